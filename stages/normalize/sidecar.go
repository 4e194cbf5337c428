package normalize

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/drmas-dev/drmas/estimators"
	"github.com/drmas-dev/drmas/internal/hugemem"
	"github.com/drmas-dev/drmas/shards"
)

// The sidecar encoder writes the advantage sidecar (shards.AdvantageRow: row_id, uid, agent,
// advantage, baseline_mean, baseline_std, group_size) straight from the decoded key columns and
// the kernel's result columns, without materialising rows of strings and without a hash lookup
// per row and column (where the row writer, shards.WriteAdvantages, spends its time). The file has exactly the schema, footer settings (created_by, column
// orders, version) and row-group size of shards.WriteAdvantages; each column chunk is one
// (dictionary page and) data page (v1) per row group, with min/max statistics. Encodings:
//
//   - row_id: DELTA_BINARY_PACKED (consecutive ids, the normal case, are written directly: a
//     few bytes a block of 128);
//   - uid: dictionary of the row group's uids, taken from the contiguous group codes (no
//     hashing); the indices are one RLE run per run of a group (a few bytes a group);
//   - agent: dictionary of the part's agent names, indices bit-packed;
//   - advantage: PLAIN, uncompressed (4 bytes a row). It takes about one value per (uid,
//     agent, score): a dictionary would cost a hash lookup a row to save two or three bytes;
//   - baseline_mean, baseline_std, group_size: dictionary-encoded when the row group has at
//     most a quarter as many distinct values as rows, with indices bit-packed, else PLAIN and
//     zstd-compressed. These statistics are one value per (uid, agent) pair for every
//     estimator but rloo (estimators.Spec.PerPair): then each pair's value is read once and looked
//     up once; otherwise every row is checked (and a per-agent cache spares most lookups).
//
// Indices are written as one bit-packed run of the RLE/bit-packed hybrid encoding (their
// values seldom repeat eight times in a row: agents alternate within a group). Dictionary,
// delta and advantage chunks are stored uncompressed: zstd (at the level of shards' writer)
// costs more on them than the rest of the stage. The output is a deterministic function of
// the inputs (about 8.1 bytes a row for drmas on the benchmark's scores, against 3.8 for the
// row writer); any Parquet reader reads back the rows shards.WriteAdvantages would have
// written.

// sidecarCodec is the compression of shards' writers (zstd, default level), used for PLAIN
// statistics chunks.
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
	arena   *hugemem.Arena // holds out when set (see hugemem)
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
	perPair bool         // statistics are constant per pair (see encode)
	compact bool         // r's statistics are one entry per pair and row group (see encode)
	statAt  int          // the current row group's first compact statistics entry
	fill    func([]byte) // when set, writes the next data page's body (fillLen bytes) in place
	fillLen int
	pair    []int32 // pair of each row
	first   []int32 // first row of each pair
	npairs  int32
	slot    []int32 // per agent code: its pair in the current group, −1 none
	touched []int32
	pairVal []uint64
	runs    []run   // (group code, rows) runs of the current row group
	idxMap  []int32 // when set, row i's index is idxMap[pair[i]] (pairDictIndex), not idx[i]
	pairIdx []int32
	bits    []uint64
}

// run is a run of rows of one group code.
type run struct{ code, n int32 }

// encodeSidecar encodes the sidecar of one part: row i describes keys row i with result row i.
func encodeSidecar(k *shards.Keys, r *estimators.Result) ([]byte, error) {
	var e sidecarEncoder
	return e.encode(k, r, false)
}

// encode encodes the sidecar of one part; the bytes are valid until the next call. perPair
// promises that r's BaselineMean, BaselineStd and GroupSize are one value per (uid, agent)
// pair (estimators.Spec.PerPair): the encoder then reads them once per pair and row group. They
// are then either per row (read at the pair's first row in the row group) or, when
// r.SparseStats is set, compact (estimators.Result.SparseStats): one entry per pair and row
// group, which needs r.SparseStats = shards.RowGroupRows.
func (e *sidecarEncoder) encode(k *shards.Keys, r *estimators.Result, perPair bool) ([]byte, error) {
	e.perPair = perPair
	e.compact = perPair && r.SparseStats > 0
	e.statAt = 0
	tmpl, err := template()
	if err != nil {
		return nil, fmt.Errorf("sidecar encoder: %w", err)
	}
	n := k.Len()
	stats := n
	if e.compact {
		if r.SparseStats != shards.RowGroupRows {
			return nil, fmt.Errorf("sidecar: statistics are per pair and %d rows, the row groups have %d", r.SparseStats, shards.RowGroupRows)
		}
		stats = len(r.PairRow)
	}
	if len(r.Advantage) != n || len(r.BaselineMean) != stats || len(r.BaselineStd) != stats || len(r.GroupSize) != stats ||
		len(k.Group) != n || len(k.Agent) != n {
		return nil, fmt.Errorf("sidecar: %d keys but result columns of %d, %d, %d, %d rows", n,
			len(r.Advantage), len(r.BaselineMean), len(r.BaselineStd), len(r.GroupSize))
	}
	for i, a := range r.Advantage {
		if !(a >= -math.MaxFloat32 && a <= math.MaxFloat32) { // NaN fails both
			return nil, fmt.Errorf("advantage row %d (row_id %d): advantage %v is not finite", i, k.RowID[i], a)
		}
	}
	e.hdr.Reset(e.proto.NewWriter(&e.hdrBuf))
	// About 8 bytes a row; the buffer is reused from call to call.
	e.out = hugemem.Grow(e.arena, e.out[:0], 9*n+64<<10)
	e.out = append(e.out[:0], "PAR1"...)
	e.rowGrps = e.rowGrps[:0]
	for off := 0; off < n; off += shards.RowGroupRows {
		end := min(off+shards.RowGroupRows, n)
		if err := e.rowGroup(k, r, off, end); err != nil {
			return nil, err
		}
	}
	if e.compact && e.statAt != len(r.PairRow) {
		return nil, fmt.Errorf("sidecar: %d statistics entries for %d (uid, agent) pairs", len(r.PairRow), e.statAt)
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
	return e.out, nil
}

// rowGroup appends rows [s, e) as one row group.
func (e *sidecarEncoder) rowGroup(k *shards.Keys, r *estimators.Result, s, t int) error {
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
	lo, hi := ids[0], ids[n-1]
	if consecutive(ids) {
		e.raw = appendConsecutiveDelta(e.raw[:0], ids[0], n)
	} else {
		for _, v := range ids {
			lo, hi = min(lo, v), max(hi, v)
		}
		e.raw, _ = (&delta.BinaryPackedEncoding{}).EncodeInt64(e.raw[:0], ids)
	}
	if err := add(e.column("row_id", format.Int64, n, nil, 0, format.DeltaBinaryPacked, e.raw,
		le64(uint64(lo)), le64(uint64(hi)))); err != nil {
		return err
	}

	// uid: the dictionary is the uids of the group codes [g0, g1] spanned by the row group;
	// the indices are one RLE run per run of a group code.
	grp := k.Group[s:t]
	e.runs = e.runs[:0]
	g0, g1 := grp[0], grp[0]
	for i := 0; i < n; {
		g := grp[i]
		j := i + 1
		for j < n && grp[j] == g {
			j++
		}
		e.runs = append(e.runs, run{g, int32(j - i)})
		g0, g1 = min(g0, g), max(g1, g)
		i = j
	}
	if g0 < 0 || int(g1) >= len(k.UIDs) {
		return fmt.Errorf("sidecar: group code outside [0, %d)", len(k.UIDs))
	}
	dict := e.byteArrayDict(k.UIDs[g0 : g1+1])
	umin, umax := minMaxString(k.UIDs[g0 : g1+1])
	w := bits.Len32(uint32(g1 - g0))
	e.tmp = append(e.tmp[:0], byte(w))
	for _, r := range e.runs {
		e.tmp = appendRLERun(e.tmp, uint32(r.code-g0), int(r.n), w)
	}
	if err := add(e.column("uid", format.ByteArray, n, dict, int(g1-g0+1), format.RLEDictionary, e.tmp, []byte(umin), []byte(umax))); err != nil {
		return err
	}

	// agent: the part's agent names.
	ag := k.Agent[s:t]
	na := uint32(len(k.Agents))
	for _, a := range ag {
		if uint32(a) >= na {
			return fmt.Errorf("sidecar: agent code %d outside [0, %d)", a, len(k.Agents))
		}
	}
	dict = e.byteArrayDict(k.Agents)
	amin, amax := minMaxString(k.Agents)
	if err := add(e.indexColumn("agent", format.ByteArray, n, dict, len(k.Agents), ag, []byte(amin), []byte(amax))); err != nil {
		return err
	}

	// advantage, baseline_mean, baseline_std, group_size. Statistics are constant per (uid,
	// agent) pair for most estimators: number the pairs of the row group once.
	e.pairs(grp, ag)
	ss, st := s, t // the row group's statistics: its rows, or its pairs' compact entries
	if e.compact {
		ss, st = e.statAt, e.statAt+int(e.npairs)
		if st > len(r.PairRow) {
			return fmt.Errorf("sidecar: %d statistics entries, fewer than the (uid, agent) pairs", len(r.PairRow))
		}
		for p, row := range r.PairRow[ss:st] {
			if int(row) != s+int(e.first[p]) {
				return fmt.Errorf("sidecar: statistics entry %d is for row %d, the pair's first row is %d", ss+p, row, s+int(e.first[p]))
			}
		}
		e.statAt = st
	}
	for _, c := range []struct {
		name string
		typ  format.Type
		f32  []float32
		f64  []float64
		i32  []int32
	}{
		{"advantage", format.Float, r.Advantage[s:t], nil, nil},
		{"baseline_mean", format.Double, nil, r.BaselineMean[ss:st], nil},
		{"baseline_std", format.Double, nil, r.BaselineStd[ss:st], nil},
		{"group_size", format.Int32, nil, nil, r.GroupSize[ss:st]},
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
	if f32 != nil {
		// Advantages: one value per (uid, agent, score), so a dictionary would hold about one
		// entry per (uid, agent) pair and cost a lookup a row for a byte or two a row. PLAIN,
		// uncompressed: a copy.
		f32 = f32[:n]
		mn, mx := f32[0], f32[0]
		for _, v := range f32 { // finite (checked by encode): plain comparisons
			if v < mn {
				mn = v
			}
			if v > mx {
				mx = v
			}
		}
		e.fillLen = 4 * n
		e.fill = func(dst []byte) {
			if littleEndian {
				copy(dst, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f32))), 4*len(f32)))
				return
			}
			for i, v := range f32 {
				binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
			}
		}
		return e.column(name, typ, n, nil, 0, format.Plain, nil, le32(math.Float32bits(mn)), le32(math.Float32bits(mx)))
	}
	e.idxMap = nil
	// The values' bits (the dictionary's keys).
	vb := grow(e.bits, n)
	e.bits = vb
	if e.perPair {
		// One value per (uid, agent) pair and row group: read it once per pair, at the pair's
		// first row or, for compact statistics (estimators.Result.SparseStats), entry p.
		pv := grow(e.pairVal, int(e.npairs))
		e.pairVal = pv
		for p, i := range e.first[:len(pv)] {
			if e.compact { // entry p is pair p's
				i = int32(p)
			}
			if f64 != nil {
				pv[p] = math.Float64bits(f64[i])
			} else {
				pv[p] = uint64(uint32(i32[i]))
			}
		}
		if e.pairDict(pv, n) {
			return e.dictValues(name, typ, n, f64 != nil)
		}
		// Too many distinct values for a dictionary: PLAIN, each row its pair's value.
		for i, p := range e.pair[:n] {
			vb[i] = pv[p]
		}
	} else {
		if f64 != nil {
			for i, v := range f64[:n] {
				vb[i] = math.Float64bits(v)
			}
		} else {
			for i, v := range i32[:n] {
				vb[i] = uint64(uint32(v))
			}
		}
		// Statistics are usually constant per pair.
		if e.pairDictIndex(vb) || e.dictIndex(grp, ag, vb) {
			return e.dictValues(name, typ, n, f64 != nil)
		}
	}
	lo, hi := minMax(typ, vb)
	e.raw = e.raw[:0]
	for _, v := range vb {
		if f64 != nil {
			e.raw = binary.LittleEndian.AppendUint64(e.raw, v)
		} else {
			e.raw = binary.LittleEndian.AppendUint32(e.raw, uint32(v))
		}
	}
	return e.column(name, typ, n, nil, 0, format.Plain, e.raw, lo, hi)
}

// dictValues writes a dictionary-encoded column whose dictionary is e.cache.values (8-byte
// values when wide, else 4-byte) and whose indices are set (e.idx or e.idxMap); its
// statistics are over the dictionary (a quarter of the rows at most).
func (e *sidecarEncoder) dictValues(name string, typ format.Type, n int, wide bool) (format.ColumnChunk, error) {
	vals := e.cache.values
	lo, hi := minMax(typ, vals)
	dict := make([]byte, 0, len(vals)*8)
	for _, v := range vals {
		if wide {
			dict = binary.LittleEndian.AppendUint64(dict, v)
		} else {
			dict = binary.LittleEndian.AppendUint32(dict, uint32(v))
		}
	}
	return e.dictColumn(name, typ, n, dict, len(vals), lo, hi)
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
	e.first = e.first[:0]
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
			e.first = append(e.first, int32(i))
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
	pair := e.pair[:n]
	// Pairs are numbered in order of first appearance: a row's pair is either the next new
	// one or one seen before.
	next := int32(0)
	for i, v := range vals {
		p := pair[i]
		if p == next {
			pv[p] = v
			next++
		} else if pv[p] != v {
			return false
		}
	}
	return e.pairDict(pv, n)
}

// pairDict numbers the distinct values of pv (one per pair) for a dictionary (in c.values)
// and sets e.idxMap; it reports false when the dictionary would hold more than n/4 values.
func (e *sidecarEncoder) pairDict(pv []uint64, n int) bool {
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
	e.idxMap = pd // row i's index is pd[e.pair[i]]
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
	if e.idxMap != nil {
		out := grow(e.idx, n)
		m := e.idxMap
		for i, p := range e.pair[:n] {
			out[i] = m[p]
		}
		e.idx, e.idxMap = out, nil
	}
	return e.indexColumn(name, typ, n, dict, dictN, e.idx, lo, hi)
}

// indexColumn writes a dictionary page (dict, PLAIN, dictN values) and a data page of the
// indices idx (all below dictN), bit-packed in one run of the RLE/bit-packed hybrid encoding
// (RLE_DICTIONARY): the indices of these columns seldom repeat in runs of eight.
func (e *sidecarEncoder) indexColumn(name string, typ format.Type, n int, dict []byte, dictN int, idx []int32, lo, hi []byte) (format.ColumnChunk, error) {
	// Indices are below dictN: its bit length is the page's bit width.
	w := bits.Len32(uint32(max(dictN-1, 0)))
	e.tmp = appendBitPacked(append(e.tmp[:0], byte(w)), idx, uint(w))
	return e.column(name, typ, n, dict, dictN, format.RLEDictionary, e.tmp, lo, hi)
}

// column appends one column chunk: an optional dictionary page, then one data page holding
// the encoded values data.
func (e *sidecarEncoder) column(name string, typ format.Type, n int, dict []byte, dictN int, enc format.Encoding, data, lo, hi []byte) (format.ColumnChunk, error) {
	// Dictionary indices and delta-encoded ids are already compact (and nearly incompressible):
	// zstd would spend more time on them than on everything else. Only PLAIN statistics
	// columns (too many distinct values for a dictionary) are compressed.
	codec := format.Uncompressed
	if enc == format.Plain && typ != format.Float {
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
	if body == nil && e.fill != nil && codec == format.Uncompressed {
		// The body is written in place after the header: e.fill writes its e.fillLen bytes.
		size := e.fillLen
		h.UncompressedPageSize, h.CompressedPageSize = int32(size), int32(size)
		e.hdrBuf.Reset()
		if err := e.hdr.Encode(h); err != nil {
			return 0, 0, err
		}
		hl := int64(e.hdrBuf.Len())
		e.out = append(e.out, e.hdrBuf.Bytes()...)
		at := len(e.out)
		e.out = extendBytes(e.out, size)
		e.fill(e.out[at:])
		e.fill = nil
		return hl + int64(size), hl + int64(size), nil
	}
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

// consecutive reports whether ids count up by one.
func consecutive(ids []int64) bool {
	if len(ids) == 0 {
		return true
	}
	base := ids[0]
	ok := true
	for i, v := range ids {
		ok = ok && v == base+int64(i)
	}
	return ok
}

// Block layout of the DELTA_BINARY_PACKED pages appendConsecutiveDelta writes (parquet-go's).
const (
	deltaBlock      = 128
	deltaMiniBlocks = 4
)

// appendConsecutiveDelta appends the DELTA_BINARY_PACKED encoding of the n values first,
// first+1, …: every delta is 1, so each block is its minimum delta and four zero bit widths.
func appendConsecutiveDelta(dst []byte, first int64, n int) []byte {
	dst = binary.AppendUvarint(dst, deltaBlock)
	dst = binary.AppendUvarint(dst, deltaMiniBlocks)
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = binary.AppendVarint(dst, first)
	for left := n - 1; left > 0; left -= deltaBlock {
		dst = binary.AppendVarint(dst, 1)
		dst = append(dst, 0, 0, 0, 0)
	}
	return dst
}

// appendRLERun appends an RLE run of the hybrid encoding: count repetitions of v, stored in
// ceil(w/8) bytes.
func appendRLERun(dst []byte, v uint32, count, w int) []byte {
	dst = binary.AppendUvarint(dst, uint64(count)<<1)
	for b := 0; b < (w+7)/8; b++ {
		dst = append(dst, byte(v>>(8*b)))
	}
	return dst
}

// appendBitPacked appends vals (each below 2^w, w ≤ 32) as one bit-packed run of the
// RLE/bit-packed hybrid encoding: the header, then ceil(len/8) groups of eight values packed
// LSB first in w bytes each (the last group padded with zeros).
func appendBitPacked(dst []byte, vals []int32, w uint) []byte {
	n := len(vals)
	groups := (n + 7) / 8
	dst = binary.AppendUvarint(dst, uint64(groups)<<1|1)
	if w == 0 || groups == 0 {
		return dst
	}
	start := len(dst)
	size := groups * int(w)
	// 16 bytes of slack: a group is written as two 8-byte words.
	if cap(dst)-start < size+16 {
		dst = append(dst, make([]byte, size+16)...)
	}
	out := dst[start : start+size+16]
	full := n &^ 7
	pos := 0
	if w <= 16 {
		// Eight values: the first four in lo (4w ≤ 64 bits), the last four in hi, which
		// continues at bit 4w (shifts by 64 give 0 in Go, which covers w = 16).
		sh := 4 * w
		for i := 0; i < full; i += 8 {
			v := vals[i : i+8 : i+8]
			lo := uint64(uint32(v[0])) | uint64(uint32(v[1]))<<w | uint64(uint32(v[2]))<<(2*w) | uint64(uint32(v[3]))<<(3*w)
			hi := uint64(uint32(v[4])) | uint64(uint32(v[5]))<<w | uint64(uint32(v[6]))<<(2*w) | uint64(uint32(v[7]))<<(3*w)
			binary.LittleEndian.PutUint64(out[pos:], lo|hi<<sh)
			binary.LittleEndian.PutUint64(out[pos+8:], hi>>(64-sh))
			pos += int(w)
		}
	} else {
		full = 0
	}
	// The rest (and every value when w > 16) bit by bit through an accumulator.
	var acc uint64
	var nb uint
	for _, v := range vals[full:] {
		x := uint64(uint32(v))
		acc |= x << nb
		nb += w
		if nb >= 64 {
			binary.LittleEndian.PutUint64(out[pos:], acc)
			pos += 8
			nb -= 64
			acc = x >> (w - nb)
		}
	}
	binary.LittleEndian.PutUint64(out[pos:], acc)
	if end := pos + 8; end < len(out) {
		clear(out[end:])
	}
	return dst[:start+size]
}

// littleEndian reports whether this machine stores a float32 as PLAIN pages do.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// extendBytes returns b with n more bytes (their values unspecified).
func extendBytes(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	return append(b, make([]byte, n)...)
}
