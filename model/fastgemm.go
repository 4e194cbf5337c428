package model

import (
	"sync"
	"sync/atomic"
)

// BlockedGEMM is a packed, cache-blocked GEMM around a 6×16 register-tile
// micro-kernel: AVX2/FMA assembly on amd64 CPUs that have it, portable Go
// elsewhere. op(B) is packed once; blocks of rows of C are packed and
// computed by a pool of goroutines, each block owned by one goroutine. Every
// element of C is accumulated over k in the same order (k blocks of 256, each
// a sequential FMA chain) whatever m, n and the scheduling: results are
// deterministic and each row of C depends only on the matching row of op(A).
type BlockedGEMM struct{}

const (
	mr = 6
	nr = 16
	kc = 256 // depth of a packed panel
	mc = 48  // rows of a packed A block (multiple of mr)
)

var packPool = sync.Pool{New: func() any { s := make([]float32, 0, mc*kc); return &s }}

func getBuf(n int) *[]float32 {
	p := packPool.Get().(*[]float32)
	if cap(*p) < n {
		*p = make([]float32, n)
	}
	*p = (*p)[:n]
	return p
}

// Sgemm implements GEMM.
func (BlockedGEMM) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m <= 0 || n <= 0 {
		return
	}
	if beta != 1 {
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
	if k <= 0 || alpha == 0 {
		return
	}
	nstrips := (n + nr - 1) / nr
	npad := nstrips * nr
	// Packed B: for each k block, nstrips strips of kcur×nr.
	bp := getBuf(npad * k)
	defer packPool.Put(bp)
	for pc := 0; pc < k; pc += kc {
		kcur := min(kc, k-pc)
		packB((*bp)[pc*npad:pc*npad+kcur*npad], transB, b, ldb, pc, kcur, 0, n)
	}
	nBlocks := (m + mc - 1) / mc
	block := func(ib int) {
		ic := ib * mc
		mcur := min(mc, m-ic)
		msr := (mcur + mr - 1) / mr
		ap := getBuf(msr * mr * kc)
		var edge [mr * nr]float32
		for pc := 0; pc < k; pc += kc {
			kcur := min(kc, k-pc)
			packA((*ap)[:msr*mr*kcur], transA, a, lda, ic, mcur, pc, kcur)
			bpc := (*bp)[pc*npad:]
			for js := 0; js < nstrips; js++ {
				bs := bpc[js*nr*kcur : (js+1)*nr*kcur]
				ncols := min(nr, n-js*nr)
				for is := 0; is < msr; is++ {
					as := (*ap)[is*mr*kcur : (is+1)*mr*kcur]
					nrows := min(mr, mcur-is*mr)
					c0 := (ic+is*mr)*ldc + js*nr
					if nrows == mr && ncols == nr {
						kernel6x16(kcur, as, bs, c[c0:c0+(mr-1)*ldc+nr], ldc, alpha)
						continue
					}
					clear(edge[:])
					for r := 0; r < nrows; r++ {
						copy(edge[r*nr:r*nr+ncols], c[c0+r*ldc:c0+r*ldc+ncols])
					}
					kernel6x16(kcur, as, bs, edge[:], nr, alpha)
					for r := 0; r < nrows; r++ {
						copy(c[c0+r*ldc:c0+r*ldc+ncols], edge[r*nr:r*nr+ncols])
					}
				}
			}
		}
		packPool.Put(ap)
	}
	if nBlocks == 1 || 2*m*n*k < 1<<20 || workers() == 1 {
		for ib := 0; ib < nBlocks; ib++ {
			block(ib)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := min(workers(), nBlocks); w > 0; w-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ib := int(next.Add(1) - 1)
				if ib >= nBlocks {
					return
				}
				block(ib)
			}
		}()
	}
	wg.Wait()
}

// packA packs rows [ic, ic+mcur) × depth [pc, pc+kcur) of op(A) into strips
// of mr rows: dst[s*mr*kcur + p*mr + r] = A(ic+s*mr+r, pc+p), zero-padded.
func packA(dst []float32, trans bool, a []float32, lda, ic, mcur, pc, kcur int) {
	msr := (mcur + mr - 1) / mr
	if trans {
		full := mcur / mr
		if full < msr {
			clear(dst[full*mr*kcur : msr*mr*kcur])
		}
		for p := 0; p < kcur; p++ {
			src := a[(pc+p)*lda+ic:][:mcur]
			for s := 0; s < full; s++ {
				q := dst[s*mr*kcur+p*mr:][:mr:mr]
				v := src[s*mr : s*mr+mr : s*mr+mr]
				q[0], q[1], q[2], q[3], q[4], q[5] = v[0], v[1], v[2], v[3], v[4], v[5]
			}
			if full < msr {
				copy(dst[full*mr*kcur+p*mr:], src[full*mr:])
			}
		}
		return
	}
	for s := 0; s < msr; s++ {
		d := dst[s*mr*kcur : (s+1)*mr*kcur]
		rows := min(mr, mcur-s*mr)
		i0 := ic + s*mr
		if rows == mr {
			r0 := a[(i0+0)*lda+pc:][:kcur]
			r1 := a[(i0+1)*lda+pc:][:kcur]
			r2 := a[(i0+2)*lda+pc:][:kcur]
			r3 := a[(i0+3)*lda+pc:][:kcur]
			r4 := a[(i0+4)*lda+pc:][:kcur]
			r5 := a[(i0+5)*lda+pc:][:kcur]
			for p := range r0 {
				q := d[p*mr : p*mr+mr : p*mr+mr]
				q[0], q[1], q[2], q[3], q[4], q[5] = r0[p], r1[p], r2[p], r3[p], r4[p], r5[p]
			}
			continue
		}
		clear(d)
		for r := 0; r < rows; r++ {
			for p, v := range a[(i0+r)*lda+pc:][:kcur] {
				d[p*mr+r] = v
			}
		}
	}
}

// packB packs depth [pc, pc+kcur) × columns [jc, jc+ncur) of op(B) into
// strips of nr columns: dst[s*nr*kcur + p*nr + c] = B(pc+p, jc+s*nr+c).
func packB(dst []float32, trans bool, b []float32, ldb, pc, kcur, jc, ncur int) {
	nstrips := (ncur + nr - 1) / nr
	for s := 0; s < nstrips; s++ {
		d := dst[s*nr*kcur : (s+1)*nr*kcur]
		cols := min(nr, ncur-s*nr)
		j0 := jc + s*nr
		if cols < nr {
			clear(d)
		}
		if !trans {
			for p := 0; p < kcur; p++ {
				copy(d[p*nr:p*nr+cols], b[(pc+p)*ldb+j0:][:cols])
			}
		} else {
			for c := 0; c < cols; c++ {
				for p, v := range b[(j0+c)*ldb+pc:][:kcur] {
					d[p*nr+c] = v
				}
			}
		}
	}
}

// kernel6x16Go is the portable micro-kernel:
// C[r*ldc+j] += alpha · Σ_p a[p*mr+r]·b[p*nr+j].
func kernel6x16Go(kcur int, a, b, c []float32, ldc int, alpha float32) {
	var acc [mr * nr]float32
	for p := 0; p < kcur; p++ {
		ap := a[p*mr : p*mr+mr]
		bp := b[p*nr : p*nr+nr]
		for r, av := range ap {
			row := acc[r*nr : r*nr+nr]
			for j, bv := range bp {
				row[j] += av * bv
			}
		}
	}
	for r := 0; r < mr; r++ {
		cr := c[r*ldc : r*ldc+nr]
		for j, v := range acc[r*nr : r*nr+nr] {
			cr[j] += alpha * v
		}
	}
}
