package filestore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/drmas-dev/drmas/storage"
)

// TestPutSyncsNewFolders: a Put that creates folders fsyncs each new folder's parent (the
// folder's own entry), once per folder, and again after a Delete removed and a Put
// recreated it. A crash must not lose a folder that holds an object Put called durable.
func TestPutSyncsNewFolders(t *testing.T) {
	root := t.TempDir()
	b, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var synced []string
	orig := syncDir
	syncDir = func(dir string) error {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Errorf("synced %s, outside the root", dir)
		}
		mu.Lock()
		synced = append(synced, filepath.ToSlash(rel))
		mu.Unlock()
		return orig(dir)
	}
	t.Cleanup(func() { syncDir = orig })
	ctx := context.Background()
	expect := func(what string, want ...string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(synced)
		slices.Sort(want)
		if !slices.Equal(synced, want) {
			t.Fatalf("%s: synced folders %q, want %q", what, synced, want)
		}
		synced = nil
	}
	put := func(key string, opts ...storage.PutOption) {
		t.Helper()
		if err := storage.PutBytes(ctx, b, key, []byte(key), opts...); err != nil {
			t.Fatal(err)
		}
	}
	put("a/b/c/x")
	expect("first put into a new chain", "a/b/c", "a/b", "a", ".")
	put("a/b/c/y")
	expect("second put into the same folder", "a/b/c")
	put("a/b/d/z", storage.IfAbsent())
	expect("a new sibling folder", "a/b/d", "a/b")
	put("a/b/d/n", storage.NoSync())
	expect("NoSync")
	for _, k := range []string{"a/b/c/x", "a/b/c/y", "a/b/d/z", "a/b/d/n"} {
		if err := b.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	expect("deletes")
	put("a/b/c/x")
	expect("the chain again after deletes removed it", "a/b/c", "a/b", "a", ".")
}

// TestMissingRootIsCreatedByTheFirstPut: New creates nothing (a mistyped root given to a
// read-only command leaves no folder behind); the missing root reads as an empty bucket;
// the first Put creates it and fsyncs the entries of root and of the ancestors it created.
func TestMissingRootIsCreatedByTheFirstPut(t *testing.T) {
	top := t.TempDir()
	root := filepath.Join(top, "new", "store")
	b, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := os.Stat(filepath.Join(top, "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("New created folders: stat %v", err)
	}
	if _, err := b.Get(ctx, "runs/r/x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get on a missing root: %v, want ErrNotFound", err)
	}
	if _, err := b.Stat(ctx, "x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Stat on a missing root: %v, want ErrNotFound", err)
	}
	var keys []string
	for _, prefix := range []string{"", "runs/"} {
		if err := b.Iter(ctx, prefix, func(k string) error { keys = append(keys, k); return nil }); err != nil {
			t.Fatalf("Iter %q on a missing root: %v", prefix, err)
		}
	}
	if len(keys) != 0 {
		t.Fatalf("Iter on a missing root listed %q", keys)
	}
	if err := b.Delete(ctx, "x"); err != nil {
		t.Fatalf("Delete on a missing root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(top, "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("reads created folders: stat %v", err)
	}

	var synced []string
	orig := syncDir
	syncDir = func(dir string) error {
		rel, err := filepath.Rel(top, dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Errorf("synced %s, outside %s", dir, top)
		}
		synced = append(synced, filepath.ToSlash(rel))
		return orig(dir)
	}
	t.Cleanup(func() { syncDir = orig })
	if err := storage.PutBytes(ctx, b, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	slices.Sort(synced)
	if want := []string{".", "new", "new/store"}; !slices.Equal(synced, want) {
		t.Fatalf("first Put synced %q, want %q (the object's folder, then each new folder's parent)", synced, want)
	}
	if got, err := storage.ReadAll(ctx, b, "k"); err != nil || string(got) != "v" {
		t.Fatalf("read back %q, %v", got, err)
	}

	file := filepath.Join(top, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(filepath.Join(file, "store")); err == nil || !strings.Contains(err.Error(), "is not a folder") {
		t.Fatalf("New under a regular file: %v, want an error naming it", err)
	}
}
