package model

import "math"

const lnEps = 1e-5

// linear computes y[n×out] = x[n×in]·Wᵀ + b with W stored [out×in].
func (m *Model) linear(x []float32, n, in int, W, b []float32, out int, y []float32) {
	if n == 0 {
		return
	}
	for r := 0; r < n; r++ {
		copy(y[r*out:(r+1)*out], b)
	}
	m.gemm.Sgemm(false, true, n, out, in, 1, x, in, W, in, 1, y, out)
}

// layerNorm normalises each row of x[n×d] into y, saving xhat and rstd
// (either may be nil when not needed for a backward pass).
func layerNorm(x []float32, n, d int, g, b, y, xhat, rstd []float32) {
	parallelRows(n, 64, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := x[r*d : (r+1)*d]
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
			yr := y[r*d : (r+1)*d]
			for j, v := range row {
				h := float32((float64(v) - mean) * rs)
				if xhat != nil {
					xhat[r*d+j] = h
				}
				yr[j] = h*g[j] + b[j]
			}
			if rstd != nil {
				rstd[r] = float32(rs)
			}
		}
	})
}

// layerNormBackward adds to dx[n×d] the input gradient of LayerNorm given
// dy, and accumulates dg, db. Row work runs in parallel; the parameter
// gradients are summed sequentially in row order.
func layerNormBackward(dy, xhat, rstd []float32, n, d int, g []float32, dx, dg, db []float32) {
	parallelRows(n, 64, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			dyr := dy[r*d : (r+1)*d]
			xh := xhat[r*d : (r+1)*d]
			var s1, s2 float64
			for j := range dyr {
				dh := float64(dyr[j] * g[j])
				s1 += dh
				s2 += dh * float64(xh[j])
			}
			s1 /= float64(d)
			s2 /= float64(d)
			rs := float64(rstd[r])
			dxr := dx[r*d : (r+1)*d]
			for j := range dyr {
				dh := float64(dyr[j] * g[j])
				dxr[j] += float32(rs * (dh - s1 - float64(xh[j])*s2))
			}
		}
	})
	for r := 0; r < n; r++ {
		dyr := dy[r*d : (r+1)*d]
		xh := xhat[r*d : (r+1)*d]
		for j := range dyr {
			dg[j] += dyr[j] * xh[j]
			db[j] += dyr[j]
		}
	}
}

// colSumAdd adds the column sums of x[n×d] to out (sequential row order).
func colSumAdd(x []float32, n, d int, out []float32) {
	for r := 0; r < n; r++ {
		row := x[r*d : (r+1)*d]
		for j, v := range row {
			out[j] += v
		}
	}
}

const geluC = 0.7978845608028654 // sqrt(2/pi)

// exp32 is a float32 exp (Cephes expf polynomial, ~1 ulp on [-87, 88]).
func exp32(x float32) float32 {
	if x > 88.3 {
		return float32(math.Inf(1))
	}
	if x < -87.3 {
		return 0
	}
	n := int32(x*1.44269504088896341+128.5) - 128 // floor(x·log2(e) + 0.5)
	fn := float32(n)
	r := x - fn*0.693359375 - fn*-2.12194440e-4
	y := ((((((1.9875691500e-4*r+1.3981999507e-3)*r+8.3334519073e-3)*r+4.1665795894e-2)*r+1.6666665459e-1)*r+5.0000001201e-1)*r*r + r + 1)
	return y * math.Float32frombits(uint32(n+127)<<23)
}

// gelu (tanh approximation) of x into y, written as x·sigmoid(2z) with
// z = sqrt(2/pi)·(x + 0.044715x³), since 0.5·(1+tanh z) = sigmoid(2z).
func gelu(x, y []float32) {
	parallelRows(len(x), 4096, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := x[i]
			z := geluC * (v + 0.044715*v*v*v)
			y[i] = v / (1 + exp32(-2*z))
		}
	})
}

// geluBackward multiplies dy in place by gelu'(x).
func geluBackward(x, dy []float32) {
	parallelRows(len(x), 4096, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := x[i]
			z := geluC * (v + 0.044715*v*v*v)
			s := 1 / (1 + exp32(-2*z))
			d := s + 2*v*s*(1-s)*geluC*(1+3*0.044715*v*v)
			dy[i] *= d
		}
	})
}

// softmaxStats computes, for logits row z scaled by 1/temp, the
// log-sum-exp, fills p with the probabilities and returns the entropy.
func softmaxStats(z []float32, invT float64, p []float32) (lse, ent float64) {
	mx := math.Inf(-1)
	for _, v := range z {
		if u := float64(v) * invT; u > mx {
			mx = u
		}
	}
	var s float64
	for _, v := range z {
		s += math.Exp(float64(v)*invT - mx)
	}
	lse = mx + math.Log(s)
	for j, v := range z {
		lp := float64(v)*invT - lse
		e := math.Exp(lp)
		if p != nil {
			p[j] = float32(e)
		}
		ent -= e * lp
	}
	return lse, ent
}
