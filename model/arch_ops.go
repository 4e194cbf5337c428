package model

import "math"

// The ops of a Llama-family block (RMSNorm, rotary embedding, grouped-query
// attention, SwiGLU), each with its backward, shared by LLM's forward,
// backward and KV-cache decoder. Every op is element- or row-wise over its
// own outputs, or reduces in a fixed order (chunkedColSums), so results do
// not depend on the number of cores.

// rmsRow writes y = w·(x·r) with r = 1/sqrt(mean(x²)+eps) and, when xhat is
// not nil, xhat = x·r; returns r. The mean of squares is accumulated in
// float64 in index order and r rounded to float32; the products are float32
// as in transformers' RMSNorm (which computes in float32). y may alias x.
func rmsRow(x, w, y, xhat []float32, eps float64) float32 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	r := float32(1 / math.Sqrt(ss/float64(len(x))+eps))
	w = w[:len(x)]
	y = y[:len(x)]
	for j, v := range x {
		h := v * r
		if xhat != nil {
			xhat[j] = h
		}
		y[j] = w[j] * h
	}
	return r
}

// rmsRowBackward adds to dx the input gradient of rmsRow given dy:
// dx += r·(g − xhat·mean(g·xhat)), g = dy·w.
func rmsRowBackward(dy, xhat, w, dx []float32, r float32) {
	var s float64
	for j, v := range dy {
		s += float64(v*w[j]) * float64(xhat[j])
	}
	m := float32(s / float64(len(dy)))
	dx = dx[:len(dy)]
	for j, v := range dy {
		dx[j] += r * (v*w[j] - xhat[j]*m)
	}
}

// rmsNorm normalises each row of x[n×d] into y, saving xhat and rstd when
// they are not nil.
func rmsNorm(x []float32, n, d int, w []float32, eps float64, y, xhat, rstd []float32) {
	parallelRows(n, 64, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			var xh []float32
			if xhat != nil {
				xh = xhat[r*d : (r+1)*d]
			}
			rs := rmsRow(x[r*d:(r+1)*d], w, y[r*d:(r+1)*d], xh, eps)
			if rstd != nil {
				rstd[r] = rs
			}
		}
	})
}

// rmsNormBackward adds to dx[n×d] the input gradient of rmsNorm given dy
// and accumulates dw (chunked column sums: independent of the core count).
func rmsNormBackward(dy, xhat, rstd []float32, n, d int, w, dx, dw []float32) {
	parallelRows(n, 64, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			rmsRowBackward(dy[r*d:(r+1)*d], xhat[r*d:(r+1)*d], w, dx[r*d:(r+1)*d], rstd[r])
		}
	})
	chunkedColSums(n, d, func(lo, hi int, part []float32) {
		for r := lo; r < hi; r++ {
			xh := xhat[r*d : (r+1)*d]
			for j, v := range dy[r*d : (r+1)*d] {
				part[j] += v * xh[j]
			}
		}
	}, func(part []float32) { addInto(dw, part) })
}

// blockDims are the sizes the block ops need.
type blockDims struct {
	D, H, KV, hd, F int
	eps             float64
}

func dimsOf(c ArchConfig) blockDims {
	return blockDims{D: c.Hidden, H: c.Heads, KV: c.KVHeads, hd: c.HeadDim, F: c.Intermediate, eps: c.RMSNormEps}
}

// ld is the width of a q|k|v row.
func (b blockDims) ld() int { return (b.H + 2*b.KV) * b.hd }

// qkNorm applies the per-head RMSNorm (qn to the H query heads, kn to the
// KV key heads) in place to the q and k parts of qkv[n×ld], saving xhat
// [n×(H+KV)·hd] and rstd [n×(H+KV)] unless xhat is nil.
func qkNorm(qkv []float32, n int, b blockDims, qn, kn, xhat, rstd []float32) {
	nh, ld := b.H+b.KV, b.ld()
	parallelRows(n, 16, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			for h := 0; h < nh; h++ {
				w := qn
				if h >= b.H {
					w = kn
				}
				seg := qkv[r*ld+h*b.hd:][:b.hd]
				if xhat == nil { // decoding: nothing kept
					rmsRow(seg, w, seg, nil, b.eps)
					continue
				}
				rstd[r*nh+h] = rmsRow(seg, w, seg, xhat[(r*nh+h)*b.hd:][:b.hd], b.eps)
			}
		}
	})
}

// qkNormBackward replaces the q and k parts of dqkv (gradients of qkNorm's
// output) by the gradients of its input and accumulates dqn, dkn.
func qkNormBackward(dqkv []float32, n int, b blockDims, qn, kn, xhat, rstd, dqn, dkn []float32) {
	nh, ld, hd := b.H+b.KV, b.ld(), b.hd
	chunkedColSums(n, 2*hd, func(lo, hi int, part []float32) {
		for r := lo; r < hi; r++ {
			for h := 0; h < nh; h++ {
				p := part[:hd]
				if h >= b.H {
					p = part[hd:]
				}
				xh := xhat[(r*nh+h)*hd:][:hd]
				for j, v := range dqkv[r*ld+h*hd:][:hd] {
					p[j] += v * xh[j]
				}
			}
		}
	}, func(part []float32) {
		addInto(dqn, part[:hd])
		addInto(dkn, part[hd:])
	})
	parallelRows(n, 16, func(lo, hi int) {
		var tmp [1024]float32
		for r := lo; r < hi; r++ {
			for h := 0; h < nh; h++ {
				w := qn
				if h >= b.H {
					w = kn
				}
				seg := dqkv[r*ld+h*hd:][:hd]
				dx := tmp[:hd]
				clear(dx)
				rmsRowBackward(seg, xhat[(r*nh+h)*hd:][:hd], w, dx, rstd[r*nh+h])
				copy(seg, dx)
			}
		}
	})
}

// ropeTable returns cos and sin [len(pos)×hd/2] of the rotary angles
// pos·f_i, f_i the inverse frequencies of RopeInvFreq: frequencies, angles,
// cos and sin are computed in float64 and then rounded to float32.
func ropeTable(pos []int32, hd int, theta float64, s RopeScaling) (cos, sin []float32) {
	half := hd / 2
	inv := RopeInvFreq(hd, theta, s)
	cos, sin = make([]float32, len(pos)*half), make([]float32, len(pos)*half)
	for r, p := range pos {
		for i, f := range inv {
			s, c := math.Sincos(float64(p) * f)
			cos[r*half+i], sin[r*half+i] = float32(c), float32(s)
		}
	}
	return cos, sin
}

// rope rotates, in place, the q and k heads of each row of qkv[n×ld] by
// its row's angles (the non-interleaved "rotate half" layout: element i
// pairs with i+hd/2). inverse applies the transposed rotation (backward).
func rope(qkv []float32, n int, b blockDims, cos, sin []float32, inverse bool) {
	half, ld := b.hd/2, b.ld()
	parallelRows(n, 16, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			c, s := cos[r*half:][:half], sin[r*half:][:half]
			for h := 0; h < b.H+b.KV; h++ {
				v := qkv[r*ld+h*b.hd:][:b.hd]
				x1, x2 := v[:half], v[half:]
				for i, cv := range c {
					a, bb := x1[i], x2[i]
					if inverse {
						x1[i] = a*cv + bb*s[i]
						x2[i] = bb*cv - a*s[i]
					} else {
						x1[i] = a*cv - bb*s[i]
						x2[i] = bb*cv + a*s[i]
					}
				}
			}
		}
	})
}

// swiglu writes act[n×F] = silu(gate)·up from gu[n×2F] (gate | up per row),
// silu(g) = g/(1+exp(−g)) with the vector exp.
func swiglu(gu []float32, n, F int, act []float32) {
	parallelRows(n, 4, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			swigluSpan(gu[r*2*F:][:F], gu[r*2*F+F:][:F], act[r*F:][:F])
		}
	})
}

// swigluBackward writes into dgu[n×2F] the gradient of gu given dact.
func swigluBackward(gu, dact []float32, n, F int, dgu []float32) {
	parallelRows(n, 4, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			swigluBackwardSpan(gu[r*2*F:][:F], gu[r*2*F+F:][:F], dact[r*F:][:F], dgu[r*2*F:][:F], dgu[r*2*F+F:][:F])
		}
	})
}

// gqaForward computes causal grouped-query attention for every sequence of
// a pass into out[N×H·hd]: query head h reads key/value head h/(H/KV). With
// maps nil the softmax maps are not kept: a worker holds the rows of a block
// of attnBlock queries at a time (memory linear in the sequence length), and
// gqaBackward recomputes them block by block with the same calls, hence the
// same bits. Otherwise they are kept in maps (per sequence at seqInfo.att,
// then per head, L×L). One task per sequence when there are enough of them
// (its rows are first streamed into cache), else one per (sequence, head).
func gqaForward(g GEMM, seqs []seqInfo, b blockDims, qkv, out, maps []float32) {
	H, od, ld := b.H, b.H*b.hd, b.ld()
	perSeq, hs := attnSplit(len(seqs), H)
	scratch, pFloats := make(workerScratch, workers()), attnFloats(seqs)
	defer scratch.release()
	parallelTasks(len(seqs)*H/hs, func(worker, t int) {
		si := seqs[t*hs/H]
		L := si.n
		if L == 0 {
			return
		}
		if perSeq {
			touch(qkv[si.start*ld : (si.start+L)*ld])
		}
		for h := t * hs % H; h < t*hs%H+hs; h++ {
			v := qkv[si.start*ld+(H+b.KV+h/(H/b.KV))*b.hd:]
			if maps != nil {
				P := maps[si.att+h*L*L:][:L*L]
				attnRows(g, si, b, qkv, h, 0, L, P)
				g.Sgemm(false, false, L, b.hd, L, 1, P, L, v, ld, 0, out[si.start*od+h*b.hd:], od)
				continue
			}
			for i0 := 0; i0 < L; i0 += attnBlock {
				i1 := min(L, i0+attnBlock)
				P := scratch.get(worker, pFloats)[:(i1-i0)*i1]
				attnRows(g, si, b, qkv, h, i0, i1, P)
				g.Sgemm(false, false, i1-i0, b.hd, i1, 1, P, i1, v, ld, 0, out[(si.start+i0)*od+h*b.hd:], od)
			}
		}
	})
}

// attnBlock is how many query rows of one head a worker holds at once when
// the maps are not kept: a multiple of the blocked GEMM's k block (256), so
// that dk and dv, summed over query rows block by block, add the same blocks
// in the same order as one product over all rows.
var attnBlock = 256

// workerScratch is one scratch buffer per worker, taken from the pools on first use.
type workerScratch []*[]float32

// get returns worker's buffer of n floats (the same n on every call).
func (s workerScratch) get(worker, n int) []float32 {
	if s[worker] == nil {
		s[worker] = getScratch(n)
	}
	return *s[worker]
}

// release returns the buffers to the pools.
func (s workerScratch) release() {
	for _, b := range s {
		putScratch(b)
	}
}

// maxLen is the length of the longest sequence.
func maxLen(seqs []seqInfo) int {
	maxL := 0
	for _, si := range seqs {
		maxL = max(maxL, si.n)
	}
	return maxL
}

// attnFloats is a worker's scratch for attnBlock rows of the longest sequence.
func attnFloats(seqs []seqInfo) int {
	maxL := maxLen(seqs)
	return min(maxL, attnBlock) * maxL
}

// attnRows writes into P[(i1−i0)×i1] the causal softmax rows i0..i1−1 of query head h of one
// sequence over its keys 0..i1−1 (row i over keys 0..i, zeros after).
func attnRows(g GEMM, si seqInfo, b blockDims, qkv []float32, h, i0, i1 int, P []float32) {
	ld, hd := b.ld(), b.hd
	base := si.start * ld
	scale := float32(1 / math.Sqrt(float64(hd)))
	g.Sgemm(false, true, i1-i0, i1, hd, scale, qkv[base+i0*ld+h*hd:], ld, qkv[base+(b.H+h/(b.H/b.KV))*hd:], ld, 0, P, i1)
	causalSoftmaxRows(P, i0, i1-i0, i1)
}

// gqaBackward writes into dqkv[N×ld] the gradient of the attention input
// (post-RoPE q and k, v) given dO[N×H·hd], reading the maps kept by
// gqaForward or, with maps nil, recomputing them attnBlock query rows at a
// time. One task per sequence and KV head (or per sequence, as in
// gqaForward): its query heads add into the shared dk and dv in head order.
func gqaBackward(g GEMM, seqs []seqInfo, b blockDims, qkv, maps, dO, dqkv []float32) {
	ld, KV := b.ld(), b.KV
	perSeq, ks := attnSplit(len(seqs), KV)
	pScratch, dScratch := make(workerScratch, workers()), make(workerScratch, workers())
	pFloats, maxL := attnFloats(seqs), maxLen(seqs)
	defer pScratch.release()
	defer dScratch.release()
	parallelTasks(len(seqs)*KV/ks, func(worker, t int) {
		si := seqs[t*ks/KV]
		L := si.n
		if L == 0 {
			return
		}
		if perSeq {
			touch(qkv[si.start*ld : (si.start+L)*ld])
			touch(dO[si.start*b.H*b.hd : (si.start+L)*b.H*b.hd])
			if maps != nil {
				touch(maps[si.att : si.att+b.H*L*L])
			}
		}
		a := attnGrad{g: g, si: si, b: b, qkv: qkv, dO: dO, dqkv: dqkv}
		for kh := t * ks % KV; kh < t*ks%KV+ks; kh++ {
			if maps != nil {
				a.keptMaps(kh, maps, dScratch.get(worker, maxL*maxL))
				continue
			}
			a.blocks(kh, pScratch.get(worker, pFloats), dScratch.get(worker, pFloats))
		}
	})
}

// attnGrad is one sequence's attention backward.
type attnGrad struct {
	g             GEMM
	si            seqInfo
	b             blockDims
	qkv, dO, dqkv []float32
}

// operands returns the rows of query head h and its KV head in qkv, dO and dqkv from row i0.
func (a *attnGrad) operands(h, i0 int) (q, k, v, do, dq, dk, dv []float32) {
	ld, hd, H, KV := a.b.ld(), a.b.hd, a.b.H, a.b.KV
	kh := h / (H / KV)
	base := a.si.start * ld
	q, dq = a.qkv[base+i0*ld+h*hd:], a.dqkv[base+i0*ld+h*hd:]
	k, v = a.qkv[base+(H+kh)*hd:], a.qkv[base+(H+KV+kh)*hd:]
	dk, dv = a.dqkv[base+(H+kh)*hd:], a.dqkv[base+(H+KV+kh)*hd:]
	do = a.dO[(a.si.start+i0)*H*hd+h*hd:]
	return
}

// keptMaps is the backward of KV head kh's query heads from the kept maps, with dScratch
// (the longest sequence's L×L) for a map's gradient.
func (a *attnGrad) keptMaps(kh int, maps, dScratch []float32) {
	ld, hd, L, od, rep := a.b.ld(), a.b.hd, a.si.n, a.b.H*a.b.hd, a.b.H/a.b.KV
	scale := float32(1 / math.Sqrt(float64(hd)))
	dP := dScratch[:L*L]
	for h := kh * rep; h < (kh+1)*rep; h++ {
		beta := float32(1)
		if h == kh*rep {
			beta = 0
		}
		P := maps[a.si.att+h*L*L:][:L*L]
		q, k, v, do, dq, dk, dv := a.operands(h, 0)
		a.g.Sgemm(false, true, L, L, hd, 1, do, od, v, ld, 0, dP, L)
		a.g.Sgemm(true, false, L, hd, L, 1, P, L, do, od, beta, dv, ld)
		softmaxRowsBackward(P, dP, 0, L, L)
		a.g.Sgemm(false, false, L, hd, L, scale, dP, L, k, ld, 0, dq, ld)
		a.g.Sgemm(true, false, L, hd, L, scale, dP, L, q, ld, beta, dk, ld)
	}
}

// blocks is the backward of KV head kh's query heads recomputing their maps attnBlock query
// rows at a time into pS, with dS for the maps' gradient.
func (a *attnGrad) blocks(kh int, pS, dS []float32) {
	ld, hd, L, od, rep := a.b.ld(), a.b.hd, a.si.n, a.b.H*a.b.hd, a.b.H/a.b.KV
	scale := float32(1 / math.Sqrt(float64(hd)))
	_, _, _, _, _, dk, dv := a.operands(kh*rep, 0)
	for r := 0; r < L; r++ {
		clear(dk[r*ld : r*ld+hd])
		clear(dv[r*ld : r*ld+hd])
	}
	for h := kh * rep; h < (kh+1)*rep; h++ {
		for i0 := 0; i0 < L; i0 += attnBlock {
			i1 := min(L, i0+attnBlock)
			n := i1 - i0
			P, dP := pS[:n*i1], dS[:n*i1]
			attnRows(a.g, a.si, a.b, a.qkv, h, i0, i1, P)
			q, k, v, do, dq, dk, dv := a.operands(h, i0)
			a.g.Sgemm(false, true, n, i1, hd, 1, do, od, v, ld, 0, dP, i1)
			a.g.Sgemm(true, false, i1, hd, n, 1, P, i1, do, od, 1, dv, ld)
			softmaxRowsBackward(P, dP, i0, n, i1)
			a.g.Sgemm(false, false, n, hd, i1, scale, dP, i1, k, ld, 0, dq, ld)
			a.g.Sgemm(true, false, i1, hd, n, scale, dP, i1, q, ld, 1, dk, ld)
		}
	}
}

// softmaxRowsBackward turns dP (gradient of the causal softmax output P:
// rows i0..i0+n−1 of width w, row i over keys 0..i) into the gradient of its
// input scores, in place.
func softmaxRowsBackward(P, dP []float32, i0, n, w int) {
	for r := 0; r < n; r++ {
		i := i0 + r
		pr := P[r*w : r*w+i+1]
		dr := dP[r*w : (r+1)*w]
		var s float32
		for j, pv := range pr {
			s += pv * dr[j]
		}
		for j, pv := range pr {
			dr[j] = pv * (dr[j] - s)
		}
		clear(dr[i+1:])
	}
}
