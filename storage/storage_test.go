package storage_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/filestore"
)

func TestValidateKey(t *testing.T) {
	for _, k := range []string{"a", "a/b", "runs/r1/iter=000007/rollout/part-00000-of-00004.parquet", "..a", "a..", ".hidden", "a b/ü"} {
		if err := storage.ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q): %v", k, err)
		}
	}
	if err := storage.ValidateKey(strings.Repeat("x/", 511) + "yy"); err != nil { // 1024 bytes
		t.Errorf("ValidateKey of a 1024-byte key: %v", err)
	}
	if err := storage.ValidateKey("a/" + strings.Repeat("é", 127) + "x"); err != nil { // 255-byte element
		t.Errorf("ValidateKey of a 255-byte element: %v", err)
	}
	// What S3 (invalid UTF-8, over 1024 bytes) or a local folder and MinIO (an element over 255
	// bytes) cannot store is rejected up front, the same way by every provider.
	for _, k := range []string{"", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b", "../a", "a\x00",
		"a/\xff\xfe", "a\xc3", strings.Repeat("x/", 512) + "y", "a/" + strings.Repeat("x", 256)} {
		if err := storage.ValidateKey(k); err == nil {
			t.Errorf("ValidateKey(%q) accepted", k)
		}
	}
}

func TestKeyError(t *testing.T) {
	err := error(&storage.KeyError{Op: "get", Bucket: "file:///x", Key: "k", Err: storage.ErrNotFound})
	if !storage.IsNotFound(err) || storage.IsAlreadyExists(err) {
		t.Fatal("KeyError does not unwrap")
	}
	if got := err.Error(); got != "get file:///x: k: object not found" {
		t.Fatalf("Error() = %q", got)
	}
}

func newBucket(t *testing.T) storage.Bucket {
	b, err := filestore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWithPrefix(t *testing.T) {
	ctx := context.Background()
	b := newBucket(t)
	if storage.WithPrefix(b, "/") != b {
		t.Fatal("an empty prefix must return the bucket itself")
	}
	bad := storage.WithPrefix(b, "a/../b")
	if err := storage.PutBytes(ctx, bad, "k", []byte("v")); err == nil || !strings.Contains(err.Error(), "invalid prefix") {
		t.Fatalf("put through an invalid prefix: %v", err)
	}
	if err := bad.Iter(ctx, "", func(string) error { return nil }); err == nil {
		t.Fatal("iter through an invalid prefix succeeded")
	}
	nested := storage.WithPrefix(storage.WithPrefix(b, "x"), "y/z")
	if err := storage.PutBytes(ctx, nested, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if got, err := storage.ReadAll(ctx, b, "x/y/z/k"); err != nil || string(got) != "v" {
		t.Fatalf("nested prefixes: %q, %v", got, err)
	}
}

func TestMetricsErrorsAndUnknownSize(t *testing.T) {
	ctx := context.Background()
	m := storage.WithMetrics(newBucket(t))
	if m.Unwrap() == nil {
		t.Fatal("Unwrap")
	}
	if err := m.Put(ctx, "k", strings.NewReader("12345"), -1); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(ctx, "k", strings.NewReader("x"), 1, storage.IfAbsent()); !storage.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, "missing"); !storage.IsNotFound(err) {
		t.Fatal(err)
	}
	rc, err := m.GetRange(ctx, "k", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	if err := m.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	want := storage.Metrics{Gets: 1, GetRanges: 1, Puts: 2, Deletes: 1, Errors: 2, BytesRead: 2, BytesWritten: 5}
	if got := m.Snapshot(); got != want {
		t.Fatalf("Snapshot %+v, want %+v", got, want)
	}
}

// shortBucket serves objects that are shorter than Stat says.
type shortBucket struct{ storage.Bucket }

func (s shortBucket) Stat(ctx context.Context, key string) (storage.Attributes, error) {
	a, err := s.Bucket.Stat(ctx, key)
	a.Size += 10
	return a, err
}

func TestOpenReaderAt(t *testing.T) {
	ctx := context.Background()
	b := newBucket(t)
	data := []byte("PAR1 ... footer PAR1")
	if err := storage.PutBytes(ctx, b, "f.parquet", data); err != nil {
		t.Fatal(err)
	}
	ra, size, err := storage.OpenReaderAt(ctx, b, "f.parquet")
	if err != nil || size != int64(len(data)) {
		t.Fatal(size, err)
	}
	r := io.NewSectionReader(ra, 0, size)
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("%q, %v", got, err)
	}
	if _, err := ra.ReadAt(make([]byte, 1), -1); err == nil {
		t.Fatal("negative offset accepted")
	}
	if n, err := ra.ReadAt(nil, 3); n != 0 || err != nil {
		t.Fatal(n, err)
	}
	ra, _, err = storage.OpenReaderAt(ctx, shortBucket{b}, "f.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ra.ReadAt(make([]byte, 8), size); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("object shorter than its size: %v", err)
	}
}

// cutBucket serves bodies that fail after their first two bytes, as a connection cut mid-body.
type cutBucket struct{ storage.Bucket }

func (c cutBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := c.Bucket.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, 2), iotest.ErrReader(io.ErrUnexpectedEOF)), rc}, nil
}

// TestMetricsCountBodyReadFailures: a body whose read fails counts as an error of its call,
// once however often it is read; a body read to its end counts none.
func TestMetricsCountBodyReadFailures(t *testing.T) {
	ctx := context.Background()
	b := newBucket(t)
	if err := storage.PutBytes(ctx, b, "k", []byte("12345")); err != nil {
		t.Fatal(err)
	}
	m := storage.WithMetrics(cutBucket{b})
	rc, err := m.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(rc); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read: %v", err)
	}
	if _, err := rc.Read(make([]byte, 4)); err == nil {
		t.Fatal("read after the failure succeeded")
	}
	rc.Close()
	if got := m.Snapshot(); got.Errors != 1 || got.Gets != 1 || got.BytesRead != 2 {
		t.Fatalf("after a cut body: %+v, want 1 error, 1 get, 2 bytes", got)
	}
	whole := storage.WithMetrics(b)
	if data, err := storage.ReadAll(ctx, whole, "k"); err != nil || string(data) != "12345" {
		t.Fatal(data, err)
	}
	if got := whole.Snapshot(); got.Errors != 0 || got.BytesRead != 5 {
		t.Fatalf("after a whole body: %+v", got)
	}
}
