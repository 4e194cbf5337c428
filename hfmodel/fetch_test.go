package hfmodel

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/hf/hftest"
	"github.com/drmas-dev/drmas/storage/filestore"
)

func sameTree(t *testing.T, a, b string) {
	t.Helper()
	list := func(dir string) []string {
		var out []string
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name() != fetchRecord && e.Name() != commit.ManifestName {
				out = append(out, e.Name())
			}
		}
		return out
	}
	if la, lb := list(a), list(b); !slices.Equal(la, lb) {
		t.Fatalf("files %v, want %v", lb, la)
	}
	for _, n := range list(a) {
		x, _ := os.ReadFile(filepath.Join(a, n))
		y, _ := os.ReadFile(filepath.Join(b, n))
		if !bytes.Equal(x, y) {
			t.Fatalf("%s differs", n)
		}
	}
}

// TestFetchUncommitted: a store folder without a manifest is downloaded, then found cached; a
// file replaced in the store is downloaded again and one removed there leaves the cache.
func TestFetchUncommitted(t *testing.T) {
	ctx := context.Background()
	src := hftest.TinyHF(t, filepath.Join(t.TempDir(), "model"), hftest.TinyTokenizer(), 1)
	b, err := filestore.New(src)
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "cache")
	st, err := Fetch(ctx, b, cache)
	if err != nil || st.Files != 4 || st.Downloaded != 4 || st.Committed {
		t.Fatalf("first fetch: %+v %v", st, err)
	}
	sameTree(t, src, cache)
	if st, err := Fetch(ctx, b, cache); err != nil || st.Cached != 4 || st.Downloaded != 0 {
		t.Fatalf("second fetch: %+v %v", st, err)
	}
	if err := os.WriteFile(filepath.Join(src, "tokenizer_config.json"), []byte(`{"changed": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(src, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	if st, err := Fetch(ctx, b, cache); err != nil || st.Downloaded != 1 || st.Cached != 2 {
		t.Fatalf("after a change: %+v %v", st, err)
	}
	sameTree(t, src, cache)
	// A file Fetch did not write stays.
	mine := filepath.Join(cache, "notes.txt")
	if err := os.WriteFile(mine, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Fetch(ctx, b, cache); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("Fetch removed a file it did not write: %v", err)
	}
	_ = os.Remove(mine)
	// A cached file damaged locally is downloaded again.
	if err := os.WriteFile(filepath.Join(cache, hf.SingleFile), []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := Fetch(ctx, b, cache); err != nil || st.Downloaded != 1 {
		t.Fatalf("after local damage: %+v %v", st, err)
	}
	if _, err := hf.OpenWeights(cache); err != nil {
		t.Fatal(err)
	}
}

// TestFetchCommitted: a committed folder's files are checked against its manifest: a store
// file with other bytes of the same size is refused, naming it.
func TestFetchCommitted(t *testing.T) {
	ctx := context.Background()
	made := hftest.TinyHF(t, filepath.Join(t.TempDir(), "model"), hftest.TinyTokenizer(), 2)
	root := t.TempDir()
	b, err := filestore.New(root)
	if err != nil {
		t.Fatal(err)
	}
	m := &commit.Manifest{Kind: "checkpoint", SchemaVersion: 1, Run: "r"}
	entries, _ := os.ReadDir(made)
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(made, e.Name()))
		f, err := commit.PutFile(ctx, b, "", e.Name(), data, 0)
		if err != nil {
			t.Fatal(err)
		}
		m.Files = append(m.Files, f)
	}
	if _, err := commit.Commit(ctx, b, "", m); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	st, err := Fetch(ctx, b, cache)
	if err != nil || !st.Committed || st.Downloaded != 4 {
		t.Fatalf("fetch: %+v %v", st, err)
	}
	sameTree(t, made, cache)
	data, _ := os.ReadFile(filepath.Join(root, hf.SingleFile))
	data[len(data)-1] ^= 1
	if err := os.WriteFile(filepath.Join(root, hf.SingleFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Fetch(ctx, b, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "refusing model.safetensors") || !strings.Contains(err.Error(), "differs from its manifest") {
		t.Fatalf("a tampered file: %v", err)
	}
	// The cache that had the right bytes keeps them: nothing to download.
	if st, err := Fetch(ctx, b, cache); err != nil || st.Cached != 4 {
		t.Fatalf("cached: %+v %v", st, err)
	}
}

// TestFetchFilesOnlyThose: FetchFiles copies the named files and nothing else of the folder,
// and names a file the folder lacks.
func TestFetchFilesOnlyThose(t *testing.T) {
	src := t.TempDir()
	for name, body := range map[string]string{hf.AdapterConfigFile: `{"r": 1}`, hf.AdapterWeightsFile: "w", "big.bin": strings.Repeat("x", 1<<20)} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := filestore.New(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := FetchFiles(t.Context(), b, dst, hf.AdapterConfigFile, hf.AdapterWeightsFile); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadDir(dst)
	if len(got) != 2 || got[0].Name() != hf.AdapterConfigFile || got[1].Name() != hf.AdapterWeightsFile {
		t.Fatalf("fetched %v", got)
	}
	if err := FetchFiles(t.Context(), b, t.TempDir(), "none.json"); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "none.json") {
		t.Fatalf("a missing file: %v", err)
	}
}
