package model

import "math"

// The small-M path of linear: a decode step multiplies a few rows of x by
// the whole of W, where the blocked GEMM's 6×16 tile spends 15 of every 16
// multiply-adds on padding (one row of x fills one of the 16 columns). Here
// each W row is read once and 8 output rows are computed at a time, one per
// vector lane, every element with the blocked GEMM's own chain: per k block
// of kc, a sequential k-ordered FMA chain from +0, the first block stored
// (or added onto the bias) and later blocks added onto the running sum with
// one more FMA by alpha = 1. The bits are therefore those of the GEMM
// under linearT whatever the number of rows (the GEMM contract). On
// AVX-512 one row takes 16 outputs a vector (gemv512_amd64.s) with the
// same chains.

// gemvMaxRows is the most rows of x one pass over W takes (the assembly
// kernel's accumulators); more rows are handled in passes of this many.
const gemvMaxRows = 4

// smallRows is the most rows for which linear takes the small-M path
// (measured with BenchmarkSmallLinear on the Qwen2.5-0.5B shapes).
const smallRows = 4

// gemvLinear is linear's small-M path for float32 weights (bfloat16 ones
// take gemvStrips): y[n×out] = x[n×in]·Wᵀ (+ b), the same bits as linearT
// with BlockedGEMM. in must be positive.
func gemvLinear(x []float32, n, in int, W []float32, b []float32, out int, y []float32) {
	groups := out / 8
	// A chunk of output groups per goroutine of at least ~64k multiply-adds.
	minChunk := max(1, (1<<16)/(8*in*max(1, min(n, gemvMaxRows))))
	parallelRows(groups, minChunk, func(lo, hi int) {
		for g := lo; g < hi; {
			o := 8 * g
			if n == 1 && hi-g >= 4 { // four groups at once: four independent chains
				if b != nil {
					copy(y[o:o+32], b[o:o+32])
				}
				gemv32x1(in, W[o*in:(o+32)*in], in, x, y[o:o+32], b != nil)
				g += 4
				continue
			}
			if b != nil {
				for r := 0; r < n; r++ {
					copy(y[r*out+o:r*out+o+8], b[o:o+8])
				}
			}
			for r0 := 0; r0 < n; r0 += gemvMaxRows {
				gemv8(in, W[o*in:(o+8)*in], in, x[r0*in:], in, min(gemvMaxRows, n-r0), y[r0*out+o:], out, b != nil)
			}
			g++
		}
	})
	if tail := out - 8*groups; tail > 0 {
		gemvTail(x, n, in, W, b, out, y, 8*groups)
	}
}

// gemvTail computes outputs [o0, out), fewer than 8, through a zero-padded
// copy of their W rows (the padding's outputs are dropped).
func gemvTail(x []float32, n, in int, W []float32, b []float32, out int, y []float32, o0 int) {
	tail := out - o0
	w := make([]float32, 8*in)
	copy(w, W[o0*in:out*in])
	cb := getScratch(8 * n)
	defer putScratch(cb)
	c := *cb
	clear(c)
	if b != nil {
		for r := 0; r < n; r++ {
			copy(c[r*8:r*8+tail], b[o0:out])
		}
	}
	for r0 := 0; r0 < n; r0 += gemvMaxRows {
		gemv8(in, w, in, x[r0*in:], in, min(gemvMaxRows, n-r0), c[r0*8:], 8, b != nil)
	}
	for r := 0; r < n; r++ {
		copy(y[r*out+o0:(r+1)*out], c[r*8:r*8+tail])
	}
}

// widenBF16 is the float32 of bfloat16 bits h (exact).
func widenBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// gemv8Go is the portable kernel and the reference of gemv8AVX2: for the 8
// rows j of w and the n rows r of x, per k block of kc,
// s = Σ_p w[j*ldw+p]·x[r*ldx+p] in order, then c[r*ldc+j] = alpha·s
// (first block without add) or c[r*ldc+j] += alpha·s. Its arithmetic is
// written as kernel6x16Go's, so it matches BlockedGEMM's portable kernel
// under the same compiler.
func gemv8Go(k int, w []float32, ldw int, x []float32, ldx, n int, c []float32, ldc int, alpha float32, add bool) {
	for pc := 0; pc < k; pc += kc {
		kcur := min(kc, k-pc)
		for r := 0; r < n; r++ {
			xr := x[r*ldx+pc : r*ldx+pc+kcur]
			cr := c[r*ldc : r*ldc+8]
			for j := range cr {
				var acc float32
				for p, xv := range xr {
					acc += w[j*ldw+pc+p] * xv
				}
				if add || pc > 0 {
					cr[j] += alpha * acc
				} else {
					cr[j] = alpha * acc
				}
			}
		}
	}
}

// gemv32x1Go is gemv32x1's portable form: gemv8Go on each group of 8.
func gemv32x1Go(k int, w []float32, ldw int, x []float32, c []float32, add bool) {
	for g := 0; g < 4; g++ {
		gemv8Go(k, w[8*g*ldw:], ldw, x, k, 1, c[8*g:], 8, 1, add)
	}
}
