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

// transpose is transposeRef by 16×16 tiles in registers where the CPU has
// AVX-512 (transpose16), the ragged edges by the reference.
func transpose(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	if !hasAVX512 || rows < 16 || cols < 16 {
		transposeRef(dst, ldd, src, lds, rows, cols)
		return
	}
	r16, c16 := rows&^15, cols&^15
	_ = src[(rows-1)*lds+cols-1]
	_ = dst[(cols-1)*ldd+rows-1]
	for r := 0; r < r16; r += 16 {
		for c := 0; c < c16; c += 16 {
			transpose16(&src[r*lds+c], lds, &dst[c*ldd+r], ldd)
		}
	}
	if c16 < cols {
		transposeRef(dst[c16*ldd:], ldd, src[c16:], lds, r16, cols-c16)
	}
	if r16 < rows {
		transposeRef(dst[r16:], ldd, src[r16*lds:], lds, rows-r16, cols)
	}
}
