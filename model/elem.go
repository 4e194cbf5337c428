package model

import "math"

// Element-wise kernels of the training and decoding paths. Each has a plain
// scalar Go reference (used where the CPU lacks AVX2+FMA, and by the tests to
// bound the vector version's error) and, on amd64, an AVX2/FMA version that
// evaluates the same formula eight lanes at a time. Every element goes
// through the same instructions whatever its position (ragged tails are
// padded, not computed by a scalar loop), so results depend only on the
// element's value: no batch-composition or chunking effects.

const (
	geluK     = 0.044715
	expClampH = 89    // exp input clamp: the scale 2^128 is +Inf (as exp overflows)
	expClampL = -87.3 // 2^-126: the smallest normal
)

// expClamped32 is the scalar reference of the vector exp: the Cephes expf
// polynomial (~1 ulp) on the input clamped to [expClampL, expClampH]: a
// normal number ≥ 2^-126 below the overflow threshold (~88.72, above which
// it is +Inf), and never NaN for a non-NaN input.
func expClamped32(t float32) float32 {
	t = min(max(t, expClampL), expClampH)
	fx := float32(math.Floor(float64(t*1.44269504088896341 + 0.5)))
	r := t - fx*0.693359375
	r = r - fx*-2.12194440e-4
	y := float32(1.9875691500e-4)
	y = y*r + 1.3981999507e-3
	y = y*r + 8.3334519073e-3
	y = y*r + 4.1665795894e-2
	y = y*r + 1.6666665459e-1
	y = y*r + 5.0000001201e-1
	y = y*(r*r) + r
	y += 1
	return y * math.Float32frombits(uint32(int32(fx)+127)<<23)
}

// geluT is -2z for z = sqrt(2/pi)·(v + 0.044715v³), the exponent of
// gelu(v) = v·sigmoid(2z) = v / (1 + exp(-2z)).
func geluT(v float32) float32 { return (v*v*geluK*v + v) * (-2 * geluC) }

// gelu32 is the scalar reference of the tanh-approximation GELU.
func gelu32(v float32) float32 { return v / (1 + expClamped32(geluT(v))) }

// geluGrad32 is the scalar reference of d gelu(v) / dv.
func geluGrad32(v float32) float32 {
	g := v*v*(3*geluK) + 1
	s := 1 / (1 + expClamped32(geluT(v)))
	return v*s*(1-s)*g*(2*geluC) + s
}

func geluRef(x, y []float32) {
	for i, v := range x {
		y[i] = gelu32(v)
	}
}

func geluBackwardRef(x, dy []float32) {
	for i, v := range x {
		dy[i] *= geluGrad32(v)
	}
}

// geluSpan applies GELU to x into y (same length).
func geluSpan(x, y []float32) {
	if !hasAVX2FMA {
		geluRef(x, y)
		return
	}
	n := len(x) &^ 7
	if n > 0 {
		geluVec(x[:n], y[:n])
	}
	if n < len(x) {
		var bx, by [8]float32
		copy(bx[:], x[n:])
		geluVec(bx[:], by[:])
		copy(y[n:], by[:len(x)-n])
	}
}

// geluBackwardSpan multiplies dy by gelu'(x) (same length).
func geluBackwardSpan(x, dy []float32) {
	if !hasAVX2FMA {
		geluBackwardRef(x, dy)
		return
	}
	n := len(x) &^ 7
	if n > 0 {
		geluBwdVec(x[:n], dy[:n])
	}
	if n < len(x) {
		var bx, bd [8]float32
		copy(bx[:], x[n:])
		copy(bd[:], dy[n:])
		geluBwdVec(bx[:], bd[:])
		copy(dy[n:], bd[:len(x)-n])
	}
}

func expRef(x []float32) {
	for i, v := range x {
		x[i] = expClamped32(v)
	}
}

// expSpan sets x[i] = expClamped32(x[i]) (vectorised where available).
func expSpan(x []float32) {
	if !hasAVX2FMA {
		expRef(x)
		return
	}
	n := len(x) &^ 7
	if n > 0 {
		expVec(x[:n])
	}
	if n < len(x) {
		var b [8]float32
		copy(b[:], x[n:])
		expVec(b[:])
		copy(x[n:], b[:len(x)-n])
	}
}

// swigluRef is the reference of swigluSpan: a[j] = g[j]/(1+exp(−g[j]))·u[j] with the
// vector exp (expSpan), each operation rounded in this order.
func swigluRef(g, u, a []float32) {
	e := make([]float32, len(g))
	for j, v := range g {
		e[j] = -v
	}
	expSpan(e)
	for j, v := range g {
		a[j] = v / (1 + e[j]) * u[j]
	}
}

// swigluBackwardRef is the reference of swigluBackwardSpan: with sig = 1/(1+exp(−g)),
// du = da·(g·sig) and dg = da·u·sig·(1 + g·(1−sig)), rounded in this order.
func swigluBackwardRef(g, u, da, dg, du []float32) {
	e := make([]float32, len(g))
	for j, v := range g {
		e[j] = -v
	}
	expSpan(e)
	for j, v := range g {
		sig := 1 / (1 + e[j])
		silu := v * sig
		du[j] = da[j] * silu
		dg[j] = da[j] * u[j] * sig * (1 + v*(1-sig))
	}
}

// swigluSpan writes a = silu(g)·u (all the same length): swigluRef's bits, the exp,
// negation, division and products fused into one pass of eight lanes where available.
func swigluSpan(g, u, a []float32) {
	if !hasAVX2FMA {
		swigluRef(g, u, a)
		return
	}
	n := len(g) &^ 7
	if n > 0 {
		swigluVec(g[:n], u[:n], a[:n])
	}
	if n < len(g) {
		var bg, bu, ba [8]float32
		copy(bg[:], g[n:])
		copy(bu[:], u[n:])
		swigluVec(bg[:], bu[:], ba[:])
		copy(a[n:], ba[:len(g)-n])
	}
}

// swigluBackwardSpan writes the gradients dg and du of swiglu's gate g and up u given da
// (all the same length): swigluBackwardRef's bits, fused like swigluSpan.
func swigluBackwardSpan(g, u, da, dg, du []float32) {
	if !hasAVX2FMA {
		swigluBackwardRef(g, u, da, dg, du)
		return
	}
	n := len(g) &^ 7
	if n > 0 {
		swigluBwdVec(g[:n], u[:n], da[:n], dg[:n], du[:n])
	}
	if n < len(g) {
		var bg, bu, bd, bdg, bdu [8]float32
		copy(bg[:], g[n:])
		copy(bu[:], u[n:])
		copy(bd[:], da[n:])
		swigluBwdVec(bg[:], bu[:], bd[:], bdg[:], bdu[:])
		copy(dg[n:], bdg[:len(g)-n])
		copy(du[n:], bdu[:len(g)-n])
	}
}

// logitGradRef is the reference of logitGradSpan: per element of one head row, in float64 and
// rounded once, dz = (−dlp·p − de·p·(z·invT − lse + H))·invT (the entropy term only when de ≠
// 0), each operation in this order; dz may be p itself.
func logitGradRef(z, p, dz []float32, dlp, de, invT, lse, H float64) {
	for j := range dz {
		pj := float64(p[j])
		du := -dlp * pj
		if de != 0 {
			du -= de * pj * (float64(z[j])*invT - lse + H)
		}
		dz[j] = float32(du * invT)
	}
}

// logitGradSpan is logitGradRef four (float64) lanes at a time where available: the same
// operations on each element, hence the same bits.
func logitGradSpan(z, p, dz []float32, dlp, de, invT, lse, H float64) {
	n := vecLen(len(dz))
	if n > 0 {
		logitGradVec(z[:n], p[:n], dz[:n], dlp, de, invT, lse, H)
	}
	logitGradRef(z[n:], p[n:], dz[n:], dlp, de, invT, lse, H)
}

// scaledMaxRef is the reference of scaledMax: the largest float64(v)·invT over z, the first of
// equals (−Inf when z is empty or all NaN; NaN never wins).
func scaledMaxRef(z []float32, invT float64) float64 {
	mx := math.Inf(-1)
	for _, v := range z {
		if u := float64(v) * invT; u > mx {
			mx = u
		}
	}
	return mx
}

// scaledMax is scaledMaxRef with eight running maxima in vector lanes where available. A
// non-zero maximum has one encoding, so the lanes' order does not matter; a zero one (+0 or
// −0, whichever comes first) is looked up again in index order.
func scaledMax(z []float32, invT float64) float64 {
	n := vecLen(len(z))
	if n == 0 {
		return scaledMaxRef(z, invT)
	}
	var lanes [8]float64
	scaledMaxVec(z[:n], invT, &lanes)
	mx := scaledMaxRef(z[n:], invT)
	for _, v := range lanes {
		if v > mx {
			mx = v
		}
	}
	if mx == 0 {
		return scaledMaxRef(z, invT)
	}
	return mx
}

// shiftScaledRef is the reference of shiftScaled: e[j] = float32(float64(z[j])·invT − mx).
func shiftScaledRef(z []float32, invT, mx float64, e []float32) {
	for j, v := range z {
		e[j] = float32(float64(v)*invT - mx)
	}
}

// shiftScaled is shiftScaledRef four float64 lanes at a time where available (the same
// operations, the same bits).
func shiftScaled(z []float32, invT, mx float64, e []float32) {
	n := vecLen(len(z))
	if n > 0 {
		shiftScaledVec(z[:n], invT, mx, e[:n])
	}
	shiftScaledRef(z[n:], invT, mx, e[n:len(z)])
}

// probsFromExpRef is the reference of probsFromExp: softmaxRow's last steps on the shifted
// exponentials e of row z, each element in softmaxRow's order: 0 where the shifted logit is
// below expClampL, then float32(float64(e)·inv).
func probsFromExpRef(z []float32, invT float64, st softmaxStat, e []float32) {
	for j, v := range z {
		if float64(v)*invT-st.mx < expClampL {
			e[j] = 0
		}
		e[j] = float32(float64(e[j]) * st.inv)
	}
}

// probsFromExp is probsFromExpRef four float64 lanes at a time where available (the same
// operations, the same bits).
func probsFromExp(z []float32, invT float64, st softmaxStat, e []float32) {
	n := vecLen(len(z))
	if n > 0 {
		probsFromExpVec(z[:n], invT, st, e[:n])
	}
	probsFromExpRef(z[n:], invT, st, e[n:len(z)])
}

// vecLen is how many of n elements the float64-lane kernels take (a multiple of 8; the rest
// goes through the reference): none without AVX2.
func vecLen(n int) int {
	if !hasAVX2FMA {
		return 0
	}
	return n &^ 7
}
