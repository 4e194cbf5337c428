package shards

import (
	"errors"
	"fmt"
	"io"
)

// maxThriftDepth bounds how deeply the structs, lists and maps of a footer or page header may
// nest (Parquet's own nest fewer than ten deep).
const maxThriftDepth = 64

// errThriftTruncated reports a struct that runs past the bytes it was given.
var errThriftTruncated = errors.New("thrift struct runs past its bytes")

// thriftSize walks the Thrift compact-protocol struct at the start of b without decoding it
// and returns its length in bytes. It fails where a list, set or map claims more elements, or a
// binary field more bytes, than remain in b, where the nesting exceeds maxThriftDepth, or
// where the struct runs past b.
//
// parquet-go's decoder allocates the elements a list claims before reading them (up to 2³¹),
// and from a stream the bytes a binary claims too, so a few bytes of a hostile footer could
// ask for gigabytes. Every element takes at least one byte, so a struct that passes here holds
// at most len(b) elements in all, and decoding it allocates at most a few hundred bytes per
// input byte.
func thriftSize(b []byte) (int, error) {
	w := thriftWalker{b: b}
	if err := w.structure(0); err != nil {
		return 0, err
	}
	return w.i, nil
}

type thriftWalker struct {
	b []byte
	i int
}

// Compact-protocol type codes.
const (
	tStop   = 0
	tTrue   = 1
	tFalse  = 2
	tByte   = 3
	tI16    = 4
	tI32    = 5
	tI64    = 6
	tDouble = 7
	tBinary = 8
	tList   = 9
	tSet    = 10
	tMap    = 11
	tStruct = 12
)

func (w *thriftWalker) rest() int { return len(w.b) - w.i }

func (w *thriftWalker) byte() (byte, error) {
	if w.i >= len(w.b) {
		return 0, errThriftTruncated
	}
	w.i++
	return w.b[w.i-1], nil
}

func (w *thriftWalker) skip(n int) error {
	if n > w.rest() {
		return errThriftTruncated
	}
	w.i += n
	return nil
}

func (w *thriftWalker) uvarint() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		c, err := w.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("thrift varint longer than 10 bytes at byte %d", w.i)
}

// count checks that n, a length or an element count just read, fits what remains at min
// bytes an element.
func (w *thriftWalker) count(what string, n uint64, min int) (int, error) {
	if n > uint64(w.rest()/min) {
		return 0, fmt.Errorf("thrift %s of %d at byte %d, but %d bytes remain", what, n, w.i, w.rest())
	}
	return int(n), nil
}

func (w *thriftWalker) structure(depth int) error {
	if depth >= maxThriftDepth {
		return fmt.Errorf("thrift structs nested more than %d deep at byte %d", maxThriftDepth, w.i)
	}
	for {
		h, err := w.byte()
		if err != nil {
			return err
		}
		if h == tStop {
			return nil
		}
		if h>>4 == 0 { // a field id that is not a small delta follows as a varint
			if _, err := w.uvarint(); err != nil {
				return err
			}
		}
		switch t := h & 0x0f; t {
		case tTrue, tFalse: // a struct's bool is in its field header
		default:
			if err := w.value(t, depth); err != nil {
				return err
			}
		}
	}
}

func (w *thriftWalker) value(t byte, depth int) error {
	switch t {
	case tTrue, tFalse, tByte:
		return w.skip(1)
	case tI16, tI32, tI64:
		_, err := w.uvarint()
		return err
	case tDouble:
		return w.skip(8)
	case tBinary:
		n, err := w.uvarint()
		if err != nil {
			return err
		}
		k, err := w.count("binary length", n, 1)
		if err != nil {
			return err
		}
		return w.skip(k)
	case tList, tSet:
		return w.list(depth)
	case tMap:
		return w.mapping(depth)
	case tStruct:
		return w.structure(depth + 1)
	}
	return fmt.Errorf("thrift type %d at byte %d", t, w.i)
}

func (w *thriftWalker) list(depth int) error {
	if depth+1 >= maxThriftDepth {
		return fmt.Errorf("thrift lists nested more than %d deep at byte %d", maxThriftDepth, w.i)
	}
	h, err := w.byte()
	if err != nil {
		return err
	}
	n := uint64(h >> 4)
	if n == 15 {
		if n, err = w.uvarint(); err != nil {
			return err
		}
	}
	k, err := w.count("list size", n, 1)
	if err != nil {
		return err
	}
	for ; k > 0; k-- {
		if err := w.value(h&0x0f, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (w *thriftWalker) mapping(depth int) error {
	if depth+1 >= maxThriftDepth {
		return fmt.Errorf("thrift maps nested more than %d deep at byte %d", maxThriftDepth, w.i)
	}
	n, err := w.uvarint()
	if err != nil || n == 0 {
		return err
	}
	k, err := w.count("map size", n, 2)
	if err != nil {
		return err
	}
	kv, err := w.byte()
	if err != nil {
		return err
	}
	for ; k > 0; k-- {
		if err := w.value(kv>>4, depth+1); err != nil {
			return err
		}
		if err := w.value(kv&0x0f, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// checkFooter reads the flen-byte footer of the Parquet file r of size bytes and checks it
// with thriftSize before parquet-go decodes it.
func checkFooter(r io.ReaderAt, size, flen int64) error {
	footer := make([]byte, flen)
	if _, err := r.ReadAt(footer, size-8-flen); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read parquet footer: %w", err)
	}
	if _, err := thriftSize(footer); err != nil {
		return fmt.Errorf("malformed parquet footer: %w", err)
	}
	return nil
}
