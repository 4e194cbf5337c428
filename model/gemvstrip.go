package model

// gemvStrips is linear's small-M path for a bfloat16 matrix packed in
// strips (bf16strips.go): y[n×out] = x[n×in]·Wᵀ (+ b), the bits of linearT
// over BlockedGEMM on the widened W (the chain of gemv.go's comment). Each
// strip's 16 outputs are one vector at every k, so no transpose is needed;
// rows of x beyond gemvMaxRows take further passes over a group of strips
// while it is in cache. in must be positive.
func gemvStrips(x []float32, n, in int, W bf16W, b []float32, out int, y []float32) {
	if b != nil {
		for r := 0; r < n; r++ {
			copy(y[r*out:(r+1)*out], b)
		}
	}
	off, o0 := 0, 0
	for _, rows := range W.segs {
		gemvSegment(x, n, in, W.bits[off:off+rows*in], rows, b != nil, y[o0:], out)
		off, o0 = off+rows*in, o0+rows
	}
}

// gemvSegment is gemvStrips on one tensor h [rows × in] into columns
// [0, rows) of y (row stride ldy); add: y holds the bias.
func gemvSegment(x []float32, n, in int, h []uint16, rows int, add bool, y []float32, ldy int) {
	full := rows / stripW
	// A chunk of strips per goroutine of at least ~64k multiply-adds.
	minChunk := max(1, (1<<16)/(stripW*in*min(n, gemvMaxRows)))
	parallelRows(full, minChunk, func(lo, hi int) {
		for s := lo; s < hi; {
			g := 1
			if hi-s >= stripsAtOnce {
				g = stripsAtOnce
			}
			for r0 := 0; r0 < n; r0 += gemvMaxRows {
				gemvStrip(g, in, h[s*stripW*in:], x[r0*in:], in, min(gemvMaxRows, n-r0), y[r0*ldy+s*stripW:], ldy, add)
			}
			s += g
		}
	})
	if tail := rows - full*stripW; tail > 0 {
		gemvStripTail(x, n, in, h[full*stripW*in:], tail, add, y[full*stripW:], ldy)
	}
}

// gemvStripTail computes a last strip of width < stripW through a copy
// padded with zeros to a full strip (the padding's outputs are dropped).
func gemvStripTail(x []float32, n, in int, h []uint16, width int, add bool, y []float32, ldy int) {
	w := make([]uint16, stripW*in)
	for k := 0; k < in; k++ {
		copy(w[k*stripW:], h[k*width:(k+1)*width])
	}
	c := make([]float32, n*stripW)
	if add {
		for r := 0; r < n; r++ {
			copy(c[r*stripW:], y[r*ldy:r*ldy+width])
		}
	}
	for r0 := 0; r0 < n; r0 += gemvMaxRows {
		gemvStrip(1, in, w, x[r0*in:], in, min(gemvMaxRows, n-r0), c[r0*stripW:], stripW, add)
	}
	for r := 0; r < n; r++ {
		copy(y[r*ldy:r*ldy+width], c[r*stripW:r*stripW+width])
	}
}

// gemvStripGo is the portable kernel and the reference of the assembly
// ones, on count full strips (the first at w, the next k·stripW apart) and
// n rows of x: per k block of kc, s = Σ_p W[o][p]·x[r][p] in order, then
// c[r*ldc+o] = alpha·s (first block without add) or c[r*ldc+o] += alpha·s.
// Its arithmetic is written as gemv8Go's and kernel6x16Go's.
func gemvStripGo(count, k int, w []uint16, x []float32, ldx, n int, c []float32, ldc int, alpha float32, add bool) {
	for pc := 0; pc < k; pc += kc {
		kcur := min(kc, k-pc)
		for r := 0; r < n; r++ {
			xr := x[r*ldx+pc : r*ldx+pc+kcur]
			cr := c[r*ldc : r*ldc+count*stripW]
			for o := range cr {
				ws := w[o/stripW*stripW*k+o%stripW:]
				var acc float32
				for p, xv := range xr {
					acc += widenBF16(ws[(pc+p)*stripW]) * xv
				}
				if add || pc > 0 {
					cr[o] += alpha * acc
				} else {
					cr[o] = alpha * acc
				}
			}
		}
	}
}
