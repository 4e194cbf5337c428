package model

import (
	"sync"
)

// BlockedGEMM is a cache-blocked GEMM around a 6×16 register-tile
// micro-kernel: AVX2/FMA assembly on amd64 CPUs that have it, portable Go
// elsewhere; on CPUs with AVX-512 four adjacent strips run at once as a
// 6×64 tile (one zmm register a row of 16 columns, each element of A
// broadcast once for the 64), two at the edges as a 6×32 one. op(B) is packed into strips
// of 16 columns in one of two ways: for a product of few rows (at most
// streamMaxRows) and a large op(B), such as an input gradient dY·W, each
// task owns a panel of columns and packs it one k block at a time into its
// own cache-resident scratch before computing every row of the panel
// (panels); otherwise all of op(B) is packed once per call by all cores and
// tiles of C (blocks of rows × blocks of columns) are computed by a pool of
// goroutines, a group of k blocks at a time (in k order), each tile owned
// by one goroutine (shared). A transposed A is packed by the task that uses
// it, a row block and a k block at a time, into strips of 6 rows; a plain
// (row-major) A is read in place through its stride (in shared, each strip
// of 6 rows through a group's k blocks before the next; only a ragged last
// strip of rows is copied into a zero-padded tile). Every element of C is
// accumulated over k in the same order (k blocks of 256, each a sequential
// FMA chain from +0, the first block stored as alpha·acc or added, later
// blocks added with one FMA) whatever m, n, the layout, the split, the
// scheduling and the assembly kernel (6×16 AVX2, 6×32 or 6×64 AVX-512): results
// are deterministic, the same on machines with and without AVX-512, and
// each row of C depends only on the matching row of op(A).
type BlockedGEMM struct {
	// avx2Only keeps the 6×16 AVX2 kernel on a CPU with AVX-512 (to compare
	// the two: their bits are the same).
	avx2Only bool
	// pairsOnly keeps the 6×32 AVX-512 tiles, without the 6×64 ones (to
	// compare them: their bits are the same).
	pairsOnly bool
	// tileCalls makes one kernel call a 6×16 tile instead of runs of them
	// (to compare them: their bits are the same).
	tileCalls bool
}

const (
	mr = 6
	nr = 16
	kc = 256 // depth of a k block
	mc = 48  // rows of a block of C (multiple of mr)
)

// packPoolA holds the edge strips and a transposed A's packed blocks (one
// per tile task); packed B (one per call or per panel task) comes from the
// scratch pools, by size class.
var packPoolA = sync.Pool{New: func() any { s := make([]float32, 0, mr*kc); return &s }}

func getBuf(pool *sync.Pool, n int) *[]float32 {
	p := pool.Get().(*[]float32)
	if cap(*p) < n {
		*p = make([]float32, n)
	}
	*p = (*p)[:n]
	return p
}

// Sgemm implements GEMM.
func (g BlockedGEMM) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemm(g, transA, m, n, k, alpha, a, lda, func(dst []float32, pc, kcur, jc, ncur int) {
		packB(dst, transB, b, ldb, pc, kcur, jc, ncur)
	}, beta, c, ldc)
}

// BlockedGEMMAVX2 is BlockedGEMM with the 6×16 AVX2 kernel only, even
// where AVX-512 exists: the same bits, for comparing the two kernels.
func BlockedGEMMAVX2() BlockedGEMM { return BlockedGEMM{avx2Only: true} }

// wide reports whether the 6×32 AVX-512 tiles run.
func (g BlockedGEMM) wide() bool { return hasAVX512 && !g.avx2Only }

// quad reports whether the 6×64 AVX-512 tiles run.
func (g BlockedGEMM) quad() bool { return g.wide() && !g.pairsOnly }

// sgemm is Sgemm with op(B) reached only through pack, which writes depth
// [pc, pc+kcur) × columns [jc, jc+ncur) of op(B) in packB's layout.
func sgemm(g BlockedGEMM, transA bool, m, n, k int, alpha float32, a []float32, lda int, pack func(dst []float32, pc, kcur, jc, ncur int), beta float32, c []float32, ldc int) {
	if m <= 0 || n <= 0 {
		return
	}
	// With beta = 0 and work to do, the first k block overwrites C instead
	// of clearing it first.
	overwrite := beta == 0 && k > 0 && alpha != 0
	if beta != 1 && !overwrite {
		scaleC(m, n, beta, c, ldc)
	}
	if k <= 0 || alpha == 0 {
		return
	}
	j := gemmJob{wide: g.wide(), quad: g.quad(), runs: !g.wide() && !g.tileCalls, transA: transA, m: m, n: n, k: k, alpha: alpha, a: a, lda: lda, pack: pack, c: c, ldc: ldc, overwrite: overwrite}
	j.nstrips = (n + nr - 1) / nr
	j.par = 2*m*n*k >= 1<<20 && workers() > 1
	if j.streamB() {
		j.panels()
		return
	}
	j.shared()
}

// scaleC multiplies C by beta (beta = 0 clears it).
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
		} else {
			for j := range row {
				row[j] *= beta
			}
		}
	}
}

// gemmJob is one call of sgemm: its operands and how its work is split.
type gemmJob struct {
	wide, quad bool
	runs       bool // the 6×16 tiles in runs (runs16)
	transA     bool
	m, n, k    int
	alpha      float32
	a          []float32
	lda        int
	pack       func(dst []float32, pc, kcur, jc, ncur int)
	c          []float32
	ldc        int
	overwrite  bool
	nstrips    int
	par        bool
}

// run runs fn(t) for t in [0, tasks), on all cores when the call is large.
func (j *gemmJob) run(tasks int, fn func(t int)) {
	if !j.par || tasks == 1 {
		for t := 0; t < tasks; t++ {
			fn(t)
		}
		return
	}
	parallelTasks(tasks, func(_, t int) { fn(t) })
}

// streamB reports whether op(B) is packed a panel and a k block at a time
// inside each task (panels) rather than all at once and shared (shared): for
// few rows of C and a large op(B) (an input gradient dY·W), where packing
// all of B would move more bytes than the product's arithmetic reuses.
func (j *gemmJob) streamB() bool {
	return j.m <= streamMaxRows && j.nstrips*nr*j.k >= streamMinB && j.nstrips >= 4
}

// GEMMPanelRows is the most rows of C for which BlockedGEMM streams a large
// op(B) in panels instead of packing all of it (for memory estimates).
func GEMMPanelRows() int { return streamMaxRows }

const (
	streamMaxRows = 512     // rows of C whose panel of C stays in L2
	streamMinB    = 1 << 18 // floats of op(B) worth streaming
)

// panels computes C by panels of columns, one task each: for each k block
// in order the task packs its panel of op(B) (and, transposed, all of A's
// k block) into its own scratch, cache-resident, and computes every row of
// its panel. No scratch as large as op(B), no barrier between k blocks.
func (j *gemmJob) panels() {
	np := 1
	if j.par {
		np = workers()
	}
	per := (j.nstrips + np - 1) / np
	switch {
	case j.quad:
		per = (per + 3) &^ 3 // whole quads of strips
	case j.wide:
		per += per & 1 // whole pairs of strips
	}
	np = (j.nstrips + per - 1) / per
	mBlocks := (j.m + mc - 1) / mc
	j.run(np, func(t int) {
		js0, js1 := t*per, min(j.nstrips, (t+1)*per)
		bp := getScratch((js1 - js0) * nr * kc)
		defer putScratch(bp)
		var ap, sp *[]float32
		if j.transA {
			ap = getScratch(mc * kc)
			defer putScratch(ap)
		}
		for pc := 0; pc < j.k; pc += kc {
			kcur := min(kc, j.k-pc)
			j.pack((*bp)[:(js1-js0)*nr*kcur], pc, kcur, js0*nr, min(j.n, js1*nr)-js0*nr)
			// A panel wider than a core's cache runs in groups of strips that
			// fit, every row block over one group before the next.
			group := js1 - js0
			if !j.transA {
				group = max(4, bGroupFloats/(nr*kcur)&^3) // whole quads
			}
			for jg := js0; jg < js1; jg += group {
				for ib := 0; ib < mBlocks; ib++ {
					var apb []float32
					if j.transA {
						apb = *ap
						j.packAT(apb, ib, pc, kcur)
					}
					sp = j.block(pc, kcur, ib, 0, j.rowStrips(ib), jg, min(js1, jg+group), js0, *bp, apb, sp)
				}
			}
		}
		if sp != nil {
			packPoolA.Put(sp)
		}
	})
}

// shared packs all of op(B) once, by all cores, then computes tiles of C
// (blocks of rows × blocks of columns, one task each, a column block's
// row blocks one after the other) over groups of k
// blocks whose packed B fits in a core's cache (every row block reuses it
// while it is there); the groups run in k order, so each element's chain
// keeps its order. A transposed A is packed by each task, a k block of its
// row block at a time.
func (j *gemmJob) shared() {
	nstrips, k := j.nstrips, j.k
	npad := nstrips * nr
	kBlocks := (k + kc - 1) / kc
	mBlocks := (j.m + mc - 1) / mc
	// Split columns too when there are few row blocks, so every core gets
	// work (tiles never share an element of C).
	nBlocks := 1
	if j.par {
		for mBlocks*nBlocks < 4*workers() && (nstrips+nBlocks)/(nBlocks+1) >= 4 {
			nBlocks++
		}
	}
	stripsPer := (nstrips + nBlocks - 1) / nBlocks
	// And in blocks whose packed B (a k block of them) stays in a core's
	// cache: the tiles run a column block at a time, every row block reusing it.
	stripsPer = min(stripsPer, max(4, bGroupFloats/(nr*kc)))
	nBlocks = (nstrips + stripsPer - 1) / stripsPer

	// B: for each k block pc, nstrips strips of kcur×nr at pc*npad, packed
	// per k block over ranges of strips (a plain B row by row, sequential
	// access; a transposed B strip by strip).
	bp := getScratch(npad * k) // by size class: calls of many shapes reuse buffers
	defer putScratch(bp)
	bSplit := 1
	for j.par && kBlocks*bSplit < 2*workers() && bSplit < nstrips {
		bSplit++
	}
	stripsPerB := (nstrips + bSplit - 1) / bSplit
	j.run(kBlocks*bSplit, func(t int) {
		pc, part := t/bSplit*kc, t%bSplit
		kcur := min(kc, k-pc)
		js0, js1 := part*stripsPerB, min(nstrips, (part+1)*stripsPerB)
		if js0 < js1 {
			off := pc*npad + js0*nr*kcur
			j.pack((*bp)[off:off+(js1-js0)*nr*kcur], pc, kcur, js0*nr, min(j.n, js1*nr)-js0*nr)
		}
	})

	tiles := func(t, kLo, kHi int) {
		ib, jb := t%mBlocks, t/mBlocks
		js0, js1 := jb*stripsPer, min(nstrips, (jb+1)*stripsPer)
		var ap, sp *[]float32
		if j.transA {
			ap = getBuf(&packPoolA, mc*kc)
		}
		// A read in place: each strip of rows runs through the group's k
		// blocks before the next strip starts, so only its mr rows of A
		// stream from memory at a time (the hardware prefetchers follow a
		// few sequential streams, not a row block's mc).
		msr := j.rowStrips(ib)
		step := 1
		if j.transA {
			step = msr
		}
		for is := 0; is < msr; is += step {
			for pc := kLo; pc < kHi; pc += kc {
				kcur := min(kc, k-pc)
				var apb []float32
				if j.transA {
					apb = *ap
					j.packAT(apb, ib, pc, kcur)
				}
				sp = j.block(pc, kcur, ib, is, is+step, js0, js1, 0, (*bp)[pc*npad:], apb, sp)
			}
		}
		for _, p := range []*[]float32{ap, sp} {
			if p != nil {
				packPoolA.Put(p)
			}
		}
	}
	groupK := kc * max(1, bGroupFloats/(npad*kc))
	for g0 := 0; g0 < k; g0 += groupK {
		j.run(mBlocks*nBlocks, func(t int) { tiles(t, g0, min(k, g0+groupK)) })
	}
}

// packAT packs row block ib of a transposed A (stored k×m) at depth
// [pc, pc+kcur) into strips of mr rows: strip s at s*mr*kcur, element
// (p, r) at p*mr + r, the ragged last strip zero-padded. It reads whole
// runs of a stored row (sequential access).
func (j *gemmJob) packAT(dst []float32, ib, pc, kcur int) {
	ic := ib * mc
	mcur := min(mc, j.m-ic)
	msr := j.rowStrips(ib)
	full := mcur / mr
	for p := 0; p < kcur; p++ {
		src := j.a[(pc+p)*j.lda+ic:][:mcur]
		scatterRows(dst[p*mr:], mr*kcur, src, full)
		if full < msr {
			q := dst[full*mr*kcur+p*mr:][:mr:mr]
			clear(q)
			copy(q, src[full*mr:])
		}
	}
}

// block computes strips of rows [is0, is1) of row block ib of C × strips
// [js0, js1) for the k block at pc (kcur deep). Strip js of op(B) is at bs[(js-jsOrg)*nr*kcur:]; a
// transposed A is packed in ap (packAT's layout), a plain one read in place
// (its ragged last strip copied into *sp, allocated on first use and
// returned for the caller to keep or release).
func (j *gemmJob) block(pc, kcur, ib, is0, is1, js0, js1, jsOrg int, bs, ap []float32, sp *[]float32) *[]float32 {
	if j.runs {
		js0 = j.runs16(pc, kcur, ib, is0, is1, js0, js1, jsOrg, bs, ap)
	}
	ic := ib * mc
	mcur := min(mc, j.m-ic)
	msr := min(is1, j.rowStrips(ib))
	store := j.overwrite && pc == 0
	for js := js0; js < js1; {
		// Four or two strips side by side make a 6×64 or a 6×32 tile.
		w := 1
		switch {
		case j.quad && js+3 < js1:
			w = 4
		case j.wide && js+1 < js1:
			w = 2
		}
		b := bs[(js-jsOrg)*nr*kcur : (js-jsOrg+w)*nr*kcur]
		is := is0
		if j.runs && js < j.n/nr {
			is = max(is0, min(msr, mcur/mr)) // runs16 did the full row strips
		}
		for ; is < msr; is++ {
			nrows := min(mr, mcur-is*mr)
			i0 := ic + is*mr
			var as []float32
			var rs, cs int
			switch {
			case j.transA:
				as, rs, cs = ap[is*mr*kcur:(is+1)*mr*kcur], 1, mr
			case nrows < mr:
				if sp == nil {
					sp = getBuf(&packPoolA, mr*kc)
				}
				if js == js0 {
					packAEdge((*sp)[:mr*kcur], j.a, j.lda, i0, nrows, pc, kcur)
				}
				as, rs, cs = (*sp)[:mr*kcur], 1, mr
			default:
				as, rs, cs = j.a[i0*j.lda+pc:], j.lda, 1
			}
			edgeTile(w, kcur, as, rs, cs, b, j.c[i0*j.ldc+js*nr:], j.ldc, nrows, min(w*nr, j.n-js*nr), j.alpha, store)
		}
		js += w
	}
	return sp
}

// runs16 computes block's full 6×16 tiles in runs (kernel6x16Run), for the
// AVX2 tile: with one full row strip, across its full strips of B, and
// returns the first strip it left; otherwise, for each full strip of B, down
// its full row strips (block skips those). block does the ragged tiles.
func (j *gemmJob) runs16(pc, kcur, ib, is0, is1, js0, js1, jsOrg int, bs, ap []float32) int {
	ic := ib * mc
	full := min(is1, min(mc, j.m-ic)/mr) // row strips [is0, full) are full
	jsFull := min(js1, j.n/nr)           // strips [js0, jsFull) of B are full
	if full <= is0 || jsFull <= js0 {
		return js0
	}
	store := j.overwrite && pc == 0
	var as []float32
	var rs, cs, anext int
	if j.transA {
		as, rs, cs, anext = ap[is0*mr*kcur:], 1, mr, mr*kcur
	} else {
		as, rs, cs, anext = j.a[(ic+is0*mr)*j.lda+pc:], j.lda, 1, mr*j.lda
	}
	c := j.c[(ic+is0*mr)*j.ldc+js0*nr:]
	b := bs[(js0-jsOrg)*nr*kcur:]
	if is1-is0 == 1 {
		kernel6x16Run(jsFull-js0, kcur, as, rs, cs, 0, b, nr*kcur, c, j.ldc, nr, j.alpha, store)
		return jsFull
	}
	for js := js0; js < jsFull; js++ {
		kernel6x16Run(full-is0, kcur, as, rs, cs, anext, b[(js-js0)*nr*kcur:], 0, c[(js-js0)*nr:], j.ldc, mr*j.ldc, j.alpha, store)
	}
	return js0
}

// rowStrips is how many strips of mr rows row block ib of C has.
func (j *gemmJob) rowStrips(ib int) int { return (min(mc, j.m-ib*mc) + mr - 1) / mr }

// bGroupFloats bounds the packed B that one pass over the tiles of C reads.
const bGroupFloats = 1 << 18

// edgeTile computes a tile of C of nrows ≤ mr rows and ncols ≤ w·nr
// columns at c (row stride ldc) from w strips of op(B) (w = 4: kernel6x64,
// 2: kernel6x32, 1: kernel6x16); through a full-size copy when the tile is
// ragged (the strips are zero-padded, so the copy's extra columns are
// computed and dropped).
func edgeTile(w, kcur int, as []float32, rs, cs int, bs []float32, c []float32, ldc, nrows, ncols int, alpha float32, store bool) {
	kern := func(c []float32, ldc int) {
		switch w {
		case 4:
			kernel6x64(kcur, as, rs, cs, bs, nr*kcur, nr, c, ldc, alpha, store)
		case 2:
			kernel6x32(true, kcur, as, rs, cs, bs, nr*kcur, nr, c, ldc, alpha, store)
		default:
			kernel6x16(kcur, as, rs, cs, bs, nr, c, ldc, alpha, store)
		}
	}
	cols := w * nr
	if nrows == mr && ncols == cols {
		kern(c[:(mr-1)*ldc+cols], ldc)
		return
	}
	var edge [mr * 4 * nr]float32
	if !store {
		for r := 0; r < nrows; r++ {
			copy(edge[r*cols:r*cols+ncols], c[r*ldc:r*ldc+ncols])
		}
	}
	kern(edge[:mr*cols], cols)
	for r := 0; r < nrows; r++ {
		copy(c[r*ldc:r*ldc+ncols], edge[r*cols:r*cols+ncols])
	}
}

// packAEdge packs the last, ragged strip of a plain (row-major) A: rows
// [i0, i0+rows), rows < mr, × depth [pc, pc+kcur) into a zero-padded strip:
// dst[p*mr + r] = A(i0+r, pc+p).
func packAEdge(dst []float32, a []float32, lda, i0, rows, pc, kcur int) {
	clear(dst[:mr*kcur])
	for r := 0; r < rows; r++ {
		for p, v := range a[(i0+r)*lda+pc:][:kcur] {
			dst[p*mr+r] = v
		}
	}
}

// packB packs depth [pc, pc+kcur) × columns [jc, jc+ncur) of op(B) into
// strips of nr columns: dst[s*nr*kcur + p*nr + c] = B(pc+p, jc+s*nr+c),
// zero-padded.
func packB(dst []float32, trans bool, b []float32, ldb, pc, kcur, jc, ncur int) {
	nstrips := (ncur + nr - 1) / nr
	full := ncur / nr
	if trans {
		// A strip is the transpose of cols stored rows' runs of kcur.
		for s := 0; s < nstrips; s++ {
			d := dst[s*nr*kcur : (s+1)*nr*kcur]
			cols := min(nr, ncur-s*nr)
			if cols < nr {
				clear(d)
			}
			transpose(d, nr, b[(jc+s*nr)*ldb+pc:], ldb, cols, kcur)
		}
		return
	}
	if full < nstrips {
		clear(dst[full*nr*kcur : nstrips*nr*kcur])
	}
	// packRows rows at a time: each strip's part of them is one contiguous
	// run of dst, and the rows are read as a few short sequential streams.
	// (Row by row, each row's groups of nr landed kcur·nr floats apart, in one
	// cache set, and packing ran at half the speed or less.)
	for p0 := 0; p0 < kcur; p0 += packRows {
		rows := min(packRows, kcur-p0)
		gatherStrips(dst[p0*nr:], nr*kcur, b[(pc+p0)*ldb+jc:], ldb, rows, full)
		if full < nstrips {
			for p := p0; p < p0+rows; p++ {
				copy(dst[full*nr*kcur+p*nr:], b[(pc+p)*ldb+jc+full*nr:][:ncur-full*nr])
			}
		}
	}
}

// kernel6x16Loop is kernel6x16Run one kernel6x16 call a tile.
func kernel6x16Loop(n, kcur int, a []float32, rs, cs, anext int, b []float32, bnext int, c []float32, ldc, cnext int, alpha float32, store bool) {
	for t := 0; t < n; t++ {
		kernel6x16(kcur, a[t*anext:], rs, cs, b[t*bnext:], nr, c[t*cnext:], ldc, alpha, store)
	}
}

// packRows is how many rows of a plain B packB copies per pass.
const packRows = 16

// kernel6x16Go is the portable micro-kernel:
// C[r*ldc+j] += alpha · Σ_p a[r*rs+p*cs]·b[p*ldb+j] (store: C = alpha · Σ).
func kernel6x16Go(kcur int, a []float32, rs, cs int, b []float32, ldb int, c []float32, ldc int, alpha float32, store bool) {
	var acc [mr * nr]float32
	for p := 0; p < kcur; p++ {
		bp := b[p*ldb : p*ldb+nr]
		for r := 0; r < mr; r++ {
			av := a[r*rs+p*cs]
			row := acc[r*nr : r*nr+nr]
			for j, bv := range bp {
				row[j] += av * bv
			}
		}
	}
	for r := 0; r < mr; r++ {
		cr := c[r*ldc : r*ldc+nr]
		for j, v := range acc[r*nr : r*nr+nr] {
			if store {
				cr[j] = alpha * v
			} else {
				cr[j] += alpha * v
			}
		}
	}
}

func scatterRowsGo(dst []float32, dstStride int, src []float32, count int) {
	for s := 0; s < count; s++ {
		copy(dst[s*dstStride:s*dstStride+mr], src[s*mr:s*mr+mr])
	}
}

// gatherStripsGo is the portable gatherStrips.
func gatherStripsGo(dst []float32, dstStride int, src []float32, lds, rows, strips int) {
	for s := 0; s < strips; s++ {
		for r := 0; r < rows; r++ {
			copy(dst[s*dstStride+r*nr:][:nr], src[r*lds+s*nr:][:nr])
		}
	}
}
