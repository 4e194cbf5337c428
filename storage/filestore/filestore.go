// Package filestore is the local-folder storage provider: key "runs/r/x" is the file
// root/runs/r/x, the same layout as a bucket, so a folder can be copied to or from S3
// as is.
//
// Promises:
//   - Put is atomic and durable: the data goes to a temporary file in the target folder
//     (named ".drmas-tmp-…", never listed by Iter), which is fsynced, renamed over the
//     key and followed by an fsync of the folder. A crash leaves either the old object or
//     the new one, plus at worst a stray temporary file.
//   - Put with storage.IfAbsent is atomic across processes sharing the folder: the
//     fsynced temporary file is hard-linked to the key, which fails if the key exists
//     (link(2) never replaces). The filesystem must support hard links.
//   - Iter lists keys in lexicographic byte order of the full key.
//   - The ETag of an object names the file that holds it (device, inode, mtime, size): every
//     Put writes a new file, so it changes with every Put, even of the same bytes.
//   - Delete removes the file and then its parent folders up to root while they are
//     empty (best effort).
//
// Limits: a key cannot both name an object and be a folder of other objects (keys "a/b"
// and "a/b/c" cannot coexist; the second Put fails). S3 and MinIO store both, so a bucket
// holding such a pair cannot be copied into a folder. Keys whose last element starts with
// ".drmas-tmp-" are rejected. Reads are not interrupted by ctx once started,
// except between Read calls.
package filestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/drmas-dev/drmas/storage"
)

// TempPrefix starts the name of every temporary file of an in-flight Put.
const TempPrefix = ".drmas-tmp-"

// Bucket is a storage.Bucket over a local folder. It is safe for concurrent use.
type Bucket struct {
	root string // absolute, cleaned
	// base is the deepest folder among root and its ancestors that existed when New ran:
	// the folders below it (root included) are created by the first Put, and their entries
	// must be fsynced like any other new folder's.
	base string
	name string
	// durable holds the folders (under root) whose entries in their parent folders this
	// process has fsynced, so a Put into a new folder syncs the chain once, not every time.
	durable sync.Map // string -> struct{}
}

var _ storage.Bucket = (*Bucket)(nil)

// New returns a bucket rooted at root; a relative root is made absolute. New creates
// nothing: a missing root reads as an empty bucket, and the first Put creates it, so a
// mistyped root given to a read-only command leaves no folder behind. Root, or else its
// deepest existing ancestor, must be a folder.
func New(root string) (*Bucket, error) {
	if root == "" {
		return nil, errors.New("filestore: empty root")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("filestore: root %q: %w", root, err)
	}
	base := abs
	for {
		fi, err := os.Stat(base)
		if err == nil {
			if !fi.IsDir() {
				if base == abs {
					return nil, fmt.Errorf("filestore: root %s is not a folder", abs)
				}
				return nil, fmt.Errorf("filestore: root %s: %s is not a folder", abs, base)
			}
			break
		}
		if !notFound(err) { // ENOTDIR: an ancestor is a file, found on the way up
			return nil, fmt.Errorf("filestore: root: %w", err)
		}
		parent := filepath.Dir(base)
		if parent == base {
			return nil, fmt.Errorf("filestore: root %s: no existing ancestor folder", abs)
		}
		base = parent
	}
	return &Bucket{root: abs, base: base, name: "file://" + filepath.ToSlash(abs)}, nil
}

// Root returns the absolute folder the bucket lives in.
func (b *Bucket) Root() string { return b.root }

// Name returns "file:///abs/root".
func (b *Bucket) Name() string { return b.name }

// Close does nothing.
func (b *Bucket) Close() error { return nil }

func (b *Bucket) keyErr(op, key string, err error) error {
	return &storage.KeyError{Op: op, Bucket: b.name, Key: key, Err: err}
}

func (b *Bucket) path(key string) (string, error) {
	if err := storage.ValidateKey(key); err != nil {
		return "", err
	}
	if strings.HasPrefix(key[strings.LastIndexByte(key, '/')+1:], TempPrefix) {
		return "", fmt.Errorf("object key %q: name starts with %s, reserved for temporary files", key, TempPrefix)
	}
	return filepath.Join(b.root, filepath.FromSlash(key)), nil
}

// notFound reports whether err means the path does not name a file: missing, or a path
// element is a regular file (ENOTDIR).
func notFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// open opens the object file, mapping missing files and folders to ErrNotFound.
func (b *Bucket) open(op, key string) (*os.File, int64, error) {
	p, err := b.path(key)
	if err != nil {
		return nil, 0, b.keyErr(op, key, err)
	}
	f, err := os.Open(p)
	if err != nil {
		if notFound(err) {
			return nil, 0, b.keyErr(op, key, storage.ErrNotFound)
		}
		return nil, 0, b.keyErr(op, key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, b.keyErr(op, key, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, b.keyErr(op, key, storage.ErrNotFound)
	}
	return f, fi.Size(), nil
}

// Get opens the object for reading.
func (b *Bucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, b.keyErr("get", key, err)
	}
	f, _, err := b.open("get", key)
	if err != nil {
		return nil, err
	}
	return &fileReader{ctx: ctx, r: f, c: f}, nil
}

// GetRange reads length bytes at off (length < 0: to the end), clipped to the object.
func (b *Bucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, b.keyErr("get range", key, err)
	}
	if off < 0 {
		return nil, b.keyErr("get range", key, fmt.Errorf("negative offset %d", off))
	}
	f, size, err := b.open("get range", key)
	if err != nil {
		return nil, err
	}
	n := size - off
	if n < 0 {
		n = 0
	}
	if length >= 0 && length < n {
		n = length
	}
	return &fileReader{ctx: ctx, r: io.NewSectionReader(f, off, n), c: f}, nil
}

// Stat returns the object's size and modification time.
func (b *Bucket) Stat(ctx context.Context, key string) (storage.Attributes, error) {
	if err := ctx.Err(); err != nil {
		return storage.Attributes{}, b.keyErr("stat", key, err)
	}
	p, err := b.path(key)
	if err != nil {
		return storage.Attributes{}, b.keyErr("stat", key, err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		if notFound(err) {
			return storage.Attributes{}, b.keyErr("stat", key, storage.ErrNotFound)
		}
		return storage.Attributes{}, b.keyErr("stat", key, err)
	}
	if !fi.Mode().IsRegular() {
		return storage.Attributes{}, b.keyErr("stat", key, storage.ErrNotFound)
	}
	return storage.Attributes{Size: fi.Size(), LastModified: fi.ModTime(), ETag: etag(fi)}, nil
}

// etag names the file that holds an object: its device, inode, modification time and size.
// Every Put writes a new file (a temporary one, renamed or linked over the key), which keeps
// its inode and mtime through the rename, so the ETag changes whenever the object is replaced,
// even with the same bytes; it could only repeat if the file system reused the inode of a
// replaced file within one tick of its clock for an object of the same size.
func etag(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%x-%x-%x-%x", uint64(st.Dev), uint64(st.Ino), fi.ModTime().UnixNano(), fi.Size())
}

// Put writes the object atomically; see the package documentation.
func (b *Bucket) Put(ctx context.Context, key string, r io.Reader, size int64, opts ...storage.PutOption) error {
	o := storage.ResolvePutOptions(opts)
	p, err := b.path(key)
	if err != nil {
		return b.keyErr("put", key, err)
	}
	if err := ctx.Err(); err != nil {
		return b.keyErr("put", key, err)
	}
	dir := filepath.Dir(p)
	b.forgetMissing(dir)
	f, err := b.createTemp(dir)
	if err != nil {
		return b.keyErr("put", key, err)
	}
	tmp := f.Name()
	committed := false
	defer func() {
		if !committed {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := writeAll(ctx, f, r, size); err != nil {
		return b.keyErr("put", key, err)
	}
	if err := f.Chmod(0o644); err != nil { // CreateTemp makes 0600 files
		return b.keyErr("put", key, fmt.Errorf("chmod: %w", err))
	}
	if !o.NoSync {
		if err := f.Sync(); err != nil {
			return b.keyErr("put", key, fmt.Errorf("fsync: %w", err))
		}
	}
	tag := ""
	if o.ETag != nil {
		fi, err := f.Stat()
		if err != nil {
			return b.keyErr("put", key, fmt.Errorf("stat: %w", err))
		}
		tag = etag(fi)
	}
	if err := f.Close(); err != nil {
		return b.keyErr("put", key, fmt.Errorf("close: %w", err))
	}
	if err := ctx.Err(); err != nil {
		return b.keyErr("put", key, err)
	}
	if o.IfAbsent {
		err := os.Link(tmp, p)
		os.Remove(tmp)
		committed = true // the temporary file is gone either way
		if err != nil {
			if errors.Is(err, fs.ErrExist) {
				if fi, serr := os.Lstat(p); serr == nil && fi.IsDir() {
					return b.keyErr("put", key, fmt.Errorf("key is a folder of other objects"))
				}
				return b.keyErr("put", key, storage.ErrAlreadyExists)
			}
			return b.keyErr("put", key, fmt.Errorf("link: %w", err))
		}
	} else {
		if err := os.Rename(tmp, p); err != nil {
			return b.keyErr("put", key, fmt.Errorf("rename: %w", err))
		}
		committed = true
	}
	if o.ETag != nil {
		*o.ETag = tag
	}
	if o.NoSync {
		return nil
	}
	if err := syncDir(dir); err != nil && !notFound(err) { // gone: a concurrent Delete won
		return b.keyErr("put", key, fmt.Errorf("fsync folder: %w", err))
	}
	if err := b.syncParents(dir); err != nil && !notFound(err) {
		return b.keyErr("put", key, fmt.Errorf("fsync parent folder: %w", err))
	}
	return nil
}

// forgetMissing drops dir and its missing ancestors from the durable set before Put
// (re)creates them: a folder that a Delete (of this or another process) removed comes back
// as a new entry that needs its own fsync. One Lstat when dir exists.
func (b *Bucket) forgetMissing(dir string) {
	for d := dir; d != b.base && strings.HasPrefix(d, b.base); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			return
		}
		b.durable.Delete(d)
	}
}

// syncParents makes the entries of dir and of its ancestors up to root durable in their
// parent folders (MkdirAll does not), stopping at the first folder already known durable.
// Root itself and the ancestors the first Put created for it (those below base) count too.
// Without it a crash could lose a new folder, and with it objects that Put reported durable.
func (b *Bucket) syncParents(dir string) error {
	var chain []string
	for d := dir; d != b.base && strings.HasPrefix(d, b.base); d = filepath.Dir(d) {
		if _, ok := b.durable.Load(d); ok {
			break
		}
		chain = append(chain, d)
	}
	for _, d := range chain {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	for _, d := range chain { // only once the whole chain is on disk
		b.durable.Store(d, struct{}{})
	}
	return nil
}

// createTemp creates the folder and a temporary file in it. A concurrent Delete may
// remove (empty) folders while MkdirAll builds the chain or before the file exists;
// retry a few times.
func (b *Bucket) createTemp(dir string) (*os.File, error) {
	var err error
	for range 20 {
		if err = os.MkdirAll(dir, 0o755); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
				if b.objectAbove(dir) {
					return nil, fmt.Errorf("a parent of the key is an object: %w", err)
				}
				// MkdirAll met a folder that a Delete removed between its Mkdir
				// and its Lstat: no object is in the way, so build the chain again.
				continue
			}
			return nil, fmt.Errorf("create folder: %w", err)
		}
		var f *os.File
		f, err = os.CreateTemp(dir, TempPrefix+"*")
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	return nil, fmt.Errorf("create temporary file: %w", err)
}

// objectAbove reports whether dir or one of its ancestors below root is something other
// than a folder, that is an object in the way of a key below it.
func (b *Bucket) objectAbove(dir string) bool {
	for d := dir; d != b.root && strings.HasPrefix(d, b.root); d = filepath.Dir(d) {
		if fi, err := os.Lstat(d); err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}

// writeAll copies r to f, checking ctx between reads and the byte count against size. An
// in-memory payload (a *bytes.Reader, as storage.PutBytes uploads) is written from its own
// bytes in large writes, not copied through io.Copy's 32 KiB buffer.
func writeAll(ctx context.Context, f *os.File, r io.Reader, size int64) error {
	if br, ok := r.(*bytes.Reader); ok && (size < 0 || int64(br.Len()) == size) {
		if _, err := br.WriteTo(ctxWriter{ctx, f}); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		return ctx.Err()
	}
	cr := &ctxReader{ctx: ctx, r: r}
	if size < 0 {
		if _, err := io.Copy(f, cr); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		return nil
	}
	n, err := io.Copy(f, io.LimitReader(cr, size))
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if n < size {
		return fmt.Errorf("reader yielded %d bytes, want %d: %w", n, size, io.ErrUnexpectedEOF)
	}
	var one [1]byte
	if m, _ := io.ReadFull(cr, one[:]); m > 0 {
		return fmt.Errorf("reader yields more than the %d bytes given as size", size)
	}
	return ctx.Err()
}

// syncDir fsyncs a folder; a variable so that a test can see which folders are synced.
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// Delete removes the object and its now-empty parent folders up to root.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return b.keyErr("delete", key, err)
	}
	p, err := b.path(key)
	if err != nil {
		return b.keyErr("delete", key, err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		if notFound(err) {
			return nil
		}
		return b.keyErr("delete", key, err)
	}
	if fi.IsDir() {
		return nil // a folder of other objects, not an object
	}
	if err := os.Remove(p); err != nil && !notFound(err) {
		return b.keyErr("delete", key, err)
	}
	for dir := filepath.Dir(p); dir != b.root && strings.HasPrefix(dir, b.root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil { // not empty, or gone: stop
			break
		}
	}
	return nil
}

// Iter lists the keys under prefix in lexicographic order.
func (b *Bucket) Iter(ctx context.Context, prefix string, f func(key string) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("iter %s: %w", b.name, err)
	}
	if strings.HasPrefix(prefix, "/") || strings.ContainsRune(prefix, 0) {
		return fmt.Errorf("iter %s: invalid prefix %q", b.name, prefix)
	}
	// Walk the deepest folder that the prefix names completely.
	start := b.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dir := prefix[:i]
		for _, el := range strings.Split(dir, "/") {
			if el == "" || el == "." || el == ".." {
				return nil // no valid key lies under such a prefix
			}
		}
		start = filepath.Join(b.root, filepath.FromSlash(dir))
	}
	var keys []string
	n := 0
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && notFound(err) {
				return fs.SkipAll
			}
			if notFound(err) {
				return nil // removed while walking
			}
			return err
		}
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if d.IsDir() || !d.Type().IsRegular() || strings.HasPrefix(d.Name(), TempPrefix) {
			return nil
		}
		rel, err := filepath.Rel(b.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("iter %s: %w", b.name, err)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("iter %s: %w", b.name, err)
		}
		if err := f(k); err != nil {
			return err
		}
	}
	return nil
}

// ctxWriter writes to f in writes of at most 4 MiB, checking ctx before each.
type ctxWriter struct {
	ctx context.Context
	f   *os.File
}

func (w ctxWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if err := w.ctx.Err(); err != nil {
			return n, err
		}
		m, err := w.f.Write(p[:min(len(p), 4<<20)])
		n += m
		if err != nil {
			return n, err
		}
		p = p[m:]
	}
	return n, nil
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// fileReader reads r (a file or a section of it), checking ctx between reads.
type fileReader struct {
	ctx context.Context
	r   io.Reader
	c   io.Closer
}

func (f *fileReader) Read(p []byte) (int, error) {
	if err := f.ctx.Err(); err != nil {
		return 0, err
	}
	return f.r.Read(p)
}

func (f *fileReader) Close() error { return f.c.Close() }
