package ablate

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/storage"
)

// IterCheckpoints returns a view of b in which run's checkpoints folder
// (runs/<run>/checkpoints/…, LATEST included) and its evaluations (runs/<run>/eval/…,
// runs/<run>/eval-train/…) are stored under runs/<run>/iter=N/ instead; every other key is
// unchanged. A replay run keeps each iteration's checkpoints there, because iteration N+1 starts
// from the source's step N+1, not from what iteration N's ablated update produced; and so its
// evaluations too: two source iterations rolled out by the same policy step both publish step
// V+1, with different weights, and each must be evaluated, not find the other's evaluation.
func IterCheckpoints(b storage.Bucket, run string, iter int) storage.Bucket {
	v := &iterView{Bucket: b}
	for _, el := range []string{"checkpoints", "eval", "eval-train"} {
		v.maps = append(v.maps, [2]string{layout.RunDir(run) + "/" + el + "/", layout.IterDir(run, iter) + "/" + el + "/"})
	}
	return v
}

type iterView struct {
	storage.Bucket
	maps [][2]string // (from, to) key prefixes
}

func (v *iterView) key(k string) string {
	if m, rest, ok := v.match(k); ok {
		return m[1] + rest
	}
	return k
}

func (v *iterView) match(k string) ([2]string, string, bool) {
	for _, m := range v.maps {
		if rest, ok := strings.CutPrefix(k, m[0]); ok {
			return m, rest, true
		}
	}
	return [2]string{}, "", false
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
	m, _, ok := v.match(prefix)
	if !ok {
		return v.Bucket.Iter(ctx, prefix, f)
	}
	mapped := v.key(prefix)
	return v.Bucket.Iter(ctx, mapped, func(key string) error {
		rest, ok := strings.CutPrefix(key, m[1])
		if !ok {
			return fmt.Errorf("iter %s: unexpected key %s", mapped, key)
		}
		return f(m[0] + rest)
	})
}

func (v *iterView) Name() string {
	return v.Bucket.Name() + " (checkpoints and evaluations under " + strings.TrimSuffix(v.maps[0][1], "checkpoints/") + ")"
}

// Close does nothing: the view does not own the bucket.
func (v *iterView) Close() error { return nil }
