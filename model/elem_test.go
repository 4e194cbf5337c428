package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// geluExact is GELU's tanh approximation in float64.
func geluExact(v float64) float64 {
	return 0.5 * v * (1 + math.Tanh(geluC*(v+geluK*v*v*v)))
}

func geluGradExact(v float64) float64 {
	z := geluC * (v + geluK*v*v*v)
	th := math.Tanh(z)
	return 0.5*(1+th) + 0.5*v*(1-th*th)*geluC*(1+3*geluK*v*v)
}

func elemInputs() []float32 {
	r := rand.New(rand.NewPCG(5, 5))
	xs := []float32{0, -0, 1, -1, 1e-30, -1e-30, 1e-7, 5, -5, 9.9, -9.9, 30, -30, 1e4, -1e4, 1e15, -1e15}
	for x := float32(-12); x <= 12; x += 0.001173 {
		xs = append(xs, x)
	}
	for i := 0; i < 20000; i++ {
		xs = append(xs, float32(r.NormFloat64()*3))
	}
	return xs
}

func TestExpClamped32(t *testing.T) {
	worst := 0.0
	for x := -87.0; x < 88; x += 0.01137 {
		got := float64(expClamped32(float32(x)))
		want := math.Exp(float64(float32(x)))
		if e := math.Abs(got-want) / want; e > worst {
			worst = e
		}
	}
	if worst > 5e-7 {
		t.Fatalf("expClamped32 max relative error %.3g", worst)
	}
	for _, x := range []float32{-1e30, -100, float32(math.Inf(-1))} {
		if e := expClamped32(x); e < 0x1p-126 || e > 0x1p-125 {
			t.Fatalf("expClamped32(%v) = %v: want the smallest normals", x, e)
		}
	}
	for _, x := range []float32{88.8, 100, 1e30, float32(math.Inf(1))} {
		if e := expClamped32(x); !math.IsInf(float64(e), 1) {
			t.Fatalf("expClamped32(%v) = %v: want +Inf", x, e)
		}
	}
}

// TestGELUFast bounds the vector GELU (and its gradient) against the scalar
// reference and against the float64 formula, and checks that an element's
// result does not depend on where it sits (offset, tail, chunking).
func TestGELUFast(t *testing.T) {
	xs := elemInputs()
	n := len(xs)
	fast, ref := make([]float32, n), make([]float32, n)
	geluSpan(xs, fast)
	geluRef(xs, ref)
	dFast, dRef := make([]float32, n), make([]float32, n)
	for i := range dFast {
		dFast[i], dRef[i] = 1, 1
	}
	geluBackwardSpan(xs, dFast)
	geluBackwardRef(xs, dRef)
	var wRef, wExact, wdRef, wdExact float64
	for i, x := range xs {
		v := float64(x)
		scale := math.Max(1, math.Abs(v)) * 1e-6 // absolute tolerance unit
		if math.Abs(v) > 1e4 {
			scale = math.Abs(v) * 1e-6
		}
		wRef = math.Max(wRef, math.Abs(float64(fast[i])-float64(ref[i]))/scale)
		wExact = math.Max(wExact, math.Abs(float64(fast[i])-geluExact(v))/scale)
		gs := math.Max(1, math.Abs(geluGradExact(v))) * 1e-6
		wdRef = math.Max(wdRef, math.Abs(float64(dFast[i])-float64(dRef[i]))/gs)
		wdExact = math.Max(wdExact, math.Abs(float64(dFast[i])-geluGradExact(v))/gs)
		if math.IsNaN(float64(fast[i])) || math.IsNaN(float64(dFast[i])) {
			t.Fatalf("NaN at x=%v", x)
		}
	}
	t.Logf("AVX2: %v; gelu: max err vs reference %.2f, vs float64 %.2f (units of 1e-6·max(1,|x|)); grad: %.2f, %.2f (units of 1e-6·max(1,|g|))",
		hasAVX2FMA, wRef, wExact, wdRef, wdExact)
	if wRef > 1 || wExact > 2 || wdRef > 2 || wdExact > 4 {
		t.Fatal("fast GELU outside its error bound")
	}
	// Position independence: every offset and length gives the same bits.
	for off := 0; off < 9; off++ {
		for _, ln := range []int{1, 7, 8, 9, 17, 100} {
			y := make([]float32, ln)
			geluSpan(xs[off:off+ln], y)
			d := make([]float32, ln)
			for i := range d {
				d[i] = 1
			}
			geluBackwardSpan(xs[off:off+ln], d)
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(fast[off+i]) || math.Float32bits(d[i]) != math.Float32bits(dFast[off+i]) {
					t.Fatalf("offset %d length %d element %d: result depends on position", off, ln, i)
				}
			}
		}
	}
	// The parallel wrapper equals the span kernel.
	y := make([]float32, n)
	gelu(xs, y)
	for i := range y {
		if math.Float32bits(y[i]) != math.Float32bits(fast[i]) {
			t.Fatalf("gelu wrapper differs at %d", i)
		}
	}
}

// TestExpFast: the vector exp against its scalar reference and math.Exp,
// independent of position.
func TestExpFast(t *testing.T) {
	var xs []float32
	for x := float32(-90); x < 90; x += 0.0137 {
		xs = append(xs, x)
	}
	xs = append(xs, 0, -0, 1e-30, -1e30, 1e30, float32(math.Inf(-1)), float32(math.Inf(1)))
	fast := append([]float32(nil), xs...)
	expSpan(fast)
	ref := append([]float32(nil), xs...)
	expRef(ref)
	worstRef, worstExact := 0.0, 0.0
	for i, x := range xs {
		f, r := float64(fast[i]), float64(ref[i])
		if math.IsInf(r, 1) || math.IsInf(f, 1) {
			if f != r {
				t.Fatalf("exp(%v): fast %v reference %v", x, f, r)
			}
			continue
		}
		worstRef = math.Max(worstRef, math.Abs(f-r)/r)
		if x > -87 && x < 88 {
			w := math.Exp(float64(x))
			worstExact = math.Max(worstExact, math.Abs(f-w)/w)
		}
	}
	t.Logf("vector exp: max rel err vs reference %.3g, vs math.Exp %.3g", worstRef, worstExact)
	if worstRef > 3e-7 || worstExact > 5e-7 {
		t.Fatal("fast exp outside its error bound")
	}
	for off := 0; off < 9; off++ {
		for _, ln := range []int{1, 5, 8, 13, 40} {
			y := append([]float32(nil), xs[off:off+ln]...)
			expSpan(y)
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(fast[off+i]) {
					t.Fatalf("offset %d length %d: result depends on position", off, ln)
				}
			}
		}
	}
}

// TestLayerNormFast bounds the vector LayerNorm row kernels (float32
// statistics) against the float64 reference rows.
func TestLayerNormFast(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, d := range []int{8, 16, 128, 136} {
		for trial := 0; trial < 50; trial++ {
			x, g, b := make([]float32, d), make([]float32, d), make([]float32, d)
			off := r.Float64()*20 - 10
			sc := math.Exp(r.Float64()*6 - 3)
			for j := range x {
				x[j] = float32(off + sc*r.NormFloat64())
				g[j] = float32(1 + 0.3*r.NormFloat64())
				b[j] = float32(0.3 * r.NormFloat64())
			}
			y1, h1, y2, h2 := make([]float32, d), make([]float32, d), make([]float32, d), make([]float32, d)
			rs1 := lnRowVec(x, g, b, y1, h1)
			rs2 := lnRowRef(x, g, b, y2, h2)
			y3 := make([]float32, d)
			if rs3 := lnRowVec(x, g, b, y3, nil); rs3 != rs1 || !slices.Equal(y3, y1) {
				t.Fatal("xhat = nil changes the result")
			}
			if math.Abs(float64(rs1-rs2)) > 1e-5*float64(rs2) {
				t.Fatalf("d=%d: rstd %v vs reference %v", d, rs1, rs2)
			}
			for j := range y1 {
				if math.Abs(float64(h1[j]-h2[j])) > 2e-5*(1+math.Abs(float64(h2[j]))) || math.Abs(float64(y1[j]-y2[j])) > 2e-5*(1+math.Abs(float64(y2[j]))) {
					t.Fatalf("d=%d j=%d: xhat %v/%v y %v/%v", d, j, h1[j], h2[j], y1[j], y2[j])
				}
			}
			dy := make([]float32, d)
			for j := range dy {
				dy[j] = float32(r.NormFloat64())
			}
			dx1, dx2 := make([]float32, d), make([]float32, d)
			for j := range dx1 {
				dx1[j] = float32(j)
				dx2[j] = float32(j)
			}
			lnRowBwdVec(dy, h2, g, dx1, rs2)
			lnRowBwdRef(dy, h2, g, dx2, rs2)
			for j := range dx1 {
				if math.Abs(float64(dx1[j]-dx2[j])) > 2e-5*(float64(rs2)+math.Abs(float64(dx2[j]))) {
					t.Fatalf("d=%d j=%d: dx %v vs reference %v", d, j, dx1[j], dx2[j])
				}
			}
		}
	}
}

func TestAddIntoVector(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, n := range []int{0, 1, 31, 32, 33, 100, 128, 1000} {
		x, y := make([]float32, n+3), make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		for i := range y {
			y[i] = float32(r.NormFloat64())
		}
		want := slices.Clone(x)
		for i, v := range y {
			want[i] += v
		}
		addInto(x, y)
		if !slices.Equal(x, want) {
			t.Fatalf("n=%d: addInto differs from the scalar sum", n)
		}
	}
}

// TestSwiGLUSameBits: the fused SwiGLU forward and backward give their references' bits
// for every element (extremes, infinities and NaN included), at any length (ragged tails)
// and offset.
func TestSwiGLUSameBits(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	g := append(elemInputs(), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 88.9, -88.9, 87.4, -87.4)
	n := len(g)
	u, da := make([]float32, n), make([]float32, n)
	for i := range u {
		u[i], da[i] = float32(r.NormFloat64()*2), float32(r.NormFloat64())
	}
	u[3], da[5] = float32(math.Inf(1)), float32(math.NaN())
	same := func(what string, got, want []float32) {
		t.Helper()
		if i := firstBitDiff(got[:len(want)], want); i >= 0 {
			t.Fatalf("%s[%d] (g=%v u=%v da=%v): got %v, reference %v", what, i, g[i], u[i], da[i], got[i], want[i])
		}
	}
	wa, wdg, wdu := make([]float32, n), make([]float32, n), make([]float32, n)
	swigluRef(g, u, wa)
	swigluBackwardRef(g, u, da, wdg, wdu)
	for _, span := range [][2]int{{0, n}, {0, 4864}, {3, 40}, {1, 8}, {5, 6}, {11, 11 + 8*97 + 5}} {
		lo, hi := span[0], span[1]
		a, dg, du := make([]float32, hi-lo), make([]float32, hi-lo), make([]float32, hi-lo)
		swigluSpan(g[lo:hi], u[lo:hi], a)
		swigluBackwardSpan(g[lo:hi], u[lo:hi], da[lo:hi], dg, du)
		same("act", a, wa[lo:hi])
		same("dgate", dg, wdg[lo:hi])
		same("dup", du, wdu[lo:hi])
	}
	if hasAVX2FMA {
		// The vector path must differ from a plain float64 formula somewhere in the
		// last bits, or this test would not be exercising it: check it is close.
		for i := range 1000 {
			v := float64(g[i])
			want := v / (1 + math.Exp(-v)) * float64(u[i])
			if d := math.Abs(float64(wa[i]) - want); d > 1e-5*math.Abs(want)+1e-30 && !math.IsInf(want, 0) {
				t.Fatalf("act[%d] = %v, float64 formula %v", i, wa[i], want)
			}
		}
	}
}

// TestLogitGradSameBits: the vector gradient of a head row gives the reference's bits for
// every element, with and without the entropy term, in place (dz = p) or not, at ragged
// lengths.
func TestLogitGradSameBits(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	n := 1<<16 + 3
	z, p := make([]float32, n), make([]float32, n)
	for i := range z {
		z[i] = float32(r.NormFloat64() * 8)
		p[i] = float32(math.Exp(r.NormFloat64()*6 - 10))
	}
	p[0], p[1], p[2], z[3], z[4] = 0, 1, 1e-44, float32(math.Inf(-1)), 1e30
	for _, c := range [][2]float64{{1, 0}, {-0.37, 0}, {0.5, 1.25}, {0, -3e-3}, {2, math.Copysign(0, -1)}, {1e-8, 7}} {
		dlp, de := c[0], c[1]
		for _, span := range [][2]int{{0, n}, {0, 8}, {1, 17}, {5, 5 + 8*41}, {9, 12}} {
			lo, hi := span[0], span[1]
			want := make([]float32, hi-lo)
			logitGradRef(z[lo:hi], p[lo:hi], want, dlp, de, 1/0.7, 3.25, 1.5)
			got := make([]float32, hi-lo)
			logitGradSpan(z[lo:hi], p[lo:hi], got, dlp, de, 1/0.7, 3.25, 1.5)
			sameBitsT(t, "dz", got, want)
			inPlace := append([]float32(nil), p[lo:hi]...)
			logitGradSpan(z[lo:hi], inPlace, inPlace, dlp, de, 1/0.7, 3.25, 1.5)
			sameBitsT(t, "dz in place", inPlace, want)
		}
	}
}

// TestSoftmaxStatsPartsSameBits: the vector maximum and shift of a scaled logits row give
// their references' bits: rows whose maximum is +0 or −0 (either first), NaN, ±Inf, a maximum
// in the ragged tail, lengths 1 to 8·k+7.
func TestSoftmaxStatsPartsSameBits(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 13))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	rows := [][]float32{{0}, {nan}, {}}
	for _, n := range []int{1, 7, 8, 9, 16, 31, 64, 1003} {
		z := make([]float32, n)
		for i := range z {
			z[i] = float32(r.NormFloat64() * 10)
		}
		rows = append(rows, z)
		neg := make([]float32, n) // maximum zero: −0 first, then +0
		for i := range neg {
			neg[i] = -1 - float32(i)
		}
		neg[n/3] = negZero
		neg[n-1] = 0
		rows = append(rows, neg)
		pos := append([]float32(nil), neg...)
		pos[n/3], pos[n-1] = 0, negZero
		rows = append(rows, pos)
		odd := append([]float32(nil), z...)
		odd[0], odd[n/2] = nan, -inf
		odd[n-1] = 1e30 // in the tail for most lengths
		rows = append(rows, odd)
		allNaN := make([]float32, n)
		for i := range allNaN {
			allNaN[i] = nan
		}
		rows = append(rows, allNaN)
		nanLast := append([]float32(nil), z...) // NaN last in every lane's share
		for i := n / 2; i < n; i++ {
			nanLast[i] = nan
		}
		rows = append(rows, nanLast)
	}
	for _, invT := range []float64{1, 1 / 0.7, 3} {
		for i, z := range rows {
			want, got := scaledMaxRef(z, invT), scaledMax(z, invT)
			if math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("row %d (len %d) invT %v: max %v, reference %v", i, len(z), invT, got, want)
			}
			we, ge := make([]float32, len(z)), make([]float32, len(z))
			shiftScaledRef(z, invT, want, we)
			shiftScaled(z, invT, want, ge)
			sameBitsT(t, "shifted", ge, we)
		}
	}
}

// TestSoftmaxProbsFromSameBits: a row's probabilities formed again from its softmaxStat (the
// head's backward over several chunks) are softmaxRow's bits: wide and narrow rows, tiny
// temperatures (most of the row below the exp clamp), infinities, ragged lengths.
func TestSoftmaxProbsFromSameBits(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 17))
	for _, n := range []int{1, 5, 8, 13, 64, 1001, 151936} {
		z := make([]float32, n)
		for i := range z {
			z[i] = float32(r.NormFloat64() * 4)
		}
		if n > 3 {
			z[1], z[2] = float32(math.Inf(-1)), -1e30
		}
		for _, invT := range []float64{1, 1 / 0.7, 50, 1e4} {
			want := make([]float32, n)
			st, _, _ := softmaxRow(z, invT, want, true)
			got := make([]float32, n)
			for i := range got {
				got[i] = float32(math.NaN())
			}
			softmaxProbsFrom(z, invT, st, got)
			sameBitsT(t, "probabilities", got, want)
			zeros := 0
			for _, v := range want {
				if v == 0 {
					zeros++
				}
			}
			if invT == 1e4 && n > 64 && zeros == 0 {
				t.Fatalf("n=%d: no probability below the clamp: the zeroing is not exercised", n)
			}
		}
	}
}

// TestShiftExpSameBits: the vector maximum, subtraction and scaling give the bits of the
// scalar loops at every length 0–130, with NaNs, infinities, zeros of both signs and ties
// among the values, the maximum anywhere (NaNs compare as one value: their payloads may
// differ).
func TestShiftExpSameBits(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	special := []float32{nan, inf, -inf, 0, float32(math.Copysign(0, -1)), 3.5, 3.5}
	canon := func(x []float32) []float32 {
		y := slices.Clone(x)
		for i, v := range y {
			if v != v {
				y[i] = nan
			}
		}
		return y
	}
	for n := range 131 {
		for trial := range 6 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64() * 4)
				if trial > 0 && r.IntN(8) == 0 {
					x[i] = special[r.IntN(len(special))]
				}
			}
			if trial == 5 {
				for i := range x {
					x[i] = special[3+r.IntN(2)] // zeros of both signs only
				}
			}
			got, want := slices.Clone(x), slices.Clone(x)
			shiftExp(got)
			shiftExpRef(want)
			if i := firstBitDiff(canon(got), canon(want)); i >= 0 {
				t.Fatalf("n=%d trial %d: shiftExp[%d] = %v, want %v (input %v)", n, trial, i, got[i], want[i], x[i])
			}
			f := float32(r.NormFloat64())
			got, want = slices.Clone(x), slices.Clone(x)
			scaleBy(got, f)
			for i := range want {
				want[i] *= f
			}
			if i := firstBitDiff(canon(got), canon(want)); i >= 0 {
				t.Fatalf("n=%d trial %d: scaleBy[%d] = %v, want %v", n, trial, i, got[i], want[i])
			}
		}
	}
}

// shiftExpRef is shiftExp with the maximum and the subtraction one element at a time.
func shiftExpRef(s []float32) {
	mx := float32(math.Inf(-1))
	for _, v := range s {
		if v > mx {
			mx = v
		}
	}
	for j := range s {
		s[j] -= mx
	}
	expSpan(s)
}
