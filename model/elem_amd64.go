//go:build amd64 && !purego

package model

import "math"

//go:noescape
func geluAVX2(x, y *float32, n int)

//go:noescape
func geluBwdAVX2(x, dy *float32, n int)

// geluVec: len(x) == len(y), a multiple of 8, AVX2+FMA present.
func geluVec(x, y []float32) {
	_ = y[len(x)-1]
	geluAVX2(&x[0], &y[0], len(x))
}

func geluBwdVec(x, dy []float32) {
	_ = dy[len(x)-1]
	geluBwdAVX2(&x[0], &dy[0], len(x))
}

//go:noescape
func expAVX2(x *float32, n int)

// expVec: len(x) a multiple of 8, AVX2+FMA present.
func expVec(x []float32) { expAVX2(&x[0], len(x)) }

//go:noescape
func lnFwdAVX2(x, gam, b, y, xhat *float32, d int, wx int, eps float32) (rstd float32)

//go:noescape
func lnBwdAVX2(dy, xhat, gam, dx *float32, d int, rstd float32)

// lnRowVec: one LayerNorm row (len(x) a positive multiple of 8; xhat may be
// nil); returns rstd.
func lnRowVec(x, g, b, y, xhat []float32) float32 {
	d := len(x)
	_, _, _ = g[d-1], b[d-1], y[d-1]
	xp, wx := &y[0], 0
	if xhat != nil {
		_ = xhat[d-1]
		xp, wx = &xhat[0], 1
	}
	return lnFwdAVX2(&x[0], &g[0], &b[0], &y[0], xp, d, wx, lnEps)
}

// lnRowBwdVec: dx += the input gradient of one LayerNorm row.
func lnRowBwdVec(dy, xhat, g, dx []float32, rstd float32) {
	d := len(dy)
	_, _, _ = xhat[d-1], g[d-1], dx[d-1]
	lnBwdAVX2(&dy[0], &xhat[0], &g[0], &dx[0], d, rstd)
}

//go:noescape
func addAVX2(x, y *float32, n int)

// addVec: x[i] += y[i] for the leading multiple of 32 elements of y; returns
// how many it did (element-wise IEEE adds: the same bits as a scalar loop).
func addVec(x, y []float32) int {
	n := len(y) &^ 31
	if n == 0 || !hasAVX2FMA {
		return 0
	}
	_ = x[n-1]
	addAVX2(&x[0], &y[0], n)
	return n
}

//go:noescape
func swigluAVX2(gate, up, a *float32, n int)

//go:noescape
func swigluBwdAVX2(gate, up, da, dg, du *float32, n int)

// swigluVec: equal lengths, a multiple of 8, AVX2+FMA present.
func swigluVec(g, u, a []float32) {
	_, _ = u[len(g)-1], a[len(g)-1]
	swigluAVX2(&g[0], &u[0], &a[0], len(g))
}

// swigluBwdVec: equal lengths, a multiple of 8, AVX2+FMA present.
func swigluBwdVec(g, u, da, dg, du []float32) {
	_, _, _, _ = u[len(g)-1], da[len(g)-1], dg[len(g)-1], du[len(g)-1]
	swigluBwdAVX2(&g[0], &u[0], &da[0], &dg[0], &du[0], len(g))
}

//go:noescape
func logitGradAVX2(z, p, dz *float32, n int, ndlp, de, invT, lse, h float64)

// logitGradVec: equal lengths, a multiple of 8, AVX2 present; z is read only when de ≠ 0.
func logitGradVec(z, p, dz []float32, dlp, de, invT, lse, H float64) {
	_ = dz[len(p)-1]
	zp := &p[0]
	if de != 0 {
		_ = z[len(p)-1]
		zp = &z[0]
	}
	logitGradAVX2(zp, &p[0], &dz[0], len(p), -dlp, de, invT, lse, H)
}

//go:noescape
func scaledMaxAVX2(z *float32, n int, invT float64, lanes *[8]float64)

//go:noescape
func shiftScaledAVX2(z, e *float32, n int, invT, mx float64)

// scaledMaxVec: len(z) a positive multiple of 8, AVX2 present; lanes receives eight running
// maxima (lane i over the elements ≡ i mod 8).
func scaledMaxVec(z []float32, invT float64, lanes *[8]float64) {
	scaledMaxAVX2(&z[0], len(z), invT, lanes)
}

// shiftScaledVec: len(z) == len(e), a positive multiple of 8, AVX2 present.
func shiftScaledVec(z []float32, invT, mx float64, e []float32) {
	_ = e[len(z)-1]
	shiftScaledAVX2(&z[0], &e[0], len(z), invT, mx)
}

//go:noescape
func probsFromExpAVX2(z, e *float32, n int, invT, mx, inv float64)

// probsFromExpVec: len(z) == len(e), a positive multiple of 8, AVX2 present.
func probsFromExpVec(z []float32, invT float64, st softmaxStat, e []float32) {
	_ = e[len(z)-1]
	probsFromExpAVX2(&z[0], &e[0], len(z), invT, st.mx, st.inv)
}

//go:noescape
func maxAVX2(x *float32, n int) float32

//go:noescape
func subAVX2(x *float32, n int, v float32)

//go:noescape
func scaleAVX2(x *float32, n int, f float32)

// lanes32 is how many leading elements of x these AVX2 loops take (four registers a pass): a
// multiple of 32, 0 without AVX2 (vecLen is the same for loops of one register).
func lanes32(x []float32) int {
	if !hasAVX2FMA {
		return 0
	}
	return len(x) &^ 31
}

// maxVec is the largest element that is not NaN of the leading lanes32(x) elements of x
// (−Inf for none) and how many it read.
func maxVec(x []float32) (float32, int) {
	n := lanes32(x)
	if n == 0 {
		return float32(math.Inf(-1)), 0
	}
	return maxAVX2(&x[0], n), n
}

// subVec: x[i] -= v for the leading lanes32(x) elements of x; returns how many it did.
func subVec(x []float32, v float32) int {
	if n := lanes32(x); n > 0 {
		subAVX2(&x[0], n, v)
		return n
	}
	return 0
}

// scaleVec: x[i] *= f for the leading lanes32(x) elements of x; returns how many it did.
func scaleVec(x []float32, f float32) int {
	if n := lanes32(x); n > 0 {
		scaleAVX2(&x[0], n, f)
		return n
	}
	return 0
}
