package engine

import (
	"fmt"

	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
	"github.com/drmas-dev/drmas/model"
)

// blockDesc is the GPU side of a block's description (model/arch_desc.go's netDesc): which
// kernels its slots run (LayerNorm or RMSNorm, learned positions or RoPE, GELU or SwiGLU), its
// tensor names and widths, and the pass's attention. Trainer and LLMTrainer each fill one per
// pass; blockForward and blockBackward are the one block program both run.
type blockDesc struct {
	t                *Trainer
	n, dim           int    // rows, residual width
	ld, od           int    // q|k|v row width, attention output width
	ff               int    // MLP hidden width (SwiGLU's gate|up rows are 2·ff wide)
	heads, kvHeads   int    // query and key/value heads (for q/k norms and RoPE)
	headDim          int    // head width
	prefix           string // block li's tensors are fmt.Sprintf(prefix, li) + name
	norm1, norm2     string // the norms' tensor names, without ".weight" / ".bias"
	final, head      string // the final norm's tensor name (as norm1), the output head's weight
	embed, posEmb    string // token and (learned positions) position embeddings; posEmb "" for none
	vocab, context   int    // embedding rows
	chunk            int    // the most embedding rows one csr_rows_add launch covers (grid's y)
	qkv, o, up, down string // the linears' tensor names, without ".weight" / ".bias"
	rms              bool   // RMSNorm (weight only, eps) rather than LayerNorm (weight and bias)
	eps              float32
	qkNorm           bool   // RMSNorm over each q and k head after the q|k|v linear (Qwen3)
	qn, kn           string // the q/k norms' weight names
	rope             bool   // rotate q and k by the cos/sin tables (learned positions: none here)
	cos, sin         ir.Ptr
	swiglu           bool // silu(gate)·up rather than gelu(fc)
	ad               *loraDev
	// attnFwd runs causal attention from qkv into out; attnBwd turns dO into dqkv. The
	// pass's attention (blockedAttn) keeps its own scratch.
	attnFwd func(l *launcher, qkv, out ir.Ptr)
	attnBwd func(l *launcher, qkv, dO, dqkv ir.Ptr)
}

// names sets bd's slots and tensor names from an architecture's block (model's registry); a
// tied head is the token embedding. q, k and v (and gate, up) are adjacent on the device as on
// the host, so the group's first tensor (n.QKV, n.Up) is the fused matrix.
func (bd *blockDesc) names(b model.Block, tied bool) *blockDesc {
	n := b.Names
	bd.prefix, bd.norm1, bd.norm2, bd.final = n.Layer, n.Norm1, n.Norm2, n.Final
	bd.qkv, bd.o, bd.up, bd.down = n.QKV, n.O, n.Up, n.Down
	bd.qn, bd.kn = n.QNorm+".weight", n.KNorm+".weight"
	bd.embed, bd.posEmb, bd.head = n.Embed, n.PosEmbed, n.Head
	if tied {
		bd.head = n.Embed
	}
	bd.rms, bd.rope, bd.swiglu = b.Norm == model.NormRMS, b.Pos == model.PosRotary, b.MLP == model.MLPSwiGLU
	return bd
}

// upWidth is the width of the MLP's first linear.
func (bd *blockDesc) upWidth() int {
	if bd.swiglu {
		return 2 * bd.ff
	}
	return bd.ff
}

// norm runs the norm name (a tensor name without ".weight" / ".bias") over x[rows×dim] into
// y, keeping xhat and rstd.
func (bd *blockDesc) norm(l *launcher, name string, rows int, x, y, xhat, rstd ir.Ptr) {
	t, D := bd.t, bd.dim
	if bd.rms {
		w := t.wp(name + ".weight")
		l.rms(x, w, w, y, xhat, rstd, rows, 1, D, D, 1, bd.eps)
		return
	}
	l.launch("ln_fwd", [3]int{rows, 1, 1}, [3]int{kernels.RowThreads, 1, 1}, ir.ArgP(x), ir.ArgP(t.wp(name+".weight")), ir.ArgP(t.wp(name+".bias")),
		ir.ArgP(y), ir.ArgP(xhat), ir.ArgP(rstd), ir.ArgI(D))
}

// normBack writes (acc: adds) into dX the gradient of norm name's input given dY, and adds
// its weight (and bias) gradients at gp.
func (bd *blockDesc) normBack(l *launcher, name string, rows int, gp func(string) ir.Ptr, dY, xhat, rstd, dX ir.Ptr, acc bool) {
	t, D := bd.t, bd.dim
	w := t.wp(name + ".weight")
	if bd.rms {
		t.rmsBack(l, dY, xhat, rstd, w, w, dX, rows, 1, D, D, 1, acc, gp(name+".weight"), 0)
		return
	}
	if !acc && l.err == nil { // ln_bwd adds into dX
		l.err = t.dev.Zero(dX, rows*D)
	}
	l.launch("ln_bwd", [3]int{rows, 1, 1}, [3]int{kernels.RowThreads, 1, 1}, ir.ArgP(dY), ir.ArgP(xhat), ir.ArgP(rstd), ir.ArgP(w), ir.ArgP(dX), ir.ArgI(D))
	if g := gp(name + ".weight"); g != 0 {
		t.colSum(l, dY, xhat, rows, D, g)
	}
	if t.has(name + ".bias") {
		if g := gp(name + ".bias"); g != 0 {
			t.colSum(l, dY, 0, rows, D, g)
		}
	}
}

// linearBack adds the gradients of y[n×out] = x[n×in]·Wᵀ + b given dY (weight, then bias
// when the model has one) at gp and writes the input's gradient into dX.
func (bd *blockDesc) linearBack(l *launcher, name string, gp func(string) ir.Ptr, x, dY ir.Ptr, in, out int, dX ir.Ptr) {
	t, N := bd.t, bd.n
	weightGrad(l, out, in, N, dY, out, x, in, gp(name+".weight"), in)
	if t.has(name + ".bias") {
		if g := gp(name + ".bias"); g != 0 {
			t.colSum(l, dY, 0, N, out, g)
		}
	}
	l.gemm(false, false, N, in, out, 1, dY, out, t.wp(name+".weight"), in, 0, dX, in)
}

// blockForward runs block li on the residual stream x[n×dim] in place, keeping the
// activations blockBackward reads in the trainer's buffers "L<li>.*".
func (bd *blockDesc) blockForward(l *launcher, li int, x ir.Ptr) error {
	t, N, D, F := bd.t, bd.n, bd.dim, bd.ff
	need := func(name string, words int) ir.Ptr { return l.keep(t.buf(name, words)) }
	pre, a := fmt.Sprintf(bd.prefix, li), fmt.Sprintf("L%d.", li)
	nh := bd.heads + bd.kvHeads
	tmp := need("tmp", N*D)
	h1, n1Hat, n1Rstd := need(a+"h1", N*D), need(a+"n1Hat", N*D), need(a+"n1Rstd", N)
	qkv, attOut := need(a+"qkv", N*bd.ld), need(a+"attOut", N*bd.od)
	h2, n2Hat, n2Rstd := need(a+"h2", N*D), need(a+"n2Hat", N*D), need(a+"n2Rstd", N)
	up, act := need(a+"up", N*bd.upWidth()), need(a+"act", N*F)
	if l.err != nil {
		return l.err
	}
	// Attention: x += o(attention(positions(qknorm(qkv(norm1(x)))))).
	bd.norm(l, pre+bd.norm1, N, x, h1, n1Hat, n1Rstd)
	t.linear(l, h1, N, D, pre+bd.qkv, bd.ld, qkv)
	bd.ad.forward(l, li, siteQKV, h1, N, qkv)
	if bd.qkNorm {
		qkHat, qkRstd := need(a+"qkHat", N*nh*bd.headDim), need(a+"qkRstd", N*nh)
		l.rms(qkv, t.wp(pre+bd.qn), t.wp(pre+bd.kn), qkv, qkHat, qkRstd, N, nh, bd.headDim, bd.ld, bd.heads, bd.eps)
	}
	if bd.rope {
		l.elementwise("rope", N*nh*bd.headDim/2, ir.ArgP(qkv), ir.ArgP(bd.cos), ir.ArgP(bd.sin), ir.ArgI(bd.ld), ir.ArgI(bd.headDim), ir.ArgI(nh), ir.ArgF(1))
	}
	bd.attnFwd(l, qkv, attOut)
	t.linear(l, attOut, N, bd.od, pre+bd.o, D, tmp)
	bd.ad.forward(l, li, siteO, attOut, N, tmp)
	l.elementwise("add_inplace", N*D, ir.ArgP(x), ir.ArgP(tmp))
	// MLP: x += down(act(up(norm2(x)))).
	bd.norm(l, pre+bd.norm2, N, x, h2, n2Hat, n2Rstd)
	t.linear(l, h2, N, D, pre+bd.up, bd.upWidth(), up)
	bd.ad.forward(l, li, siteGateUp, h2, N, up)
	if bd.swiglu {
		l.elementwise("swiglu_fwd", N*F, ir.ArgP(up), ir.ArgP(act), ir.ArgI(F))
	} else {
		l.elementwise("gelu_fwd", N*F, ir.ArgP(up), ir.ArgP(act))
	}
	t.linear(l, act, N, F, pre+bd.down, D, tmp)
	bd.ad.forward(l, li, siteDown, act, N, tmp)
	l.elementwise("add_inplace", N*D, ir.ArgP(x), ir.ArgP(tmp))
	return l.err
}

// blockGradBufs are the scratch buffers of blockBackward: dX[n×dim] (the residual stream's
// gradient, updated in place) and the rest.
type blockGradBufs struct{ dX, dT, dAct, dUp, dAO, dQKV ir.Ptr }

// gradBufs takes blockBackward's scratch buffers besides dX; GELU's gradient is taken in
// place (dUp is dAct) and, when the widths agree, dO is dT (free until the q|k|v linear's
// backward writes it).
func (bd *blockDesc) gradBufs(l *launcher, dX ir.Ptr) blockGradBufs {
	t, N := bd.t, bd.n
	need := func(name string, words int) ir.Ptr { return l.keep(t.buf(name, words)) }
	s := blockGradBufs{dX: dX, dT: need("dT", N*bd.dim), dAct: need("dAct", N*bd.ff)}
	s.dUp = s.dAct
	if bd.swiglu {
		s.dUp = need("dUp", N*2*bd.ff)
	}
	s.dAO = s.dT
	if bd.od != bd.dim {
		s.dAO = need("dAO", N*bd.od)
	}
	s.dQKV = need("dQKV", N*bd.ld)
	return s
}

// blockBackward turns s.dX (gradient of block li's output) into the gradient of its input,
// adding the block's tensor gradients at gp(name) (0: a frozen tensor, none launched).
func (bd *blockDesc) blockBackward(l *launcher, li int, gp func(string) ir.Ptr, s blockGradBufs) {
	t, N, D, F := bd.t, bd.n, bd.dim, bd.ff
	b := t.bufs
	nh := bd.heads + bd.kvHeads
	pre, a := fmt.Sprintf(bd.prefix, li), fmt.Sprintf("L%d.", li)
	act := func(name string) ir.Ptr { return b[a+name].p }
	// MLP.
	bd.linearBack(l, pre+bd.down, gp, act("act"), s.dX, F, D, s.dAct)
	bd.ad.backward(l, li, siteDown, act("act"), s.dX, N, s.dAct)
	if bd.swiglu {
		l.elementwise("swiglu_bwd", N*F, ir.ArgP(act("up")), ir.ArgP(s.dAct), ir.ArgP(s.dUp), ir.ArgI(F))
	} else {
		l.elementwise("gelu_bwd", N*F, ir.ArgP(act("up")), ir.ArgP(s.dAct))
	}
	bd.linearBack(l, pre+bd.up, gp, act("h2"), s.dUp, D, bd.upWidth(), s.dT)
	bd.ad.backward(l, li, siteGateUp, act("h2"), s.dUp, N, s.dT)
	bd.normBack(l, pre+bd.norm2, N, gp, s.dT, act("n2Hat"), act("n2Rstd"), s.dX, true)
	// Attention.
	bd.linearBack(l, pre+bd.o, gp, act("attOut"), s.dX, bd.od, D, s.dAO)
	bd.ad.backward(l, li, siteO, act("attOut"), s.dX, N, s.dAO)
	bd.attnBwd(l, act("qkv"), s.dAO, s.dQKV)
	if bd.rope {
		l.elementwise("rope", N*nh*bd.headDim/2, ir.ArgP(s.dQKV), ir.ArgP(bd.cos), ir.ArgP(bd.sin), ir.ArgI(bd.ld), ir.ArgI(bd.headDim), ir.ArgI(nh), ir.ArgF(-1))
	}
	if bd.qkNorm {
		qn, kn := t.wp(pre+bd.qn), t.wp(pre+bd.kn)
		t.rmsBack(l, s.dQKV, act("qkHat"), act("qkRstd"), qn, kn, s.dQKV, N, nh, bd.headDim, bd.ld, bd.heads, false, gp(pre+bd.qn), gp(pre+bd.kn))
	}
	bd.linearBack(l, pre+bd.qkv, gp, act("h1"), s.dQKV, D, bd.ld, s.dT)
	bd.ad.backward(l, li, siteQKV, act("h1"), s.dQKV, N, s.dT)
	bd.normBack(l, pre+bd.norm1, N, gp, s.dT, act("n1Hat"), act("n1Rstd"), s.dX, true)
}

// headForward gathers the m scored rows of x (row indices at rows), applies the final norm and
// the output head, and reads log softmax(logits/temp)[target] (targets at tgt) and the
// entropies back into logp and ent. The logits and probabilities exist for one chunk of rows
// at a time (headChunk), so the device never holds [m × vocab].
func (bd *blockDesc) headForward(l *launcher, x, rows, tgt ir.Ptr, m, vocab int, temp float32, logp, ent []float32) error {
	t, D, V := bd.t, bd.dim, vocab
	c := min(t.headChunk(V), m)
	need := func(name string, words int) ir.Ptr { return l.keep(t.buf(name, words)) }
	xg, nfHat, nfRstd, hf := need("xg", m*D), need("nfHat", m*D), need("nfRstd", m), need("hf", m*D)
	need("logits", c*V)
	need("probs", c*V)
	need("lse", m)
	logpP, entP := need("logp", m), need("ent", m)
	if l.err != nil {
		return l.err
	}
	l.elementwise("gather_rows", m*D, ir.ArgP(x), ir.ArgP(rows), ir.ArgP(xg), ir.ArgI(D))
	bd.norm(l, bd.final, m, xg, hf, nfHat, nfRstd)
	for r0 := 0; r0 < m; r0 += c {
		bd.headChunk(l, tgt, r0, min(c, m-r0), V, temp)
	}
	t.headKept = 0
	if c == m {
		t.headKept = t.gen
	}
	return t.readScores(l, logp, ent, logpP, entP)
}

// headChunk computes the logits of the scored rows [r0, r0+k) into the "logits" buffer, their
// probabilities into "probs", and their log-sum-exp, log-probs and entropies at row r0 of
// "lse", "logp" and "ent".
func (bd *blockDesc) headChunk(l *launcher, tgt ir.Ptr, r0, k, V int, temp float32) {
	t, D, b := bd.t, bd.dim, bd.t.bufs
	logits := b["logits"].p
	l.gemm(false, true, k, V, D, 1, b["hf"].p.Add(r0*D), D, t.wp(bd.head), D, 0, logits, V)
	l.launch("log_softmax", [3]int{k, 1, 1}, [3]int{kernels.RowThreads, 1, 1}, ir.ArgP(logits), ir.ArgP(tgt.Add(r0)), ir.ArgP(b["probs"].p),
		ir.ArgP(b["lse"].p.Add(r0)), ir.ArgP(b["logp"].p.Add(r0)), ir.ArgP(b["ent"].p.Add(r0)), ir.ArgI(V), ir.ArgF(float32(1/float64(temp))))
}

// headBackward writes into dX[n×dim] the gradient of headForward's input x given the
// per-token weights dLogProb (at fb) and dEntropy (at fb+m), adding the head's and final
// norm's gradients at gp. Chunk by chunk it recomputes the logits and probabilities (unless
// the forward's only chunk is still there), turns the logits into their gradient in place and
// takes the hidden rows' and the head's gradients from it.
func (bd *blockDesc) headBackward(l *launcher, gp func(string) ir.Ptr, rows, tgt, fb ir.Ptr, m, vocab int, temp float32, dX ir.Ptr) {
	t, D, V := bd.t, bd.dim, vocab
	c := min(t.headChunk(V), m)
	need := func(name string, words int) ir.Ptr { return l.keep(t.buf(name, words)) }
	dHf, dXg := need("dHf", m*D), need("dXg", m*D)
	if l.err != nil {
		return
	}
	b := t.bufs
	dZ := b["logits"].p // d_logits reads and writes each element in one thread
	for r0 := 0; r0 < m; r0 += c {
		k := min(c, m-r0)
		if c < m || t.headKept != t.gen {
			bd.headChunk(l, tgt, r0, k, V, temp)
		}
		l.elementwise("d_logits", k*V, ir.ArgP(b["logits"].p), ir.ArgP(b["probs"].p), ir.ArgP(b["lse"].p.Add(r0)), ir.ArgP(b["ent"].p.Add(r0)), ir.ArgP(tgt.Add(r0)),
			ir.ArgP(fb.Add(r0)), ir.ArgP(fb.Add(m+r0)), ir.ArgP(dZ), ir.ArgI(V), ir.ArgF(float32(1/float64(temp))))
		l.gemm(false, false, k, D, V, 1, dZ, V, t.wp(bd.head), D, 0, dHf.Add(r0*D), D)
		weightGrad(l, V, D, k, dZ, V, b["hf"].p.Add(r0*D), D, gp(bd.head), D)
	}
	t.headKept = 0
	bd.normBack(l, bd.final, m, gp, dHf, b["nfHat"].p, b["nfRstd"].p, dXg, false)
	if l.err == nil {
		l.err = t.dev.Zero(dX, bd.n*D)
	}
	l.elementwise("scatter_rows_add", m*D, ir.ArgP(dXg), ir.ArgP(rows), ir.ArgP(dX), ir.ArgI(D))
}

// embedForward writes the token rows (plus, with learned positions, the position rows) of the
// pass's n tokens (ids at tok, positions at pos) into x[n×dim].
func (bd *blockDesc) embedForward(l *launcher, x, tok, pos ir.Ptr) {
	t, N, D := bd.t, bd.n, bd.dim
	if bd.posEmb != "" {
		l.elementwise("embed", N*D, ir.ArgP(t.wp(bd.embed)), ir.ArgP(t.wp(bd.posEmb)), ir.ArgP(tok), ir.ArgP(pos), ir.ArgP(x), ir.ArgI(D))
		return
	}
	l.elementwise("gather_rows", N*D, ir.ArgP(t.wp(bd.embed)), ir.ArgP(tok), ir.ArgP(x), ir.ArgI(D))
}

// embedCSR lists embedBackward's integer inputs: the token rows' CSR lists, then (learned
// positions) the position rows'.
func (bd *blockDesc) embedCSR(toks, pos []int32) []int32 {
	ptr, idx := csr(toks, bd.vocab)
	ints := append(append([]int32(nil), ptr...), idx...)
	if bd.posEmb != "" {
		ptr, idx = csr(pos, bd.context)
		ints = append(append(ints, ptr...), idx...)
	}
	return ints
}

// embedBackward adds dX's rows into the embeddings' gradients at gp (none for a frozen
// embedding), reading embedCSR's lists at ib.
func (bd *blockDesc) embedBackward(l *launcher, gp func(string) ir.Ptr, dX, ib ir.Ptr) {
	bd.csrRowsAdd(l, dX, ib, bd.vocab, gp(bd.embed))
	if bd.posEmb != "" {
		bd.csrRowsAdd(l, dX, ib.Add(bd.vocab+1+bd.n), bd.context, gp(bd.posEmb))
	}
}

// csrRowsAdd adds into g[rows×dim] the rows of dX the CSR lists at ib (rows+1 pointers, then
// the indices) name, in launches of at most bd.chunk rows.
func (bd *blockDesc) csrRowsAdd(l *launcher, dX, ib ir.Ptr, rows int, g ir.Ptr) {
	if g == 0 {
		return
	}
	D := bd.dim
	for r0 := 0; r0 < rows; r0 += bd.chunk {
		r := min(bd.chunk, rows-r0)
		l.launch("csr_rows_add", [3]int{ceil(D, kernels.RowThreads), r, 1}, [3]int{kernels.RowThreads, 1, 1},
			ir.ArgP(dX), ir.ArgP(ib.Add(r0)), ir.ArgP(ib.Add(rows+1)), ir.ArgP(g.Add(r0*D)), ir.ArgI(D))
	}
}
