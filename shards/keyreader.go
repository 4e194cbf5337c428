package shards

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/drmas-dev/drmas/internal/hugemem"
	"github.com/drmas-dev/drmas/storage"
)

// KeyReader reads the key columns of trajectory parts from a bucket, like OpenColumns followed
// by ReadKeys, but decodes the column chunks itself when they are stored the way
// WriteTrajectories stores them (required columns, uncompressed chunks, PLAIN, DELTA_BINARY_PACKED
// or dictionary-encoded pages, data pages v1 or v2): one ranged read per chunk into a buffer
// that is reused, and no page or row objects. Any other file, and any file the fast decoder
// rejects, is read with OpenColumns and ReadKeys, so the result and the errors are theirs.
//
// A KeyReader reuses its memory from part to part: the Keys that Read returns (their slices)
// are valid only until the next Read. The zero value is ready to use; a KeyReader must not be
// used by two goroutines at once.
type KeyReader struct {
	// NoSample leaves Keys.Sample empty (the column is neither fetched nor decoded) when the
	// fast path reads the part; callers that need no trajectories set it.
	NoSample bool
	// Arena, when set, holds the Keys' columns and the chunk buffer (on huge pages: see
	// hugemem); the Keys are then valid until the next Read or the Arena's Free, whichever is
	// first, and the KeyReader itself must not be used after the Arena's Free (its buffers are
	// the Arena's). Nil: the Go heap.
	Arena *hugemem.Arena

	keys Keys
	buf  []byte  // the chunk being decoded
	idx  []int32 // dictionary indices of a page
	offs []int32 // byte-array offsets of the current dictionary (len = values + 1)
	dict []byte  // the current dictionary's PLAIN bytes (aliases buf)
	hdr  format.PageHeader
	prot thrift.CompactProtocol
	rd   thrift.BytesReader
	dec  *thrift.Decoder

	// uid decoding (see groupDecoder): names are arena[ends[i-1]:ends[i]].
	arena   []byte
	ends    []int
	seen    map[string]struct{}
	uidBad  bool
	lastIdx int32 // dictionary index of the last uid, −1 none

	// agent decoding: per dictionary index of the current chunk, the agent code.
	agentCodes map[string]int32
	agents     []string
	local      []int32 // agent code of each index of the current dictionary

	tmp64   []int64
	tmpOffs []int32

	fallbacks int // reads that took OpenColumns and ReadKeys (for tests)
}

// errFallback makes Read use OpenColumns and ReadKeys.
var errFallback = errors.New("shards: key columns not in the fast decoder's format")

// Read returns the key columns of the trajectory part key (of the given size). See KeyReader.
func (r *KeyReader) Read(ctx context.Context, b storage.Bucket, key string, size int64) (*Keys, error) {
	k, err := r.read(ctx, b, key, size)
	if err == nil {
		return k, nil
	}
	if !errors.Is(err, errFallback) {
		return nil, err
	}
	r.fallbacks++
	pf, err := OpenColumns(ctx, b, key, size, KeyColumns)
	if err != nil {
		return nil, err
	}
	return ReadKeys(ctx, pf, key)
}

// keyCol is one key column of the fast path: its leaf index and physical type.
type keyCol struct {
	leaf int
	kind parquet.Kind
}

func (r *KeyReader) read(ctx context.Context, b storage.Bucket, key string, size int64) (k *Keys, err error) {
	// Malformed input the checks below miss makes the slow path report it.
	defer func() {
		if p := recover(); p != nil {
			k, err = nil, errFallback
		}
	}()
	f, _, dataEnd, err := openFooter(ctx, b, key, size)
	if err != nil {
		return nil, err
	}
	// The checks of OpenColumns, then ReadKeys, in their order (so are the errors).
	leaves, err := columnIndexes(f, key, KeyColumns)
	if err != nil {
		return nil, err
	}
	md := f.Metadata()
	for rgi := range md.RowGroups {
		for _, ci := range leaves {
			if _, _, err := chunkRange(f, key, rgi, ci, dataEnd); err != nil {
				return nil, err
			}
		}
	}
	if err := CheckSchema(f, trajectorySchema, key, KeyColumns...); err != nil {
		return nil, err
	}
	n := f.NumRows()
	if n < 0 || n > f.Size()*8 {
		return nil, fmt.Errorf("%s: footer claims %d rows in %d bytes", key, n, f.Size())
	}
	// Column order: row_id, uid, sample, agent, score (KeyColumns).
	var cols [5]keyCol
	for i, c := range KeyColumns {
		leaf, _ := f.Schema().Lookup(c)
		if leaf.MaxDefinitionLevel != 0 || leaf.MaxRepetitionLevel != 0 {
			return nil, errFallback
		}
		cols[i] = keyCol{leaf: leaf.ColumnIndex, kind: leaf.Node.Type().Kind()}
	}
	for _, rg := range md.RowGroups {
		for _, c := range cols {
			if rg.Columns[c.leaf].MetaData.Codec != format.Uncompressed {
				return nil, errFallback
			}
		}
	}

	k = &r.keys
	k.RowID = hugemem.Grow(r.Arena, k.RowID[:0], int(n))
	k.Group = hugemem.Grow(r.Arena, k.Group[:0], int(n))
	if !r.NoSample {
		k.Sample = hugemem.Grow(r.Arena, k.Sample[:0], int(n))
	}
	k.Sample = k.Sample[:0]
	k.Agent = hugemem.Grow(r.Arena, k.Agent[:0], int(n))
	k.Score = hugemem.Grow(r.Arena, k.Score[:0], int(n))
	r.arena, r.ends, r.seen, r.uidBad = r.arena[:0], r.ends[:0], nil, false
	r.agentCodes = map[string]int32{}
	r.agents = nil
	for rgi, rg := range md.RowGroups {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rows := rg.NumRows
		if rows < 0 || rows > n-int64(len(k.RowID)) {
			return nil, errFallback
		}
		for ci, c := range cols {
			if ci == 2 && r.NoSample {
				continue
			}
			off, size, _ := chunkRange(f, key, rgi, c.leaf, dataEnd)
			cmd := rg.Columns[c.leaf].MetaData
			if cmd.NumValues != rows {
				return nil, errFallback
			}
			if err := r.fetch(ctx, b, key, off, size); err != nil {
				return nil, err
			}
			var err error
			switch ci {
			case 0:
				k.RowID, err = r.decodeInt64(k.RowID, int(rows), c.kind)
			case 1:
				k.Group, err = r.decodeBytes(k.Group, int(rows), c.kind, r.uid)
			case 2:
				k.Sample, err = r.decodeInt32(k.Sample, int(rows), c.kind)
			case 3:
				k.Agent, err = r.decodeBytes(k.Agent, int(rows), c.kind, nil)
			case 4:
				k.Score, err = r.decodeDouble(k.Score, int(rows), c.kind)
			}
			if err != nil {
				return nil, err
			}
		}
		if (len(k.Sample) != len(k.RowID) && !r.NoSample) || len(k.Score) != len(k.RowID) || len(k.Agent) != len(k.RowID) || len(k.Group) != len(k.RowID) {
			return nil, errFallback
		}
	}
	if int64(len(k.RowID)) != n || r.uidBad {
		return nil, errFallback
	}
	for _, s := range k.Score {
		if s != s || s > maxFloat || s < -maxFloat {
			return nil, errFallback
		}
	}
	names := string(r.arena)
	k.UIDs = extend(k.UIDs[:0], len(r.ends))
	start := 0
	for i, e := range r.ends {
		k.UIDs[i] = names[start:e]
		start = e
	}
	k.Agents = r.agents
	return k, nil
}

// fetch reads [off, off+n) of key into r.buf.
func (r *KeyReader) fetch(ctx context.Context, b storage.Bucket, key string, off, n int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rc, err := b.GetRange(ctx, key, off, n)
	if err != nil {
		return err
	}
	defer rc.Close()
	r.buf = hugemem.Grow(r.Arena, r.buf[:0], int(n))[:n]
	if _, err := io.ReadFull(rc, r.buf); err != nil {
		return fmt.Errorf("read %s [%d, +%d): %w", key, off, n, err)
	}
	return nil
}

// page is one page of the chunk in r.buf: its type, encoding, value count and encoded values.
type page struct {
	typ    format.PageType
	enc    format.Encoding
	values int
	data   []byte
}

// nextPage parses the page at the start of *rest and advances *rest past it.
func (r *KeyReader) nextPage(rest *[]byte) (page, error) {
	if r.rd == nil {
		r.rd = r.prot.NewReaderFromBytes(nil)
		r.dec = thrift.NewDecoder(r.rd)
	}
	r.rd.ResetBytes(*rest)
	r.hdr = format.PageHeader{}
	if err := r.dec.Decode(&r.hdr); err != nil {
		return page{}, errFallback
	}
	h := &r.hdr
	body := (*rest)[r.rd.BytesRead():]
	if h.CompressedPageSize < 0 || int(h.CompressedPageSize) > len(body) || h.CompressedPageSize != h.UncompressedPageSize {
		return page{}, errFallback
	}
	data := body[:h.CompressedPageSize]
	*rest = body[h.CompressedPageSize:]
	if h.CRC != 0 && uint32(h.CRC) != crc32.ChecksumIEEE(data) {
		return page{}, errFallback
	}
	switch h.Type {
	case format.DictionaryPage:
		d, ok := h.DictionaryPageHeader.Get()
		if !ok || d.NumValues < 0 || (d.Encoding != format.Plain && d.Encoding != format.PlainDictionary) {
			return page{}, errFallback
		}
		return page{typ: h.Type, enc: format.Plain, values: int(d.NumValues), data: data}, nil
	case format.DataPage:
		d, ok := h.DataPageHeader.Get()
		if !ok || d.NumValues < 0 {
			return page{}, errFallback
		}
		return page{typ: h.Type, enc: d.Encoding, values: int(d.NumValues), data: data}, nil
	case format.DataPageV2:
		d, ok := h.DataPageHeaderV2.Get()
		if !ok || d.NumValues < 0 || d.NumNulls != 0 || d.NumRows != d.NumValues ||
			d.DefinitionLevelsByteLength != 0 || d.RepetitionLevelsByteLength != 0 {
			return page{}, errFallback
		}
		return page{typ: h.Type, enc: d.Encoding, values: int(d.NumValues), data: data}, nil
	}
	return page{}, errFallback
}

// dataPages calls f with each data page of the chunk in r.buf, whose values must add up to
// rows; a dictionary page may come first (dict is called with it).
func (r *KeyReader) dataPages(rows int, dict func(p page) error, f func(p page) error) error {
	rest := r.buf
	seen := 0
	first := true
	for seen < rows {
		p, err := r.nextPage(&rest)
		if err != nil {
			return err
		}
		if p.typ == format.DictionaryPage {
			if !first || dict == nil {
				return errFallback
			}
			if err := dict(p); err != nil {
				return err
			}
			first = false
			continue
		}
		first = false
		if p.values > rows-seen {
			return errFallback
		}
		if err := f(p); err != nil {
			return err
		}
		seen += p.values
	}
	if len(rest) != 0 {
		return errFallback
	}
	return nil
}

// decodeInt64 appends the rows values of the required INT64 column chunk in r.buf (PLAIN or
// DELTA_BINARY_PACKED pages).
func (r *KeyReader) decodeInt64(out []int64, rows int, kind parquet.Kind) ([]int64, error) {
	if kind != parquet.Int64 {
		return nil, errFallback
	}
	err := r.dataPages(rows, nil, func(p page) error {
		switch p.enc {
		case format.Plain:
			if len(p.data) != 8*p.values {
				return errFallback
			}
			out = appendPlain(out, p.data)
		case format.DeltaBinaryPacked:
			var derr error
			out, derr = appendDelta64(out, p.data, p.values)
			return derr
		default:
			return errFallback
		}
		return nil
	})
	return out, err
}

// decodeInt32 is decodeInt64 for a required INT32 column.
func (r *KeyReader) decodeInt32(out []int32, rows int, kind parquet.Kind) ([]int32, error) {
	if kind != parquet.Int32 {
		return nil, errFallback
	}
	err := r.dataPages(rows, nil, func(p page) error {
		switch p.enc {
		case format.Plain:
			if len(p.data) != 4*p.values {
				return errFallback
			}
			out = appendPlain(out, p.data)
		case format.DeltaBinaryPacked:
			var err error
			if r.tmp64, err = appendDelta64(r.tmp64[:0], p.data, p.values); err != nil {
				return err
			}
			if len(r.tmp64) > 0 && r.tmp64[0] != int64(int32(r.tmp64[0])) {
				return errFallback
			}
			for _, v := range r.tmp64 {
				out = append(out, int32(v)) // INT32 deltas wrap at 32 bits
			}
		default:
			return errFallback
		}
		return nil
	})
	return out, err
}

// decodeDouble appends the rows values of the required DOUBLE column chunk in r.buf (PLAIN
// pages).
func (r *KeyReader) decodeDouble(out []float64, rows int, kind parquet.Kind) ([]float64, error) {
	if kind != parquet.Double {
		return nil, errFallback
	}
	err := r.dataPages(rows, nil, func(p page) error {
		if p.enc != format.Plain || len(p.data) != 8*p.values {
			return errFallback
		}
		out = appendPlain(out, p.data)
		return nil
	})
	return out, err
}

// decodeBytes decodes the required BYTE_ARRAY column chunk in r.buf (a dictionary page and
// RLE_DICTIONARY pages, or PLAIN pages), calling value with each row's bytes and its dictionary
// index (−1 on PLAIN pages); value appends the row's code to out. A nil value decodes agent
// codes (agentCode), looked up once per dictionary entry.
func (r *KeyReader) decodeBytes(out []int32, rows int, kind parquet.Kind, value func(out []int32, v []byte, ix int32) []int32) ([]int32, error) {
	if kind != parquet.ByteArray {
		return nil, errFallback
	}
	r.offs = r.offs[:0]
	r.dict = nil
	r.lastIdx = -1
	hasDict := false
	err := r.dataPages(rows, func(p page) error {
		var ok bool
		r.offs, ok = plainOffsets(r.offs[:0], p.data, p.values)
		if !ok {
			return errFallback
		}
		r.dict = p.data
		hasDict = true
		if value == nil {
			r.local = r.local[:0]
			for i := 0; i+1 < len(r.offs); i++ {
				r.local = append(r.local, r.agentCode(p.data[r.offs[i]+4:r.offs[i+1]]))
			}
		}
		return nil
	}, func(p page) error {
		switch p.enc {
		case format.Plain:
			offs, ok := plainOffsets(r.tmpOffs[:0], p.data, p.values)
			r.tmpOffs = offs
			if !ok {
				return errFallback
			}
			for i := 0; i < p.values; i++ {
				v := p.data[offs[i]+4 : offs[i+1]]
				if value == nil {
					out = append(out, r.agentCode(v))
				} else {
					out = value(out, v, -1)
				}
			}
			r.lastIdx = -1
		case format.RLEDictionary, format.PlainDictionary:
			if !hasDict || len(p.data) == 0 {
				return errFallback
			}
			nd := uint32(len(r.offs) - 1)
			if value == nil {
				// Agent codes: decode the indices in place, then map them.
				start := len(out)
				var ok bool
				if out, ok = decodeHybrid(out, p.data[1:], uint(p.data[0]), p.values); !ok {
					return errFallback
				}
				local := r.local[:nd]
				codes := out[start:]
				for i, ix := range codes {
					if uint32(ix) >= nd {
						return errFallback
					}
					codes[i] = local[ix]
				}
			} else {
				var ok bool
				if r.idx, ok = decodeHybrid(r.idx[:0], p.data[1:], uint(p.data[0]), p.values); !ok {
					return errFallback
				}
				for _, ix := range r.idx {
					if uint32(ix) >= nd {
						return errFallback
					}
				}
				out = r.dictRows(out, value)
			}
		default:
			return errFallback
		}
		return nil
	})
	return out, err
}

// agentCode returns the code of agent name v, numbering names in first-seen order.
func (r *KeyReader) agentCode(v []byte) int32 {
	code, ok := r.agentCodes[string(v)]
	if !ok {
		code = int32(len(r.agents))
		r.agents = append(r.agents, string(v))
		r.agentCodes[string(v)] = code
	}
	return code
}

// dictRows appends the codes of the rows whose dictionary indices are in r.idx. A row whose
// index equals the previous row's repeats its code without looking at the bytes.
func (r *KeyReader) dictRows(out []int32, value func(out []int32, v []byte, ix int32) []int32) []int32 {
	offs, dict := r.offs, r.dict
	last := r.lastIdx
	for _, ix := range r.idx {
		if ix == last && len(out) > 0 {
			out = append(out, out[len(out)-1])
			continue
		}
		out = value(out, dict[offs[ix]+4:offs[ix+1]], ix)
		last = ix
	}
	r.lastIdx = last
	return out
}

// uid appends the group code of a uid: a new code whenever the uid differs from the previous
// row's. A uid that reappears after its run ended marks the part bad (ReadKeys then reports
// it); while uids increase, as the writer sorts them, none can reappear and no set is kept.
func (r *KeyReader) uid(out []int32, v []byte, _ int32) []int32 {
	if len(r.ends) > 0 {
		start := 0
		if len(r.ends) > 1 {
			start = r.ends[len(r.ends)-2]
		}
		last := r.arena[start:]
		if string(v) == string(last) {
			return append(out, int32(len(r.ends)-1))
		}
		if r.seen == nil && string(v) < string(last) {
			r.seen = make(map[string]struct{}, 2*len(r.ends))
			s := 0
			for _, e := range r.ends {
				r.seen[string(r.arena[s:e])] = struct{}{}
				s = e
			}
		}
	}
	if r.seen != nil {
		if _, dup := r.seen[string(v)]; dup {
			r.uidBad = true
		}
		r.seen[string(v)] = struct{}{}
	}
	r.arena = append(r.arena, v...)
	r.ends = append(r.ends, len(r.arena))
	return append(out, int32(len(r.ends)-1))
}

// plainOffsets parses count PLAIN byte arrays (4-byte length, bytes) filling data exactly:
// value i is data[offs[i]+4 : offs[i+1]].
func plainOffsets(offs []int32, data []byte, count int) ([]int32, bool) {
	if count > len(data)/4 {
		return offs, false
	}
	pos := 0
	for i := 0; i < count; i++ {
		if len(data)-pos < 4 {
			return offs, false
		}
		l := int(binary.LittleEndian.Uint32(data[pos:]))
		if l > len(data)-pos-4 {
			return offs, false
		}
		offs = append(offs, int32(pos))
		pos += 4 + l
	}
	offs = append(offs, int32(pos))
	return offs, pos == len(data)
}

// decodeHybrid appends count values of the RLE/bit-packed hybrid encoding of width bits.
func decodeHybrid(out []int32, src []byte, width uint, count int) ([]int32, bool) {
	if width > 32 {
		return out, false
	}
	mask := uint64(1)<<width - 1
	bytesW := int(width+7) / 8
	for count > 0 {
		h, n := binary.Uvarint(src)
		if n <= 0 {
			return out, false
		}
		src = src[n:]
		if h&1 == 0 { // RLE run
			run := h >> 1
			if len(src) < bytesW {
				return out, false
			}
			var v uint64
			for i := 0; i < bytesW; i++ {
				v |= uint64(src[i]) << (8 * i)
			}
			src = src[bytesW:]
			if v > mask {
				return out, false
			}
			m := int(min(run, uint64(count)))
			for i := 0; i < m; i++ {
				out = append(out, int32(v))
			}
			count -= m
			continue
		}
		groups := h >> 1
		if groups > uint64(len(src)) {
			return out, false
		}
		nb := int(groups) * int(width)
		if nb > len(src) {
			return out, false
		}
		packed := src[:nb]
		src = src[nb:]
		m := int(min(groups*8, uint64(count)))
		out = unpackBits(out, packed, width, m)
		count -= m
	}
	return out, true
}

// unpackBits appends m values of width bits packed LSB first in data (len(data) ≥ m×width/8).
func unpackBits(out []int32, data []byte, width uint, m int) []int32 {
	start := len(out)
	out = extend(out, m)
	dst := out[start:]
	if width == 0 {
		return out
	}
	mask := uint64(1)<<width - 1
	w := int(width)
	i := 0
	// Groups of 8 values (width bytes); the last ones are read from a padded copy, so that
	// 8 bytes can always be loaded past a group's start.
	var pad [48]byte
	for g := 0; i+8 <= m; i, g = i+8, g+w {
		grp := data[g:]
		if g+w+8 > len(data) {
			pad = [48]byte{}
			copy(pad[:], data[g:])
			grp = pad[:]
		}
		d := dst[i : i+8 : i+8]
		if width <= 8 {
			x := binary.LittleEndian.Uint64(grp)
			d[0] = int32(x & mask)
			d[1] = int32(x >> width & mask)
			d[2] = int32(x >> (2 * width) & mask)
			d[3] = int32(x >> (3 * width) & mask)
			d[4] = int32(x >> (4 * width) & mask)
			d[5] = int32(x >> (5 * width) & mask)
			d[6] = int32(x >> (6 * width) & mask)
			d[7] = int32(x >> (7 * width) & mask)
			continue
		}
		for j := range d {
			bit := uint(j) * width
			d[j] = int32(binary.LittleEndian.Uint64(grp[bit>>3:]) >> (bit & 7) & mask)
		}
	}
	for ; i < m; i++ {
		dst[i] = int32(getBits(data, uint(i)*width, width))
	}
	return out
}

// extend returns s with n more elements, whose values are unspecified (the caller sets them).
func extend[T any](s []T, n int) []T { return slices.Grow(s, n)[:len(s)+n] }

// appendDelta64 appends the count values of a DELTA_BINARY_PACKED page (int64 arithmetic,
// wrapping as the format specifies).
func appendDelta64(out []int64, src []byte, count int) ([]int64, error) {
	var hdr [3]uint64
	for i := range hdr {
		v, n := binary.Uvarint(src)
		if n <= 0 {
			return out, errFallback
		}
		hdr[i], src = v, src[n:]
	}
	blockSize, miniBlocks, total := hdr[0], hdr[1], hdr[2]
	first, n := binary.Varint(src)
	if n <= 0 {
		return out, errFallback
	}
	src = src[n:]
	if total != uint64(count) || blockSize == 0 || blockSize%128 != 0 || blockSize > 1<<20 || miniBlocks == 0 ||
		blockSize%miniBlocks != 0 || (blockSize/miniBlocks)%32 != 0 {
		return out, errFallback
	}
	if count == 0 {
		return out, nil
	}
	per := int(blockSize / miniBlocks)
	out = append(out, first)
	prev := first
	left := count - 1
	for left > 0 {
		minDelta, n := binary.Varint(src)
		if n <= 0 || len(src)-n < int(miniBlocks) {
			return out, errFallback
		}
		src = src[n:]
		widths := src[:miniBlocks]
		src = src[miniBlocks:]
		for _, w := range widths {
			if left == 0 {
				break
			}
			m := min(per, left)
			left -= m
			if w == 0 {
				for i := 0; i < m; i++ {
					prev += minDelta
					out = append(out, prev)
				}
				continue
			}
			if w > 64 {
				return out, errFallback
			}
			size := per * int(w) / 8
			need := (m*int(w) + 7) / 8
			if len(src) < need {
				return out, errFallback
			}
			data := src[:min(size, len(src))]
			src = src[len(data):]
			for i := 0; i < m; i++ {
				prev += minDelta + int64(getBits(data, uint(i)*uint(w), uint(w)))
				out = append(out, prev)
			}
		}
	}
	return out, nil
}

// getBits returns the w bits (1 ≤ w ≤ 64) at bit offset bit of data, LSB first; bytes past the
// end of data read as zero.
func getBits(data []byte, bit, w uint) uint64 {
	byt := int(bit >> 3)
	sh := bit & 7
	lo := load64(data, byt) >> sh
	if sh+w > 64 {
		lo |= load64(data, byt+8) << (64 - sh)
	}
	if w == 64 {
		return lo
	}
	return lo & (1<<w - 1)
}

func load64(data []byte, at int) uint64 {
	if at+8 <= len(data) {
		return binary.LittleEndian.Uint64(data[at:])
	}
	var pad [8]byte
	if at < len(data) {
		copy(pad[:], data[at:])
	}
	return binary.LittleEndian.Uint64(pad[:])
}

// littleEndian reports whether this machine stores numbers as PLAIN pages do.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// appendPlain appends the little-endian fixed-size values in data (len a multiple of their size).
func appendPlain[T int32 | int64 | float64](out []T, data []byte) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	n := len(data) / size
	start := len(out)
	out = extend(out, n)
	if littleEndian && n > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[start])), n*size), data)
		return out
	}
	for i := 0; i < n; i++ {
		var u uint64
		if size == 4 {
			u = uint64(binary.LittleEndian.Uint32(data[4*i:]))
		} else {
			u = binary.LittleEndian.Uint64(data[8*i:])
		}
		switch p := any(&out[start+i]).(type) {
		case *int32:
			*p = int32(uint32(u))
		case *int64:
			*p = int64(u)
		case *float64:
			*p = math.Float64frombits(u)
		}
	}
	return out
}
