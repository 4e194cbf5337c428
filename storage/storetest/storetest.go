// Package storetest is the acceptance suite every storage.Bucket provider must pass.
// Providers call Run from their tests with a function that opens a fresh, empty bucket.
//
// The suite checks the promises of storage.Bucket: round trips (empty, small, unknown
// size, > 16 MiB), ranged reads and their clipping, Stat, typed NotFound errors, idempotent
// Delete, lexicographic and prefix-limited Iter, IfAbsent semantics (including 8 racing
// writers), ctx cancellation, rejected keys, and the storage wrappers (WithPrefix,
// WithMetrics, OpenReaderAt) on top of the provider.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/storage"
)

// LargeSize is the size of the large object of the suite: above 16 MiB, so that an S3
// provider with a part size of 16 MiB or less uploads it in several parts.
const LargeSize = 17<<20 + 12345

// Run runs the acceptance suite. open must return a fresh, empty bucket for each call;
// the suite closes it.
func Run(t *testing.T, open func(t *testing.T) storage.Bucket) {
	tests := []struct {
		name string
		f    func(t *testing.T, b storage.Bucket)
	}{
		{"RoundTrip", testRoundTrip},
		{"UnknownSize", testUnknownSize},
		{"Large", testLarge},
		{"ShortReader", testShortReader},
		{"GetRange", testGetRange},
		{"NotFound", testNotFound},
		{"Delete", testDelete},
		{"Iter", testIter},
		{"IfAbsent", testIfAbsent},
		{"NoSync", testNoSync},
		{"ETag", testETag},
		{"ConcurrentIfAbsent", testConcurrentIfAbsent},
		{"Cancel", testCancel},
		{"InvalidKeys", testInvalidKeys},
		{"Wrappers", testWrappers},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t)
			t.Cleanup(func() { b.Close() })
			tc.f(t, b)
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// randomBytes returns n deterministic pseudo-random bytes.
func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 7}))
	p := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			p[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		p[i] = byte(r.Uint32())
	}
	return p
}

func mustPut(t *testing.T, b storage.Bucket, key string, data []byte, opts ...storage.PutOption) {
	t.Helper()
	if err := storage.PutBytes(ctxT(t), b, key, data, opts...); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func mustGet(t *testing.T, b storage.Bucket, key string) []byte {
	t.Helper()
	data, err := storage.ReadAll(ctxT(t), b, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return data
}

func checkContent(t *testing.T, b storage.Bucket, key string, want []byte) {
	t.Helper()
	got := mustGet(t, b, key)
	if !bytes.Equal(got, want) {
		t.Fatalf("get %s: %d bytes %q…, want %d bytes %q…", key, len(got), head(got), len(want), head(want))
	}
	a, err := b.Stat(ctxT(t), key)
	if err != nil {
		t.Fatalf("stat %s: %v", key, err)
	}
	if a.Size != int64(len(want)) {
		t.Fatalf("stat %s: size %d, want %d", key, a.Size, len(want))
	}
}

func head(p []byte) []byte {
	if len(p) > 16 {
		return p[:16]
	}
	return p
}

func listKeys(t *testing.T, b storage.Bucket, prefix string) []string {
	t.Helper()
	keys := []string{}
	if err := b.Iter(ctxT(t), prefix, func(k string) error {
		keys = append(keys, k)
		return nil
	}); err != nil {
		t.Fatalf("iter %q: %v", prefix, err)
	}
	return keys
}

// onlyReader hides every method of r but Read (no io.Seeker, no io.ReaderAt).
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func testRoundTrip(t *testing.T, b storage.Bucket) {
	if b.Name() == "" {
		t.Error("empty Name")
	}
	before := time.Now().Add(-time.Minute)
	objects := map[string][]byte{
		"empty":                   {},
		"one":                     {0},
		"runs/r1/iter=000001/x":   []byte("hello, bucket"),
		"bin/zero-and-high":       {0, 0xff, 0x80, '\n', 0},
		"deep/a/b/c/d/e/f/g/obj":  randomBytes(100_000, 1),
		"spaces and ünïcode/ключ": []byte("utf-8 key"),
	}
	for k, v := range objects {
		mustPut(t, b, k, v)
	}
	for k, v := range objects {
		checkContent(t, b, k, v)
	}
	a, err := b.Stat(ctxT(t), "runs/r1/iter=000001/x")
	if err != nil {
		t.Fatal(err)
	}
	if a.LastModified.Before(before) || a.LastModified.After(time.Now().Add(time.Minute)) {
		t.Errorf("LastModified %v is not about now", a.LastModified)
	}
	// Overwrite without IfAbsent replaces, including with a shorter and an empty object.
	mustPut(t, b, "deep/a/b/c/d/e/f/g/obj", []byte("short"))
	checkContent(t, b, "deep/a/b/c/d/e/f/g/obj", []byte("short"))
	mustPut(t, b, "deep/a/b/c/d/e/f/g/obj", nil)
	checkContent(t, b, "deep/a/b/c/d/e/f/g/obj", nil)
	// A reader without Seek/ReadAt and a known size.
	data := randomBytes(70_000, 2)
	if err := b.Put(ctxT(t), "plain-reader", onlyReader{bytes.NewReader(data)}, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	checkContent(t, b, "plain-reader", data)
}

func testUnknownSize(t *testing.T, b storage.Bucket) {
	for i, data := range [][]byte{nil, []byte("x"), randomBytes(300_000, 3)} {
		key := fmt.Sprintf("unknown/%d", i)
		if err := b.Put(ctxT(t), key, onlyReader{bytes.NewReader(data)}, -1); err != nil {
			t.Fatalf("put %s with size -1: %v", key, err)
		}
		checkContent(t, b, key, data)
	}
}

func testLarge(t *testing.T, b storage.Bucket) {
	data := randomBytes(LargeSize, 4)
	if err := b.Put(ctxT(t), "large/seekable", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	checkContent(t, b, "large/seekable", data)
	if err := b.Put(ctxT(t), "large/stream", onlyReader{bytes.NewReader(data)}, -1); err != nil {
		t.Fatal(err)
	}
	checkContent(t, b, "large/stream", data)
	// A seekable reader that was already read from: Put stores from its position on, not
	// from offset 0 (minio-go's multipart upload of a ReaderAt reads at absolute offsets).
	const skip = 1000
	mid := bytes.NewReader(data)
	if _, err := mid.Seek(skip, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctxT(t), "large/from-position", mid, int64(len(data)-skip)); err != nil {
		t.Fatalf("put large from a position: %v", err)
	}
	checkContent(t, b, "large/from-position", data[skip:])
	// A range across the 5 MiB and 16 MiB boundaries.
	for _, off := range []int64{5<<20 - 10, 16<<20 - 10} {
		got := readRange(t, b, "large/stream", off, 20)
		if !bytes.Equal(got, data[off:off+20]) {
			t.Fatalf("range at %d differs", off)
		}
	}
	got := readRange(t, b, "large/seekable", LargeSize-100, -1)
	if !bytes.Equal(got, data[LargeSize-100:]) {
		t.Fatal("tail range differs")
	}
}

func testShortReader(t *testing.T, b storage.Bucket) {
	data := []byte("only eleven")
	for _, r := range []io.Reader{onlyReader{bytes.NewReader(data)}, bytes.NewReader(data)} {
		err := b.Put(ctxT(t), "short", r, 100)
		if err == nil {
			t.Fatal("put with a reader shorter than size succeeded")
		}
		if _, err := b.Stat(ctxT(t), "short"); !storage.IsNotFound(err) {
			t.Fatalf("after a failed put: stat error %v, want not found", err)
		}
	}
	// A failed overwrite keeps the old object.
	mustPut(t, b, "short", []byte("old"))
	if err := b.Put(ctxT(t), "short", onlyReader{bytes.NewReader(data)}, 100); err == nil {
		t.Fatal("put with a reader shorter than size succeeded")
	}
	checkContent(t, b, "short", []byte("old"))
}

func readRange(t *testing.T, b storage.Bucket, key string, off, length int64) []byte {
	t.Helper()
	rc, err := b.GetRange(ctxT(t), key, off, length)
	if err != nil {
		t.Fatalf("get range %s [%d,+%d): %v", key, off, length, err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read range %s [%d,+%d): %v", key, off, length, err)
	}
	return got
}

func testGetRange(t *testing.T, b storage.Bucket) {
	data := []byte("0123456789abcdefghij") // 20 bytes
	mustPut(t, b, "r", data)
	for _, c := range []struct {
		off, length int64
		want        string
	}{
		{5, 4, "5678"},        // middle
		{0, 1, "0"},           // first byte
		{0, -1, string(data)}, // whole
		{15, -1, "fghij"},     // to end
		{19, -1, "j"},         // last byte
		{15, 100, "fghij"},    // past end: clipped
		{0, 20, string(data)}, // exactly all
		{7, 0, ""},            // empty range
		{20, -1, ""},          // at end
		{20, 5, ""},           // at end
		{25, 5, ""},           // beyond end
		{1 << 40, -1, ""},     // far beyond end
	} {
		got := readRange(t, b, "r", c.off, c.length)
		if string(got) != c.want {
			t.Errorf("GetRange(%d, %d) = %q, want %q", c.off, c.length, got, c.want)
		}
	}
	if rc, err := b.GetRange(ctxT(t), "r", -1, 2); err == nil {
		rc.Close()
		t.Error("GetRange with a negative offset succeeded")
	}
	mustPut(t, b, "empty", nil)
	if got := readRange(t, b, "empty", 0, -1); len(got) != 0 {
		t.Errorf("range of empty object: %q", got)
	}
	if got := readRange(t, b, "empty", 0, 10); len(got) != 0 {
		t.Errorf("range of empty object: %q", got)
	}
}

func testNotFound(t *testing.T, b storage.Bucket) {
	ctx := ctxT(t)
	mustPut(t, b, "dir/x", []byte("x"))
	for _, key := range []string{"missing", "dir/missing", "dir", "dir/x/y", "missing/deeper/key"} {
		if rc, err := b.Get(ctx, key); !storage.IsNotFound(err) {
			if err == nil {
				rc.Close()
			}
			t.Errorf("Get(%q): %v, want not found", key, err)
		} else if !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), key) {
			t.Errorf("Get(%q): error %q does not name the key", key, err)
		}
		if _, err := b.Stat(ctx, key); !storage.IsNotFound(err) {
			t.Errorf("Stat(%q): %v, want not found", key, err)
		}
		for _, r := range [][2]int64{{0, -1}, {0, 0}, {3, 5}} {
			if rc, err := b.GetRange(ctx, key, r[0], r[1]); !storage.IsNotFound(err) {
				if err == nil {
					rc.Close()
				}
				t.Errorf("GetRange(%q, %d, %d): %v, want not found", key, r[0], r[1], err)
			}
		}
		var ke *storage.KeyError
		if _, err := b.Stat(ctx, key); !errors.As(err, &ke) || ke.Key == "" {
			t.Errorf("Stat(%q): %v is not a *storage.KeyError naming the key", key, err)
		}
	}
}

func testDelete(t *testing.T, b storage.Bucket) {
	ctx := ctxT(t)
	mustPut(t, b, "d/1", []byte("1"))
	mustPut(t, b, "d/2", []byte("2"))
	mustPut(t, b, "d/sub/3", []byte("3"))
	if err := b.Delete(ctx, "d/1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, "d/1"); !storage.IsNotFound(err) {
		t.Fatalf("stat after delete: %v", err)
	}
	if err := b.Delete(ctx, "d/1"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if err := b.Delete(ctx, "never/existed"); err != nil {
		t.Fatalf("delete of a missing key: %v", err)
	}
	if err := b.Delete(ctx, "d/sub/3"); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "d"); err != nil { // a folder, not an object
		t.Fatalf("delete of a folder name: %v", err)
	}
	checkContent(t, b, "d/2", []byte("2"))
	if got := listKeys(t, b, ""); !slices.Equal(got, []string{"d/2"}) {
		t.Fatalf("keys after deletes: %q", got)
	}
	// The key can be written again, also below a deleted folder.
	mustPut(t, b, "d/sub/3", []byte("again"))
	checkContent(t, b, "d/sub/3", []byte("again"))
}

func testIter(t *testing.T, b storage.Bucket) {
	ctx := ctxT(t)
	// Orders that differ: walking folders depth-first gives a/… before a-b; sorting by
	// path elements gives a/… after a.b; lexicographic byte order is "a-b" < "a.b" <
	// "a/…" < "a0" < "b.c" < "b/…".
	keys := []string{"a/b/c", "a-b", "a0", "a/c", "a.b", "b.c", "a/bc", "b/x/y/z"}
	for _, k := range keys {
		mustPut(t, b, k, []byte(k))
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	if got := listKeys(t, b, ""); !slices.Equal(got, want) {
		t.Fatalf("Iter(\"\") = %q, want %q", got, want)
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"a/", []string{"a/b/c", "a/bc", "a/c"}},
		{"a/b", []string{"a/b/c", "a/bc"}},
		{"a/b/", []string{"a/b/c"}},
		{"a", []string{"a-b", "a.b", "a/b/c", "a/bc", "a/c", "a0"}},
		{"a-", []string{"a-b"}},
		{"b", []string{"b.c", "b/x/y/z"}},
		{"b/x/", []string{"b/x/y/z"}},
		{"zz", []string{}},
		{"zz/yy/", []string{}},
		{"a/b/c", []string{"a/b/c"}},
	} {
		if got := listKeys(t, b, c.prefix); !slices.Equal(got, c.want) {
			t.Errorf("Iter(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
	// Iteration stops at the first error of f, which Iter returns.
	stop := errors.New("stop here")
	var seen []string
	err := b.Iter(ctx, "", func(k string) error {
		seen = append(seen, k)
		if len(seen) == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Iter returned %v, want the error of f", err)
	}
	if !slices.Equal(seen, want[:3]) {
		t.Fatalf("Iter called f for %q before stopping, want %q", seen, want[:3])
	}
	if err := b.Delete(ctx, "a/bc"); err != nil {
		t.Fatal(err)
	}
	if got := listKeys(t, b, "a/"); !slices.Equal(got, []string{"a/b/c", "a/c"}) {
		t.Fatalf("Iter after delete = %q", got)
	}
}

// NoSync only relaxes durability: the object is written, replaces the old one, is listed,
// and combines with IfAbsent.
func testNoSync(t *testing.T, b storage.Bucket) {
	ctx := ctxT(t)
	mustPut(t, b, "r/_receipts/part-0.json", []byte("old"))
	mustPut(t, b, "r/_receipts/part-0.json", []byte("new receipt"), storage.NoSync())
	checkContent(t, b, "r/_receipts/part-0.json", []byte("new receipt"))
	mustPut(t, b, "r/_receipts/part-1.json", randomBytes(1<<16, 3), storage.NoSync(), storage.IfAbsent())
	checkContent(t, b, "r/_receipts/part-1.json", randomBytes(1<<16, 3))
	if err := storage.PutBytes(ctx, b, "r/_receipts/part-1.json", []byte("x"), storage.NoSync(), storage.IfAbsent()); !storage.IsAlreadyExists(err) {
		t.Fatalf("NoSync+IfAbsent over an existing key: %v, want already exists", err)
	}
	if got := listKeys(t, b, "r/"); !slices.Equal(got, []string{"r/_receipts/part-0.json", "r/_receipts/part-1.json"}) {
		t.Fatalf("Iter = %q", got)
	}
}

// testETag checks the ETag promise: the ETag a Put records is the one Stat reports until the
// object is replaced, and a replacement with other bytes changes it, whatever way the bytes
// were put (one PUT, streamed, multipart, only if absent, through the wrappers).
func testETag(t *testing.T, b storage.Bucket) {
	ctx := ctxT(t)
	stat := func(b storage.Bucket, key string) string {
		t.Helper()
		a, err := b.Stat(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if a.ETag == "" {
			t.Fatalf("Stat(%s) has no ETag", key)
		}
		return a.ETag
	}
	p := storage.WithPrefix(storage.WithMetrics(b), "tagged")
	large := randomBytes(LargeSize, 9)
	puts := []struct {
		name string
		b    storage.Bucket
		put  func(b storage.Bucket, key string, data []byte, opts ...storage.PutOption) error
		data [2][]byte
	}{
		{"bytes", b, func(b storage.Bucket, key string, data []byte, opts ...storage.PutOption) error {
			return storage.PutBytes(ctx, b, key, data, opts...)
		}, [2][]byte{[]byte("first"), []byte("other")}},
		{"stream", b, func(b storage.Bucket, key string, data []byte, opts ...storage.PutOption) error {
			return b.Put(ctx, key, onlyReader{bytes.NewReader(data)}, -1, opts...)
		}, [2][]byte{randomBytes(70_000, 1), randomBytes(70_000, 2)}},
		{"large", b, func(b storage.Bucket, key string, data []byte, opts ...storage.PutOption) error {
			return b.Put(ctx, key, bytes.NewReader(data), int64(len(data)), opts...)
		}, [2][]byte{large, append(slices.Clone(large[:len(large)-1]), large[len(large)-1]^1)}},
		{"wrapped", p, func(b storage.Bucket, key string, data []byte, opts ...storage.PutOption) error {
			return storage.PutBytes(ctx, b, key, data, opts...)
		}, [2][]byte{[]byte("same size 1"), []byte("same size 2")}},
	}
	for _, tc := range puts {
		key := "etag/" + tc.name
		var first, second, nosync string
		if err := tc.put(tc.b, key, tc.data[0], storage.RecordETag(&first)); err != nil {
			t.Fatal(err)
		}
		if got := stat(tc.b, key); first == "" || got != first {
			t.Fatalf("%s: Put recorded ETag %q, Stat reports %q", tc.name, first, got)
		}
		if got := stat(tc.b, key); got != first {
			t.Fatalf("%s: ETag changed from %q to %q without a Put", tc.name, first, got)
		}
		if err := tc.put(tc.b, key, tc.data[1], storage.RecordETag(&second)); err != nil {
			t.Fatal(err)
		}
		if second == first {
			t.Fatalf("%s: a Put of other bytes kept the ETag %q", tc.name, first)
		}
		if got := stat(tc.b, key); got != second {
			t.Fatalf("%s: Put recorded ETag %q, Stat reports %q", tc.name, second, got)
		}
		if err := tc.put(tc.b, key, tc.data[0], storage.RecordETag(&nosync), storage.NoSync()); err != nil {
			t.Fatal(err)
		}
		if nosync == second {
			t.Fatalf("%s: a NoSync Put of other bytes kept the ETag %q", tc.name, second)
		}
		if got := stat(tc.b, key); got != nosync {
			t.Fatalf("%s: NoSync Put recorded ETag %q, Stat reports %q", tc.name, nosync, got)
		}
	}
	var cond string
	mustPut(t, b, "etag/m/_MANIFEST.json", []byte("manifest"), storage.IfAbsent(), storage.RecordETag(&cond))
	if got := stat(b, "etag/m/_MANIFEST.json"); cond == "" || got != cond {
		t.Fatalf("conditional Put recorded ETag %q, Stat reports %q", cond, got)
	}
	cond = "unchanged"
	if err := storage.PutBytes(ctx, b, "etag/m/_MANIFEST.json", []byte("manifest"), storage.IfAbsent(), storage.RecordETag(&cond)); !storage.IsAlreadyExists(err) || cond != "unchanged" {
		t.Fatalf("a conditional Put that lost: %v, and recorded ETag %q", err, cond)
	}
}

func testIfAbsent(t *testing.T, b storage.Bucket) {
	ctx := ctxT(t)
	mustPut(t, b, "m/_MANIFEST.json", []byte("first"), storage.IfAbsent())
	checkContent(t, b, "m/_MANIFEST.json", []byte("first"))
	for _, data := range [][]byte{[]byte("second"), []byte("first"), nil} {
		err := storage.PutBytes(ctx, b, "m/_MANIFEST.json", data, storage.IfAbsent())
		if !storage.IsAlreadyExists(err) {
			t.Fatalf("IfAbsent put of %q over an existing key: %v, want already exists", data, err)
		}
		if !strings.Contains(err.Error(), "m/_MANIFEST.json") {
			t.Errorf("error %q does not name the key", err)
		}
		checkContent(t, b, "m/_MANIFEST.json", []byte("first"))
	}
	// Unknown size, conditional.
	if err := b.Put(ctx, "m/LATEST", onlyReader{strings.NewReader("7")}, -1, storage.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "m/LATEST", onlyReader{strings.NewReader("8")}, -1, storage.IfAbsent()); !storage.IsAlreadyExists(err) {
		t.Fatalf("second conditional put: %v", err)
	}
	checkContent(t, b, "m/LATEST", []byte("7"))
	// A plain Put still overwrites; after Delete the conditional Put succeeds again.
	mustPut(t, b, "m/LATEST", []byte("8"))
	checkContent(t, b, "m/LATEST", []byte("8"))
	if err := b.Delete(ctx, "m/LATEST"); err != nil {
		t.Fatal(err)
	}
	mustPut(t, b, "m/LATEST", []byte("9"), storage.IfAbsent())
	checkContent(t, b, "m/LATEST", []byte("9"))
	// An empty conditional object.
	mustPut(t, b, "m/empty", nil, storage.IfAbsent())
	if err := storage.PutBytes(ctx, b, "m/empty", nil, storage.IfAbsent()); !storage.IsAlreadyExists(err) {
		t.Fatalf("second conditional put of an empty object: %v", err)
	}
}

func testConcurrentIfAbsent(t *testing.T, b storage.Bucket) {
	ctx := ctxT(t)
	const writers = 8
	for round := range 3 {
		key := fmt.Sprintf("race/%d/LATEST", round)
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			errs  [writers]error
		)
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = storage.PutBytes(ctx, b, key, fmt.Appendf(nil, "writer %d of round %d", i, round), storage.IfAbsent())
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: writers %d and %d both won", round, winner, i)
				}
				winner = i
			case !storage.IsAlreadyExists(err):
				t.Fatalf("round %d: writer %d: %v, want nil or already exists", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won", round)
		}
		checkContent(t, b, key, fmt.Appendf(nil, "writer %d of round %d", winner, round))
	}
}

// endless yields zeros forever, slowly enough that a cancellation lands mid-Put.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	time.Sleep(time.Millisecond)
	clear(p)
	return len(p), nil
}

func testCancel(t *testing.T, b storage.Bucket) {
	mustPut(t, b, "present", []byte("here"))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for name, op := range map[string]func() error{
		"get": func() error {
			rc, err := b.Get(cancelled, "present")
			if err == nil {
				_, err = io.ReadAll(rc)
				rc.Close()
			}
			return err
		},
		"get range": func() error {
			rc, err := b.GetRange(cancelled, "present", 1, 2)
			if err == nil {
				_, err = io.ReadAll(rc)
				rc.Close()
			}
			return err
		},
		"stat": func() error { _, err := b.Stat(cancelled, "present"); return err },
		"put":  func() error { return storage.PutBytes(cancelled, b, "cancelled", []byte("x")) },
		"iter": func() error { return b.Iter(cancelled, "", func(string) error { return nil }) },
	} {
		start := time.Now()
		err := op()
		if err == nil {
			t.Errorf("%s with a cancelled context succeeded", name)
		} else if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", name, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s with a cancelled context took %v", name, d)
		}
	}
	// Cancel in the middle of an endless upload.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.Put(ctx, "endless", endless{}, -1) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("put of an endless reader succeeded")
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled put: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("put did not return within 10 s of cancellation")
	}
	if _, err := b.Stat(ctxT(t), "endless"); !storage.IsNotFound(err) {
		t.Fatalf("a cancelled put left an object: %v", err)
	}
	if got := listKeys(t, b, ""); !slices.Equal(got, []string{"present"}) {
		t.Fatalf("keys after cancelled puts: %q", got)
	}
}

func testInvalidKeys(t *testing.T, b storage.Bucket) {
	ctx := ctxT(t)
	// The last ones one provider or another cannot store (S3: invalid UTF-8, over 1024 bytes;
	// a folder and MinIO: an element over 255 bytes): every provider rejects them alike.
	for _, key := range []string{"", "/abs", "trailing/", "a//b", "a/./b", "./a", "../escape", "a/..", "nul\x00byte", ".",
		"bad/\xff\xfe", strings.Repeat("k/", 512) + "y", "long/" + strings.Repeat("x", 256)} {
		if err := storage.PutBytes(ctx, b, key, []byte("x")); err == nil {
			t.Errorf("Put(%q) succeeded", key)
		}
		if err := storage.PutBytes(ctx, b, key, []byte("x"), storage.IfAbsent()); err == nil {
			t.Errorf("conditional Put(%q) succeeded", key)
		}
		if rc, err := b.Get(ctx, key); err == nil {
			rc.Close()
			t.Errorf("Get(%q) succeeded", key)
		} else if storage.IsNotFound(err) {
			t.Errorf("Get(%q): %v, want an invalid-key error, not not-found", key, err)
		}
		if rc, err := b.GetRange(ctx, key, 0, 1); err == nil {
			rc.Close()
			t.Errorf("GetRange(%q) succeeded", key)
		}
		if _, err := b.Stat(ctx, key); err == nil || storage.IsNotFound(err) {
			t.Errorf("Stat(%q): %v, want an invalid-key error", key, err)
		}
		if err := b.Delete(ctx, key); err == nil {
			t.Errorf("Delete(%q) succeeded", key)
		}
	}
	if got := listKeys(t, b, ""); len(got) != 0 {
		t.Fatalf("invalid puts left keys %q", got)
	}
}

func testWrappers(t *testing.T, b storage.Bucket) {
	ctx := ctxT(t)
	m := storage.WithMetrics(b)
	p := storage.WithPrefix(m, "/runs/r1/")
	data := randomBytes(10_000, 5)
	if err := storage.PutBytes(ctx, p, "iter=000001/shard", data); err != nil {
		t.Fatal(err)
	}
	if err := p.Put(ctx, "iter=000001/unknown", onlyReader{strings.NewReader("abc")}, -1); err != nil {
		t.Fatal(err)
	}
	mustPut(t, b, "runs/r10/other", []byte("not under the prefix"))
	checkContent(t, b, "runs/r1/iter=000001/shard", data)
	checkContent(t, p, "iter=000001/shard", data)
	if got := listKeys(t, p, ""); !slices.Equal(got, []string{"iter=000001/shard", "iter=000001/unknown"}) {
		t.Fatalf("prefixed Iter = %q", got)
	}
	if got := listKeys(t, p, "iter=000001/s"); !slices.Equal(got, []string{"iter=000001/shard"}) {
		t.Fatalf("prefixed Iter with prefix = %q", got)
	}
	if _, err := p.Stat(ctx, "../escape"); err == nil || storage.IsNotFound(err) {
		t.Fatalf("prefixed Stat of an invalid key: %v", err)
	}
	if !strings.HasSuffix(p.Name(), "/runs/r1") {
		t.Errorf("prefixed Name %q", p.Name())
	}

	ra, size, err := storage.OpenReaderAt(ctx, p, "iter=000001/shard")
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(len(data)) {
		t.Fatalf("OpenReaderAt size %d, want %d", size, len(data))
	}
	buf := make([]byte, 100)
	if n, err := ra.ReadAt(buf, 5000); n != 100 || err != nil || !bytes.Equal(buf, data[5000:5100]) {
		t.Fatalf("ReadAt middle: %d, %v", n, err)
	}
	if n, err := ra.ReadAt(buf, size-40); n != 40 || err != io.EOF || !bytes.Equal(buf[:40], data[size-40:]) {
		t.Fatalf("ReadAt tail: %d, %v", n, err)
	}
	if n, err := ra.ReadAt(buf, size); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt at end: %d, %v", n, err)
	}
	if _, _, err := storage.OpenReaderAt(ctx, p, "missing"); !storage.IsNotFound(err) {
		t.Fatalf("OpenReaderAt of a missing key: %v", err)
	}

	s := m.Snapshot()
	// 2 puts; checkContent through p: 1 get + 1 stat; 2 ReadAt that reach the bucket; 1+1 stats of
	// OpenReaderAt; 1 invalid stat rejected by the prefix view before reaching m.
	want := storage.Metrics{Gets: 1, GetRanges: 2, Puts: 2, Stats: 3, Iters: 2, Errors: 1,
		BytesRead: int64(len(data)) + 140, BytesWritten: int64(len(data)) + 3}
	if s != want {
		t.Fatalf("metrics %+v, want %+v", s, want)
	}
}
