//go:build unix

package regular

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO, a directory and a device are refused at once, by name and kind; a symlink to a
// regular file is read.
func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.safetensors")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "config.json")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "real")
	if err := os.WriteFile(file, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, kind string }{{fifo, "a named pipe"}, {sub, "a directory"}, {"/dev/zero", "a character device"}} {
		done := make(chan error, 1)
		go func() { _, err := ReadFile(context.Background(), c.path, 1<<20); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.kind) {
				t.Errorf("%s: %v, want ErrNotRegular naming it as %s", c.path, err, c.kind)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: ReadFile blocked", c.path)
		}
		if err := Check(c.path); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Check(%s) = %v", c.path, err)
		}
	}
	got, err := ReadFile(context.Background(), link, 3)
	if err != nil || string(got) != "abc" {
		t.Fatalf("symlink: %q, %v", got, err)
	}
	if err := Check(link); err != nil {
		t.Fatal(err)
	}
}

func TestReadFileBoundsAndContext(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, make([]byte, 3*chunk+5), 0o600); err != nil {
		t.Fatal(err)
	}
	var tl *TooLargeError
	if _, err := ReadFile(context.Background(), file, 3*chunk+4); !errors.As(err, &tl) || tl.Limit != 3*chunk+4 {
		t.Fatalf("over the limit: %v", err)
	}
	got, err := ReadFile(context.Background(), file, 3*chunk+5)
	if err != nil || len(got) != 3*chunk+5 {
		t.Fatalf("at the limit: %d bytes, %v", len(got), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ReadFile(ctx, file, 1<<30); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if _, err := ReadFile(context.Background(), filepath.Join(t.TempDir(), "none"), 1); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}
