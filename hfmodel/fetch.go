package hfmodel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/storage"
)

// fetchRecord is the cache's record of what it downloaded, beside the files.
const fetchRecord = ".drmas-fetch.json"

// FetchStats counts what Fetch did.
type FetchStats struct {
	Files      int   // files of the folder
	Bytes      int64 // their bytes
	Downloaded int   // files fetched from the store
	Cached     int   // files already in the cache with the right content
	Committed  bool  // the folder has a _MANIFEST.json: files were checked against its sha256
}

// cached is what the cache knows of one file it holds.
type cached struct {
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	ETag   string `json:"etag,omitempty"`
}

// Fetch makes the model folder at the root of b (the top-level objects; subfolders are not a
// model's) present in the local folder cache, verified, and removes cached files the folder no
// longer has. In a committed folder (one with a _MANIFEST.json) every file must have its
// manifest's size and sha256; otherwise each file must keep the size and ETag the store
// reported before the download, so a file replaced midway is refused instead of mixed. Files in
// cache that Fetch did not download are left alone. Files
// are streamed to disk (a 1 GB checkpoint is not held in memory), hashed on the way, and renamed
// into place; a cached file whose sha256 still matches is not downloaded again.
func Fetch(ctx context.Context, b storage.Bucket, cache string) (FetchStats, error) {
	var st FetchStats
	want, err := listFolder(ctx, b)
	if err != nil {
		return st, err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return st, fmt.Errorf("model cache: %w", err)
	}
	_, st.Committed = want[commit.ManifestName]
	delete(want, commit.ManifestName)
	record := readRecord(cache)
	for _, name := range slices.Sorted(maps.Keys(want)) {
		w := want[name]
		st.Files++
		st.Bytes += w.Bytes
		if have, ok := record[name]; ok && sameFile(have, w) && hashFile(filepath.Join(cache, name)) == have.SHA256 {
			st.Cached++
			continue
		}
		got, err := download(ctx, b, name, w, filepath.Join(cache, name))
		if err != nil {
			return st, err
		}
		record[name] = got
		st.Downloaded++
	}
	return st, prune(cache, want, record)
}

// sameFile reports whether the cached record still describes the store's file w.
func sameFile(have, w cached) bool {
	if w.SHA256 != "" {
		return have.SHA256 == w.SHA256 && have.Bytes == w.Bytes
	}
	return have.ETag != "" && have.ETag == w.ETag && have.Bytes == w.Bytes
}

// listFolder returns the top-level objects of b with what they must be: the manifest's size and
// sha256 when the folder is committed, else the store's size and ETag.
func listFolder(ctx context.Context, b storage.Bucket) (map[string]cached, error) {
	want := map[string]cached{}
	err := b.Iter(ctx, "", func(key string) error {
		if strings.Contains(key, "/") {
			return nil
		}
		attr, err := b.Stat(ctx, key)
		if err != nil {
			return err
		}
		want[key] = cached{Bytes: attr.Size, ETag: attr.ETag}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list model folder %s: %w", b.Name(), err)
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("model folder %s: no files there: %w", b.Name(), storage.ErrNotFound)
	}
	if _, ok := want[commit.ManifestName]; !ok {
		return want, nil
	}
	m, _, err := commit.Read(ctx, b, "")
	if err != nil {
		return nil, err
	}
	listed := map[string]cached{commit.ManifestName: {}}
	for _, f := range m.Files {
		if !strings.Contains(f.Name, "/") {
			listed[f.Name] = cached{Bytes: f.Bytes, SHA256: f.SHA256}
		}
	}
	return listed, nil
}

// download streams key into local through a temporary file, checking it against w.
func download(ctx context.Context, b storage.Bucket, key string, w cached, local string) (cached, error) {
	rc, err := b.Get(ctx, key)
	if err != nil {
		return cached{}, fmt.Errorf("download %s: %w", key, err)
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(filepath.Dir(local), ".tmp-*")
	if err != nil {
		return cached{}, fmt.Errorf("model cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), rc)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return cached{}, fmt.Errorf("download %s from %s: %w", key, b.Name(), err)
	}
	got := cached{Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil)), ETag: w.ETag}
	if err := verifyDownload(ctx, b, key, w, got); err != nil {
		return cached{}, err
	}
	if err := os.Rename(tmp.Name(), local); err != nil {
		return cached{}, fmt.Errorf("model cache: %w", err)
	}
	return got, nil
}

// verifyDownload refuses bytes that are not the file listed: another sha256 or size than the
// manifest's, or a store file whose size or ETag changed while it was read.
func verifyDownload(ctx context.Context, b storage.Bucket, key string, w, got cached) error {
	if w.SHA256 != "" {
		if got.SHA256 != w.SHA256 || got.Bytes != w.Bytes {
			return fmt.Errorf("refusing %s from %s: content (%d bytes, sha256 %.12s) differs from its manifest (%d bytes, %.12s)", key, b.Name(), got.Bytes, got.SHA256, w.Bytes, w.SHA256)
		}
		return nil
	}
	attr, err := b.Stat(ctx, key)
	if err != nil {
		return fmt.Errorf("download %s: %w", key, err)
	}
	if got.Bytes != w.Bytes || attr.Size != w.Bytes || attr.ETag != w.ETag {
		return fmt.Errorf("refusing %s from %s: it changed while it was downloaded (%d bytes read, listed %d): run again", key, b.Name(), got.Bytes, w.Bytes)
	}
	return nil
}

// prune removes the files an earlier Fetch downloaded that the folder no longer has (a stale
// *.safetensors would be loaded), leaving files it did not write, and writes the record.
func prune(cache string, want, record map[string]cached) error {
	entries, err := os.ReadDir(cache)
	if err != nil {
		return fmt.Errorf("model cache: %w", err)
	}
	for _, e := range entries {
		_, fetched := record[e.Name()]
		_, wanted := want[e.Name()]
		if !wanted && (fetched || strings.HasPrefix(e.Name(), ".tmp-")) { // only what Fetch wrote
			if err := os.Remove(filepath.Join(cache, e.Name())); err != nil {
				return fmt.Errorf("model cache: %w", err)
			}
			delete(record, e.Name())
		}
	}
	data, err := json.MarshalIndent(record, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(cache, fetchRecord), data, 0o644)
	}
	if err != nil {
		return fmt.Errorf("model cache: %w", err)
	}
	return nil
}

func readRecord(cache string) map[string]cached {
	rec := map[string]cached{}
	data, err := os.ReadFile(filepath.Join(cache, fetchRecord))
	if err == nil && json.Unmarshal(data, &rec) != nil {
		rec = map[string]cached{} // a damaged record only costs a download
	}
	return rec
}

// hashFile is the sha256 of a local file, or "" if it cannot be read.
func hashFile(name string) string {
	f, err := os.Open(name)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// FetchFiles downloads only the named files at the root of b into the local folder dst (which
// must exist), each verified as Fetch verifies it (against the folder's _MANIFEST.json when it
// has one); a file b does not have is an error naming it. Nothing else of the folder is listed
// or copied, and nothing is recorded: the caller owns dst and removes it.
func FetchFiles(ctx context.Context, b storage.Bucket, dst string, names ...string) error {
	manifest := map[string]cached{}
	if _, err := b.Stat(ctx, commit.ManifestName); err == nil {
		m, _, err := commit.Read(ctx, b, "")
		if err != nil {
			return err
		}
		for _, f := range m.Files {
			manifest[f.Name] = cached{Bytes: f.Bytes, SHA256: f.SHA256}
		}
	} else if !storage.IsNotFound(err) {
		return fmt.Errorf("fetch from %s: %w", b.Name(), err)
	}
	for _, name := range names {
		attr, err := b.Stat(ctx, name)
		if storage.IsNotFound(err) {
			return fmt.Errorf("%s has no %s: %w", b.Name(), name, os.ErrNotExist)
		}
		if err != nil {
			return fmt.Errorf("fetch %s from %s: %w", name, b.Name(), err)
		}
		w, ok := manifest[name]
		if !ok {
			if len(manifest) > 0 {
				return fmt.Errorf("%s: %s is not in its %s", b.Name(), name, commit.ManifestName)
			}
			w = cached{Bytes: attr.Size, ETag: attr.ETag}
		}
		if _, err := download(ctx, b, name, w, filepath.Join(dst, name)); err != nil {
			return err
		}
	}
	return nil
}
