//go:build unix

package tokenizer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/internal/regular"
)

func withAdded(toks []any) func(m map[string]any) {
	return func(m map[string]any) { m["added_tokens"] = toks }
}

// Added tokens over MaxAddedBytes in all are refused, naming the field and the entry that
// crossed the cap; at the cap, the tokenizer's heap stays within a small multiple of the
// content (the trie once cost ~190 bytes a content byte).
func TestAddedTokensBounded(t *testing.T) {
	over := []any{
		map[string]any{"id": 300, "content": "<a>"},
		map[string]any{"id": 301, "content": strings.Repeat("x", MaxAddedBytes)},
	}
	_, err := Load(tinyJSON(withAdded(over)), nil)
	if err == nil || !strings.Contains(err.Error(), "added_tokens[1]") || !strings.Contains(err.Error(), "at most 1048576") {
		t.Fatalf("over the cap: %v", err)
	}
	at := []any{map[string]any{"id": 300, "content": strings.Repeat("y", MaxAddedBytes)}}
	js := tinyJSON(withAdded(at))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tok, err := Load(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 64*MaxAddedBytes {
		t.Errorf("one %d-byte added token holds %d bytes of heap (%.0f a byte), want ≤ 64 a byte", MaxAddedBytes, grew, float64(grew)/MaxAddedBytes)
	}
	t.Logf("heap per content byte: %.1f", float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/MaxAddedBytes)
	if ids := tok.Encode("a" + strings.Repeat("y", MaxAddedBytes)); len(ids) != 2 || ids[1] != 300 {
		t.Fatalf("the long token is not matched: %v", ids[:min(len(ids), 4)])
	}
	runtime.KeepAlive(tok)
}

// A named pipe or a directory as tokenizer.json is refused at once, by name.
func TestLoadDirRefusesFIFOAndDirectory(t *testing.T) {
	fifo := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifo, "tokenizer.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "tokenizer.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfgFIFO := t.TempDir()
	if err := os.WriteFile(filepath.Join(cfgFIFO, "tokenizer.json"), tinyJSON(nil), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(cfgFIFO, "tokenizer_config.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{fifo, dir, cfgFIFO} {
		done := make(chan error, 1)
		go func() { _, err := LoadDirContext(context.Background(), d); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, regular.ErrNotRegular) || !strings.Contains(err.Error(), d) {
				t.Errorf("%s: %v", d, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: LoadDir blocked", d)
		}
	}
}
