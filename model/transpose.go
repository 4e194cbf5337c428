package model

// transposeRef writes dst[c*ldd+r] = src[r*lds+c] for r < rows, c < cols:
// the plain reference of transpose.
func transposeRef(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	for c := 0; c < cols; c++ {
		d := dst[c*ldd : c*ldd+rows]
		for r := range d {
			d[r] = src[r*lds+c]
		}
	}
}

// transpose is transposeRef by square tiles in registers where the CPU has
// AVX-512 (16×16, transpose16) or AVX2 (8×8, transpose8), the ragged edges by
// the reference.
func transpose(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	t, tile := transposeTile()
	if t == 0 || rows < t || cols < t {
		transposeRef(dst, ldd, src, lds, rows, cols)
		return
	}
	rt, ct := rows&^(t-1), cols&^(t-1)
	_ = src[(rows-1)*lds+cols-1]
	_ = dst[(cols-1)*ldd+rows-1]
	for r := 0; r < rt; r += t {
		for c := 0; c < ct; c += t {
			tile(&src[r*lds+c], lds, &dst[c*ldd+r], ldd)
		}
	}
	if ct < cols {
		transposeRef(dst[ct*ldd:], ldd, src[ct:], lds, rt, cols-ct)
	}
	if rt < rows {
		transposeRef(dst[rt:], ldd, src[rt*lds:], lds, rows-rt, cols)
	}
}
