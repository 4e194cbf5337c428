package ablate

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/storage"
)

// IterCheckpoints returns a view of b in which run's checkpoints folder
// (runs/<run>/checkpoints/…, LATEST included) is stored under runs/<run>/iter=N/checkpoints/
// instead; every other key is unchanged. A replay run keeps each iteration's checkpoints there,
// because iteration N+1 starts from the source's step N+1, not from what iteration N's ablated
// update produced.
func IterCheckpoints(b storage.Bucket, run string, iter int) storage.Bucket {
	return &iterView{Bucket: b, from: commit.CheckpointsDir(run) + "/", to: commit.IterDir(run, iter) + "/checkpoints/"}
}

type iterView struct {
	storage.Bucket
	from, to string
}

func (v *iterView) key(k string) string {
	if rest, ok := strings.CutPrefix(k, v.from); ok {
		return v.to + rest
	}
	return k
}

func (v *iterView) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return v.Bucket.Get(ctx, v.key(key))
}

func (v *iterView) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	return v.Bucket.GetRange(ctx, v.key(key), off, length)
}

func (v *iterView) Put(ctx context.Context, key string, r io.Reader, size int64, opts ...storage.PutOption) error {
	return v.Bucket.Put(ctx, v.key(key), r, size, opts...)
}

func (v *iterView) Stat(ctx context.Context, key string) (storage.Attributes, error) {
	return v.Bucket.Stat(ctx, v.key(key))
}

func (v *iterView) Delete(ctx context.Context, key string) error {
	return v.Bucket.Delete(ctx, v.key(key))
}

// Iter maps a prefix inside the checkpoints folder (the only listings the stages make of it);
// other prefixes list the underlying keys as they are.
func (v *iterView) Iter(ctx context.Context, prefix string, f func(key string) error) error {
	mapped := v.key(prefix)
	if mapped == prefix {
		return v.Bucket.Iter(ctx, prefix, f)
	}
	return v.Bucket.Iter(ctx, mapped, func(key string) error {
		rest, ok := strings.CutPrefix(key, v.to)
		if !ok {
			return fmt.Errorf("iter %s: unexpected key %s", mapped, key)
		}
		return f(v.from + rest)
	})
}

func (v *iterView) Name() string { return v.Bucket.Name() + " (checkpoints under " + v.to + ")" }

// Close does nothing: the view does not own the bucket.
func (v *iterView) Close() error { return nil }
