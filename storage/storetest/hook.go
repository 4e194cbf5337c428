package storetest

import (
	"context"
	"io"
	"strings"
	"sync"

	"github.com/drmas-dev/drmas/storage"
)

// PutHook is a bucket that runs Before and After around the first Put of a key that starts with
// Prefix (a whole key is its own prefix), each once: another writer's steps, placed exactly
// between two steps of the writer that uses the hook, for tests of concurrent writers. The hooks
// act on the bucket underneath, not through the hook.
type PutHook struct {
	storage.Bucket
	Prefix        string
	Before, After func()

	mu sync.Mutex
}

var _ storage.Bucket = (*PutHook)(nil)

// take returns *f and clears it, if key matches.
func (h *PutHook) take(key string, f *func()) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := *f
	if g == nil || !strings.HasPrefix(key, h.Prefix) {
		return nil
	}
	*f = nil
	return g
}

// Put runs Before, the Put, then After, for the first Put under Prefix.
func (h *PutHook) Put(ctx context.Context, key string, r io.Reader, size int64, opts ...storage.PutOption) error {
	if f := h.take(key, &h.Before); f != nil {
		f()
	}
	err := h.Bucket.Put(ctx, key, r, size, opts...)
	if f := h.take(key, &h.After); f != nil {
		f()
	}
	return err
}
