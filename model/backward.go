package model

import (
	"fmt"
	"math"
)

// Backward accumulates into g the gradient of
//
//	L = Σ dLogProb[i][t]·logprob[i][t] + Σ dEntropy[i][t]·entropy[i][t]
//
// with respect to every parameter. dEntropy may be nil. dLogProb (and
// dEntropy) must have the shape of LogProbs(). Calling Backward on several
// passes into one Grads accumulates the gradients.
func (p *Pass) Backward(dLogProb, dEntropy [][]float32, g *Grads) error {
	m := p.m
	if g == nil || g.cfg != m.cfg {
		return fmt.Errorf("model: Backward: grads do not match the model config")
	}
	if err := p.checkShape("dLogProb", dLogProb, false); err != nil {
		return err
	}
	if err := p.checkShape("dEntropy", dEntropy, true); err != nil {
		return err
	}
	c := m.cfg
	D, F, V := c.Dim, c.FFMult*c.Dim, c.Vocab
	N, M := p.n, p.M
	w, gw := &m.w, &g.w

	// d loss / d logits.
	dZb := getScratch(M * V)
	defer putScratch(dZb)
	dZ := *dZb
	logitGrads(p.seqs, dLogProb, dEntropy, p.logits, p.probs, p.lse, p.ent, p.targets, V, p.temp, dZ)
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
		m.gemm.Sgemm(false, false, M, D, V, 1, dZ, V, w.head, D, 0, dHf, D)
		m.gemm.Sgemm(true, false, V, D, M, 1, dZ, V, p.hf, D, 1, gw.head, D)
		layerNormBackward(dHf, p.lnfXhat, p.lnfRstd, M, D, w.lnfW, dXg, gw.lnfW, gw.lnfB)
		for k, r := range p.respRows {
			addInto(dX[int(r)*D:(int(r)+1)*D], dXg[k*D:(k+1)*D])
		}
	}
	if N == 0 {
		return nil
	}
	dFb, dTb, dQKVb := getScratch(N*F), getScratch(N*D), getScratch(N*3*D)
	defer putScratch(dFb)
	defer putScratch(dTb)
	defer putScratch(dQKVb)
	dF, dT, dQKV := *dFb, *dTb, *dQKVb
	for l := c.Layers - 1; l >= 0; l-- {
		lw, gl, a := &w.layers[l], &gw.layers[l], &p.acts[l]
		// MLP.
		m.gemm.Sgemm(true, false, D, F, N, 1, dX, D, a.fcAct, F, 1, gl.fc2W, F)
		colSumAdd(dX, N, D, gl.fc2B)
		m.gemm.Sgemm(false, false, N, F, D, 1, dX, D, lw.fc2W, F, 0, dF, F)
		geluBackward(a.fcPre, dF)
		m.gemm.Sgemm(true, false, F, D, N, 1, dF, F, a.ln2out, D, 1, gl.fcW, D)
		colSumAdd(dF, N, F, gl.fcB)
		m.gemm.Sgemm(false, false, N, D, F, 1, dF, F, lw.fcW, D, 0, dT, D)
		layerNormBackward(dT, a.ln2xhat, a.ln2rstd, N, D, lw.ln2w, dX, gl.ln2w, gl.ln2b)
		// Attention.
		m.gemm.Sgemm(true, false, D, D, N, 1, dX, D, a.attOut, D, 1, gl.projW, D)
		colSumAdd(dX, N, D, gl.projB)
		m.gemm.Sgemm(false, false, N, D, D, 1, dX, D, lw.projW, D, 0, dT, D)
		m.attentionBackward(p, a, dT, dQKV)
		m.gemm.Sgemm(true, false, 3*D, D, N, 1, dQKV, 3*D, a.ln1out, D, 1, gl.qkvW, D)
		colSumAdd(dQKV, N, 3*D, gl.qkvB)
		m.gemm.Sgemm(false, false, N, D, 3*D, 1, dQKV, 3*D, lw.qkvW, D, 0, dT, D)
		layerNormBackward(dT, a.ln1xhat, a.ln1rstd, N, D, lw.ln1w, dX, gl.ln1w, gl.ln1b)
	}
	for r := 0; r < N; r++ {
		dx := dX[r*D : (r+1)*D]
		addInto(gw.tok[int(p.tokens[r])*D:][:D], dx)
		addInto(gw.pos[int(p.pos[r])*D:][:D], dx)
	}
	return nil
}

func (p *Pass) checkShape(name string, d [][]float32, optional bool) error {
	return checkGradShape(p.seqs, name, d, optional)
}

// attentionBackward writes into dQKV [N×3D] the gradient of the attention
// block's input given dO [N×D] (gradient of the concatenated head outputs).
func (m *Model) attentionBackward(p *Pass, a *layerAct, dO, dQKV []float32) {
	c := m.cfg
	D, H := c.Dim, c.Heads
	hd := D / H
	scale := float32(1 / math.Sqrt(float64(hd)))
	ld := 3 * D
	maxL := 0
	for _, si := range p.seqs {
		maxL = max(maxL, si.n)
	}
	scratch := make([][]float32, workers())
	// As in attentionForward: whole sequences (their activations first
	// streamed into cache) when there are enough, else single heads.
	perSeq, hs := attnSplit(len(p.seqs), H)
	parallelTasks(len(p.seqs)*H/hs, func(worker, t int) {
		si := p.seqs[t*hs/H]
		L := si.n
		if L == 0 {
			return
		}
		if scratch[worker] == nil {
			scratch[worker] = make([]float32, maxL*maxL)
		}
		if perSeq {
			touch(a.qkv[si.start*ld : (si.start+L)*ld])
			touch(dO[si.start*D : (si.start+L)*D])
			touch(a.att[si.att : si.att+H*L*L])
		}
		for h := t * hs % H; h < t*hs%H+hs; h++ {
			attentionHeadBackward(m, a, dO, dQKV, si, h, scratch[worker][:L*L], scale)
		}
	})
}

// attentionHeadBackward is attentionBackward for one sequence and head.
func attentionHeadBackward(m *Model, a *layerAct, dO, dQKV []float32, si seqInfo, h int, dP []float32, scale float32) {
	D, H := m.cfg.Dim, m.cfg.Heads
	hd := D / H
	ld := 3 * D
	L := si.n
	P := a.att[si.att+h*L*L : si.att+(h+1)*L*L]
	base := si.start * ld
	q, k, v := a.qkv[base+h*hd:], a.qkv[base+D+h*hd:], a.qkv[base+2*D+h*hd:]
	dq, dk, dv := dQKV[base+h*hd:], dQKV[base+D+h*hd:], dQKV[base+2*D+h*hd:]
	do := dO[si.start*D+h*hd:]
	m.gemm.Sgemm(false, true, L, L, hd, 1, do, D, v, ld, 0, dP, L)
	m.gemm.Sgemm(true, false, L, hd, L, 1, P, L, do, D, 0, dv, ld)
	softmaxRowsBackward(P, dP, L)
	m.gemm.Sgemm(false, false, L, hd, L, scale, dP, L, k, ld, 0, dq, ld)
	m.gemm.Sgemm(true, false, L, hd, L, scale, dP, L, q, ld, 0, dk, ld)
}
