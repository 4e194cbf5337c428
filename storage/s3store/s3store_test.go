package s3store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/miniotest"
	"github.com/drmas-dev/drmas/storage/s3store"
	"github.com/drmas-dev/drmas/storage/storetest"
)

func config(srv *miniotest.Server, bucket string) s3store.Config {
	return s3store.Config{
		Endpoint:   srv.Endpoint,
		Bucket:     bucket,
		AccessKey:  srv.AccessKey,
		SecretKey:  srv.SecretKey,
		Insecure:   true,
		MaxRetries: 3,
		PartSize:   s3store.MinPartSize, // 5 MiB: the suite's large object goes multipart
	}
}

func open(t *testing.T, cfg s3store.Config) *s3store.Bucket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	b, err := s3store.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestWithServer runs the tests that can share one MinIO server (each uses its own
// bucket); starting a server costs about a second.
func TestWithServer(t *testing.T) {
	srv := miniotest.Start(t)
	for _, tc := range []struct {
		name string
		f    func(*testing.T, *miniotest.Server)
	}{
		{"Suite", testSuite},
		{"ConditionalPutConflict409", testConditionalPutConflict409},
		{"PrefixLayoutAndName", testPrefixLayoutAndName},
		{"Environment", testEnvironment},
		{"MissingBucketAndBadCredentials", testMissingBucketAndBadCredentials},
		{"ConditionalPutLostResponse", testConditionalPutLostResponse},
		{"ConditionalPutLostResponseOtherWriter", testConditionalPutLostResponseOtherWriter},
		{"ConditionalPutDialErrorThenConflict", testConditionalPutDialErrorThenConflict},
		{"ConditionalPutTooLarge", testConditionalPutTooLarge},
		{"CancelledMultipartLeavesNoUploads", testCancelledMultipartLeavesNoUploads},
		{"ReaderAtConnectionCut", testReaderAtConnectionCut},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, srv) })
	}
}

func testSuite(t *testing.T, srv *miniotest.Server) {
	t.Run("NoPrefix", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storage.Bucket {
			return open(t, config(srv, srv.NewBucket(t)))
		})
	})
	t.Run("Prefix", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storage.Bucket {
			cfg := config(srv, srv.NewBucket(t))
			cfg.Prefix = "/team/a/"
			return open(t, cfg)
		})
	})
}

func testPrefixLayoutAndName(t *testing.T, srv *miniotest.Server) {
	bucket := srv.NewBucket(t)
	cfg := config(srv, bucket)
	cfg.Prefix = "team/a"
	b := open(t, cfg)
	ctx := context.Background()
	if err := storage.PutBytes(ctx, b, "runs/r/x", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client(t).StatObject(ctx, bucket, "team/a/runs/r/x", minio.StatObjectOptions{}); err != nil {
		t.Fatalf("object not at prefix/key: %v", err)
	}
	// An object beside the prefix is not part of the bucket view.
	srv.Client(t).PutObject(ctx, bucket, "team/ab", strings.NewReader("x"), 1, minio.PutObjectOptions{})
	var keys []string
	b.Iter(ctx, "", func(k string) error { keys = append(keys, k); return nil })
	if len(keys) != 1 || keys[0] != "runs/r/x" {
		t.Fatalf("Iter = %q", keys)
	}
	want := "s3://" + bucket + "/team/a@" + srv.Endpoint
	if b.Name() != want {
		t.Fatalf("Name %q, want %q", b.Name(), want)
	}
	if strings.Contains(b.Name(), srv.AccessKey) || strings.Contains(b.Name(), srv.SecretKey) {
		t.Fatal("Name holds credentials")
	}
	cfg.Prefix = "bad/../prefix"
	if _, err := s3store.New(ctx, cfg); err == nil {
		t.Fatal("New accepted an invalid prefix")
	}
}

func testEnvironment(t *testing.T, srv *miniotest.Server) {
	bucket := srv.NewBucket(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_ENDPOINT_URL", "http://"+srv.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "us-east-1")
	b := open(t, s3store.Config{Bucket: bucket, MaxRetries: 2})
	if err := storage.PutBytes(context.Background(), b, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if b.Name() != "s3://"+bucket+"@"+srv.Endpoint {
		t.Fatalf("Name %q", b.Name())
	}
}

func testMissingBucketAndBadCredentials(t *testing.T, srv *miniotest.Server) {
	ctx := context.Background()
	cfg := config(srv, "no-such-bucket")
	_, err := s3store.New(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), srv.Endpoint) {
		t.Fatalf("missing bucket: %v", err)
	}
	if !strings.Contains(err.Error(), "create it first") {
		t.Errorf("missing bucket: the error does not say to create it: %v", err)
	}
	cfg = config(srv, srv.NewBucket(t))
	cfg.SecretKey = "wrong-secret-" + srv.SecretKey
	start := time.Now()
	_, err = s3store.New(ctx, cfg)
	if err == nil {
		t.Fatal("New with a wrong secret succeeded")
	}
	t.Logf("wrong secret (%v): %v", time.Since(start).Round(time.Millisecond), err)
	for _, secret := range []string{cfg.SecretKey, srv.SecretKey} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error shows the secret: %v", err)
		}
	}
	if !strings.Contains(err.Error(), srv.Endpoint) || !strings.Contains(err.Error(), cfg.Bucket) {
		t.Fatalf("error does not name endpoint and bucket: %v", err)
	}
	if strings.Contains(err.Error(), "no credentials were given") {
		t.Fatalf("a wrong secret is blamed on missing credentials: %v", err)
	}
	if !strings.Contains(err.Error(), "check the credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") {
		t.Errorf("wrong secret: the error does not say which settings to check: %v", err)
	}
	// An unknown access key likewise.
	cfg.AccessKey, cfg.SecretKey = "no-such-key", srv.SecretKey
	if _, err = s3store.New(ctx, cfg); err == nil || !strings.Contains(err.Error(), "check the credentials") {
		t.Errorf("unknown access key: want an error saying to check the credentials, got %v", err)
	}
	// No credentials at all (none configured, none in the environment): the error says so.
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	cfg.AccessKey, cfg.SecretKey = "", ""
	_, err = s3store.New(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "no credentials were given: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") {
		t.Fatalf("no credentials: %v", err)
	}
}

func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestUnreachableEndpoint(t *testing.T) {
	t.Parallel()
	endpoint := closedPort(t)
	const secret = "super-secret-value-1234"
	start := time.Now()
	_, err := s3store.New(context.Background(), s3store.Config{
		Endpoint: endpoint, Bucket: "some-bucket", AccessKey: "ak", SecretKey: secret, Insecure: true,
		ConnectTimeout: 3 * time.Second,
	})
	d := time.Since(start)
	if err == nil {
		t.Fatal("New on a closed port succeeded")
	}
	t.Logf("after %v: %v", d.Round(time.Millisecond), err)
	if d < 2*time.Second || d > 5*time.Second {
		t.Fatalf("took %v, want about the 3 s ConnectTimeout", d)
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error does not say why: %v", err)
	}
	if !strings.Contains(err.Error(), endpoint) || strings.Contains(err.Error(), secret) {
		t.Fatalf("error must name %s and not the secret: %v", endpoint, err)
	}
}

// faultTransport forwards requests to the real transport and lets a test tamper with
// the first conditional PUT.
type faultTransport struct {
	base  http.RoundTripper
	fired atomic.Bool
	fault func(req *http.Request, base http.RoundTripper) (*http.Response, error)
}

func (f *faultTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && req.Header.Get("If-None-Match") == "*" && f.fired.CompareAndSwap(false, true) {
		return f.fault(req, f.base)
	}
	return f.base.RoundTrip(req)
}

func faultBucket(t *testing.T, srv *miniotest.Server, fault func(*http.Request, http.RoundTripper) (*http.Response, error)) (*s3store.Bucket, *faultTransport) {
	t.Helper()
	base, err := minio.DefaultTransport(false)
	if err != nil {
		t.Fatal(err)
	}
	ft := &faultTransport{base: base, fault: fault}
	cfg := config(srv, srv.NewBucket(t))
	cfg.Transport = ft
	return open(t, cfg), ft
}

// The server stores the object but its response is lost; minio-go retries and gets 412.
func testConditionalPutLostResponse(t *testing.T, srv *miniotest.Server) {
	ctx := context.Background()
	b, ft := faultBucket(t, srv, func(req *http.Request, base http.RoundTripper) (*http.Response, error) {
		resp, err := base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("fault: first conditional put got %s", resp.Status)
		}
		return nil, errors.New("fault: connection reset after the server committed")
	})
	if err := storage.PutBytes(ctx, b, "ckpt/LATEST", []byte("step=000008"), storage.IfAbsent()); err != nil {
		t.Fatalf("conditional put whose first response was lost: %v", err)
	}
	if !ft.fired.Load() {
		t.Fatal("fault did not fire")
	}
	got, err := storage.ReadAll(ctx, b, "ckpt/LATEST")
	if err != nil || string(got) != "step=000008" {
		t.Fatalf("stored %q, %v", got, err)
	}
	// A fresh conditional put of the same content is a conflict.
	if err := storage.PutBytes(ctx, b, "ckpt/LATEST", []byte("step=000008"), storage.IfAbsent()); !storage.IsAlreadyExists(err) {
		t.Fatalf("fresh conditional put of identical content: %v", err)
	}
}

// Another writer commits different content while our first attempt's response is lost.
func testConditionalPutLostResponseOtherWriter(t *testing.T, srv *miniotest.Server) {
	ctx := context.Background()
	var other *minio.Client
	var bucket string
	b, ft := faultBucket(t, srv, func(req *http.Request, base http.RoundTripper) (*http.Response, error) {
		name := strings.TrimPrefix(req.URL.Path, "/"+bucket+"/")
		if _, err := other.PutObject(req.Context(), bucket, name, strings.NewReader("theirs"), 6, minio.PutObjectOptions{}); err != nil {
			return nil, fmt.Errorf("fault: other writer: %w", err)
		}
		return nil, errors.New("fault: connection reset")
	})
	other, bucket = srv.Client(t), b.BucketName()
	err := storage.PutBytes(ctx, b, "ckpt/LATEST", []byte("ours"), storage.IfAbsent())
	if !storage.IsAlreadyExists(err) {
		t.Fatalf("conditional put that lost to another writer: %v", err)
	}
	if !ft.fired.Load() {
		t.Fatal("fault did not fire")
	}
	got, _ := storage.ReadAll(ctx, b, "ckpt/LATEST")
	if string(got) != "theirs" {
		t.Fatalf("stored %q", got)
	}
}

// A first attempt that never connected cannot have written: a 412 on the retry is a
// conflict even with identical content.
func testConditionalPutDialErrorThenConflict(t *testing.T, srv *miniotest.Server) {
	ctx := context.Background()
	b, ft := faultBucket(t, srv, func(req *http.Request, base http.RoundTripper) (*http.Response, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("fault: connection refused")}
	})
	ft.fired.Store(true) // first let the object be written without the fault
	if err := storage.PutBytes(ctx, b, "m", []byte("same"), storage.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	ft.fired.Store(false)
	err := storage.PutBytes(ctx, b, "m", []byte("same"), storage.IfAbsent())
	if !storage.IsAlreadyExists(err) {
		t.Fatalf("conditional put after a dial error: %v", err)
	}
	if !ft.fired.Load() {
		t.Fatal("fault did not fire")
	}
}

func testConditionalPutTooLarge(t *testing.T, srv *miniotest.Server) {
	b := open(t, config(srv, srv.NewBucket(t)))
	ctx := context.Background()
	big := make([]byte, s3store.MaxConditionalSize+1)
	if err := storage.PutBytes(ctx, b, "big", big, storage.IfAbsent()); err == nil || storage.IsAlreadyExists(err) {
		t.Fatalf("conditional put of %d bytes: %v", len(big), err)
	}
	if err := b.Put(ctx, "big", bytes.NewReader(big), -1, storage.IfAbsent()); err == nil || storage.IsAlreadyExists(err) {
		t.Fatalf("conditional put of %d bytes, unknown size: %v", len(big), err)
	}
	if err := storage.PutBytes(ctx, b, "max", big[:s3store.MaxConditionalSize], storage.IfAbsent()); err != nil {
		t.Fatalf("conditional put of exactly the maximum: %v", err)
	}
}

// cancelAfter cancels a context once more than n bytes have been read through it.
type cancelAfter struct {
	r      *bytes.Reader
	n      int64
	read   atomic.Int64
	cancel context.CancelFunc
	once   sync.Once
}

func (c *cancelAfter) note(n int) {
	if c.read.Add(int64(n)) > c.n {
		c.once.Do(c.cancel)
	}
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.note(n)
	return n, err
}

// readerAtCancel also offers ReadAt and Seek, which sends minio-go down its parallel
// multipart path.
type readerAtCancel struct{ *cancelAfter }

func (c readerAtCancel) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.note(n)
	return n, err
}

func (c readerAtCancel) Seek(off int64, whence int) (int64, error) { return c.r.Seek(off, whence) }

func testCancelledMultipartLeavesNoUploads(t *testing.T, srv *miniotest.Server) {
	b := open(t, config(srv, srv.NewBucket(t)))
	data := make([]byte, 40<<20)
	for name, mk := range map[string]func(*cancelAfter) (io.Reader, int64){
		"stream-unknown-size": func(c *cancelAfter) (io.Reader, int64) { return c, -1 },
		"stream-known-size":   func(c *cancelAfter) (io.Reader, int64) { return c, int64(len(data)) },
		"readerat":            func(c *cancelAfter) (io.Reader, int64) { return readerAtCancel{c}, int64(len(data)) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := &cancelAfter{r: bytes.NewReader(data), n: 12 << 20, cancel: cancel}
			r, size := mk(c)
			start := time.Now()
			err := b.Put(ctx, "big/"+name, r, size)
			if err == nil {
				t.Fatal("cancelled put succeeded")
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled put: %v, want context.Canceled", err)
			}
			t.Logf("returned after %v, %d MiB read: %v", time.Since(start).Round(time.Millisecond), c.read.Load()>>20, err)
			lctx, lcancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer lcancel()
			var left []string
			for u := range b.Client().ListIncompleteUploads(lctx, b.BucketName(), "", true) {
				if u.Err != nil {
					t.Fatal(u.Err)
				}
				left = append(left, u.Key+" "+u.UploadID)
			}
			if len(left) > 0 {
				t.Fatalf("incomplete multipart uploads left: %q", left)
			}
			if _, err := b.Stat(lctx, "big/"+name); !storage.IsNotFound(err) {
				t.Fatalf("cancelled put left an object: %v", err)
			}
		})
	}
}

// The client survives a server restart (connections reset, same endpoint).
func TestServerRestart(t *testing.T) {
	srv := miniotest.Start(t)
	b := open(t, config(srv, srv.NewBucket(t)))
	ctx := context.Background()
	if err := storage.PutBytes(ctx, b, "before", []byte("1")); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	if err := storage.PutBytes(ctx, b, "after", []byte("2"), storage.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"before", "after"} {
		if _, err := b.Stat(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	// While the server is down, operations fail (bounded by MaxRetries), never hang.
	srv.Stop()
	start := time.Now()
	_, err := b.Stat(ctx, "before")
	if err == nil || storage.IsNotFound(err) {
		t.Fatalf("stat with the server down: %v", err)
	}
	if strings.Contains(err.Error(), srv.SecretKey) {
		t.Fatal("error shows the secret")
	}
	t.Logf("server down: failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

func conflictResponse(req *http.Request) *http.Response {
	body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>ConditionalRequestConflict</Code>` +
		`<Message>A conflicting operation occurred.</Message></Error>`
	return &http.Response{
		Status: "409 Conflict", StatusCode: http.StatusConflict, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/xml"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// S3's 409 ConditionalRequestConflict is retried; if the 409 came after the server
// stored our object, the retry's 412 is recognised as our own write.
func testConditionalPutConflict409(t *testing.T, srv *miniotest.Server) {
	ctx := context.Background()
	for _, forward := range []bool{false, true} {
		b, ft := faultBucket(t, srv, func(req *http.Request, base http.RoundTripper) (*http.Response, error) {
			if forward {
				resp, err := base.RoundTrip(req)
				if err != nil {
					return nil, err
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			return conflictResponse(req), nil
		})
		if err := storage.PutBytes(ctx, b, "LATEST", []byte("v1"), storage.IfAbsent()); err != nil {
			t.Fatalf("forward=%v: conditional put after a 409: %v", forward, err)
		}
		if !ft.fired.Load() {
			t.Fatal("fault did not fire")
		}
		if got, _ := storage.ReadAll(ctx, b, "LATEST"); string(got) != "v1" {
			t.Fatalf("stored %q", got)
		}
		if err := storage.PutBytes(ctx, b, "LATEST", []byte("v1"), storage.IfAbsent()); !storage.IsAlreadyExists(err) {
			t.Fatalf("fresh conditional put: %v", err)
		}
	}
}

// cutBody yields left bytes of a response body, then fails as net/http does when the server
// goes away in the middle of a body (a restarted MinIO).
type cutBody struct {
	rc   io.ReadCloser
	left int
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := c.rc.Read(p[:min(len(p), c.left)])
	c.left -= n
	return n, err
}

func (c *cutBody) Close() error { return c.rc.Close() }

// cutTransport cuts the bodies of ranged GETs while cut is set.
type cutTransport struct {
	base http.RoundTripper
	cut  atomic.Bool
}

func (c *cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err == nil && req.Method == http.MethodGet && req.Header.Get("Range") != "" && c.cut.Load() {
		resp.Body = &cutBody{rc: resp.Body, left: 100}
	}
	return resp, err
}

// A ranged read whose connection fails mid-body is a read error naming the store, not an
// object "shorter than its size" (which says the object changed); a really shorter object
// still says so.
func testReaderAtConnectionCut(t *testing.T, srv *miniotest.Server) {
	ctx := context.Background()
	base, err := minio.DefaultTransport(false)
	if err != nil {
		t.Fatal(err)
	}
	ct := &cutTransport{base: base}
	cfg := config(srv, srv.NewBucket(t))
	cfg.Transport = ct
	b := open(t, cfg)
	data := bytes.Repeat([]byte("0123456789"), 100_000)
	if err := storage.PutBytes(ctx, b, "part.parquet", data); err != nil {
		t.Fatal(err)
	}
	ra, _, err := storage.OpenReaderAt(ctx, b, "part.parquet")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	ct.cut.Store(true)
	n, err := ra.ReadAt(buf, 1000)
	ct.cut.Store(false)
	if err == nil || n != 100 {
		t.Fatalf("ReadAt over a cut connection: %d bytes, %v", n, err)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "shorter") || !strings.Contains(err.Error(), b.Name()) {
		t.Fatalf("ReadAt over a cut connection: %v; want a read error naming %s, not a shorter object", err, b.Name())
	}
	if n, err := ra.ReadAt(buf, 1000); n != len(buf) || err != nil || !bytes.Equal(buf, data[1000:1000+len(buf)]) {
		t.Fatalf("ReadAt after the cut: %d, %v", n, err)
	}
	if err := storage.PutBytes(ctx, b, "part.parquet", data[:2000]); err != nil {
		t.Fatal(err)
	}
	if _, err := ra.ReadAt(buf, 1000); err == nil || !strings.Contains(err.Error(), "object shorter than its size") {
		t.Fatalf("ReadAt of an object that shrank: %v", err)
	}
}

// serveHTTP serves h on a free 127.0.0.1 port until the test ends and returns the address.
func serveHTTP(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// openFake serves bucket "bkt" from a minimal fake S3 server on 127.0.0.1: it answers the
// bucket's HEAD and location itself and every other request with h. It returns a Bucket on it
// (closed when the test ends) and a context for its calls.
func openFake(t *testing.T, h http.HandlerFunc) (context.Context, *s3store.Bucket) {
	t.Helper()
	endpoint := serveHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodHead && strings.TrimSuffix(r.URL.Path, "/") == "/bkt":
			w.WriteHeader(http.StatusOK)
		case r.URL.Query().Has("location"):
			fmt.Fprint(w, `<LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/">us-east-1</LocationConstraint>`)
		default:
			h(w, r)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	b, err := s3store.New(ctx, s3store.Config{Endpoint: endpoint, Bucket: "bkt", AccessKey: "ak", SecretKey: "sk", Insecure: true, MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return ctx, b
}

// An https client against a plain-HTTP server (s3.insecure left false, or an endpoint
// without http://) is a setting to fix, not a server to wait for: it fails at once and says
// what to change.
func TestPlainHTTPServerWithTLS(t *testing.T) {
	t.Parallel()
	endpoint := serveHTTP(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	start := time.Now()
	_, err := s3store.New(context.Background(), s3store.Config{
		Endpoint: endpoint, Bucket: "some-bucket", AccessKey: "ak", SecretKey: "sk",
		ConnectTimeout: 5 * time.Second,
	})
	d := time.Since(start)
	if err == nil {
		t.Fatal("New over https to a plain-HTTP server succeeded")
	}
	t.Logf("after %v: %v", d.Round(time.Millisecond), err)
	if d > 2*time.Second {
		t.Errorf("took %v: a scheme mismatch was retried until the ConnectTimeout", d)
	}
	if !strings.Contains(err.Error(), "http://"+endpoint) || !strings.Contains(err.Error(), "s3.insecure: true") {
		t.Errorf("error does not say how to fix it (http://%s or s3.insecure: true): %v", endpoint, err)
	}
}

// TestListingThatDoesNotAdvance: a server that answers every page of a listing with "truncated,
// continue from token X" and the same X (not S3-compatible) was listed forever (317,000
// requests in 100 s); Iter now says so after the repeated token. A listing over several pages
// with new tokens is unaffected.
func TestListingThatDoesNotAdvance(t *testing.T) {
	t.Parallel()
	var lists atomic.Int32
	ctx, b := openFake(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch {
		case q.Has("list-type"):
			lists.Add(1)
			// prefix "pages/": three pages (tokens "", p1, p2), one key each; else the loop.
			page := map[string]string{"": "p1", "p1": "p2", "p2": ""}
			token := q.Get("continuation-token")
			key, next, truncated := "", "same", true
			if strings.HasPrefix(q.Get("prefix"), "pages/") {
				key, next = "pages/k-"+token, page[token]
				truncated = next != ""
			}
			contents := ""
			if key != "" {
				contents = `<Contents><Key>` + key + `</Key><Size>1</Size><ETag>"x"</ETag><LastModified>2026-01-01T00:00:00.000Z</LastModified></Contents>`
			}
			fmt.Fprintf(w, `<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>%s</Prefix><MaxKeys>1000</MaxKeys><IsTruncated>%v</IsTruncated>%s<NextContinuationToken>%s</NextContinuationToken></ListBucketResult>`,
				q.Get("prefix"), truncated, contents, next)
		default:
			w.WriteHeader(http.StatusNotImplemented)
		}
	})
	var keys []string
	if err := b.Iter(ctx, "pages/", func(k string) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatalf("a listing of three pages: %v", err)
	}
	if want := []string{"pages/k-", "pages/k-p1", "pages/k-p2"}; !slices.Equal(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	lists.Store(0)
	err := b.Iter(ctx, "loop/", func(string) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "does not advance") || !strings.Contains(err.Error(), `"same"`) {
		t.Fatalf("a listing that repeats its token: %v", err)
	}
	if n := lists.Load(); n > 3 {
		t.Errorf("%d list requests before the listing was stopped", n)
	}
}

// TestServerErrorsNameTheStatus: minio-go's error text is the server's message alone ("Access
// Denied."); errors name the HTTP status and S3 code too, and still match what they wrap.
func TestServerErrorsNameTheStatus(t *testing.T) {
	t.Parallel()
	ctx, b := openFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		if r.Method != http.MethodHead {
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><Resource>/bkt/k</Resource><RequestId>1</RequestId></Error>`)
		}
	})
	_, err := storage.ReadAll(ctx, b, "k")
	t.Logf("get: %v", err)
	if err == nil || !strings.Contains(err.Error(), "Please reduce your request rate. (HTTP 503 SlowDown)") {
		t.Fatalf("get from a server answering 503 SlowDown: %v; want the message with the status and code", err)
	}
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) || resp.Code != "SlowDown" || !strings.Contains(err.Error(), b.Name()) {
		t.Fatalf("error lost its store's name or its cause: %v", err)
	}
	_, err = b.Stat(ctx, "k")
	t.Logf("stat: %v", err)
	if err == nil || !strings.Contains(err.Error(), "503") || strings.Count(err.Error(), "503") > 1 || storage.IsNotFound(err) {
		t.Fatalf("stat from a server answering 503: %v; want the status", err)
	}
}
