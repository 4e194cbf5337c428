package model

import "fmt"

// Backward accumulates into g the gradient of
//
//	L = Σ dLogProb[i][t]·logprob[i][t] + Σ dEntropy[i][t]·entropy[i][t]
//
// with respect to every tensor. dEntropy may be nil; both have the shape of
// LogProbs(). Calling Backward on several passes into one grads accumulates.
func (p *LLMPass) Backward(dLogProb, dEntropy [][]float32, g *LLMGrads) error {
	m := p.m
	if g == nil || g.cfg != m.cfg {
		return fmt.Errorf("model: Backward: grads do not match the model config")
	}
	if err := checkGradShape(p.seqs, "dLogProb", dLogProb, false); err != nil {
		return err
	}
	if err := checkGradShape(p.seqs, "dEntropy", dEntropy, true); err != nil {
		return err
	}
	p.backward(dLogProb, dEntropy, g)
	return nil
}

// backward is Backward after its checks: the skeleton's backward, shared by
// every description.
func (p *LLMPass) backward(dLogProb, dEntropy [][]float32, g *LLMGrads) {
	m := p.m
	b := m.d
	D, F, ld, od := b.D, b.F, b.ld(), b.H*b.hd
	N, M := p.n, p.M
	// One backward at a time rewrites or returns the activations; the last returns them to
	// the scratch pools for the next step.
	p.mu.Lock()
	defer p.mu.Unlock()
	p.restoreActs()
	defer p.releaseActs()
	w, gw := &m.w, &g.w
	dXb := getScratch(N * D)
	defer putScratch(dXb)
	dX := *dXb
	clear(dX)
	if M > 0 {
		dHfb, dXgb := getScratch(M*D), getScratch(M*D)
		defer putScratch(dHfb)
		defer putScratch(dXgb)
		dHf, dXg := *dHfb, *dXgb
		clear(dXg)
		dlps, des := flatGrads(p.seqs, dLogProb, dEntropy, M)
		p.headBackward(dlps, des, dHf, gw.head)
		b.normRowsBackward(dHf, p.nHat, p.nRstd, M, w.norm, dXg, gw.norm, gw.normB)
		for k, r := range p.respRows {
			addInto(dX[int(r)*D:(int(r)+1)*D], dXg[k*D:(k+1)*D])
		}
	}
	if N == 0 {
		return
	}
	// Scratch, every element written before it is read.
	bufs := []*[]float32{getScratch(N * D), getScratch(N * F), getScratch(N * od), getScratch(N * ld), nil}
	bs := &blockGrads{dT: *bufs[0], dAct: *bufs[1], dAO: *bufs[2], dQKV: *bufs[3]}
	bs.dGU = bs.dAct // GELU's backward is in place
	if b.mlp == MLPSwiGLU {
		bufs[4] = getScratch(N * 2 * F)
		bs.dGU = *bufs[4]
	}
	defer func() {
		for _, sb := range bufs {
			putScratch(sb)
		}
	}()
	if p.ins != nil {
		xb := getScratch(N * D)
		defer putScratch(xb)
		bs.x = *xb
	}
	for l := b.layers - 1; l >= 0; l-- {
		p.blockBackward(l, p.recompute(l, bs), dX, g, bs)
	}
	if gw.embed != nil { // nil: frozen (a LoRA's base)
		b.embedBackward(gw, p.tokens, p.pos, dX)
	}
}

// blockGrads is the scratch of blockBackward; x is the residual stream a
// checkpointed block is recomputed on.
type blockGrads struct{ dT, dAct, dGU, dAO, dQKV, x []float32 }

// recompute returns block l's activations: kept by the forward, or with
// checkpointing computed again from the block's kept input with the
// forward's calls (the same bits) into the one block's buffers, unless they
// hold block l already. s.dT serves as the forward's scratch: blockBackward
// writes it before reading it.
func (p *LLMPass) recompute(l int, s *blockGrads) *llmAct {
	a := p.act(l)
	if p.ins == nil || p.held == l {
		return a
	}
	copy(s.x, p.ins[l])
	p.m.blockForward(p, l, s.x, s.dT, a)
	p.held = l
	return a
}

// blockBackward turns dX (gradient of block l's output) into the gradient
// of its input, in place, accumulating the block's tensor gradients (its
// activations a) into g.
func (p *LLMPass) blockBackward(l int, a *llmAct, dX []float32, g *LLMGrads, s *blockGrads) {
	m, b := p.m, p.m.d
	N, D, F, ld, od := p.n, b.D, b.F, b.ld(), b.H*b.hd
	bw, gl := &m.w.blocks[l], &g.w.blocks[l]
	// MLP: x += down(act(up(h2))).
	weightGrad(m.gemm, N, dX, D, a.act, F, gl.down)
	if gl.downB != nil {
		colSumAdd(dX, N, D, gl.downB)
	}
	sgemmW(m.gemm, false, false, N, F, D, 1, dX, D, bw.downM(), F, 0, s.dAct, F)
	m.ad.backward(bw.downM(), N, a.act, dX, s.dAct)
	b.actBackward(a.gu, s.dAct, N, s.dGU)
	weightGrad(m.gemm, N, s.dGU, b.up(), a.h2, D, gl.gateUp)
	if gl.upB != nil {
		colSumAdd(s.dGU, N, b.up(), gl.upB)
	}
	sgemmW(m.gemm, false, false, N, D, b.up(), 1, s.dGU, b.up(), bw.gateUpM(), D, 0, s.dT, D)
	m.ad.backward(bw.gateUpM(), N, a.h2, s.dGU, s.dT)
	b.normRowsBackward(s.dT, a.postHat, a.postRstd, N, bw.post, dX, gl.post, gl.postB)
	// Attention: x += o_proj(attention(rope(norm(qkv(h1))))).
	weightGrad(m.gemm, N, dX, D, a.attOut, od, gl.oW)
	if gl.oB != nil {
		colSumAdd(dX, N, D, gl.oB)
	}
	sgemmW(m.gemm, false, false, N, od, D, 1, dX, D, bw.oM(), od, 0, s.dAO, od)
	m.ad.backward(bw.oM(), N, a.attOut, dX, s.dAO)
	gqaBackward(m.gemm, p.seqs, b.blockDims, a.qkv, a.maps, s.dAO, s.dQKV)
	if p.cos != nil {
		rope(s.dQKV, N, b.blockDims, p.cos, p.sin, true)
	}
	if bw.qn != nil {
		qkNormBackward(s.dQKV, N, b.blockDims, bw.qn, bw.kn, a.qkHat, a.qkRstd, gl.qn, gl.kn)
	}
	weightGrad(m.gemm, N, s.dQKV, ld, a.h1, D, gl.qkvW)
	if gl.qkvB != nil {
		colSumAdd(s.dQKV, N, ld, gl.qkvB)
	}
	sgemmW(m.gemm, false, false, N, D, ld, 1, s.dQKV, ld, bw.qkvM(), D, 0, s.dT, D)
	m.ad.backward(bw.qkvM(), N, a.h1, s.dQKV, s.dT)
	b.normRowsBackward(s.dT, a.inHat, a.inRstd, N, bw.in, dX, gl.in, gl.inB)
}

// checkGradShape checks that d (dLogProb or dEntropy) has one row per
// sequence of a pass and one value per response token.
func checkGradShape(seqs []seqInfo, name string, d [][]float32, optional bool) error {
	if d == nil && optional {
		return nil
	}
	if len(d) != len(seqs) {
		return fmt.Errorf("model: Backward: %s has %d sequences, want %d", name, len(d), len(seqs))
	}
	for i, si := range seqs {
		if len(d[i]) != si.rlen {
			return fmt.Errorf("model: Backward: %s[%d] has %d tokens, want %d", name, i, len(d[i]), si.rlen)
		}
	}
	return nil
}

// flatGrads lays dLogProb and dEntropy (nil: none) out as the pass's M response rows.
func flatGrads(seqs []seqInfo, dLogProb, dEntropy [][]float32, M int) (dlps, des []float32) {
	dlps = make([]float32, M)
	if dEntropy != nil {
		des = make([]float32, M)
	}
	for i, si := range seqs {
		copy(dlps[si.resp:si.resp+si.rlen], dLogProb[i])
		if dEntropy != nil {
			copy(des[si.resp:si.resp+si.rlen], dEntropy[i])
		}
	}
	return dlps, des
}

// logitGradRows writes into dZ[k×V] the gradient of Σ dlps·logprob + Σ des·entropy (des
// may be nil) with respect to the raw logits z[k×V] of k rows with probabilities probs
// (float64 per element, rounded once). dZ may be probs itself.
func logitGradRows(z, probs []float32, lse []float64, ent []float32, targets []int32, dlps, des []float32, V int, temp float32, dZ []float32) {
	invT := 1 / float64(temp)
	parallelRows(len(targets), 32, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			dlp := float64(dlps[k])
			var de float64
			if des != nil {
				de = float64(des[k])
			}
			logitGradSpan(z[k*V:(k+1)*V], probs[k*V:(k+1)*V], dZ[k*V:(k+1)*V], dlp, de, invT, lse[k], float64(ent[k]))
			dZ[k*V+int(targets[k])] += float32(dlp * invT)
		}
	})
}
