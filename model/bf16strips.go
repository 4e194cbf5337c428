package model

// The layout of a matrix stored in BF16. A tensor W [out × in] is kept in
// strips of stripW rows, each strip k-major: element (o, k) lies at
// (o/stripW)·stripW·in + k·w + o%stripW, where w is the strip's width
// (stripW, or out%stripW for a last partial strip; no padding). A product
// with few rows of x (gemvStrips) then loads the 16 outputs of a strip at
// one k as one contiguous vector, with no transpose in registers, and the
// blocked GEMM's packing of B (packB) is a contiguous widening. Everything
// that reads the bits goes through bf16W's methods.

// stripW is the width of a strip: one AVX-512 vector of float32.
const stripW = 16

// bf16W is a matrix of bfloat16 bits [rows() × in]: one or more tensors
// (q, k and v; gate and up) stacked by rows, each packed in strips on its
// own (segs holds their row counts, in order).
type bf16W struct {
	bits []uint16
	in   int
	segs []int
}

// rows is the number of rows (outputs) of w.
func (w bf16W) rows() int {
	n := 0
	for _, r := range w.segs {
		n += r
	}
	return n
}

// locate returns the strip that holds row o: the index of its element
// (o, 0) less the lane, its width, and o's lane in it. Element (o, k) is
// bits[base + k·width + lane].
func (w bf16W) locate(o int) (base, width, lane int) {
	off := 0
	for _, rows := range w.segs {
		if o < rows {
			s := o / stripW
			return off + s*stripW*w.in, min(stripW, rows-s*stripW), o % stripW
		}
		o -= rows
		off += rows * w.in
	}
	panic("model: row outside a BF16 matrix")
}

// packStrips rearranges h, a tensor [out × in] in row-major order, into
// strips in place (a strip's rows occupy the same span in both layouts).
func packStrips(h []uint16, out, in int) {
	tmp := make([]uint16, stripW*in)
	for o0 := 0; o0 < out; o0 += stripW {
		width := min(stripW, out-o0)
		span := h[o0*in : (o0+width)*in]
		copy(tmp, span)
		for j := 0; j < width; j++ {
			for k, v := range tmp[j*in : (j+1)*in] {
				span[k*width+j] = v
			}
		}
	}
}

// eachRun calls fn for the rows [o0, o1) of w in runs that share a strip:
// rows [o, o+run) are lanes lane.. of the strip at base of the given width.
func (w bf16W) eachRun(o0, o1 int, fn func(o, run, base, width, lane int)) {
	for o := o0; o < o1; {
		base, width, lane := w.locate(o)
		run := min(width-lane, o1-o)
		fn(o, run, base, width, lane)
		o += run
	}
}

// widenRows writes rows [o0, o1) of w, widened, into dst in row-major
// order ((o1-o0)·in values).
func (w bf16W) widenRows(dst []float32, o0, o1 int) { rowsInto(w, dst, o0, o1) }

// widened is all of w as float32 in row-major order (a new slice).
func (w bf16W) widened() []float32 {
	f := make([]float32, len(w.bits))
	w.widenRows(f, 0, w.rows())
	return f
}

// bitsRows is widenRows without the widening: rows [o0, o1) of bits.
func (w bf16W) bitsRows(dst []uint16, o0, o1 int) { rowsInto(w, dst, o0, o1) }

func rowsInto[T float32 | uint16](w bf16W, dst []T, o0, o1 int) {
	in := w.in
	w.eachRun(o0, o1, func(o, run, base, width, lane int) {
		d := dst[(o-o0)*in:]
		for k := 0; k < in; k++ {
			for q, h := range w.bits[base+k*width+lane:][:run] {
				d[q*in+k] = fromBF16[T](h)
			}
		}
	})
}

// fromBF16 is bits h as a T: widened for float32, as they are for uint16.
func fromBF16[T float32 | uint16](h uint16) T {
	if _, wide := any(T(0)).(float32); wide {
		return T(widenBF16(h))
	}
	return T(h)
}

// packB is packB's layout for op(B) = Wᵀ (trans: columns are W's rows) or
// W (depth runs over W's rows), depth [pc, pc+kcur) × columns [jc,
// jc+ncur), each value widened exactly: the closure sgemmW hands the
// blocked GEMM.
func (w bf16W) packB(dst []float32, trans bool, pc, kcur, jc, ncur int) {
	nstrips := (ncur + nr - 1) / nr
	if full := ncur / nr; full < nstrips {
		clear(dst[full*nr*kcur : nstrips*nr*kcur])
	}
	if !trans {
		// Depth p is row pc+p; a run of rows is contiguous per column k.
		w.eachRun(pc, pc+kcur, func(o, run, base, width, lane int) {
			p := o - pc
			for j := 0; j < ncur; j++ {
				d := dst[(j/nr)*nr*kcur+p*nr+j%nr:]
				for q, h := range w.bits[base+(jc+j)*width+lane:][:run] {
					d[q*nr] = widenBF16(h)
				}
			}
		})
		return
	}
	// Column j is row jc+j: a stored strip aligned with a packed one is
	// one contiguous span of kcur·16 values.
	for j := 0; j < ncur; {
		base, width, lane := w.locate(jc + j)
		run := min(width-lane, ncur-j, nr-j%nr)
		d := dst[(j/nr)*nr*kcur+j%nr:]
		src := w.bits[base+pc*width+lane:]
		if run == nr && width == nr {
			widenInto(d[:kcur*nr], src[:kcur*nr])
		} else {
			for p := 0; p < kcur; p++ {
				for q, h := range src[p*width:][:run] {
					d[p*nr+q] = widenBF16(h)
				}
			}
		}
		j += run
	}
}

// widenInto is dst[i] = the float32 of src[i].
func widenInto(dst []float32, src []uint16) {
	for i, h := range src {
		dst[i] = widenBF16(h)
	}
}
