// Package storage is drmas's object-store abstraction: a small, context-first Bucket
// interface with the guarantees every stage relies on, typed errors, and wrappers
// (prefixing, metrics). Providers live in their own packages (storage/filestore,
// storage/s3store) and are chosen by one factory (storage/client) from a URL.
//
// Keys are slash-separated, relative, valid UTF-8, never start with "/" and never contain
// "." or ".." elements; a key is at most MaxKeyBytes long and each element at most
// MaxKeyElementBytes (the limits of S3 and of local file systems). ValidateKey says why one
// is rejected. Every provider stores the same key layout, so a local folder and a bucket are
// interchangeable.
package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Bucket is an object store. All methods honour ctx cancellation.
type Bucket interface {
	// Get returns a reader for the whole object. The caller must Close it.
	// A missing object yields an error for which IsNotFound is true.
	Get(ctx context.Context, key string) (io.ReadCloser, error)

	// GetRange returns length bytes starting at off (length < 0 means to the end).
	// The range is clipped to the object: a range that extends past the end yields the
	// bytes up to the end, and off at or past the end yields an empty reader. off < 0 is
	// an error. A missing object yields an error for which IsNotFound is true.
	GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error)

	// Put stores the object atomically: readers see either the previous object (or none) or
	// the complete new one, never a partial write, also if the process crashes mid-Put.
	// size is the number of bytes r yields, or -1 if unknown. A reader that yields fewer
	// bytes than a non-negative size makes Put fail without storing anything; bytes beyond
	// size are rejected by some providers and ignored by others: pass the exact size.
	// Without IfAbsent, Put is idempotent and overwrites.
	// With IfAbsent, Put succeeds only if no object exists under key; otherwise it returns an
	// error for which IsAlreadyExists is true. The check-and-write is atomic across processes.
	// With RecordETag, a successful Put reports the ETag of the object it stored.
	Put(ctx context.Context, key string, r io.Reader, size int64, opts ...PutOption) error

	// Stat returns the object's attributes, or an error for which IsNotFound is true.
	Stat(ctx context.Context, key string) (Attributes, error)

	// Delete removes the object. Deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error

	// Iter calls f for every object key under prefix, in lexicographic byte order.
	// prefix is a key prefix ("runs/r1/" lists everything below that folder). Keys are
	// full keys, not relative to prefix. Iteration stops at the first error f returns.
	// Temporary files of in-flight Puts are never listed.
	Iter(ctx context.Context, prefix string, f func(key string) error) error

	// Name describes the bucket for logs and errors; it never contains credentials.
	Name() string

	// Close releases resources held by the bucket.
	Close() error
}

// Attributes describes a stored object.
type Attributes struct {
	Size         int64
	LastModified time.Time
	// ETag identifies one stored version of the object: while it is unchanged, so are the
	// object's bytes. A Put of other bytes always gives another ETag; a Put of the same bytes
	// may or may not (S3 hashes the content; the folder provider names the file it wrote). It
	// is opaque: compare it only with ETags of the same key and bucket. Empty if the provider
	// has none.
	ETag string
}

// PutOption changes the behaviour of Put.
type PutOption interface{ applyPut(*PutOptions) }

// PutOptions is the resolved set of options of one Put. Providers call ResolvePutOptions.
type PutOptions struct {
	// IfAbsent makes the Put conditional on no object existing under the key.
	// Default false.
	IfAbsent bool
	// NoSync lets Put return before the object is durable where the provider would otherwise
	// wait for it (the folder provider's fsyncs). Running processes still see the old object
	// or the complete new one, but after an operating-system crash or power loss the object
	// may be gone, and on a local folder may even be empty or cut short (the rename can reach
	// the disk before the data). So only for data that is cheap to redo and whose readers
	// treat an unreadable object as missing, such as receipts. Default false; objects on S3
	// are durable when Put returns either way.
	NoSync bool
	// ETag, when not nil, receives the stored object's ETag (as Stat would report it) after a
	// successful Put. Default nil.
	ETag *string
}

type putOptionFunc func(*PutOptions)

func (f putOptionFunc) applyPut(o *PutOptions) { f(o) }

// IfAbsent makes Put fail with ErrAlreadyExists when the key already holds an object.
func IfAbsent() PutOption { return putOptionFunc(func(o *PutOptions) { o.IfAbsent = true }) }

// NoSync lets Put skip waiting for durability (see PutOptions.NoSync).
func NoSync() PutOption { return putOptionFunc(func(o *PutOptions) { o.NoSync = true }) }

// RecordETag makes a successful Put store the ETag of the object it wrote in *etag: the
// version this writer stored, even if another writer replaces the object right after.
func RecordETag(etag *string) PutOption {
	return putOptionFunc(func(o *PutOptions) { o.ETag = etag })
}

// ResolvePutOptions applies opts to the defaults.
func ResolvePutOptions(opts []PutOption) PutOptions {
	var o PutOptions
	for _, opt := range opts {
		opt.applyPut(&o)
	}
	return o
}

// ErrNotFound is matched (with errors.Is) by errors about missing objects.
var ErrNotFound = errors.New("object not found")

// ErrAlreadyExists is matched (with errors.Is) by errors of conditional Puts that lost.
var ErrAlreadyExists = errors.New("object already exists")

// IsNotFound reports whether err says an object does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsAlreadyExists reports whether err says a conditional Put found an existing object.
func IsAlreadyExists(err error) bool { return errors.Is(err, ErrAlreadyExists) }

// KeyError wraps a sentinel with the bucket and key it is about.
type KeyError struct {
	Op     string // "get", "put", ...
	Bucket string
	Key    string
	Err    error
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("%s %s: %s: %v", e.Op, e.Bucket, e.Key, e.Err)
}

func (e *KeyError) Unwrap() error { return e.Err }

// MaxKeyBytes is the longest key (S3's limit); MaxKeyElementBytes the longest element of a
// key (a file name on local file systems, and on MinIO).
const (
	MaxKeyBytes        = 1024
	MaxKeyElementBytes = 255
)

// ValidateKey reports why key cannot name an object, or nil.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return errors.New("empty object key")
	case !utf8.ValidString(key):
		return fmt.Errorf("object key %q is not valid UTF-8", key)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("object key %.40q… is %d bytes long, more than %d", key, len(key), MaxKeyBytes)
	case strings.HasPrefix(key, "/"):
		return fmt.Errorf("object key %q starts with /", key)
	case strings.HasSuffix(key, "/"):
		return fmt.Errorf("object key %q ends with /", key)
	case strings.ContainsRune(key, 0):
		return fmt.Errorf("object key %q contains a NUL byte", key)
	}
	for _, el := range strings.Split(key, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("object key %q has an empty, . or .. element", key)
		}
		if len(el) > MaxKeyElementBytes {
			return fmt.Errorf("object key %q has an element of %d bytes, more than %d", key, len(el), MaxKeyElementBytes)
		}
	}
	return nil
}

// ReadAll reads a whole object.
func ReadAll(ctx context.Context, b Bucket, key string) ([]byte, error) {
	rc, err := b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		// A failure mid-body (a reset connection) names the store too, like Get's errors.
		return nil, &KeyError{Op: "read", Bucket: b.Name(), Key: key, Err: err}
	}
	return data, nil
}

// PutBytes stores data under key.
func PutBytes(ctx context.Context, b Bucket, key string, data []byte, opts ...PutOption) error {
	return b.Put(ctx, key, bytes.NewReader(data), int64(len(data)), opts...)
}
