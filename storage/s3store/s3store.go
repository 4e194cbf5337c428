// Package s3store is the S3 storage provider (any S3-compatible endpoint, e.g. MinIO),
// built on minio-go v7.
//
// Promises:
//   - Keys map to objects Prefix+key in one bucket; Iter lists in S3's UTF-8 binary order,
//     which is lexicographic byte order, with the prefix stripped (an out-of-order
//     listing from a non-conforming server is an error, not silently passed on).
//   - Put is atomic (S3 objects appear whole). Objects larger than the part size go up as
//     multipart uploads; a failed or cancelled upload is aborted (minio-go aborts with a
//     context detached from the cancelled one). An upload whose creation response is lost
//     cannot be aborted by us: give the bucket a lifecycle rule that aborts incomplete
//     multipart uploads after a day.
//   - Put with storage.IfAbsent sends If-None-Match: * in a single PUT (never multipart,
//     whose Complete does not carry the condition), so it is limited to
//     MaxConditionalSize bytes, buffered in memory: conditional puts are for manifests and
//     pointers. A 412 PreconditionFailed is storage.ErrAlreadyExists, except when an
//     earlier attempt of the same Put may have reached the server (its response was lost
//     and minio-go retried): then the existing object is read and, if its bytes equal
//     ours, the Put succeeded. An attempt "may have reached the server" unless it failed
//     to dial; each HTTP attempt is observed through the client's transport. So a fresh
//     conditional Put over an existing object always reports ErrAlreadyExists, even with
//     identical content. A 409 ConditionalRequestConflict (a concurrent operation on the
//     key) is retried a few times, as S3 asks.
//   - The ETag is the server's (an MD5 of the bytes for a single PUT, of the parts' MD5s for
//     a multipart one): storage.RecordETag takes it from the PUT's response, Stat from HEAD.
//   - Requests are retried by minio-go up to Config.MaxRetries times with capped
//     exponential backoff; ctx bounds all of it.
//   - Credentials never appear in Name, in errors or in logs: errors are scrubbed of the
//     secret key as a second line of defence.
//   - A server's error answer keeps its HTTP status and S3 code in the message ("Please
//     reduce your request rate. (HTTP 503 SlowDown)") and minio.ErrorResponse in the chain.
package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/drmas-dev/drmas/storage"
)

const (
	// DefaultMaxRetries is the number of attempts per request when Config.MaxRetries is 0.
	DefaultMaxRetries = 10
	// DefaultPartSize is the multipart part size when Config.PartSize is 0. Objects up to
	// this size go up in a single PUT; unknown-size uploads buffer one part at a time.
	DefaultPartSize = 16 << 20
	// MinPartSize is the smallest part size S3 accepts (except for the last part).
	MinPartSize = 5 << 20
	// DefaultConnectTimeout bounds New's reachability check when Config.ConnectTimeout is 0.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultIdleTimeout is Config.IdleTimeout when it is 0.
	DefaultIdleTimeout = 30 * time.Second
	// MaxConditionalSize is the largest object Put accepts with storage.IfAbsent.
	MaxConditionalSize = 16 << 20
	// conflictRetries bounds the retries of a conditional put answered 409.
	conflictRetries = 4
)

// Config says where the bucket is and how to reach it. Empty fields fall back to the
// standard AWS environment: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (Endpoint),
// AWS_REGION or AWS_DEFAULT_REGION (Region), AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN (credentials, used only when AccessKey is empty).
type Config struct {
	// Endpoint is host[:port] or a URL http(s)://host[:port]; an http:// URL implies
	// Insecure. Default: the environment, else s3.amazonaws.com.
	Endpoint string
	// Bucket is the bucket name (required).
	Bucket string
	// Prefix is prepended to every key ("runs/team-a" stores key k as "runs/team-a/k").
	Prefix string
	// Region is the bucket's region; empty asks the server (one request, cached).
	Region string
	// AccessKey and SecretKey are static credentials; empty uses the environment.
	AccessKey, SecretKey string
	// SessionToken goes with temporary credentials.
	SessionToken string
	// Insecure uses plain http.
	Insecure bool
	// PathStyle forces path-style requests (endpoint/bucket/key). When false the client
	// uses virtual-host style for AWS and Google endpoints and path style elsewhere.
	PathStyle bool
	// MaxRetries is the number of attempts per request (1: no retries). 0: DefaultMaxRetries.
	MaxRetries int
	// PartSize is the multipart part size (at least MinPartSize). 0: DefaultPartSize.
	PartSize uint64
	// ConnectTimeout bounds New's check that the bucket is reachable. 0: DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Transport replaces the HTTP transport (custom TLS, proxies, fault injection in
	// tests). nil: minio-go's default transport.
	Transport http.RoundTripper
	// IdleTimeout fails a request once its connection has moved no byte in either direction
	// for this long (a stalled network or server). Without it a stalled response body hangs
	// forever and a stalled request waits a minute for headers. It applies to the default
	// transport (Transport nil). 0: DefaultIdleTimeout; < 0: none.
	IdleTimeout time.Duration
}

// Bucket is a storage.Bucket over an S3 bucket. It is safe for concurrent use.
type Bucket struct {
	client    *minio.Client
	core      minio.Core
	transport *trackingTransport
	bucket    string
	prefix    string // "" or ends with "/"
	endpoint  string // host[:port]
	name      string
	secret    string
	partSize  uint64
}

var _ storage.Bucket = (*Bucket)(nil)

// New connects to the bucket and checks that it exists and the credentials work. It
// retries connection failures and 5xx answers until Config.ConnectTimeout, and fails at
// once on other S3 errors (no such bucket, bad credentials). Its errors name the endpoint
// and bucket, never the secret.
func New(ctx context.Context, cfg Config) (*Bucket, error) {
	cfg = withEnv(cfg)
	if cfg.Bucket == "" {
		return nil, errors.New("s3store: no bucket configured")
	}
	host, secure, err := parseEndpoint(cfg.Endpoint, !cfg.Insecure)
	if err != nil {
		return nil, fmt.Errorf("s3store: %w", err)
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		if err := storage.ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("s3store: prefix: %w", err)
		}
		prefix += "/"
	}
	partSize := cfg.PartSize
	if partSize == 0 {
		partSize = DefaultPartSize
	}
	if partSize < MinPartSize {
		return nil, fmt.Errorf("s3store: part size %d is below the S3 minimum %d", partSize, MinPartSize)
	}
	retries := cfg.MaxRetries
	if retries <= 0 {
		retries = DefaultMaxRetries
	}
	base := cfg.Transport
	if base == nil {
		t, err := minio.DefaultTransport(secure)
		if err != nil {
			return nil, fmt.Errorf("s3store: transport: %w", err)
		}
		if idle := cfg.IdleTimeout; idle >= 0 {
			if idle == 0 {
				idle = DefaultIdleTimeout
			}
			t.DialContext = idleDialer(t.DialContext, idle)
			// Let the pool retire idle connections before their deadline fires.
			t.IdleConnTimeout = min(t.IdleConnTimeout, idle/2)
		}
		base = t
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	b := &Bucket{
		transport: &trackingTransport{base: base},
		bucket:    cfg.Bucket,
		prefix:    prefix,
		endpoint:  host,
		secret:    cfg.SecretKey,
		partSize:  partSize,
	}
	b.name = "s3://" + cfg.Bucket
	if prefix != "" {
		b.name += "/" + strings.TrimSuffix(prefix, "/")
	}
	b.name += "@" + host
	client, err := minio.New(host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken),
		Secure:       secure,
		Transport:    b.transport,
		Region:       cfg.Region,
		BucketLookup: lookup,
		MaxRetries:   retries,
	})
	if err != nil {
		return nil, fmt.Errorf("s3store: client for %s: %w", b.name, b.redact(err))
	}
	b.client = client
	b.core = minio.Core{Client: client}

	timeout := cfg.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tr := &attempts{}
	var ok bool
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		// Retry what looks transient (no connection yet, a server still starting) until
		// the timeout; an S3 error such as AccessDenied fails at once.
		ok, err = client.BucketExists(withAttempts(cctx, tr), cfg.Bucket)
		if err == nil || !transient(err) {
			break
		}
		select {
		case <-cctx.Done():
		case <-time.After(wait):
			continue
		}
		break
	}
	if err != nil {
		if last := tr.lastErr.Load(); last != nil && errors.Is(err, cctx.Err()) {
			err = fmt.Errorf("%w (last attempt: %v)", err, *last)
		}
		if cctx.Err() != nil {
			return nil, fmt.Errorf("s3store: bucket %s at endpoint %s not reachable within %v: %w", cfg.Bucket, host, timeout, b.redact(err))
		}
		if errors.Is(err, http.ErrSchemeMismatch) {
			return nil, fmt.Errorf("s3store: bucket %s at endpoint %s: %w (the server speaks plain HTTP: give the endpoint as http://%s, or set s3.insecure: true)",
				cfg.Bucket, host, b.redact(err), host)
		}
		if code := minio.ToErrorResponse(err).StatusCode; (code == http.StatusForbidden || code == http.StatusUnauthorized) && cfg.AccessKey == "" {
			return nil, fmt.Errorf("s3store: bucket %s at endpoint %s: %w (no credentials were given: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or s3.access_key and s3.secret_key)",
				cfg.Bucket, host, b.redact(withStatus(err)))
		}
		if code := minio.ToErrorResponse(err).Code; code == "SignatureDoesNotMatch" || code == "InvalidAccessKeyId" {
			return nil, fmt.Errorf("s3store: bucket %s at endpoint %s: %w (check the credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or s3.access_key and s3.secret_key)",
				cfg.Bucket, host, b.redact(withStatus(err)))
		}
		return nil, fmt.Errorf("s3store: bucket %s at endpoint %s: %w", cfg.Bucket, host, b.redact(withStatus(err)))
	}
	if !ok {
		return nil, fmt.Errorf("s3store: bucket %s does not exist at endpoint %s: create it first, drmas never does (e.g. `mc mb ALIAS/%s` or `aws s3 mb s3://%s`)",
			cfg.Bucket, host, cfg.Bucket, cfg.Bucket)
	}
	return b, nil
}

// transient reports whether err is a transport failure or a server-side 5xx.
func transient(err error) bool {
	if errors.Is(err, http.ErrSchemeMismatch) {
		return false // https to a plain-HTTP server: waiting will not change it
	}
	var ue *url.Error
	return errors.As(err, &ue) || minio.ToErrorResponse(err).StatusCode >= 500
}

func withEnv(cfg Config) Config {
	if cfg.Endpoint == "" {
		cfg.Endpoint = firstEnv("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "s3.amazonaws.com"
	}
	if cfg.Region == "" {
		cfg.Region = firstEnv("AWS_REGION", "AWS_DEFAULT_REGION")
	}
	if cfg.AccessKey == "" {
		cfg.AccessKey = os.Getenv("AWS_ACCESS_KEY_ID")
		cfg.SecretKey = os.Getenv("AWS_SECRET_ACCESS_KEY")
		cfg.SessionToken = os.Getenv("AWS_SESSION_TOKEN")
	}
	return cfg
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// parseEndpoint returns host[:port] and whether to use TLS.
func parseEndpoint(ep string, secure bool) (string, bool, error) {
	if !strings.Contains(ep, "://") {
		if ep == "" || strings.ContainsAny(ep, "/?#@") {
			return "", false, fmt.Errorf("invalid endpoint %q: want host[:port] or http(s)://host[:port]", ep)
		}
		return ep, secure, nil
	}
	u, err := url.Parse(ep)
	if err != nil {
		return "", false, fmt.Errorf("invalid endpoint: %w", err)
	}
	if u.User != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", false, fmt.Errorf("invalid endpoint %s://%s: want http(s)://host[:port]", u.Scheme, u.Host)
	}
	switch u.Scheme {
	case "http":
		return u.Host, false, nil
	case "https":
		return u.Host, true, nil
	}
	return "", false, fmt.Errorf("invalid endpoint scheme %q: want http or https", u.Scheme)
}

// Name returns "s3://bucket/prefix@endpoint".
func (b *Bucket) Name() string { return b.name }

// Client returns the underlying minio-go client (for tests and tools).
func (b *Bucket) Client() *minio.Client { return b.client }

// BucketName returns the S3 bucket name.
func (b *Bucket) BucketName() string { return b.bucket }

// Prefix returns the key prefix, "" or ending with "/".
func (b *Bucket) Prefix() string { return b.prefix }

// Close releases idle connections. The bucket remains usable.
func (b *Bucket) Close() error {
	if c, ok := b.transport.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	return nil
}

func (b *Bucket) object(key string) (string, error) {
	if err := storage.ValidateKey(key); err != nil {
		return "", err
	}
	return b.prefix + key, nil
}

func (b *Bucket) keyErr(op, key string, err error) error {
	return &storage.KeyError{Op: op, Bucket: b.name, Key: key, Err: b.redact(withStatus(err))}
}

// statusError adds the HTTP status and S3 error code of a server's answer to its message
// (minio-go's error text is the server's message alone, e.g. "Access Denied.").
type statusError struct {
	status int
	code   string
	err    error
}

func (e *statusError) Error() string {
	msg, status, code := e.err.Error(), strconv.Itoa(e.status), e.code
	if strings.HasPrefix(code, status) {
		code = "" // no body (a HEAD): minio-go's code is the status line, e.g. "503 Service Unavailable"
	}
	switch {
	case strings.Contains(msg, status) && (code == "" || strings.Contains(msg, code)):
		return msg
	case code == "":
		return fmt.Sprintf("%s (HTTP %s)", msg, status)
	}
	return fmt.Sprintf("%s (HTTP %s %s)", msg, status, code)
}

func (e *statusError) Unwrap() error { return e.err }

// withStatus wraps a minio-go error response in a statusError; other errors pass unchanged.
func withStatus(err error) error {
	resp := minio.ToErrorResponse(err)
	if resp.StatusCode == 0 {
		return err
	}
	return &statusError{status: resp.StatusCode, code: resp.Code, err: err}
}

// mapErr turns a minio-go error into a storage error.
func (b *Bucket) mapErr(op, key string, err error) error {
	resp := minio.ToErrorResponse(err)
	if resp.Code == minio.NoSuchKey || (resp.StatusCode == http.StatusNotFound && resp.Code != minio.NoSuchBucket) {
		return b.keyErr(op, key, storage.ErrNotFound)
	}
	return b.keyErr(op, key, err)
}

// redact removes the secret key from err's message, keeping errors.Is/As working.
func (b *Bucket) redact(err error) error {
	if err == nil || len(b.secret) < 4 || !strings.Contains(err.Error(), b.secret) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), b.secret, "<redacted>"), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Get reads the whole object.
func (b *Bucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	name, err := b.object(key)
	if err != nil {
		return nil, b.keyErr("get", key, err)
	}
	rc, _, _, err := b.core.GetObject(ctx, b.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return nil, b.mapErr("get", key, err)
	}
	return rc, nil
}

// GetRange reads length bytes at off (length < 0: to the end), clipped to the object.
func (b *Bucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	name, err := b.object(key)
	if err != nil {
		return nil, b.keyErr("get range", key, err)
	}
	if off < 0 {
		return nil, b.keyErr("get range", key, fmt.Errorf("negative offset %d", off))
	}
	if length == 0 {
		if _, err := b.Stat(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	var opts minio.GetObjectOptions
	switch {
	case length > 0 && off <= math.MaxInt64-length:
		err = opts.SetRange(off, off+length-1)
	case off > 0:
		err = opts.SetRange(off, 0) // bytes=off-
	}
	if err != nil {
		return nil, b.keyErr("get range", key, err)
	}
	rc, _, _, err := b.core.GetObject(ctx, b.bucket, name, opts)
	if err != nil {
		if minio.ToErrorResponse(err).Code == minio.InvalidRange {
			// Only an existing object has an unsatisfiable range: off is past its end.
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, b.mapErr("get range", key, err)
	}
	return rc, nil
}

// Stat returns the object's size and modification time.
func (b *Bucket) Stat(ctx context.Context, key string) (storage.Attributes, error) {
	name, err := b.object(key)
	if err != nil {
		return storage.Attributes{}, b.keyErr("stat", key, err)
	}
	info, err := b.client.StatObject(ctx, b.bucket, name, minio.StatObjectOptions{})
	if err != nil {
		return storage.Attributes{}, b.mapErr("stat", key, err)
	}
	return storage.Attributes{Size: info.Size, LastModified: info.LastModified, ETag: info.ETag}, nil
}

// Delete removes the object; a missing object is not an error.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	name, err := b.object(key)
	if err != nil {
		return b.keyErr("delete", key, err)
	}
	if err := b.client.RemoveObject(ctx, b.bucket, name, minio.RemoveObjectOptions{}); err != nil {
		if storage.IsNotFound(b.mapErr("delete", key, err)) {
			return nil
		}
		return b.keyErr("delete", key, err)
	}
	return nil
}

// Iter lists the keys under prefix in lexicographic order. A server that hands back a
// continuation token it already answered (a listing that never ends) is an error.
func (b *Bucket) Iter(ctx context.Context, prefix string, f func(key string) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("iter %s: %w", b.name, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx = context.WithValue(ctx, listGuardKey{}, &listGuard{answered: map[string]bool{}, stop: cancel})
	noOwner := false
	opts := minio.ListObjectsOptions{Prefix: b.prefix + prefix, Recursive: true, FetchOwner: &noOwner}
	last := ""
	for obj := range b.client.ListObjectsIter(ctx, b.bucket, opts) {
		if cause := context.Cause(ctx); errors.Is(cause, errListLoops) {
			return fmt.Errorf("iter %s: %w", b.name, cause)
		}
		if obj.Err != nil {
			return fmt.Errorf("iter %s: %w", b.name, b.redact(obj.Err))
		}
		key, ok := strings.CutPrefix(obj.Key, b.prefix)
		if !ok || key == "" || strings.HasSuffix(key, "/") {
			continue // folder markers written by other tools
		}
		// S3 lists in UTF-8 binary order; say so if a server does not, rather than
		// hand callers an order they rely on but did not get.
		if key <= last && last != "" {
			return fmt.Errorf("iter %s: server listed %q after %q: not in lexicographic order", b.name, key, last)
		}
		last = key
		if err := f(key); err != nil {
			return err
		}
	}
	// The listing ends silently when ctx is cancelled.
	if cause := context.Cause(ctx); errors.Is(cause, errListLoops) {
		return fmt.Errorf("iter %s: %w", b.name, cause)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("iter %s: %w", b.name, err)
	}
	return nil
}

// Put stores the object; see the package documentation for IfAbsent.
func (b *Bucket) Put(ctx context.Context, key string, r io.Reader, size int64, opts ...storage.PutOption) error {
	name, err := b.object(key)
	if err != nil {
		return b.keyErr("put", key, err)
	}
	if err := ctx.Err(); err != nil {
		return b.keyErr("put", key, err)
	}
	o := storage.ResolvePutOptions(opts)
	if o.IfAbsent {
		return b.putIfAbsent(ctx, key, name, r, size, o.ETag)
	}
	popts := minio.PutObjectOptions{PartSize: b.partSize}
	switch {
	case size < 0:
		// Buffer up to one part: small objects go up in one PUT with a known size,
		// larger ones stream as multipart with the buffered part in front.
		head, err := readUpTo(ctx, r, int64(b.partSize)+1)
		if err != nil {
			return b.keyErr("put", key, err)
		}
		if int64(len(head)) <= int64(b.partSize) {
			r, size = bytes.NewReader(head), int64(len(head))
		} else {
			r = io.MultiReader(bytes.NewReader(head), &ctxReader{ctx: ctx, r: r})
		}
	case isSeekable(r):
		// Catch a short reader now rather than after minio-go's retries.
		cur, n, err := remaining(r.(io.Seeker))
		if err != nil {
			return b.keyErr("put", key, err)
		} else if n < size {
			return b.keyErr("put", key, fmt.Errorf("reader holds %d bytes, want %d: %w", n, size, io.ErrUnexpectedEOF))
		}
		if ra, ok := r.(io.ReaderAt); ok && cur != 0 {
			// minio-go uploads the parts of a ReaderAt from absolute offsets: give it one
			// that starts where the caller's reader stands.
			r = io.NewSectionReader(ra, cur, size)
		}
	case size <= int64(b.partSize):
		// A single PUT is retried only if its body can seek back: buffer it.
		data, err := readExactly(ctx, r, size)
		if err != nil {
			return b.keyErr("put", key, err)
		}
		r = bytes.NewReader(data)
	}
	info, err := b.client.PutObject(ctx, b.bucket, name, r, size, popts)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return b.keyErr("put", key, err)
	}
	if o.ETag != nil {
		*o.ETag = info.ETag
	}
	return nil
}

func (b *Bucket) putIfAbsent(ctx context.Context, key, name string, r io.Reader, size int64, etag *string) error {
	var data []byte
	var err error
	if size < 0 {
		data, err = readUpTo(ctx, r, MaxConditionalSize+1)
		if err == nil && len(data) > MaxConditionalSize {
			err = fmt.Errorf("conditional put of more than %d bytes is not supported", MaxConditionalSize)
		}
	} else if size > MaxConditionalSize {
		err = fmt.Errorf("conditional put of %d bytes: more than the %d supported", size, MaxConditionalSize)
	} else {
		data, err = readExactly(ctx, r, size)
	}
	if err != nil {
		return b.keyErr("put", key, err)
	}
	popts := minio.PutObjectOptions{DisableMultipart: true}
	popts.SetMatchETagExcept("*")
	tr := &attempts{}
	var resp minio.ErrorResponse
	for try, wait := 0, 100*time.Millisecond; ; try, wait = try+1, 2*wait {
		var info minio.UploadInfo
		info, err = b.client.PutObject(withAttempts(ctx, tr), b.bucket, name, bytes.NewReader(data), int64(len(data)), popts)
		if err == nil {
			if etag != nil {
				*etag = info.ETag
			}
			return nil
		}
		// S3 answers 409 ConditionalRequestConflict when a concurrent operation on the
		// key interfered; it asks for a retry, which minio-go does not do.
		resp = minio.ToErrorResponse(err)
		if try >= conflictRetries || (resp.Code != "ConditionalRequestConflict" && resp.Code != "OperationAborted") {
			break
		}
		select {
		case <-ctx.Done():
			return b.keyErr("put", key, ctx.Err())
		case <-time.After(wait):
		}
	}
	if resp.Code != minio.PreconditionFailed && resp.StatusCode != http.StatusPreconditionFailed {
		return b.keyErr("put", key, err)
	}
	if tr.maybeSent.Load() < 2 {
		// Only this attempt reached the server: the object was there before us.
		return b.keyErr("put", key, storage.ErrAlreadyExists)
	}
	// An earlier attempt may have written the object before its response was lost.
	existing, rerr := b.readLimited(ctx, name, int64(len(data))+1)
	if rerr != nil {
		return b.keyErr("put", key, fmt.Errorf("%w (and reading it back after a retried conditional put: %v)", storage.ErrAlreadyExists, b.redact(rerr)))
	}
	if !bytes.Equal(existing, data) {
		return b.keyErr("put", key, storage.ErrAlreadyExists)
	}
	if etag != nil {
		// The lost response held the ETag; an object put only if absent is never replaced by
		// drmas, so the stored one is the one this Put wrote.
		attr, err := b.Stat(ctx, key)
		if err != nil {
			return err
		}
		*etag = attr.ETag
	}
	return nil
}

func (b *Bucket) readLimited(ctx context.Context, name string, limit int64) ([]byte, error) {
	rc, _, _, err := b.core.GetObject(ctx, b.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, limit))
}

// remaining returns the number of bytes between s's position and its end.
func remaining(s io.Seeker) (cur, n int64, err error) {
	cur, err = s.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, 0, fmt.Errorf("seek: %w", err)
	}
	end, err := s.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, 0, fmt.Errorf("seek: %w", err)
	}
	if _, err := s.Seek(cur, io.SeekStart); err != nil {
		return 0, 0, fmt.Errorf("seek: %w", err)
	}
	return cur, end - cur, nil
}

func isSeekable(r io.Reader) bool {
	_, ok := r.(io.Seeker)
	return ok
}

// readUpTo reads at most limit bytes of r.
func readUpTo(ctx context.Context, r io.Reader, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(&ctxReader{ctx: ctx, r: r}, limit)); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return buf.Bytes(), nil
}

// readExactly reads exactly size bytes of r.
func readExactly(ctx context.Context, r io.Reader, size int64) ([]byte, error) {
	data := make([]byte, size)
	n, err := io.ReadFull(&ctxReader{ctx: ctx, r: r}, data)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reader yielded %d bytes, want %d: %w", n, size, io.ErrUnexpectedEOF)
		}
		return nil, fmt.Errorf("read: %w", err)
	}
	return data, nil
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// attempts records the HTTP attempts of one operation, observed by trackingTransport.
type attempts struct {
	maybeSent atomic.Int32 // PUT attempts that may have reached the server
	lastErr   atomic.Pointer[error]
}

type attemptsKey struct{}

func withAttempts(ctx context.Context, a *attempts) context.Context {
	return context.WithValue(ctx, attemptsKey{}, a)
}

// errListLoops says a listing does not advance.
var errListLoops = errors.New("the server's listing does not advance (not S3-compatible?)")

// listGuard records the continuation tokens of one Iter's listing that the server answered:
// minio-go keeps listing while the server says the listing is truncated, so a server that hands
// back a token it already answered would be listed forever. Retries of an unanswered request
// reuse its token, which is fine.
type listGuard struct {
	mu       sync.Mutex
	answered map[string]bool
	stop     context.CancelCauseFunc
}

type listGuardKey struct{}

// check stops the listing if req asks again for a page the server already gave.
func (g *listGuard) check(req *http.Request) error {
	q := req.URL.Query()
	if req.Method != http.MethodGet || !q.Has("list-type") {
		return nil
	}
	token := q.Get("continuation-token")
	g.mu.Lock()
	defer g.mu.Unlock()
	if token != "" && g.answered[token] {
		err := fmt.Errorf("%w: it returned continuation token %.40q again after answering it", errListLoops, token)
		g.stop(err)
		return err
	}
	return nil
}

func (g *listGuard) answer(req *http.Request, resp *http.Response) {
	if resp.StatusCode != http.StatusOK || req.Method != http.MethodGet || !req.URL.Query().Has("list-type") {
		return
	}
	g.mu.Lock()
	g.answered[req.URL.Query().Get("continuation-token")] = true
	g.mu.Unlock()
}

// trackingTransport lets an operation see its own HTTP attempts, which minio-go's
// internal retries otherwise hide.
type trackingTransport struct{ base http.RoundTripper }

func (t *trackingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	g, _ := req.Context().Value(listGuardKey{}).(*listGuard)
	if g != nil {
		if err := g.check(req); err != nil {
			return nil, err
		}
	}
	resp, err := t.base.RoundTrip(req)
	if g != nil && err == nil {
		g.answer(req, resp)
	}
	if a, ok := req.Context().Value(attemptsKey{}).(*attempts); ok {
		if err != nil {
			a.lastErr.Store(&err)
		}
		if req.Method == http.MethodPut && !isDialError(err) {
			a.maybeSent.Add(1)
		}
	}
	return resp, err
}

// isDialError reports whether err says the connection was never made, so the request
// cannot have reached the server.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// idleDialer wraps dial so that every connection fails an I/O call once no byte has moved
// in either direction for idle.
func idleDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error), idle time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &idleConn{Conn: c, idle: idle}, nil
	}
}

// idleConn pushes its read and write deadlines forward on every Read and Write, so a pending
// read (the transport waits for a response while it uploads) does not expire while the
// upload progresses, and a stall in either direction ends in a timeout error.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	_ = c.Conn.SetDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(p)
}

func (c *idleConn) Write(p []byte) (int, error) {
	_ = c.Conn.SetDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(p)
}
