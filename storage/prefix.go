package storage

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// WithPrefix returns a view of b in which every key is stored under prefix: key "x" of
// the view is key prefix+"/x" of b. Leading and trailing slashes of prefix are ignored
// and an empty prefix returns b itself. Iter of the view yields keys without the prefix.
// An invalid prefix (one ValidateKey rejects) makes every operation of the view fail.
func WithPrefix(b Bucket, prefix string) Bucket {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return b
	}
	p := &prefixBucket{b: b, prefix: prefix + "/"}
	if err := ValidateKey(prefix); err != nil {
		p.err = fmt.Errorf("invalid prefix: %w", err)
	}
	return p
}

type prefixBucket struct {
	b      Bucket
	prefix string // ends with "/"
	err    error  // set when prefix is invalid
}

var _ Bucket = (*prefixBucket)(nil)

func (p *prefixBucket) key(key string) (string, error) {
	if p.err != nil {
		return "", p.err
	}
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return p.prefix + key, nil
}

func (p *prefixBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	k, err := p.key(key)
	if err != nil {
		return nil, &KeyError{Op: "get", Bucket: p.Name(), Key: key, Err: err}
	}
	return p.b.Get(ctx, k)
}

func (p *prefixBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	k, err := p.key(key)
	if err != nil {
		return nil, &KeyError{Op: "get range", Bucket: p.Name(), Key: key, Err: err}
	}
	return p.b.GetRange(ctx, k, off, length)
}

func (p *prefixBucket) Put(ctx context.Context, key string, r io.Reader, size int64, opts ...PutOption) error {
	k, err := p.key(key)
	if err != nil {
		return &KeyError{Op: "put", Bucket: p.Name(), Key: key, Err: err}
	}
	return p.b.Put(ctx, k, r, size, opts...)
}

func (p *prefixBucket) Stat(ctx context.Context, key string) (Attributes, error) {
	k, err := p.key(key)
	if err != nil {
		return Attributes{}, &KeyError{Op: "stat", Bucket: p.Name(), Key: key, Err: err}
	}
	return p.b.Stat(ctx, k)
}

func (p *prefixBucket) Delete(ctx context.Context, key string) error {
	k, err := p.key(key)
	if err != nil {
		return &KeyError{Op: "delete", Bucket: p.Name(), Key: key, Err: err}
	}
	return p.b.Delete(ctx, k)
}

func (p *prefixBucket) Iter(ctx context.Context, prefix string, f func(key string) error) error {
	if p.err != nil {
		return fmt.Errorf("iter %s: %w", p.Name(), p.err)
	}
	return p.b.Iter(ctx, p.prefix+prefix, func(key string) error {
		rel, ok := strings.CutPrefix(key, p.prefix)
		if !ok {
			return nil // cannot happen with a conforming provider
		}
		return f(rel)
	})
}

func (p *prefixBucket) Name() string { return p.b.Name() + "/" + strings.TrimSuffix(p.prefix, "/") }

func (p *prefixBucket) Close() error { return p.b.Close() }
