package model

import "math"

const lnEps = 1e-5

// layerNorm normalises each row of x[n×d] into y, saving xhat and rstd
// (either may be nil when not needed for a backward pass). Rows go through
// the vector kernel when d is a multiple of 8 and AVX2 is present (float32
// statistics), else through the float64 reference lnRowRef.
func layerNorm(x []float32, n, d int, g, b, y, xhat, rstd []float32) {
	vec := hasAVX2FMA && d%8 == 0 && d > 0
	parallelRows(n, 64, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			var xh []float32
			if xhat != nil {
				xh = xhat[r*d : (r+1)*d]
			}
			row, yr := x[r*d:(r+1)*d], y[r*d:(r+1)*d]
			var rs float32
			if vec {
				rs = lnRowVec(row, g, b, yr, xh)
			} else {
				rs = lnRowRef(row, g, b, yr, xh)
			}
			if rstd != nil {
				rstd[r] = rs
			}
		}
	})
}

// lnRowRef is the reference LayerNorm of one row (float64 statistics);
// returns rstd.
func lnRowRef(row, g, b, y, xhat []float32) float32 {
	d := len(row)
	var mean float64
	for _, v := range row {
		mean += float64(v)
	}
	mean /= float64(d)
	var vr float64
	for _, v := range row {
		dv := float64(v) - mean
		vr += dv * dv
	}
	vr /= float64(d)
	rs := 1 / math.Sqrt(vr+lnEps)
	for j, v := range row {
		h := float32((float64(v) - mean) * rs)
		if xhat != nil {
			xhat[j] = h
		}
		y[j] = h*g[j] + b[j]
	}
	return float32(rs)
}

// lnRowBwdRef is the reference input gradient of one LayerNorm row:
// dx += rstd·(dh - mean(dh) - xhat·mean(dh·xhat)), dh = dy·g.
func lnRowBwdRef(dyr, xh, g, dxr []float32, rstd float32) {
	d := len(dyr)
	var s1, s2 float64
	for j := range dyr {
		dh := float64(dyr[j] * g[j])
		s1 += dh
		s2 += dh * float64(xh[j])
	}
	s1 /= float64(d)
	s2 /= float64(d)
	rs := float64(rstd)
	for j := range dyr {
		dh := float64(dyr[j] * g[j])
		dxr[j] += float32(rs * (dh - s1 - float64(xh[j])*s2))
	}
}

// layerNormBackward adds to dx[n×d] the input gradient of LayerNorm given
// dy, and accumulates dg, db. Row work runs in parallel; the parameter
// gradients are summed as in chunkedColSums.
func layerNormBackward(dy, xhat, rstd []float32, n, d int, g []float32, dx, dg, db []float32) {
	vec := hasAVX2FMA && d%8 == 0 && d > 0
	parallelRows(n, 64, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			dyr, xh, dxr := dy[r*d:(r+1)*d], xhat[r*d:(r+1)*d], dx[r*d:(r+1)*d]
			if vec {
				lnRowBwdVec(dyr, xh, g, dxr, rstd[r])
			} else {
				lnRowBwdRef(dyr, xh, g, dxr, rstd[r])
			}
		}
	})
	// Parameter gradients: per fixed chunk of rows in parallel, then the
	// chunk partials added in chunk order (independent of the core count).
	chunkedColSums(n, 2*d, func(lo, hi int, part []float32) {
		pg, pb := part[:d], part[d:]
		for r := lo; r < hi; r++ {
			dyr := dy[r*d : (r+1)*d]
			xh := xhat[r*d : (r+1)*d][:len(dyr)]
			for j, v := range dyr {
				pg[j] += v * xh[j]
				pb[j] += v
			}
		}
	}, func(part []float32) {
		addInto(dg, part[:d])
		addInto(db, part[d:])
	})
}

// colSumAdd adds the column sums of x[n×d] to out: sequential sums over
// fixed chunks of rows (in parallel), added to out in chunk order.
func colSumAdd(x []float32, n, d int, out []float32) {
	chunkedColSums(n, d, func(lo, hi int, part []float32) {
		for r := lo; r < hi; r++ {
			addInto(part, x[r*d:(r+1)*d])
		}
	}, func(part []float32) { addInto(out, part) })
}

// sumChunk is the fixed row chunk of chunkedColSums.
const sumChunk = 256

// chunkedColSums runs sum(lo, hi, part) on each chunk of sumChunk rows of
// [0, n) (concurrently, part zeroed, width floats) and then add(part) on the
// chunks in order. The result depends only on n, never on the number of
// cores or the scheduling.
func chunkedColSums(n, width int, sum func(lo, hi int, part []float32), add func(part []float32)) {
	if n <= 0 {
		return
	}
	chunks := (n + sumChunk - 1) / sumChunk
	parts := getScratch(chunks * width)
	defer putScratch(parts)
	ps := *parts
	clear(ps)
	do := func(c int) { sum(c*sumChunk, min(n, (c+1)*sumChunk), ps[c*width:(c+1)*width]) }
	if chunks == 1 {
		do(0)
	} else {
		parallelTasks(chunks, func(_, c int) { do(c) })
	}
	for c := 0; c < chunks; c++ {
		add(ps[c*width : (c+1)*width])
	}
}

const geluC = 0.7978845608028654 // sqrt(2/pi)

// gelu (tanh approximation) of x into y, written as x·sigmoid(2z) with
// z = sqrt(2/pi)·(x + 0.044715x³), since 0.5·(1+tanh z) = sigmoid(2z)
// (gelu32 is the scalar reference; elem.go).
func gelu(x, y []float32) {
	parallelRows(len(x), 16384, func(lo, hi int) { geluSpan(x[lo:hi], y[lo:hi]) })
}

// geluBackward multiplies dy in place by gelu'(x).
func geluBackward(x, dy []float32) {
	parallelRows(len(x), 16384, func(lo, hi int) { geluBackwardSpan(x[lo:hi], dy[lo:hi]) })
}

// softmaxStats computes, for logits row z scaled by 1/temp, the
// log-sum-exp, fills p with the probabilities (when p is not nil) and
// returns the entropy. The exponentials are the vector float32 exp of the
// max-shifted logits (relative error < 1e-6); sums, the log-sum-exp and the
// entropy are accumulated in float64 in index order. A shifted logit below
// expClampL (probability < 2^-126 relative to the largest), where the
// clamped exp would floor at 2^-126 instead of underflowing, counts as
// probability 0: the floor times a huge log-probability (at a tiny
// temperature) would otherwise give an entropy above log(len(z)).
func softmaxStats(z []float32, invT float64, p []float32) (lse, ent float64) {
	_, lse, ent = softmaxRow(z, invT, p, true)
	return lse, ent
}

// softmaxProbs is softmaxStats without the entropy (a sampler's draw): the same log-sum-exp and
// the same probabilities, bit for bit, without the entropy's sequential float64 chain.
func softmaxProbs(z []float32, invT float64, p []float32) (lse float64) {
	_, lse, _ = softmaxRow(z, invT, p, false)
	return lse
}

// softmaxStat is what gives a row's probabilities again without its sums: the scaled logits'
// maximum and the reciprocal of the exponentials' sum.
type softmaxStat struct{ mx, inv float64 }

// softmaxRow is softmaxStats (with entropy; else without its chain, ent 0), also returning the
// row's softmaxStat.
func softmaxRow(z []float32, invT float64, p []float32, entropy bool) (st softmaxStat, lse, ent float64) {
	mx := scaledMax(z, invT)
	e := p
	if e == nil {
		e = make([]float32, len(z))
	}
	shiftScaled(z, invT, mx, e)
	expSpan(e)
	var s float64
	for j, v := range z {
		if float64(v)*invT-mx < expClampL {
			e[j] = 0
		}
		s += float64(e[j])
	}
	lse = mx + math.Log(s)
	inv := 1 / s
	if !entropy {
		probsFromExp(z, invT, softmaxStat{mx, inv}, e)
		return softmaxStat{mx, inv}, lse, 0
	}
	for j, v := range z {
		pj := float64(e[j]) * inv
		e[j] = float32(pj)
		if pj > 0 {
			ent -= pj * (float64(v)*invT - lse)
		}
	}
	return softmaxStat{mx, inv}, lse, ent
}

// softmaxProbsFrom fills p with the probabilities softmaxRow gave z, from its softmaxStat (a
// backward's recomputed probabilities): the same operations on each element (hence the same
// bits) without the maximum's pass and the index-ordered sums.
func softmaxProbsFrom(z []float32, invT float64, st softmaxStat, p []float32) {
	shiftScaled(z, invT, st.mx, p)
	expSpan(p[:len(z)])
	probsFromExp(z, invT, st, p)
}
