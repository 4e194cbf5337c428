package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// OpenReaderAt returns an io.ReaderAt over the object under key and its size, for
// readers that seek (Parquet footers, column chunks). Each ReadAt is one GetRange; the
// object is assumed not to change while the ReaderAt is in use. ctx bounds every ReadAt.
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
	n, err := io.ReadFull(rc, p[:want])
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return n, fmt.Errorf("read %s at %d: object shorter than its size %d: %w", r.key, off, r.size, io.ErrUnexpectedEOF)
		}
		return n, fmt.Errorf("read %s at %d: %w", r.key, off, &KeyError{Op: "read", Bucket: r.b.Name(), Key: r.key, Err: err})
	}
	if int64(n) < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}
