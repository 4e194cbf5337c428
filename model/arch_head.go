package model

// The output head runs a chunk of response rows at a time: final-norm rows × head, softmax,
// the chosen token's log-prob and the entropy in the forward; the logits' gradient, the
// final-norm rows' gradient and the head's gradient in the backward, recomputing the chunk's
// logits. No [tokens × Vocab] array exists; a pass of one chunk keeps its logits for the
// backward instead of recomputing them.

// headBudget is the floats of one chunk's logits (16 MiB) when 256 rows take fewer.
const headBudget = 1 << 22

// headRows is how many rows the head handles at once for a vocabulary of V: a multiple of the
// blocked GEMM's k block (256), so that the head's gradient, accumulated chunk by chunk into
// one sum, adds the same blocks in the same order as one product over all rows.
var headRows = func(V int) int { return 256 * max(1, headBudget/(256*V)) }

// scoreHead fills p.lse, p.logp and p.ent from the final-norm rows p.hf.
func (m *LLM) scoreHead(p *LLMPass) {
	V, rows := m.d.vocab, headRows(m.d.vocab)
	n := min(rows, p.M)
	if p.M <= rows { // kept for the backward
		// From the scratch pools (the backward returns them): no fresh pages a step.
		p.logits, p.probs = (*getScratch(n * V))[:n*V], (*getScratch(n * V))[:n*V]
		m.headLogits(p.hf, 0, p.M, p.logits)
		scoreRows(p.logits, p.probs, V, p.temp, p.targets, p.lse, p.logp, p.ent, p.rowStats)
		return
	}
	zb, pb := getScratch(n*V), getScratch(n*V)
	defer putScratch(zb)
	defer putScratch(pb)
	z, pr := *zb, *pb
	for lo := 0; lo < p.M; lo += rows {
		hi := min(p.M, lo+rows)
		m.headLogits(p.hf, lo, hi, z)
		scoreRows(z, pr, V, p.temp, p.targets[lo:hi], p.lse[lo:hi], p.logp[lo:hi], p.ent[lo:hi], p.rowStats[lo:hi])
	}
}

// headLogits writes into z the logits of final-norm rows [lo, hi) of hf.
func (m *LLM) headLogits(hf []float32, lo, hi int, z []float32) {
	D, V := m.d.D, m.d.vocab
	m.linear(hf[lo*D:hi*D], hi-lo, D, m.w.headM(), nil, V, z[:(hi-lo)*V])
}

// logits returns the raw logits [M×Vocab] of every response row (only for the slow checking
// paths: it forms the array the head otherwise never holds).
func (p *LLMPass) rawLogits() []float32 {
	if p.logits != nil {
		p.lent = true
		return p.logits
	}
	z := make([]float32, p.M*p.m.d.vocab)
	p.m.headLogits(p.hf, 0, p.M, z)
	return z
}

// headBackward writes into dHf[M×D] the gradient of Σ dlps·logprob + Σ des·entropy (des may
// be nil) with respect to the final-norm rows and adds the head's gradient into gHead (nil:
// frozen).
func (p *LLMPass) headBackward(dlps, des, dHf, gHead []float32) {
	m := p.m
	D, V, rows := m.d.D, m.d.vocab, headRows(m.d.vocab)
	n := min(rows, p.M)
	dZb := getScratch(n * V)
	defer putScratch(dZb)
	dZ := (*dZb)[:n*V]
	var z, pr []float32
	if p.logits == nil {
		zb := getScratch(n * V)
		defer putScratch(zb)
		z, pr = (*zb)[:n*V], dZ // the gradient overwrites the probabilities in place
	}
	invT := 1 / float64(p.temp)
	for lo := 0; lo < p.M; lo += rows {
		hi := min(p.M, lo+rows)
		k := hi - lo
		if p.logits != nil {
			z, pr = p.logits, p.probs
		} else {
			m.headLogits(p.hf, lo, hi, z)
			parallelRows(k, 16, func(a, b int) {
				for r := a; r < b; r++ {
					softmaxProbsFrom(z[r*V:(r+1)*V], invT, p.rowStats[lo+r], pr[r*V:(r+1)*V])
				}
			})
		}
		logitGradRows(z, pr, p.lse[lo:hi], p.ent[lo:hi], p.targets[lo:hi], dlps[lo:hi], sliceOrNil(des, lo, hi), V, p.temp, dZ)
		sgemmW(m.gemm, false, false, k, D, V, 1, dZ, V, m.w.headM(), D, 0, dHf[lo*D:], D)
		weightGrad(m.gemm, k, dZ, V, p.hf[lo*D:hi*D], D, gHead)
	}
	p.releaseLogits()
}

// releaseLogits returns the kept logits and probabilities to the scratch pools, unless they
// were handed out; a later backward or rawLogits recomputes them (the same bits).
func (p *LLMPass) releaseLogits() {
	if p.logits == nil || p.lent {
		return
	}
	l, q := p.logits, p.probs
	p.logits, p.probs = nil, nil
	putScratch(&l)
	putScratch(&q)
}

func sliceOrNil(v []float32, lo, hi int) []float32 {
	if v == nil {
		return nil
	}
	return v[lo:hi]
}

// HeadRows is how many response rows the output head of a vocabulary of vocab tokens holds at
// once (for memory estimates).
func HeadRows(vocab int) int { return headRows(vocab) }

// AttentionBlock is how many query rows of a head's attention map a worker holds at once (for
// memory estimates).
func AttentionBlock() int { return attnBlock }
