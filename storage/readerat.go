package storage

import (
	"context"
	"fmt"
	"io"
)

// OpenReaderAt returns an io.ReaderAt over the object under key and its size, for
// readers that seek (Parquet footers, column chunks). Each ReadAt is one GetRange; the
// object is assumed not to change while the ReaderAt is in use: a range that ends early is an
// error saying the object is shorter than its size, while a read that fails mid-range (a
// dropped connection) is a KeyError naming the store and wrapping the cause. ctx bounds every
// ReadAt.
func OpenReaderAt(ctx context.Context, b Bucket, key string) (io.ReaderAt, int64, error) {
	a, err := b.Stat(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	return &objectReaderAt{ctx: ctx, b: b, key: key, size: a.Size}, a.Size, nil
}

type objectReaderAt struct {
	ctx  context.Context
	b    Bucket
	key  string
	size int64
}

func (r *objectReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read %s at %d: negative offset", r.key, off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	want := int64(len(p))
	if rest := r.size - off; want > rest {
		want = rest
	}
	if want == 0 {
		return 0, nil
	}
	rc, err := r.b.GetRange(r.ctx, r.key, off, want)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	// Not io.ReadFull: it reports a range that ends early (io.EOF: the object is shorter than
	// its size) and a body cut off by a failed connection (the HTTP client's
	// io.ErrUnexpectedEOF) alike, and only the first means the object changed.
	n := 0
	for int64(n) < want && err == nil {
		var m int
		m, err = rc.Read(p[n:want])
		n += m
	}
	if int64(n) < want {
		if err == io.EOF {
			return n, fmt.Errorf("read %s at %d: object shorter than its size %d: %w", r.key, off, r.size, io.ErrUnexpectedEOF)
		}
		return n, fmt.Errorf("read %s at %d: %w", r.key, off, &KeyError{Op: "read", Bucket: r.b.Name(), Key: r.key, Err: err})
	}
	if int64(n) < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}
