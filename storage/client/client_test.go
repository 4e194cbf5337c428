package client_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/client"
	"github.com/drmas-dev/drmas/storage/filestore"
	"github.com/drmas-dev/drmas/storage/miniotest"
	"github.com/drmas-dev/drmas/storage/s3store"
)

func TestFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, u := range []string{"file://" + filepath.Join(dir, "a"), filepath.Join(dir, "b", "c"), "file://localhost" + filepath.Join(dir, "d")} {
		b, err := client.Open(ctx, u, s3store.Config{})
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if _, ok := b.(*filestore.Bucket); !ok {
			t.Fatalf("%s: %T", u, b)
		}
		if err := storage.PutBytes(ctx, b, "k", []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(strings.TrimPrefix(strings.TrimPrefix(b.Name(), "file://"), "localhost") + "/k"); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
	}
	t.Chdir(dir)
	b, err := client.Open(ctx, "rel/store", s3store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "file://" + filepath.Join(dir, "rel", "store"); b.Name() != want {
		t.Fatalf("relative path: Name %q, want %q", b.Name(), want)
	}
}

func TestBadURLs(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"", "gs://bucket/x", "http://host/x", "file://relative/path", "file://host/abs", "s3://", "s3:///prefix", "s3://user:pw@bucket/x"} {
		_, err := client.Open(ctx, u, s3store.Config{})
		if err == nil {
			t.Errorf("Open(%q) succeeded", u)
			continue
		}
		if strings.Contains(err.Error(), "pw@") {
			t.Errorf("Open(%q) error shows the password: %v", u, err)
		}
		t.Logf("%q: %v", u, err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	for _, u := range []string{"s3:/bucket/x", "s3:bucket", "file:/abs/path", "S3:/b"} {
		_, err := client.Open(ctx, u, s3store.Config{})
		if err == nil || !strings.Contains(err.Error(), `looks like a URL without "//"`) {
			t.Errorf("Open(%q): %v, want an error saying the URL lacks //", u, err)
		}
	}
	// ~ from a config file or a quoted flag: no shell expanded it, and a first write would
	// create a folder named "~" in the working folder.
	for _, u := range []string{"~/drmas-data", "~", "~user/data"} {
		b, err := client.Open(ctx, u, s3store.Config{})
		if err == nil {
			err = storage.PutBytes(ctx, b, "x", []byte("x"))
			t.Errorf("Open(%q) succeeded as %s (put: %v)", u, b.Name(), err)
		} else if !strings.Contains(err.Error(), "~ is not expanded") {
			t.Errorf("Open(%q): %v, want an error saying ~ is not expanded", u, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("mistyped URLs left %d entries in the working folder", len(ents))
	}
	for _, p := range []string{"./s3:/bucket", "c:/data", "data/s3:x"} {
		b, err := client.Open(ctx, p, s3store.Config{})
		if err != nil {
			t.Errorf("Open(%q), a folder: %v", p, err)
		} else if want := filepath.Join(dir, filepath.FromSlash(p)); b.Name() != "file://"+filepath.ToSlash(want) {
			t.Errorf("Open(%q) is %s, want file://%s", p, b.Name(), want)
		}
	}
	_, err := client.Open(ctx, "gs://bucket/x", s3store.Config{})
	if err == nil || !strings.Contains(err.Error(), `unsupported scheme "gs"`) {
		t.Errorf("unknown scheme: %v", err)
	}
}

func TestUnreachableS3(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := l.Addr().String()
	l.Close()
	const secret = "do-not-print-this-secret-42"
	start := time.Now()
	_, err = client.Open(context.Background(), "s3://some-bucket/runs", s3store.Config{
		Endpoint: endpoint, AccessKey: "key-id", SecretKey: secret, Insecure: true,
	})
	d := time.Since(start)
	if err == nil {
		t.Fatal("Open of an unreachable endpoint succeeded")
	}
	t.Logf("after %v: %v", d.Round(time.Millisecond), err)
	if d > 15*time.Second {
		t.Fatalf("took %v, want under 15 s", d)
	}
	if !strings.Contains(err.Error(), endpoint) || !strings.Contains(err.Error(), "some-bucket") {
		t.Fatalf("error does not name endpoint and bucket: %v", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("error shows the secret: %v", err)
	}
}

func TestS3(t *testing.T) {
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	ctx := context.Background()
	cfg := s3store.Config{
		Endpoint: "http://" + srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		Bucket: "ignored", Prefix: "ignored", MaxRetries: 2,
	}
	b, err := client.Open(ctx, "s3://"+bucket+"/runs/r1/", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sb, ok := b.(*s3store.Bucket)
	if !ok {
		t.Fatalf("%T", b)
	}
	if sb.BucketName() != bucket || sb.Prefix() != "runs/r1/" {
		t.Fatalf("bucket %q prefix %q", sb.BucketName(), sb.Prefix())
	}
	if err := storage.PutBytes(ctx, b, "x", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.Name(), srv.SecretKey) || strings.Contains(b.Name(), srv.AccessKey) {
		t.Fatalf("Name %q shows credentials", b.Name())
	}
	// A wrong secret: the error names the bucket and never the secret.
	cfg.SecretKey = "definitely-wrong-secret"
	_, err = client.Open(ctx, "s3://"+bucket, cfg)
	if err == nil || strings.Contains(err.Error(), cfg.SecretKey) || strings.Contains(err.Error(), srv.SecretKey) {
		t.Fatalf("wrong secret: %v", err)
	}
}
