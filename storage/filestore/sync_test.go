package filestore

import (
	"context"
	"path/filepath"
	"slices"
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
