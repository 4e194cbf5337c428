// Package client opens a storage.Bucket from a storage URL, the one place that knows
// every provider:
//
//	file:///abs/path     a local folder (created by the first write), storage/filestore
//	path/to/dir, /abs    the same, for a plain path (relative paths are made absolute); a
//	                     path that starts like a URL without "//" (s3:/bucket, file:/abs) is
//	                     an error, not a folder of that name (write ./s3:/bucket for one), and
//	                     so is a path starting with ~, which no shell expanded (./~ for one)
//	s3://bucket/prefix   an S3 bucket, storage/s3store; the bucket and prefix come from the
//	                     URL, the endpoint, region, credentials and tuning from s3store.Config
//	                     and the AWS_* environment
//
// Any other scheme is an error that lists the supported ones.
package client

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/filestore"
	"github.com/drmas-dev/drmas/storage/s3store"
)

// Open returns the bucket rawURL names. s3 configures s3:// URLs (its Bucket and Prefix
// are replaced by the URL's) and is ignored otherwise.
func Open(ctx context.Context, rawURL string, s3 s3store.Config) (storage.Bucket, error) {
	if rawURL == "" {
		return nil, fmt.Errorf("open storage: empty URL")
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		if u, err := url.Parse(rawURL); err == nil && len(u.Scheme) > 1 { // not a drive letter
			return nil, fmt.Errorf("open storage %q: looks like a URL without \"//\" (want s3://bucket/prefix or file:///abs/path); a folder whose name has a colon is ./%s",
				redactURL(rawURL), redactURL(rawURL))
		}
		if strings.HasPrefix(rawURL, "~") {
			// No shell expanded it (--store=~/data, a config file): it would be a folder
			// named "~" in the working folder.
			return nil, fmt.Errorf("open storage %q: ~ is not expanded here (a shell expands it only at the start of a word: not in --store=~/… or a config file): write the absolute path; a folder named ~ is ./%s",
				rawURL, rawURL)
		}
		return openDir(rawURL)
	}
	switch strings.ToLower(scheme) {
	case "file":
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, fmt.Errorf("open storage %q: %w", rawURL, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("open storage %q: file URLs take an absolute path, file:///abs/path", rawURL)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("open storage %q: unexpected query or fragment", rawURL)
		}
		if !filepath.IsAbs(filepath.FromSlash(u.Path)) {
			return nil, fmt.Errorf("open storage %q: file URLs take an absolute path, file:///abs/path", rawURL)
		}
		return openDir(filepath.FromSlash(u.Path))
	case "s3":
		bucket, prefix, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return nil, fmt.Errorf("open storage %q: no bucket, want s3://bucket/prefix", redactURL(rawURL))
		}
		if strings.ContainsAny(bucket, "@:?#") || strings.ContainsAny(prefix, "?#") {
			return nil, fmt.Errorf("open storage %q: want s3://bucket/prefix (credentials and endpoint go in the config)", redactURL(rawURL))
		}
		s3.Bucket = bucket
		s3.Prefix = strings.Trim(prefix, "/")
		b, err := s3store.New(ctx, s3)
		if err != nil {
			return nil, fmt.Errorf("open storage %s: %w", rawURL, err)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("open storage %q: unsupported scheme %q (want file:///abs/path, a plain path, or s3://bucket/prefix)", redactURL(rawURL), scheme)
	}
}

func openDir(path string) (storage.Bucket, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open storage %q: %w", path, err)
	}
	b, err := filestore.New(abs)
	if err != nil {
		return nil, fmt.Errorf("open storage %s: %w", abs, err)
	}
	return b, nil
}

// redactURL drops userinfo (a password pasted into a URL) from a URL for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if i := strings.Index(raw, "@"); i >= 0 {
			if j := strings.Index(raw, "://"); j >= 0 && j < i {
				return raw[:j+3] + "…" + raw[i:]
			}
		}
		return raw
	}
	u.User = nil
	return u.String()
}
