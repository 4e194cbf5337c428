package shards

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// Keys are the columns of a trajectory part that advantage estimation needs, decoded column by
// column through the page API (no row materialisation). Groups are contiguous by construction
// of the part (CheckPart), and Group codes count up from 0 in file order.
type Keys struct {
	RowID  []int64
	Group  []int32  // dense uid code, one per contiguous uid run
	UIDs   []string // UIDs[g] is the uid of group code g
	Sample []int32
	Agent  []int32  // dense agent code
	Agents []string // Agents[a] is the agent name of code a, in first-seen order
	Score  []float64
}

// Len is the number of rows.
func (k *Keys) Len() int { return len(k.RowID) }

// KeyColumns are the trajectory columns ReadKeys touches.
var KeyColumns = []string{"row_id", "uid", "sample", "agent", "score"}

// ReadKeys decodes the key columns of a trajectory part, checking ctx once per row group.
// It fails on non-finite scores and on a uid that reappears after its run ended, naming the
// row and the file.
func ReadKeys(ctx context.Context, f *parquet.File, name string) (k *Keys, err error) {
	defer func() {
		if p := recover(); p != nil {
			k, err = nil, fmt.Errorf("%s: malformed parquet: %v", name, p)
		}
	}()
	if err := CheckSchema(f, trajectorySchema, name, KeyColumns...); err != nil {
		return nil, err
	}
	n := f.NumRows()
	if n < 0 || n > f.Size()*8 {
		return nil, fmt.Errorf("%s: footer claims %d rows in %d bytes", name, n, f.Size())
	}
	col := func(c string) int {
		leaf, _ := f.Schema().Lookup(c)
		return leaf.ColumnIndex
	}
	k = &Keys{
		RowID:  make([]int64, 0, n),
		Group:  make([]int32, 0, n),
		Sample: make([]int32, 0, n),
		Agent:  make([]int32, 0, n),
		Score:  make([]float64, 0, n),
	}
	var g groupDecoder
	a := dictDecoder{codes: map[string]int32{}}
	var pages []byte // scratch for checkChunkPages
	for rgi, rg := range f.RowGroups() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		chunks := rg.ColumnChunks()
		for _, c := range KeyColumns {
			var err error
			if pages, _, err = checkChunkPages(f, name, rgi, col(c), true, pages); err != nil {
				return nil, err
			}
		}
		before := len(k.RowID)
		err := errors.Join(
			readPages(chunks[col("row_id")], func(p parquet.Page) { k.RowID = append(k.RowID, pageData(p).Int64()...) }),
			readPages(chunks[col("sample")], func(p parquet.Page) { k.Sample = append(k.Sample, pageData(p).Int32()...) }),
			readPages(chunks[col("score")], func(p parquet.Page) { k.Score = append(k.Score, pageData(p).Double()...) }),
			readPages(chunks[col("agent")], func(p parquet.Page) { k.Agent = a.decode(p, k.Agent) }),
			readPages(chunks[col("uid")], func(p parquet.Page) { k.Group = g.decode(p, k.Group) }),
		)
		if err != nil {
			return nil, fmt.Errorf("%s: row group %d: %w", name, rgi, err)
		}
		want := before + int(rg.NumRows())
		if len(k.RowID) != want || len(k.Sample) != want || len(k.Score) != want || len(k.Agent) != want || len(k.Group) != want {
			return nil, fmt.Errorf("%s: row group %d: columns decoded to different lengths", name, rgi)
		}
	}
	if g.err != nil {
		return nil, fmt.Errorf("%s: %w", name, g.err)
	}
	for i, s := range k.Score {
		if s != s || s > maxFloat || s < -maxFloat {
			return nil, fmt.Errorf("%s: row %d (row_id %d): score %v is not finite", name, i, k.RowID[i], s)
		}
	}
	k.UIDs = g.names
	k.Agents = a.names
	return k, nil
}

func pageData(p parquet.Page) *encoding.Values {
	v := p.Data()
	return &v
}

const maxFloat = 1.7976931348623157e308

// maxPageExpansion bounds how many bytes a compressed page of a key column may claim to
// decompress to, per compressed byte. drmas writes key columns uncompressed; no well-formed
// key page of another writer comes near it.
const maxPageExpansion = 512

// checkChunkPages walks the page headers of one column chunk before parquet-go reads it:
// parquet-go decodes a header with a thrift decoder that allocates any string length the header
// claims before reading it, and sizes its page buffers from the headers, so a few malformed
// bytes could make it allocate gigabytes. Here every header must decode from the chunk's own
// bytes (a claimed length cannot exceed them) and every page must lie inside the chunk.
//
// With keys (the key columns, which drmas writes uncompressed, required and not repeated),
// a page must also claim no more uncompressed bytes than maxPageExpansion × its compressed
// bytes (exactly its compressed bytes when the chunk is uncompressed), and no more values than
// the row group has rows. Other columns get no such bounds: a compressed page of repetitive
// text legitimately expands thousands of times, and a repeated column holds any number of
// values per row. buf is scratch space, returned grown if the chunk needed more; claimed is the
// sum of the pages' uncompressed sizes.
func checkChunkPages(f *parquet.File, name string, rgi, ci int, keys bool, buf []byte) (_ []byte, claimed int64, err error) {
	off, n, err := chunkRange(f, name, rgi, ci, f.Size()-8)
	if err != nil {
		return buf, 0, err
	}
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	chunk := buf[:n]
	if _, err := f.ReadAt(chunk, off); err != nil {
		return buf, 0, fmt.Errorf("%s: row group %d column %d: read chunk: %w", name, rgi, ci, err)
	}
	rg := f.Metadata().RowGroups[rgi]
	codec, rows := rg.Columns[ci].MetaData.Codec, rg.NumRows
	var prot thrift.CompactProtocol
	rd := prot.NewReaderFromBytes(nil)
	dec := thrift.NewDecoder(rd)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: row group %d column %d: malformed page: "+format, append([]any{name, rgi, ci}, args...)...)
	}
	for rest := chunk; len(rest) > 0; {
		if _, err := thriftSize(rest); err != nil {
			return buf, 0, bad("header: %v", err)
		}
		rd.ResetBytes(rest)
		var h format.PageHeader
		if err := dec.Decode(&h); err != nil {
			return buf, 0, bad("header: %v", err)
		}
		body := rest[rd.BytesRead():]
		c, u := int64(h.CompressedPageSize), int64(h.UncompressedPageSize)
		if c < 0 || c > int64(len(body)) {
			return buf, 0, bad("%d bytes, but %d left in the chunk", c, len(body))
		}
		if u < 0 {
			return buf, 0, bad("%d bytes claim %d uncompressed", c, u)
		}
		rest = body[c:]
		claimed += u
		if !keys {
			continue
		}
		limit := c
		if codec != format.Uncompressed {
			limit = c * maxPageExpansion
		}
		if u > limit {
			return buf, 0, bad("%d bytes claim %d uncompressed", c, u)
		}
		var values int64
		if d, ok := h.DataPageHeader.Get(); ok {
			values = int64(d.NumValues)
		}
		if d, ok := h.DataPageHeaderV2.Get(); ok {
			values = int64(d.NumValues)
		}
		if d, ok := h.DictionaryPageHeader.Get(); ok {
			values = int64(d.NumValues)
		}
		if values < 0 || values > max(rows, u) {
			return buf, 0, bad("%d values in a row group of %d rows", values, rows)
		}
	}
	return buf, claimed, nil
}

// Uncompressed pages of a Parquet file read here may claim at most maxClaimedBase +
// maxClaimedPerByte × the file's size in all: parquet-go allocates what a page header claims
// before decompressing, so a lying header in a 1 KB file could take gigabytes. Real files
// compress far less than 512×, except pages of one value repeated (128 KiB in 13 bytes), which
// the base covers.
const (
	maxClaimedBase    = 32 << 20
	maxClaimedPerByte = 512
)

// checkPages runs checkChunkPages (without the key columns' bounds) on every column chunk of f,
// and bounds what all pages together claim uncompressed.
func checkPages(f *parquet.File, name string) error {
	var buf []byte
	var claimed int64
	limit := maxClaimedBase + maxClaimedPerByte*f.Size()
	for rgi, rg := range f.Metadata().RowGroups {
		for ci := range rg.Columns {
			var u int64
			var err error
			if buf, u, err = checkChunkPages(f, name, rgi, ci, false, buf); err != nil {
				return err
			}
			if claimed += u; claimed > limit {
				return fmt.Errorf("%s: row group %d column %d: malformed pages: they claim %d MiB uncompressed so far in a file of %d bytes, more than the %d MiB + %d× its size read here (if the file is intact, it compresses more than that: write it again with dictionary encoding)",
					name, rgi, ci, claimed>>20, f.Size(), maxClaimedBase>>20, maxClaimedPerByte)
			}
		}
	}
	return nil
}

func readPages(cc parquet.ColumnChunk, f func(parquet.Page)) error {
	pages := cc.Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if p.NumNulls() != 0 {
			parquet.Release(p)
			return fmt.Errorf("column %d has nulls", cc.Column())
		}
		f(p)
		parquet.Release(p)
	}
}

// byteValues calls f with each value of a BYTE_ARRAY page, dictionary-encoded or plain.
// For dictionary pages it passes the dictionary index too (−1 for plain pages).
func byteValues(p parquet.Page, f func(idx int32, v []byte)) {
	if d := p.Dictionary(); d != nil {
		data, offs := pageData(d.Page()).ByteArray()
		for _, ix := range pageData(p).Int32() {
			f(ix, data[offs[ix]:offs[ix+1]])
		}
		return
	}
	data, offs := pageData(p).ByteArray()
	for i := 0; i+1 < len(offs); i++ {
		f(-1, data[offs[i]:offs[i+1]])
	}
}

// groupDecoder turns a uid column into dense codes of contiguous runs.
//
// A uid that reappears after its run ended is an error. While uids come in increasing order
// (as the rollout writer sorts them) none can reappear, so the set of seen uids is only built
// (from names) once a uid is not greater than the one before.
type groupDecoder struct {
	names   []string
	seen    map[string]int32 // nil while uids are increasing
	last    []byte
	lastIdx int32
	lastD   parquet.Dictionary
	rows    int
	err     error
}

func (g *groupDecoder) decode(p parquet.Page, out []int32) []int32 {
	d := p.Dictionary()
	if d != g.lastD {
		g.lastIdx = -1
		g.lastD = d
	}
	if d != nil {
		// Dictionary page: a row whose index equals the previous row's continues its run
		// without looking at the bytes.
		data, offs := pageData(d.Page()).ByteArray()
		cur := int32(len(g.names) - 1)
		for _, ix := range pageData(p).Int32() {
			if ix == g.lastIdx && ix >= 0 && cur >= 0 {
				out = append(out, cur)
				g.rows++
				continue
			}
			out = g.value(ix, data[offs[ix]:offs[ix+1]], out)
			cur = int32(len(g.names) - 1)
		}
		return out
	}
	data, offs := pageData(p).ByteArray()
	for i := 0; i+1 < len(offs); i++ {
		out = g.value(-1, data[offs[i]:offs[i+1]], out)
	}
	return out
}

// value appends the code of one uid (dictionary index idx, or −1 on a plain page).
func (g *groupDecoder) value(idx int32, v []byte, out []int32) []int32 {
	g.rows++
	if len(g.names) > 0 && bytes.Equal(v, g.last) {
		g.lastIdx = idx
		return append(out, int32(len(g.names)-1))
	}
	s := string(v)
	if g.seen == nil && len(g.names) > 0 && bytes.Compare(v, g.last) < 0 {
		g.seen = make(map[string]int32, 2*len(g.names))
		for i, name := range g.names {
			g.seen[name] = int32(i)
		}
	}
	if g.seen != nil {
		if _, dup := g.seen[s]; dup && g.err == nil {
			g.err = fmt.Errorf("row %d: uid %q reappears after its rows ended: rows of one uid must be contiguous", g.rows-1, s)
		}
		g.seen[s] = int32(len(g.names))
	}
	g.names = append(g.names, s)
	g.last = append(g.last[:0], v...)
	g.lastIdx = idx
	return append(out, int32(len(g.names)-1))
}

// dictDecoder maps a low-cardinality string column to dense codes in first-seen order.
type dictDecoder struct {
	names []string
	codes map[string]int32
	lastD parquet.Dictionary
	local []int32 // dictionary index → code for lastD
}

func (a *dictDecoder) code(v []byte) int32 {
	c, ok := a.codes[string(v)]
	if !ok {
		c = int32(len(a.names))
		a.names = append(a.names, string(v))
		a.codes[string(v)] = c
	}
	return c
}

func (a *dictDecoder) decode(p parquet.Page, out []int32) []int32 {
	if d := p.Dictionary(); d != nil {
		if d != a.lastD {
			a.lastD = d
			data, offs := pageData(d.Page()).ByteArray()
			a.local = a.local[:0]
			for i := 0; i+1 < len(offs); i++ {
				a.local = append(a.local, a.code(data[offs[i]:offs[i+1]]))
			}
		}
		for _, ix := range pageData(p).Int32() {
			out = append(out, a.local[ix])
		}
		return out
	}
	byteValues(p, func(_ int32, v []byte) { out = append(out, a.code(v)) })
	return out
}
