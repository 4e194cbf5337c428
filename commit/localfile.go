package commit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/drmas-dev/drmas/storage"
)

// PutLocalFile is PutFile for the bytes of the local file src, streamed: a checkpoint's
// weights or optimizer state (gigabytes for a real model) are never held in memory. src is
// hashed first, then uploaded; a file that changes between the two is an error, and the store
// keeps nothing of it (Put is atomic and checks the size).
func PutLocalFile(ctx context.Context, b storage.Bucket, dir, name, src string, rows int64) (File, error) {
	size, sha, err := hashLocal(src)
	if err != nil {
		return File{}, fmt.Errorf("upload %s: %w", name, err)
	}
	f := File{Name: name, Rows: rows, Bytes: size, SHA256: sha}
	var in *os.File
	defer func() {
		if in != nil {
			in.Close()
		}
	}()
	out, err := putChecked(ctx, b, dir, f, func() (io.Reader, error) {
		in, err = os.Open(src)
		if err != nil {
			return nil, err
		}
		return &hashCheck{r: in, h: sha256.New(), want: sha, name: src}, nil
	})
	return out, err
}

// hashCheck passes r through and, at its end, fails the read if the bytes hash to another
// sha256 than want (the file changed after it was hashed).
type hashCheck struct {
	r    io.Reader
	h    hash.Hash
	want string
	name string
}

func (c *hashCheck) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	if err == io.EOF && hex.EncodeToString(c.h.Sum(nil)) != c.want {
		return n, fmt.Errorf("%s changed while it was uploaded", c.name)
	}
	return n, err
}

// hashLocal returns the size and sha256 of a local file.
func hashLocal(name string) (int64, string, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// ReadFileTo downloads one committed file into the local file dst, streamed and checked
// against its manifest entry (size and sha256) before dst appears: dst is written beside
// itself (as .tmp-<name>-*) and renamed, so it is complete and verified, or absent (an existing dst is left as it
// was on an error).
func ReadFileTo(ctx context.Context, b storage.Bucket, dir string, f File, dst string) error {
	key := path.Join(dir, f.Name)
	r, err := b.Get(ctx, key)
	if err != nil {
		return err
	}
	defer r.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-"+filepath.Base(dst)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), r)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("download %s: %w", key, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != f.Bytes || got != f.SHA256 {
		return fmt.Errorf("%s: content (%d bytes, sha256 %.12s) differs from manifest (%d bytes, %.12s)", key, n, got, f.Bytes, f.SHA256)
	}
	return os.Rename(tmp.Name(), dst)
}

// LocalMatches reports whether the local file name holds exactly f's bytes (size, then
// sha256, streamed).
func LocalMatches(name string, f File) bool {
	st, err := os.Stat(name)
	if err != nil || st.Size() != f.Bytes {
		return false
	}
	_, sha, err := hashLocal(name)
	return err == nil && sha == f.SHA256
}
