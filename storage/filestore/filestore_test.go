package filestore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/filestore"
	"github.com/drmas-dev/drmas/storage/storetest"
)

func TestSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storage.Bucket {
		b, err := filestore.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

func newBucket(t *testing.T) *filestore.Bucket {
	t.Helper()
	b, err := filestore.New(filepath.Join(t.TempDir(), "bucket"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLayout(t *testing.T) {
	ctx := context.Background()
	b := newBucket(t)
	if err := storage.PutBytes(ctx, b, "runs/r/x", []byte("data")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(b.Root(), "runs", "r", "x"))
	if err != nil || string(got) != "data" {
		t.Fatalf("root/runs/r/x: %q, %v", got, err)
	}
	if want := "file://" + b.Root(); b.Name() != want {
		t.Fatalf("Name %q, want %q", b.Name(), want)
	}
	// Delete removes now-empty folders up to, not including, the root.
	if err := b.Delete(ctx, "runs/r/x"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b.Root(), "runs")); !os.IsNotExist(err) {
		t.Fatalf("empty folder runs left behind: %v", err)
	}
	if _, err := os.Stat(b.Root()); err != nil {
		t.Fatalf("root removed: %v", err)
	}
}

func TestRelativeRoot(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	b, err := filestore.New("rel/store")
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(b.Root()) || !strings.HasSuffix(b.Root(), filepath.Join("rel", "store")) {
		t.Fatalf("Root %q", b.Root())
	}
	f := filepath.Join(dir, "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := filestore.New(f); err == nil {
		t.Fatal("New on a regular file succeeded")
	}
	if _, err := filestore.New(""); err == nil {
		t.Fatal("New with an empty root succeeded")
	}
}

// A "crash" mid-Put leaves a temporary file next to the object: it is never listed and
// never shadows the object.
func TestCrashLeftovers(t *testing.T) {
	ctx := context.Background()
	b := newBucket(t)
	if err := storage.PutBytes(ctx, b, "runs/r/LATEST", []byte("good")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(b.Root(), "runs", "r")
	for _, name := range []string{filestore.TempPrefix + "123456", filestore.TempPrefix + "LATEST"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("partial garb"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A leftover in a folder that holds nothing else.
	os.MkdirAll(filepath.Join(b.Root(), "lonely"), 0o755)
	os.WriteFile(filepath.Join(b.Root(), "lonely", filestore.TempPrefix+"9"), []byte("x"), 0o644)

	var keys []string
	if err := b.Iter(ctx, "", func(k string) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"runs/r/LATEST"}) {
		t.Fatalf("Iter lists %q", keys)
	}
	got, err := storage.ReadAll(ctx, b, "runs/r/LATEST")
	if err != nil || string(got) != "good" {
		t.Fatalf("object read as %q, %v", got, err)
	}
	// Overwrites and conditional puts still work next to the leftovers.
	if err := storage.PutBytes(ctx, b, "runs/r/LATEST", []byte("better")); err != nil {
		t.Fatal(err)
	}
	if err := storage.PutBytes(ctx, b, "runs/r/LATEST", []byte("x"), storage.IfAbsent()); !storage.IsAlreadyExists(err) {
		t.Fatalf("conditional put: %v", err)
	}
	// Temporary names cannot be used as keys.
	if err := storage.PutBytes(ctx, b, "runs/r/"+filestore.TempPrefix+"1", []byte("x")); err == nil {
		t.Fatal("a key named like a temporary file was accepted")
	}
}

// A successful Put leaves no temporary files, neither does a failed one.
func TestNoTempFilesLeft(t *testing.T) {
	ctx := context.Background()
	b := newBucket(t)
	storage.PutBytes(ctx, b, "a/x", []byte("1"))
	storage.PutBytes(ctx, b, "a/x", []byte("2"), storage.IfAbsent())
	b.Put(ctx, "a/y", strings.NewReader("short"), 100)
	entries, err := os.ReadDir(filepath.Join(b.Root(), "a"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"x"}) {
		t.Fatalf("folder holds %q", names)
	}
}

// Writers in separate processes race through separate Bucket values over one folder;
// goroutines with their own Bucket stand in for them (link(2) is the arbiter either way).
func TestIfAbsentRaceSeparateBuckets(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	const writers = 16
	for round := range 20 {
		key := fmt.Sprintf("ckpt/LATEST-%d", round)
		var wg sync.WaitGroup
		errs := make([]error, writers)
		start := make(chan struct{})
		for i := range writers {
			b, err := filestore.New(root)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = storage.PutBytes(ctx, b, key, bytes.Repeat([]byte{byte('a' + i)}, 1000+i), storage.IfAbsent())
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				if winner >= 0 {
					t.Fatalf("round %d: two winners", round)
				}
				winner = i
			} else if !storage.IsAlreadyExists(err) {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		b, _ := filestore.New(root)
		got, err := storage.ReadAll(ctx, b, key)
		if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{byte('a' + winner)}, 1000+winner)) {
			t.Fatalf("round %d: content is not the winner's (%d bytes, %v)", round, len(got), err)
		}
	}
}

// Concurrent Puts and Deletes in the same folders never fail a Put because Delete
// removed the folder under it.
func TestPutDeleteRace(t *testing.T) {
	ctx := context.Background()
	b := newBucket(t)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				key := fmt.Sprintf("x/y/z/%d-%d", w, i%3)
				if err := storage.PutBytes(ctx, b, key, []byte("v")); err != nil {
					t.Errorf("put: %v", err)
					return
				}
				if err := b.Delete(ctx, key); err != nil {
					t.Errorf("delete: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestObjectFolderConflict(t *testing.T) {
	ctx := context.Background()
	b := newBucket(t)
	if err := storage.PutBytes(ctx, b, "a/b", []byte("1")); err != nil {
		t.Fatal(err)
	}
	err := storage.PutBytes(ctx, b, "a/b/c", []byte("2"))
	if err == nil || storage.IsAlreadyExists(err) {
		t.Fatalf("put below an object: %v", err)
	}
	if err := storage.PutBytes(ctx, b, "x/y/z", []byte("1")); err != nil {
		t.Fatal(err)
	}
	for _, opts := range [][]storage.PutOption{nil, {storage.IfAbsent()}} {
		err := storage.PutBytes(ctx, b, "x/y", []byte("2"), opts...)
		if err == nil || storage.IsAlreadyExists(err) {
			t.Fatalf("put over a folder (%d opts): %v", len(opts), err)
		}
	}
}
