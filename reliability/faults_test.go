package reliability_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/normalize"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/client"
	"github.com/drmas-dev/drmas/storage/miniotest"
	"github.com/drmas-dev/drmas/storage/s3store"
)

// failFast bounds how long an operation may take to report a storage fault.
const failFast = 30 * time.Second

func s3config(endpoint string, srv *miniotest.Server) s3store.Config {
	return s3store.Config{
		Endpoint: endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		Insecure: true, PathStyle: true, MaxRetries: 1, ConnectTimeout: 2 * time.Second,
		IdleTimeout: 5 * time.Second, // a stalled connection fails after 5 s without a byte
	}
}

func openS3(t testing.TB, url string, cfg s3store.Config) storage.Bucket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := client.Open(ctx, url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// incompleteUploads lists the bucket's incomplete multipart uploads.
func incompleteUploads(t testing.TB, srv *miniotest.Server, bucket string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var left []string
	for u := range srv.Client(t).ListIncompleteUploads(ctx, bucket, "", true) {
		if u.Err != nil {
			t.Fatalf("list incomplete uploads: %v", u.Err)
		}
		left = append(left, u.Key+" "+u.UploadID)
	}
	return left
}

// signalAfter is a reader that runs f once after n bytes were read from it.
type signalAfter struct {
	r    io.Reader
	n    int64
	read atomic.Int64
	once sync.Once
	f    func()
}

func (s *signalAfter) Read(p []byte) (int, error) {
	k, err := s.r.Read(p)
	if s.read.Add(int64(k)) >= s.n {
		s.once.Do(func() { go s.f() })
	}
	return k, err
}

// TestMultipartPutServerStopped stops MinIO in the middle of a 40 MiB multipart upload (5 MiB
// parts), from another goroutine once the first part's bytes have gone out. The Put must fail
// within failFast with an error naming the key and the endpoint; after a restart the same Put
// must succeed and store the exact bytes, and no incomplete multipart upload may be left.
func TestMultipartPutServerStopped(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	cfg := s3config(srv.Endpoint, srv)
	cfg.PartSize = s3store.MinPartSize
	b := openS3(t, "s3://"+bucket+"/big", cfg)

	data := make([]byte, 40<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < len(data); i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8; j++ {
			data[i+j] = byte(v >> (8 * j))
		}
	}
	for _, mode := range []string{"stream", "readerat"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			key := "objects/" + mode + ".bin"
			stopped := make(chan struct{})
			sig := &signalAfter{r: bytes.NewReader(data), n: 6 << 20, f: func() { srv.Stop(); close(stopped) }}
			var r io.Reader = struct{ io.Reader }{sig} // no Seek, no ReadAt: sequential multipart
			if mode == "readerat" {
				r = readerAtSignal{sig, bytes.NewReader(data)} // minio-go's parallel path
			}
			start := time.Now()
			err := b.Put(ctx, key, r, int64(len(data)))
			took := time.Since(start)
			<-stopped
			if err == nil {
				t.Fatal("Put succeeded although the server was stopped mid-upload")
			}
			t.Logf("Put failed after %v (%d MiB read): %v", took.Round(time.Millisecond), sig.read.Load()>>20, err)
			if took > failFast {
				t.Errorf("Put took %v to fail, want < %v", took, failFast)
			}
			var ke *storage.KeyError
			if !errors.As(err, &ke) || ke.Key != key {
				t.Errorf("error is not a *storage.KeyError for %s: %#v", key, err)
			}
			if msg := err.Error(); !strings.Contains(msg, key) || !strings.Contains(msg, srv.Endpoint) {
				t.Errorf("error names neither key %s nor endpoint %s: %v", key, srv.Endpoint, err)
			}
			if strings.Contains(err.Error(), srv.SecretKey) {
				t.Error("error shows the secret key")
			}

			srv.Restart()
			if _, err := b.Stat(ctx, key); !storage.IsNotFound(err) {
				t.Fatalf("the interrupted Put left an object: %v", err)
			}
			if err := b.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatalf("Put after restart: %v", err)
			}
			got, err := storage.ReadAll(ctx, b, key)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("stored %d bytes, sha256 %.12s; want %d, %.12s", len(got), sha(got), len(data), sha(data))
			}
			if left := incompleteUploads(t, srv, bucket); len(left) > 0 {
				t.Errorf("incomplete multipart uploads left after the restart and rerun: %q", left)
			}
		})
	}
}

type readerAtSignal struct {
	*signalAfter
	ra *bytes.Reader
}

func (r readerAtSignal) ReadAt(p []byte, off int64) (int, error) {
	k, err := r.ra.ReadAt(p, off)
	if r.read.Add(int64(k)) >= r.n {
		r.once.Do(func() { go r.f() })
	}
	return k, err
}

func (r readerAtSignal) Seek(off int64, whence int) (int64, error) { return r.ra.Seek(off, whence) }

// stageStep is one stage of the faulted sequence.
type stageStep struct {
	name string
	run  func(ctx context.Context, env *stages.Env) error
}

var faultSteps = []stageStep{
	{"warmup", func(ctx context.Context, env *stages.Env) error { _, err := warmup.Run(ctx, env); return err }},
	{"rollout", func(ctx context.Context, env *stages.Env) error {
		_, err := rollout.Run(ctx, env, rollout.Options{Iteration: 0, Step: stages.LatestStep})
		return err
	}},
	{"normalize", func(ctx context.Context, env *stages.Env) error {
		_, err := normalize.Run(ctx, env, normalize.Options{Iteration: 0})
		return err
	}},
	{"learn", func(ctx context.Context, env *stages.Env) error {
		_, err := learn.Run(ctx, env, learn.Options{Iteration: 0})
		return err
	}},
}

// runBounded runs a stage and fails the test if it does not return within limit (a hang).
func runBounded(t testing.TB, limit time.Duration, f func() error) (error, time.Duration) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err, time.Since(start)
	case <-time.After(limit):
		t.Fatalf("the stage hung: no return within %v", limit)
		return nil, 0
	}
}

// TestStagesSurviveStorageFaults runs warmup, rollout, normalize and learn on MinIO through a
// TCP proxy and, in the middle of each of rollout, normalize and learn (half-way through the
// bytes a fault-free run moves), injects a fault: the server stopped (connections reset, then
// refused; restarted afterwards), connections reset by the network, or connections stalled.
// Each stage must fail within failFast with an error naming the endpoint, and the rerun after
// the fault heals must finish. At the end the store must be consistent, its committed bytes
// identical to a fault-free run on the folder store, and no multipart upload left incomplete.
func TestStagesSurviveStorageFaults(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	px := startProxy(t, srv.Endpoint)
	cfg := stagetest.Config(t, "math")

	// The reference: the same stages on the folder store, no faults.
	local := stagetest.Env(t, cfg)
	for _, s := range faultSteps {
		if err := s.run(context.Background(), local); err != nil {
			t.Fatalf("reference %s: %v", s.name, err)
		}
	}
	want := inspect(t, local.Bucket, "runs/")

	// The bytes each stage moves through the proxy without faults.
	moved := map[string]int64{}
	measure := &stages.Env{Bucket: openS3(t, "s3://"+bucket+"/measure", s3config(px.Addr(), srv)), Config: cfg}
	for _, s := range faultSteps {
		before := px.Moved()
		if err := s.run(context.Background(), measure); err != nil {
			t.Fatalf("fault-free %s on MinIO: %v", s.name, err)
		}
		moved[s.name] = px.Moved() - before
	}
	if d := diff(inspect(t, measure.Bucket, "runs/").Committed, want.Committed); d != "" {
		t.Fatalf("fault-free MinIO run differs from the folder store:\n%s", d)
	}
	t.Logf("bytes through the proxy per stage: %v", moved)

	for _, mode := range []string{"server-stopped", "reset", "stall"} {
		t.Run(mode, func(t *testing.T) {
			env := &stages.Env{Bucket: openS3(t, "s3://"+bucket+"/"+mode, s3config(px.Addr(), srv)), Config: cfg}
			for i, s := range faultSteps {
				ctx := context.Background()
				if i == 0 {
					if err := s.run(ctx, env); err != nil {
						t.Fatalf("%s: %v", s.name, err)
					}
					continue
				}
				var hook func()
				pmode := reset
				switch mode {
				case "server-stopped":
					hook = srv.Stop
				case "stall":
					pmode = stall
				}
				px.FailAfter(moved[s.name]/2, pmode, hook)
				err, took := runBounded(t, 3*failFast, func() error { return s.run(ctx, env) })
				if !px.Fired() {
					t.Fatalf("%s: the fault did not fire", s.name)
				}
				if err == nil {
					t.Fatalf("%s succeeded although the store failed mid-stage", s.name)
				}
				t.Logf("%s: failed after %v: %v", s.name, took.Round(time.Millisecond), err)
				if took > failFast {
					t.Errorf("%s took %v to report the fault, want < %v", s.name, took, failFast)
				}
				if errors.Is(err, checkpoints.ErrNone) {
					t.Errorf("%s: a storage fault reads as \"no checkpoint\": %v", s.name, err)
				}
				if !strings.Contains(err.Error(), px.Addr()) {
					t.Errorf("%s: error does not name the endpoint %s: %v", s.name, px.Addr(), err)
				}
				if strings.Contains(err.Error(), srv.SecretKey) {
					t.Errorf("%s: error shows the secret key", s.name)
				}
				if mode == "server-stopped" {
					px.WaitHook() // the hook (srv.Stop) runs asynchronously: a late one would stop the restarted server
					srv.Restart()
				}
				px.Heal()
				mid := inspect(t, env.Bucket, "runs/")
				if err, _ := runBounded(t, 3*failFast, func() error { return s.run(ctx, env) }); err != nil {
					t.Fatalf("%s: rerun after the fault healed: %v (uncommitted objects before it: %v)", s.name, err, mid.Leftovers)
				}
			}
			got := inspect(t, env.Bucket, "runs/")
			if d := diff(got.Committed, want.Committed); d != "" {
				t.Fatalf("after faults and reruns the committed outputs differ from a fault-free run:\n%s", d)
			}
			if len(got.Leftovers) > 0 {
				t.Errorf("objects outside committed folders after the reruns: %v", got.Leftovers)
			}
			if left := incompleteUploads(t, srv, bucket); len(left) > 0 {
				t.Errorf("incomplete multipart uploads: %q", left)
			}
		})
	}
}
