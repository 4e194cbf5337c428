package normalize

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/drmas-dev/drmas/kernels"
	"github.com/drmas-dev/drmas/shards"
)

// The sidecar encoder writes the advantage sidecar (shards.AdvantageRow: row_id, uid, agent,
// advantage, baseline_mean, baseline_std, group_size) straight from the decoded key columns and
// the kernel's result columns, without materialising rows of strings and without a hash lookup
// per row and column (the row writer, shards.WriteAdvantages, spent ~90% of the stage's time
// there and in zstd). The file has exactly the schema, footer settings (created_by, column
// orders, version) and row-group size of shards.WriteAdvantages; each column chunk is one
// (dictionary page and) data page (v1) per row group, with min/max statistics. Encodings:
//
//   - row_id: DELTA_BINARY_PACKED (consecutive ids cost a few bits a row group);
//   - uid: dictionary of the row group's uids, taken from the contiguous group codes (no
//     hashing), RLE/bit-packed indices: a run of a group costs a few bytes;
//   - agent: dictionary of the part's agent names, bit-packed indices;
//   - advantage, baseline_mean, baseline_std, group_size: dictionary-encoded when the row group
//     has at most a quarter as many distinct values as rows (statistics are one value per
//     (uid, agent) pair: one lookup per pair; advantages one per pair and score: a two-entry
//     cache per agent spares most lookups), else PLAIN.
//
// Dictionary-encoded and delta-encoded chunks are stored uncompressed: the indices are already
// a few bits a row and nearly incompressible, and zstd (at the level of shards' writer) costs
// ~50–100 ns a byte on such input here, more than the rest of the stage. PLAIN chunks are
// zstd-compressed like shards' files. The output is a deterministic function of the inputs
// (about 5.3 bytes a row for drmas on realistic scores, against 3.8 for the row writer); any
// Parquet reader reads back the rows shards.WriteAdvantages would have written.

// sidecarCodec is the compression of shards' writers (zstd, default level), used for PLAIN
// chunks.
var sidecarCodec = &zstd.Codec{Level: zstd.SpeedDefault}

// sidecarColumns is the leaf column order the encoder writes; it must be the schema's.
var sidecarColumns = []string{"row_id", "uid", "agent", "advantage", "baseline_mean", "baseline_std", "group_size"}

var (
	sidecarTemplateOnce sync.Once
	sidecarTemplate     *format.FileMetaData
	sidecarTemplateErr  error
)

// template returns the footer of an empty sidecar written by shards' writer: the schema
// elements, created_by, version and column orders to copy.
func template() (*format.FileMetaData, error) {
	sidecarTemplateOnce.Do(func() {
		data, err := shards.EncodeTable([]shards.AdvantageRow{})
		if err != nil {
			sidecarTemplateErr = err
			return
		}
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			sidecarTemplateErr = err
			return
		}
		md := *f.Metadata()
		leaves := shards.AdvantageSchema().Columns()
		if len(leaves) != len(sidecarColumns) {
			sidecarTemplateErr = fmt.Errorf("sidecar schema has %d columns, the encoder writes %d", len(leaves), len(sidecarColumns))
			return
		}
		for i, p := range leaves {
			if len(p) != 1 || p[0] != sidecarColumns[i] || md.Schema[i+1].Name != sidecarColumns[i] {
				sidecarTemplateErr = fmt.Errorf("sidecar schema column %d is %v, the encoder writes %s", i, p, sidecarColumns[i])
				return
			}
		}
		md.RowGroups = nil
		md.NumRows = 0
		sidecarTemplate = &md
	})
	return sidecarTemplate, sidecarTemplateErr
}

// sidecarEncoder holds reusable scratch space; it is not safe for concurrent use.
type sidecarEncoder struct {
	out     []byte
	raw     []byte // uncompressed page
	tmp     []byte
	comp    []byte // compressed page
	idx     []int32
	i64     []int64
	hdr     thrift.Encoder
	hdrBuf  bytes.Buffer
	proto   thrift.CompactProtocol
	cache   valueCache
	rowGrps []format.RowGroup

	// (group, agent) pairs of the current row group
	pair     []int32 // pair of each row
	npairs   int32
	slot     []int32 // per agent code: its pair in the current group, −1 none
	touched  []int32
	pairVal  []uint64
	pairSeen []bool
	pairIdx  []int32
	bits     []uint64
}

// encodeSidecar encodes the sidecar of one part: row i describes keys row i with result row i.
func encodeSidecar(k *shards.Keys, r *kernels.Result) ([]byte, error) {
	var e sidecarEncoder
	return e.encode(k, r)
}

func (e *sidecarEncoder) encode(k *shards.Keys, r *kernels.Result) ([]byte, error) {
	tmpl, err := template()
	if err != nil {
		return nil, fmt.Errorf("sidecar encoder: %w", err)
	}
	n := k.Len()
	if len(r.Advantage) != n || len(r.BaselineMean) != n || len(r.BaselineStd) != n || len(r.GroupSize) != n ||
		len(k.Group) != n || len(k.Agent) != n {
		return nil, fmt.Errorf("sidecar: %d keys but result columns of %d, %d, %d, %d rows", n,
			len(r.Advantage), len(r.BaselineMean), len(r.BaselineStd), len(r.GroupSize))
	}
	for i, a := range r.Advantage {
		if a != a || math.IsInf(float64(a), 0) {
			return nil, fmt.Errorf("advantage row %d (row_id %d): advantage %v is not finite", i, k.RowID[i], a)
		}
	}
	e.hdr.Reset(e.proto.NewWriter(&e.hdrBuf))
	// About 6 bytes a row; grown as needed.
	e.out = append(make([]byte, 0, 6*n+64<<10), "PAR1"...)
	e.rowGrps = e.rowGrps[:0]
	for off := 0; off < n; off += shards.RowGroupRows {
		end := min(off+shards.RowGroupRows, n)
		if err := e.rowGroup(k, r, off, end); err != nil {
			return nil, err
		}
	}
	md := *tmpl
	md.NumRows = int64(n)
	md.RowGroups = e.rowGrps
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		return nil, fmt.Errorf("sidecar footer: %w", err)
	}
	e.out = append(e.out, footer...)
	e.out = binary.LittleEndian.AppendUint32(e.out, uint32(len(footer)))
	e.out = append(e.out, "PAR1"...)
	out := e.out
	e.out = nil // the caller owns the bytes
	return out, nil
}

// rowGroup appends rows [s, e) as one row group.
func (e *sidecarEncoder) rowGroup(k *shards.Keys, r *kernels.Result, s, t int) error {
	n := t - s
	rg := format.RowGroup{NumRows: int64(n), FileOffset: int64(len(e.out)), Ordinal: int16(len(e.rowGrps))}
	cols := make([]format.ColumnChunk, 0, len(sidecarColumns))
	add := func(cc format.ColumnChunk, err error) error {
		if err != nil {
			return fmt.Errorf("sidecar column %s: %w", cc.MetaData.PathInSchema, err)
		}
		rg.TotalByteSize += cc.MetaData.TotalUncompressedSize
		rg.TotalCompressedSize += cc.MetaData.TotalCompressedSize
		cols = append(cols, cc)
		return nil
	}

	// row_id
	ids := k.RowID[s:t]
	lo, hi := ids[0], ids[0]
	for _, v := range ids {
		lo, hi = min(lo, v), max(hi, v)
	}
	e.raw, _ = (&delta.BinaryPackedEncoding{}).EncodeInt64(e.raw[:0], ids)
	if err := add(e.column("row_id", format.Int64, n, nil, 0, format.DeltaBinaryPacked, e.raw,
		le64(uint64(lo)), le64(uint64(hi)))); err != nil {
		return err
	}

	// uid: the dictionary is the uids of the group codes [g0, g1] spanned by the row group.
	grp := k.Group[s:t]
	g0, g1 := grp[0], grp[0]
	for _, g := range grp {
		g0, g1 = min(g0, g), max(g1, g)
	}
	if g0 < 0 || int(g1) >= len(k.UIDs) {
		return fmt.Errorf("sidecar: group code outside [0, %d)", len(k.UIDs))
	}
	e.idx = e.idx[:0]
	for _, g := range grp {
		e.idx = append(e.idx, g-g0)
	}
	dict := e.byteArrayDict(k.UIDs[g0 : g1+1])
	umin, umax := minMaxString(k.UIDs[g0 : g1+1])
	if err := add(e.dictColumn("uid", format.ByteArray, n, dict, int(g1-g0+1), []byte(umin), []byte(umax))); err != nil {
		return err
	}

	// agent: the part's agent names.
	ag := k.Agent[s:t]
	e.idx = e.idx[:0]
	for _, a := range ag {
		if a < 0 || int(a) >= len(k.Agents) {
			return fmt.Errorf("sidecar: agent code %d outside [0, %d)", a, len(k.Agents))
		}
		e.idx = append(e.idx, a)
	}
	dict = e.byteArrayDict(k.Agents)
	amin, amax := minMaxString(k.Agents)
	if err := add(e.dictColumn("agent", format.ByteArray, n, dict, len(k.Agents), []byte(amin), []byte(amax))); err != nil {
		return err
	}

	// advantage, baseline_mean, baseline_std, group_size. Statistics are constant per (uid,
	// agent) pair for most estimators: number the pairs of the row group once.
	e.pairs(grp, ag)
	for _, c := range []struct {
		name string
		typ  format.Type
		f32  []float32
		f64  []float64
		i32  []int32
	}{
		{"advantage", format.Float, r.Advantage[s:t], nil, nil},
		{"baseline_mean", format.Double, nil, r.BaselineMean[s:t], nil},
		{"baseline_std", format.Double, nil, r.BaselineStd[s:t], nil},
		{"group_size", format.Int32, nil, nil, r.GroupSize[s:t]},
	} {
		if err := add(e.valueColumn(c.name, c.typ, grp, ag, c.f32, c.f64, c.i32)); err != nil {
			return err
		}
	}
	rg.Columns = cols
	e.rowGrps = append(e.rowGrps, rg)
	return nil
}

// valueColumn writes a float32, float64 or int32 column (exactly one of f32, f64, i32 is
// non-nil), dictionary-encoded when the row group has at most a quarter as many distinct values
// as rows, else PLAIN and compressed.
func (e *sidecarEncoder) valueColumn(name string, typ format.Type, grp, ag []int32, f32 []float32, f64 []float64, i32 []int32) (format.ColumnChunk, error) {
	n := len(grp)
	// The values' bits, the dictionary's keys.
	vb := grow(e.bits, n)
	e.bits = vb
	switch {
	case f32 != nil:
		for i, v := range f32[:n] {
			vb[i] = uint64(math.Float32bits(v))
		}
	case f64 != nil:
		for i, v := range f64[:n] {
			vb[i] = math.Float64bits(v)
		}
	default:
		for i, v := range i32[:n] {
			vb[i] = uint64(uint32(v))
		}
	}
	// Advantages vary within a pair (with the score); statistics usually do not.
	dense := (f32 == nil && e.pairDictIndex(vb)) || e.dictIndex(grp, ag, vb)
	// Statistics: over the dictionary when there is one (a quarter of the rows at most).
	var lo, hi []byte
	if dense {
		lo, hi = minMax(typ, e.cache.values)
	} else {
		lo, hi = minMax(typ, vb)
	}
	if dense {
		vals := e.cache.values
		dict := make([]byte, 0, len(vals)*8)
		for _, v := range vals {
			if f64 != nil {
				dict = binary.LittleEndian.AppendUint64(dict, v)
			} else {
				dict = binary.LittleEndian.AppendUint32(dict, uint32(v))
			}
		}
		return e.dictColumn(name, typ, n, dict, len(vals), lo, hi)
	}
	e.raw = e.raw[:0]
	switch {
	case f32 != nil:
		for _, v := range f32 {
			e.raw = binary.LittleEndian.AppendUint32(e.raw, math.Float32bits(v))
		}
	case f64 != nil:
		for _, v := range f64 {
			e.raw = binary.LittleEndian.AppendUint64(e.raw, math.Float64bits(v))
		}
	default:
		for _, v := range i32 {
			e.raw = binary.LittleEndian.AppendUint32(e.raw, uint32(v))
		}
	}
	return e.column(name, typ, n, nil, 0, format.Plain, e.raw, lo, hi)
}

// minMax returns the PLAIN encodings of the least and greatest of values of type typ (FLOAT,
// DOUBLE or INT32) given by their bits.
func minMax(typ format.Type, vb []uint64) ([]byte, []byte) {
	switch typ {
	case format.Float:
		mn, mx := math.Float32frombits(uint32(vb[0])), math.Float32frombits(uint32(vb[0]))
		for _, b := range vb {
			v := math.Float32frombits(uint32(b))
			mn, mx = min(mn, v), max(mx, v)
		}
		return le32(math.Float32bits(mn)), le32(math.Float32bits(mx))
	case format.Double:
		mn, mx := math.Float64frombits(vb[0]), math.Float64frombits(vb[0])
		for _, b := range vb {
			v := math.Float64frombits(b)
			mn, mx = min(mn, v), max(mx, v)
		}
		return le64(math.Float64bits(mn)), le64(math.Float64bits(mx))
	default:
		mn, mx := int32(vb[0]), int32(vb[0])
		for _, b := range vb {
			v := int32(uint32(b))
			mn, mx = min(mn, v), max(mx, v)
		}
		return le32(uint32(mn)), le32(uint32(mx))
	}
}

// pairs numbers the (group, agent) pairs of the rows, in order of first appearance, into
// e.pair (one per row); e.npairs is their count.
func (e *sidecarEncoder) pairs(grp, ag []int32) {
	e.pair = e.pair[:0]
	e.npairs = 0
	ag = ag[:len(grp)]
	slot := e.slot
	var touched []int32
	last := int32(-1)
	for i, g := range grp {
		if i == 0 || g != last {
			for _, a := range touched {
				slot[a] = -1
			}
			touched = e.touched[:0]
			last = g
		}
		a := ag[i]
		if int(a) >= len(slot) {
			for int(a) >= len(slot) {
				slot = append(slot, -1)
			}
			e.slot = slot
		}
		p := slot[a]
		if p < 0 {
			p = e.npairs
			e.npairs++
			slot[a] = p
			touched = append(touched, a)
			e.touched = touched
		}
		e.pair = append(e.pair, p)
	}
	for _, a := range touched {
		slot[a] = -1
	}
}

// pairDictIndex is dictIndex for a column whose value is the same on every row of a
// (group, agent) pair: one hash lookup per pair. It reports false, leaving the work to
// dictIndex, when the column is not constant per pair or has too many distinct values.
func (e *sidecarEncoder) pairDictIndex(vals []uint64) bool {
	n := len(vals)
	pv := grow(e.pairVal, int(e.npairs))
	e.pairVal = pv
	seen := grow(e.pairSeen, int(e.npairs))
	e.pairSeen = seen
	clear(seen)
	pair := e.pair[:n]
	for i, v := range vals {
		p := pair[i]
		if !seen[p] {
			seen[p] = true
			pv[p] = v
		} else if pv[p] != v {
			return false
		}
	}
	c := &e.cache
	c.reset()
	limit := n / 4
	pd := grow(e.pairIdx, int(e.npairs))
	e.pairIdx = pd
	for p, v := range pv {
		pd[p] = c.lookup(v)
		if len(c.values) > limit {
			return false
		}
	}
	out := e.idx[:0]
	for _, p := range pair {
		out = append(out, pd[p])
	}
	e.idx = out
	return true
}

func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// dictIndex fills e.idx with the dictionary index of each value (dictionary in order of first
// appearance, in c.values) and reports true, or reports false as soon as there are more than
// len(vals)/4 distinct values. Values are compared by their bits. A per-agent cache of the
// value last seen in the current group spares the hash lookup for values that repeat per
// (group, agent), as statistics do.
func (e *sidecarEncoder) dictIndex(grp, ag []int32, vals []uint64) bool {
	c := &e.cache
	c.reset()
	limit := len(vals) / 4
	out := e.idx[:0]
	grp = grp[:len(vals)]
	ag = ag[:len(vals)]
	for i, v := range vals {
		a := ag[i]
		if uint(a) < uint(len(c.group)) && c.group[a] == grp[i] {
			if c.val[a] == v {
				out = append(out, c.idx[a])
				continue
			}
			if c.idx2[a] >= 0 && c.val2[a] == v {
				// Swap, so that the most recent value is checked first.
				d := c.idx2[a]
				c.val2[a], c.idx2[a] = c.val[a], c.idx[a]
				c.val[a], c.idx[a] = v, d
				out = append(out, d)
				continue
			}
		}
		d := c.lookup(v)
		if len(c.values) > limit {
			e.idx = out
			return false
		}
		c.remember(a, grp[i], v, d)
		out = append(out, d)
	}
	e.idx = out
	return true
}

// valueCache finds the dictionary index of values that repeat per (group, agent): per agent
// code it keeps the last two distinct values seen in the current group.
type valueCache struct {
	group  []int32 // per agent code: the group whose values are cached, −1 none
	val    []uint64
	idx    []int32
	val2   []uint64 // the value before, valid when idx2 ≥ 0
	idx2   []int32
	index  u64Index
	values []uint64
}

// u64Index maps uint64 keys to int32 values: open addressing with linear probing, sized to a
// power of two at least twice the keys it holds. reset is O(1) (a generation stamp).
type u64Index struct {
	keys []uint64
	vals []int32
	gen  []uint32
	cur  uint32
	n    int
	mask uint64
}

func (m *u64Index) reset() {
	m.cur++
	m.n = 0
	if m.cur == 0 { // wrapped: stamps are ambiguous
		clear(m.gen)
		m.cur = 1
	}
	if m.keys == nil {
		m.resize(1 << 12)
	}
}

func (m *u64Index) resize(size int) {
	oldK, oldV, oldG, oldCur := m.keys, m.vals, m.gen, m.cur
	m.keys, m.vals, m.gen = make([]uint64, size), make([]int32, size), make([]uint32, size)
	m.mask = uint64(size - 1)
	m.cur, m.n = 1, 0
	for i, g := range oldG {
		if g == oldCur {
			m.insert(oldK[i], oldV[i])
		}
	}
}

func (m *u64Index) slot(k uint64) uint64 {
	h := (k ^ k>>29) * 0x9E3779B97F4A7C15
	return (h >> 32) & m.mask
}

// get returns the value of k, or inserts v for it and returns v.
func (m *u64Index) getOrInsert(k uint64, v int32) int32 {
	for i := m.slot(k); ; i = (i + 1) & m.mask {
		if m.gen[i] != m.cur {
			m.gen[i], m.keys[i], m.vals[i] = m.cur, k, v
			m.n++
			if 2*m.n > len(m.keys) {
				m.resize(2 * len(m.keys))
			}
			return v
		}
		if m.keys[i] == k {
			return m.vals[i]
		}
	}
}

func (m *u64Index) insert(k uint64, v int32) { m.getOrInsert(k, v) }

func (c *valueCache) reset() {
	for i := range c.group {
		c.group[i] = -1
	}
	c.index.reset()
	c.values = c.values[:0]
}

func (c *valueCache) lookup(v uint64) int32 {
	x := c.index.getOrInsert(v, int32(len(c.values)))
	if int(x) == len(c.values) {
		c.values = append(c.values, v)
	}
	return x
}

func (c *valueCache) remember(a, g int32, v uint64, x int32) {
	if a < 0 {
		return
	}
	for int(a) >= len(c.group) {
		c.group = append(c.group, -1)
		c.val = append(c.val, 0)
		c.idx = append(c.idx, 0)
		c.val2 = append(c.val2, 0)
		c.idx2 = append(c.idx2, -1)
	}
	if c.group[a] == g {
		c.val2[a], c.idx2[a] = c.val[a], c.idx[a]
	} else {
		c.idx2[a] = -1
	}
	c.group[a], c.val[a], c.idx[a] = g, v, x
}

// byteArrayDict is the PLAIN encoding of strings (4-byte length, bytes).
func (e *sidecarEncoder) byteArrayDict(vals []string) []byte {
	size := 0
	for _, v := range vals {
		size += 4 + len(v)
	}
	out := make([]byte, 0, size)
	for _, v := range vals {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(v)))
		out = append(out, v...)
	}
	return out
}

// dictColumn writes a dictionary page (dict, PLAIN, dictN values) and a data page of the
// indices in e.idx (RLE_DICTIONARY).
func (e *sidecarEncoder) dictColumn(name string, typ format.Type, n int, dict []byte, dictN int, lo, hi []byte) (format.ColumnChunk, error) {
	// Indices are below dictN: its bit length is the page's bit width (no scan for the
	// maximum, as rle.DictionaryEncoding would do).
	w := bits.Len32(uint32(max(dictN-1, 0)))
	var err error
	e.tmp, err = (&rle.Encoding{BitWidth: w}).EncodeInt32(e.tmp[:0], e.idx)
	if err != nil {
		return format.ColumnChunk{MetaData: format.ColumnMetaData{PathInSchema: []string{name}}}, err
	}
	e.raw = append(append(e.raw[:0], byte(w)), e.tmp...)
	return e.column(name, typ, n, dict, dictN, format.RLEDictionary, e.raw, lo, hi)
}

// column appends one column chunk: an optional dictionary page, then one data page holding
// the encoded values data.
func (e *sidecarEncoder) column(name string, typ format.Type, n int, dict []byte, dictN int, enc format.Encoding, data, lo, hi []byte) (format.ColumnChunk, error) {
	// Dictionary indices and delta-encoded ids are already compact (and nearly incompressible):
	// zstd would spend more time on them than on everything else. Only PLAIN values are
	// compressed.
	codec := format.Uncompressed
	if enc == format.Plain {
		codec = format.Zstd
	}
	md := format.ColumnMetaData{
		Type: typ, PathInSchema: []string{name}, Codec: codec, NumValues: int64(n),
		Statistics: format.Statistics{MinValue: lo, MaxValue: hi, NullCount: 0},
	}
	start := int64(len(e.out))
	if dict != nil {
		md.DictionaryPageOffset = start
		md.Encoding = []format.Encoding{format.Plain, enc}
		h := format.PageHeader{Type: format.DictionaryPage,
			DictionaryPageHeader: thrift.New(format.DictionaryPageHeader{NumValues: int32(dictN), Encoding: format.Plain})}
		u, c, err := e.page(&h, dict, codec)
		if err != nil {
			return format.ColumnChunk{MetaData: md}, err
		}
		md.TotalUncompressedSize += u
		md.TotalCompressedSize += c
	} else {
		md.Encoding = []format.Encoding{enc}
	}
	md.DataPageOffset = int64(len(e.out))
	h := format.PageHeader{Type: format.DataPage, DataPageHeader: thrift.New(format.DataPageHeader{
		NumValues: int32(n), Encoding: enc, DefinitionLevelEncoding: format.RLE, RepetitionLevelEncoding: format.RLE,
	})}
	u, c, err := e.page(&h, data, codec)
	if err != nil {
		return format.ColumnChunk{MetaData: md}, err
	}
	md.TotalUncompressedSize += u
	md.TotalCompressedSize += c
	return format.ColumnChunk{FileOffset: start, MetaData: md}, nil
}

// page compresses body and appends its header and the compressed bytes; it returns the
// uncompressed and compressed sizes, headers included.
func (e *sidecarEncoder) page(h *format.PageHeader, body []byte, codec format.CompressionCodec) (int64, int64, error) {
	if codec == format.Zstd {
		var err error
		e.comp, err = sidecarCodec.Encode(e.comp[:0], body)
		if err != nil {
			return 0, 0, err
		}
	} else {
		e.comp = body
	}
	h.UncompressedPageSize = int32(len(body))
	h.CompressedPageSize = int32(len(e.comp))
	e.hdrBuf.Reset()
	if err := e.hdr.Encode(h); err != nil {
		return 0, 0, err
	}
	hl := int64(e.hdrBuf.Len())
	e.out = append(e.out, e.hdrBuf.Bytes()...)
	e.out = append(e.out, e.comp...)
	c := int64(len(e.comp))
	if codec != format.Zstd {
		e.comp = nil // body belongs to the caller
	}
	return hl + int64(len(body)), hl + c, nil
}

func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

func minMaxString(vals []string) (string, string) {
	if len(vals) == 0 {
		return "", ""
	}
	lo, hi := vals[0], vals[0]
	for _, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}
