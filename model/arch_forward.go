package model

import (
	"fmt"
	"math"
	"sync"
)

// llmAct is what one block keeps for the backward pass.
type llmAct struct {
	inHat, inRstd     []float32 // input_layernorm
	h1                []float32 // its output
	qkv               []float32 // [N×ld] q and k after norm and RoPE, v
	qkHat, qkRstd     []float32 // q_norm/k_norm (Qwen3)
	maps              []float32 // softmax maps when the description keeps them
	attOut            []float32 // [N×H·hd]
	postHat, postRstd []float32 // post_attention_layernorm
	h2                []float32 // its output
	gu, act           []float32 // [N×up] gate|up (or fc), [N×F] its activation
}

// LLMPass is the result of LLM.Forward: per-token log-probs and entropies
// plus the activations Backward needs. Read-only after Forward; Backward may
// be called on several passes concurrently only with different grads.
type LLMPass struct {
	m        *LLM
	temp     float32
	seqs     []seqInfo
	n        int
	tokens   []int32
	pos      []int32   // position of each packed row
	cos, sin []float32 // RoPE angles per packed row
	attLen   int       // floats of one block's kept attention maps
	acts     []llmAct  // per block; with checkpointing one, the block held
	// With activation checkpointing: every block's input, from which the
	// backward recomputes the block's activations into acts[0]; held is the
	// block acts[0] holds; mu serialises the backwards that rewrite it.
	ins  [][]float32
	held int
	mu   sync.Mutex
	// arena holds acts' and ins' buffers (getArena); Backward returns it
	// (nil after), and a later Backward runs the blocks' forward again to refill it.
	arena *[]float32
	ckpt  bool // checkpointing when the forward ran

	M        int
	respRows []int32
	targets  []int32
	nHat     []float32 // final norm
	nRstd    []float32
	hf       []float32 // [M×D] final norm outputs
	logits   []float32 // [M×Vocab] with probs: kept only when M fits one head chunk
	probs    []float32
	lent     bool // logits handed out (rawLogits): not returned to the scratch pools
	lse      []float64
	rowStats []softmaxStat // per row: what gives its probabilities again (softmaxProbs)
	logp     []float32
	ent      []float32
}

func (m *LLM) checkSeqs(seqs []Sequence) error {
	return checkSequences(seqs, m.d.context, m.d.vocab)
}

// Forward runs the batch (packed, no padding), keeping the activations for
// Backward: per response token log softmax(logits/temperature)[token] and
// the entropy of that distribution. temperature must be > 0. With
// activation checkpointing on (SetActivationCheckpointing) it keeps only
// each block's input, and Backward recomputes each block's activations.
func (m *LLM) Forward(seqs []Sequence, temperature float32) (*LLMPass, error) {
	if !(temperature > 0) || math.IsInf(float64(temperature), 0) {
		return nil, fmt.Errorf("model: temperature %v must be > 0", temperature)
	}
	if err := m.checkSeqs(seqs); err != nil {
		return nil, err
	}
	d := m.d
	p := m.newPass(seqs, temperature)
	M, D := p.M, d.D
	p.cos, p.sin = d.rotary(p.pos)
	xb := p.runBlocks()
	defer putScratch(xb)
	x := *xb
	w := &m.w
	xg := make([]float32, M*D)
	for k, r := range p.respRows {
		copy(xg[k*D:(k+1)*D], x[int(r)*D:])
	}
	p.nHat, p.nRstd, p.hf = make([]float32, M*D), make([]float32, M), make([]float32, M*D)
	d.normRows(xg, M, w.norm, w.normB, p.hf, p.nHat, p.nRstd)
	p.lse, p.logp, p.ent = make([]float64, M), make([]float32, M), make([]float32, M)
	p.rowStats = make([]softmaxStat, M)
	m.scoreHead(p)
	return p, nil
}

// newPass lays out the packed rows of seqs (no padding) with their
// positions, and the offsets of kept attention maps.
func (m *LLM) newPass(seqs []Sequence, temperature float32) *LLMPass {
	pk, pos := packSeqs(seqs)
	p := &LLMPass{m: m, ckpt: m.ckpt, temp: temperature, seqs: pk.seqs, n: pk.n, M: pk.m, tokens: pk.tokens, pos: pos, respRows: pk.respRows, targets: pk.targets}
	if m.d.keepMaps {
		for i := range p.seqs {
			p.seqs[i].att = p.attLen
			p.attLen += m.d.H * p.seqs[i].n * p.seqs[i].n
		}
	}
	return p
}

// act is where block l's activations are kept: its own, or with
// checkpointing the one block's that acts[0] holds.
func (p *LLMPass) act(l int) *llmAct {
	if p.ins != nil {
		return &p.acts[0]
	}
	return &p.acts[l]
}

// runBlocks embeds the pass's tokens and runs every block on them, keeping the activations
// (or with checkpointing each block's input) in a fresh arena; it returns the residual stream
// after the last block (scratch for the caller to put back).
func (p *LLMPass) runBlocks() *[]float32 {
	m, d := p.m, p.m.d
	N, D := p.n, d.D
	xb, tmpb := getScratch(N*D), getScratch(N*D)
	defer putScratch(tmpb)
	x := *xb
	d.embed(&m.w, p.tokens, p.pos, x)
	p.carveActs()
	for l := range d.layers {
		if p.ins != nil {
			copy(p.ins[l], x)
		}
		m.blockForward(p, l, x, *tmpb, p.act(l))
	}
	p.held = d.layers - 1
	return xb
}

// carveActs lays out the blocks' activations (and checkpointed inputs) in one arena
// (getArena): a step's ~20 MB a block at 256 tokens would otherwise be fresh pages each step.
func (p *LLMPass) carveActs() {
	d := p.m.d
	nActs := d.layers
	if p.ckpt {
		nActs = 1
	}
	total := 0
	count := func(n int) []float32 { total += n; return nil }
	p.layOut(nActs, count)
	p.arena = getArena(total)
	buf := *p.arena
	p.layOut(nActs, func(n int) []float32 {
		s := buf[:n:n]
		buf = buf[n:]
		return s
	})
}

// layOut gives the pass nActs blocks' activations and, with checkpointing, every block's input,
// each taken in turn from take.
func (p *LLMPass) layOut(nActs int, take func(n int) []float32) {
	d := p.m.d
	p.acts = make([]llmAct, nActs)
	for l := range p.acts {
		p.acts[l].alloc(p, d, p.m.w.blocks[l].qn != nil, take)
	}
	p.ins = nil
	if p.ckpt {
		p.ins = make([][]float32, d.layers)
		for l := range p.ins {
			p.ins[l] = take(p.n * d.D)
		}
	}
}

// releaseActs returns the activations' arena to the idle arenas (putArena).
func (p *LLMPass) releaseActs() {
	if p.arena == nil {
		return
	}
	putArena(p.arena)
	p.arena, p.acts, p.ins = nil, nil, nil
}

// restoreActs gives a pass whose activations were released them again: the blocks' forward
// once more (the same calls, hence the same bits with the same weights).
func (p *LLMPass) restoreActs() {
	if p.arena == nil && p.n > 0 {
		putScratch(p.runBlocks())
	}
}

// alloc gives a its buffers for the N rows of a pass, each taken from take.
func (a *llmAct) alloc(p *LLMPass, b netDesc, qkNorm bool, take func(n int) []float32) {
	N, D, H := p.n, b.D, b.H
	a.inHat, a.inRstd, a.h1 = take(N*D), take(N), take(N*D)
	a.qkv = take(N * b.ld())
	if qkNorm {
		a.qkHat, a.qkRstd = take(N*(H+b.KV)*b.hd), take(N*(H+b.KV))
	}
	if b.keepMaps {
		a.maps = take(p.attLen)
	}
	a.attOut = take(N * H * b.hd)
	a.postHat, a.postRstd, a.h2 = take(N*D), take(N), take(N*D)
	a.gu, a.act = take(N*b.up()), take(N*b.F)
}

// blockForward runs block l on the residual stream x[N×D] in place,
// keeping its activations in a; tmp is N×D scratch. Every kept value is
// written whatever a held before, so a recomputation gives the same bits.
func (m *LLM) blockForward(p *LLMPass, l int, x, tmp []float32, a *llmAct) {
	b := m.d
	N, D, H, F, ld := p.n, b.D, b.H, b.F, b.ld()
	bw := &m.w.blocks[l]
	b.normRows(x, N, bw.in, bw.inB, a.h1, a.inHat, a.inRstd)
	m.linear(a.h1, N, D, bw.qkvM(), bw.qkvB, ld, a.qkv)
	if bw.qn != nil {
		qkNorm(a.qkv, N, b.blockDims, bw.qn, bw.kn, a.qkHat, a.qkRstd)
	}
	if p.cos != nil {
		rope(a.qkv, N, b.blockDims, p.cos, p.sin, false)
	}
	gqaForward(m.gemm, p.seqs, b.blockDims, a.qkv, a.attOut, a.maps)
	m.linear(a.attOut, N, H*b.hd, bw.oM(), bw.oB, D, tmp)
	addIntoPar(x, tmp)
	b.normRows(x, N, bw.post, bw.postB, a.h2, a.postHat, a.postRstd)
	m.linear(a.h2, N, D, bw.gateUpM(), bw.upB, b.up(), a.gu)
	b.act(a.gu, N, a.act)
	m.linear(a.act, N, F, bw.downM(), bw.downB, D, tmp)
	addIntoPar(x, tmp)
}

// linear is y[n×out] = x[n×in]·Wᵀ (+ b when b is not nil), W [out×in].
// BF16 weights take the small-M path up to bf16SmallRows rows, and above
// transposedRows the direct product, which widens W in its packing and
// keeps no transposed copy of y (a training step's head chunk: 155 MB at
// Qwen's vocabulary). Every path gives the same bits (the GEMM contract).
func (m *LLM) linear(x []float32, n, in int, W weight, b []float32, out int, y []float32) {
	if n == 0 {
		return
	}
	defer m.ad.forward(x, n, in, W, out, y) // a LoRA adds its adapter's output (lora.go)
	bf16 := W.h.bits != nil
	small := n <= smallRows || (bf16 && n <= bf16SmallRows)
	if _, blocked := m.gemm.(BlockedGEMM); blocked && !m.d.directLinear && small && in > 0 {
		if bf16 {
			gemvStrips(x, n, in, W.h, b, out, y)
		} else {
			gemvLinear(x, n, in, W.f, b, out, y)
		}
		return
	}
	if !m.d.directLinear && takeTransposed(n, in, out, bf16) {
		linearT(m.gemm, x, n, in, W, b, out, y)
		return
	}
	beta := float32(0)
	if b != nil {
		beta = 1
		parallelRows(n, 256, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				copy(y[r*out:(r+1)*out], b)
			}
		})
	}
	sgemmW(m.gemm, false, true, n, out, in, 1, x, in, W, in, beta, y, out)
}

// transposedRows is the most rows for which linear always takes linearT.
const transposedRows = 128

// takeTransposed reports whether linear takes linearT for n rows of in → out (docs/performance.md,
// "Which product a decoding step runs"): up to transposedRows rows always; above, for float32 weights only, when
// the outputs are at least 8 times the rows or linearT moves fewer floats than the direct GEMM
// (it packs x, n·in, and transposes the result, 2·n·out, where the direct GEMM packs W,
// out·in). Both paths compute the same FLOPs and bits.
func takeTransposed(n, in, out int, bf16 bool) bool {
	if n <= transposedRows {
		return true
	}
	return !bf16 && (out >= 8*n || n*in+2*n*out < out*in)
}

// linearT is linear for fewer rows than weights (decoding steps; the MLP's
// and the head's wide outputs; a training sequence's projections): it
// computes yᵀ = W·xᵀ, so that the GEMM packs x rather than the larger W
// (packing all of W costs about as much as the product when x has a few
// hundred rows) and reads W in place, then transposes. Each element is the
// same k-ordered chain as in the direct GEMM (the GEMM contract), so the
// bits do not depend on the path. BF16 weights are widened a cache-sized
// block of rows at a time, each block multiplied as it is widened.
func linearT(g GEMM, x []float32, n, in int, W weight, b []float32, out int, y []float32) {
	yt := getScratch(out * n)
	defer putScratch(yt)
	t := *yt
	beta := float32(0)
	if b != nil {
		// The bias starts each sum, as in linear.
		beta = 1
		for o, v := range b {
			for r := 0; r < n; r++ {
				t[o*n+r] = v
			}
		}
	}
	if W.h.bits == nil {
		g.Sgemm(false, true, out, n, in, 1, W.f, in, x, in, beta, t, n)
	} else {
		linearTBF16(g, x, n, in, W.h, beta, out, t)
	}
	// Transpose by blocks of 64 outputs (a block of t stays in cache).
	parallelRows((out+63)/64, 16, func(lo, hi int) {
		for o0 := lo * 64; o0 < min(out, hi*64); o0 += 64 {
			transpose(y[o0:], out, t[o0*n:], n, min(out, o0+64)-o0, n)
		}
	})
}

// scoreRows fills, per row k of logits[M×V], the softmax of logits/temp
// into probs, its log-sum-exp, the log-prob of targets[k] and the entropy,
// and what gives the probabilities again into stats.
func scoreRows(logits, probs []float32, V int, temp float32, targets []int32, lse []float64, logp, ent []float32, stats []softmaxStat) {
	invT := 1 / float64(temp)
	parallelRows(len(targets), 16, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			z := logits[k*V : (k+1)*V]
			st, l, e := softmaxRow(z, invT, probs[k*V:(k+1)*V], true)
			stats[k] = st
			lse[k] = l
			logp[k] = float32(float64(z[targets[k]])*invT - l)
			ent[k] = float32(e)
		}
	})
}

// LogProbs returns, per sequence and response token, log softmax(logits/T)[token].
func (p *LLMPass) LogProbs() [][]float32 { return splitSeqs(p.seqs, p.logp) }

// Entropy returns, per sequence and response token, the entropy of the same
// distribution.
func (p *LLMPass) Entropy() [][]float32 { return splitSeqs(p.seqs, p.ent) }

// Tokens is the number of response tokens scored.
func (p *LLMPass) Tokens() int { return p.M }

func splitSeqs(seqs []seqInfo, v []float32) [][]float32 {
	out := make([][]float32, len(seqs))
	for i, si := range seqs {
		out[i] = append([]float32(nil), v[si.resp:si.resp+si.rlen]...)
	}
	return out
}

// Score returns the per-token log-probs and entropies of seqs: Forward on
// chunks of sequences of at most ~2048 tokens (the head runs in chunks of
// rows whatever the vocabulary).
func (m *LLM) Score(seqs []Sequence, temperature float32) ([][]float32, [][]float32, error) {
	if err := m.checkSeqs(seqs); err != nil {
		return nil, nil, err
	}
	return scoreChunks(seqs, 2048, func(chunk []Sequence) ([][]float32, [][]float32, error) {
		p, err := m.Forward(chunk, temperature)
		if err != nil {
			return nil, nil, err
		}
		p.releaseActs() // no backward follows
		p.releaseLogits()
		return p.LogProbs(), p.Entropy(), nil
	})
}

// linearTBF16 is linearT's product t = W·xᵀ (+ t with beta 1) for bfloat16
// W: blocks of rows of W widened into a scratch buffer of about 256k floats
// (1 MiB, to stay in cache), each multiplied by the GEMM.
func linearTBF16(g GEMM, x []float32, n, in int, W bf16W, beta float32, out int, t []float32) {
	rows := max(stripW, (1<<18)/in/stripW*stripW)
	wb := getScratch(min(rows, out) * in)
	defer putScratch(wb)
	for o0 := 0; o0 < out; o0 += rows {
		o1 := min(out, o0+rows)
		wf := (*wb)[:(o1-o0)*in]
		parallelRows((o1-o0+stripW-1)/stripW, 1, func(lo, hi int) {
			a, b := o0+lo*stripW, min(o1, o0+hi*stripW)
			W.widenRows(wf[(a-o0)*in:], a, b)
		})
		g.Sgemm(false, true, o1-o0, n, in, 1, wf, in, x, in, beta, t[o0*n:], n)
	}
}
