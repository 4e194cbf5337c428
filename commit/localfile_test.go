package commit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/storage/filestore"
)

// TestLocalFileStreams: PutLocalFile records the entry PutFile would for the same bytes, the
// folder commits and verifies, and ReadFileTo brings the bytes back; a manifest entry that
// does not match the object leaves dst as it was.
func TestLocalFileStreams(t *testing.T) {
	ctx := context.Background()
	b, err := filestore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("weights!"), 300_001)
	src := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := PutLocalFile(ctx, b, "run/ckpt", "m/model.safetensors", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if f.Bytes != int64(len(data)) || f.SHA256 != Digest(data) || f.ETag == "" {
		t.Fatalf("entry %+v, want %d bytes sha256 %s with an ETag", f, len(data), Digest(data))
	}
	if _, err := Commit(ctx, b, "run/ckpt", &Manifest{Kind: "checkpoint", SchemaVersion: 1, Run: "run", Files: []File{f}}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if err := ReadFileTo(ctx, b, "run/ckpt", f, dst); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("downloaded %d bytes (%v), want the %d uploaded", len(got), err, len(data))
	}
	if !LocalMatches(dst, f) {
		t.Error("LocalMatches refuses the file it downloaded")
	}
	bad := f
	bad.SHA256 = strings.Repeat("0", 64)
	if LocalMatches(dst, bad) {
		t.Error("LocalMatches accepts another sha256")
	}
	if err := ReadFileTo(ctx, b, "run/ckpt", bad, dst); err == nil || !strings.Contains(err.Error(), "differs from manifest") {
		t.Fatalf("a mismatching download: %v", err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Error("a failed download changed the existing file")
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), ".tmp-copy-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestHashCheckRefusesChangedBytes: an upload whose bytes no longer hash to what was recorded
// fails at its end instead of storing them.
func TestHashCheckRefusesChangedBytes(t *testing.T) {
	want := sha256.Sum256([]byte("old"))
	c := &hashCheck{r: strings.NewReader("new"), h: sha256.New(), want: hex.EncodeToString(want[:]), name: "f"}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(c); err == nil || !strings.Contains(err.Error(), "changed while it was uploaded") {
		t.Fatalf("changed bytes: %v", err)
	}
	ok := &hashCheck{r: strings.NewReader("old"), h: sha256.New(), want: hex.EncodeToString(want[:]), name: "f"}
	if _, err := buf.ReadFrom(ok); err != nil {
		t.Fatalf("unchanged bytes: %v", err)
	}
}
