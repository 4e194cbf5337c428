package shards

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sort"

	"github.com/parquet-go/parquet-go"

	"github.com/drmas-dev/drmas/storage"
)

// maxFooterBytes bounds the Parquet footer OpenColumns will fetch.
const maxFooterBytes = 64 << 20

// OpenColumns opens the Parquet object key (of the given size) for reading only the named
// top-level columns (all the leaves of a list or group column), without downloading the rest: it fetches the footer, then each row
// group's chunks of those columns with one ranged read per chunk, and serves the Parquet
// reader from memory. Reading any other column of the returned file fails.
func OpenColumns(ctx context.Context, b storage.Bucket, key string, size int64, columns []string) (*parquet.File, error) {
	f, ra, dataEnd, err := openFooter(ctx, b, key, size)
	if err != nil {
		return nil, err
	}
	idx, err := columnIndexes(f, key, columns)
	if err != nil {
		return nil, err
	}
	for rgi := range f.Metadata().RowGroups {
		for _, ci := range idx {
			off, n, err := chunkRange(f, key, rgi, ci, dataEnd)
			if err != nil {
				return nil, err
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			data, err := getRange(ctx, b, key, off, n)
			if err != nil {
				return nil, err
			}
			ra.add(off, data)
		}
	}
	return f, nil
}

// openFooter fetches the first bytes and the footer of the Parquet object key and opens it
// over them; dataEnd is where the footer starts (column chunks lie before it).
func openFooter(ctx context.Context, b storage.Bucket, key string, size int64) (f *parquet.File, ra *rangeReaderAt, dataEnd int64, err error) {
	if size < 12 {
		return nil, nil, 0, fmt.Errorf("%s: %d bytes is too short to be a parquet file", key, size)
	}
	ra = &rangeReaderAt{key: key}
	tail, err := getRange(ctx, b, key, size-8, 8)
	if err != nil {
		return nil, nil, 0, err
	}
	if string(tail[4:]) != "PAR1" {
		return nil, nil, 0, fmt.Errorf("%s: not a parquet file (no PAR1 trailer)", key)
	}
	flen := int64(binary.LittleEndian.Uint32(tail[:4]))
	if flen > maxFooterBytes || flen+12 > size {
		return nil, nil, 0, fmt.Errorf("%s: footer length %d does not fit a %d-byte file", key, flen, size)
	}
	footer, err := getRange(ctx, b, key, size-8-flen, flen+8)
	if err != nil {
		return nil, nil, 0, err
	}
	head, err := getRange(ctx, b, key, 0, 4)
	if err != nil {
		return nil, nil, 0, err
	}
	if _, err := thriftSize(footer[:flen]); err != nil {
		return nil, nil, 0, fmt.Errorf("%s: malformed parquet footer: %w", key, err)
	}
	ra.add(0, head)
	ra.add(size-8-flen, footer)
	f, err = openFile(ra, size)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("%s: open parquet: %w", key, err)
	}
	return f, ra, size - 8 - flen, nil
}

// openFile is parquet.OpenFile, with a panic on a malformed footer turned into an error.
func openFile(ra io.ReaderAt, size int64) (f *parquet.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, err = nil, fmt.Errorf("malformed parquet footer: %v", p)
		}
	}()
	return parquet.OpenFile(ra, size, parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true), parquet.ReadBufferSize(1<<20))
}

// columnIndexes returns the leaf column indexes of the named top-level columns: one for a
// plain column, every leaf below it for a list or a group.
func columnIndexes(f *parquet.File, key string, columns []string) ([]int, error) {
	var idx []int
	paths := f.Schema().Columns()
	for _, c := range columns {
		n := len(idx)
		for _, p := range paths {
			if p[0] == c {
				leaf, _ := f.Schema().Lookup(p...)
				idx = append(idx, leaf.ColumnIndex)
			}
		}
		if len(idx) == n {
			return nil, fmt.Errorf("%s: missing column %s", key, c)
		}
	}
	return idx, nil
}

// chunkRange returns the byte range of row group rgi's chunk of leaf column ci, checked to lie
// in the data region [4, dataEnd).
func chunkRange(f *parquet.File, key string, rgi, ci int, dataEnd int64) (off, n int64, err error) {
	rg := f.Metadata().RowGroups[rgi]
	if ci >= len(rg.Columns) {
		return 0, 0, fmt.Errorf("%s: row group %d has %d columns", key, rgi, len(rg.Columns))
	}
	md := rg.Columns[ci].MetaData
	off = md.DataPageOffset
	if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < off {
		off = md.DictionaryPageOffset
	}
	n = md.TotalCompressedSize
	if off < 4 || n < 0 || off > dataEnd || n > dataEnd-off {
		return 0, 0, fmt.Errorf("%s: row group %d column %d: chunk [%d, +%d) outside the data region", key, rgi, ci, off, n)
	}
	return off, n, nil
}

func getRange(ctx context.Context, b storage.Bucket, key string, off, n int64) ([]byte, error) {
	rc, err := b.GetRange(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf := make([]byte, n)
	if _, err := io.ReadFull(rc, buf); err != nil {
		return nil, fmt.Errorf("read %s [%d, +%d): %w", key, off, n, err)
	}
	return buf, nil
}

// rangeReaderAt serves reads from fetched byte ranges.
type rangeReaderAt struct {
	key    string
	spans  []span
	sorted bool
}

type span struct {
	off  int64
	data []byte
}

func (r *rangeReaderAt) add(off int64, data []byte) {
	r.spans = append(r.spans, span{off, data})
	r.sorted = false
}

func (r *rangeReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if !r.sorted {
		sort.Slice(r.spans, func(i, j int) bool { return r.spans[i].off < r.spans[j].off })
		r.sorted = true
	}
	// The last span starting at or before off.
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i].off > off }) - 1
	if i < 0 {
		return 0, fmt.Errorf("%s: read at %d outside the fetched columns", r.key, off)
	}
	s := r.spans[i]
	rel := off - s.off
	if rel >= int64(len(s.data)) {
		return 0, fmt.Errorf("%s: read at %d outside the fetched columns", r.key, off)
	}
	n := copy(p, s.data[rel:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
