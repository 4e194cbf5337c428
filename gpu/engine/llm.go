package engine

import (
	"fmt"
	"time"

	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
	"github.com/drmas-dev/drmas/model"
)

// LLMTrainer runs a Llama-family model (model.LLM: Qwen2/Qwen2.5, Qwen3, Llama) on a device:
// the forward and backward passes of model.LLM with the kernels of gpu/kernels (the Qwen block
// ops of qwen.go, grouped-query attention from kernels.NewGQATables), following the model's
// ArchConfig (q/k/v and o biases, q/k norms, tied head). Results match the CPU engine within
// float32 tolerance, as for Trainer. It keeps the weights and a gradient buffer on the device;
// Backward copies the gradient back and adds it into a *model.LLMGrads. (The device optimizer
// of Trainer is not wired for it yet.) Not safe for concurrent use.
type LLMTrainer struct {
	t   *Trainer // device, weight and gradient buffers, buffer pool, launcher settings
	cfg model.ArchConfig
	src *model.LLM // the model whose weights the device holds
	// vocabChunk is the most vocabulary rows one csr_rows_add launch covers (the grid's y
	// limit); tests lower it to run the chunking at a tiny vocabulary.
	vocabChunk int
	// ad is the LoRA adapter the linears carry (lora.go); nil for a plain LLM. With one, the
	// base is frozen: the backward launches no weight, bias, norm or embedding gradient.
	ad *loraDev
	// attnRows is the most query rows of a sequence one attention block covers (0:
	// AttnBlockRows); tests lower it to run several blocks a sequence.
	attnRows int
}

// NewLLM allocates an LLMTrainer for models shaped like m on dev and uploads m's weights.
func NewLLM(dev Device, m *model.LLM) (*LLMTrainer, error) {
	t, err := newTrainer(dev, m.Params())
	if err != nil {
		return nil, err
	}
	lt := &LLMTrainer{t: t, cfg: m.Config(), vocabChunk: 65535}
	if err := lt.upload(m); err != nil {
		_ = t.Close()
		return nil, err
	}
	return lt, nil
}

// Close frees every device buffer of the trainer.
func (lt *LLMTrainer) Close() error { return lt.t.Close() }

// MarkDirty says the host weights changed: the next Forward uploads them.
func (lt *LLMTrainer) MarkDirty() { lt.t.dirty = true }

func (lt *LLMTrainer) upload(m *model.LLM) error {
	t := lt.t
	start := time.Now()
	defer func() { t.times.Upload += time.Since(start) }()
	if m.Config() != lt.cfg {
		return fmt.Errorf("gpu engine: model config differs from the trainer's")
	}
	if err := t.writeParams(m.Params()); err != nil {
		return err
	}
	t.dirty, lt.src = false, m
	return nil
}

// LLMPass is the result of LLMTrainer.Forward: log-probs and entropies on the host, the
// activations on the device until the next Forward.
type LLMPass struct {
	lt       *LLMTrainer
	gen      int
	temp     float32
	seqs     []seqInfo
	n, m     int
	logp     []float32
	ent      []float32
	toks     []int32
	attn     *blockedAttn      // attention by blocks of query rows
	tabs     map[string]ir.Ptr // the integer inputs on the device
	rowsP    ir.Ptr
	tgtP     ir.Ptr
	cos, sin ir.Ptr
}

// Tokens is the number of response tokens scored.
func (p *LLMPass) Tokens() int { return p.m }

// LogProbs returns, per sequence and response token, log softmax(logits/T)[token].
func (p *LLMPass) LogProbs() [][]float32 { return splitResp(p.seqs, p.logp) }

// Entropy returns, per sequence and response token, the entropy of the same distribution.
func (p *LLMPass) Entropy() [][]float32 { return splitResp(p.seqs, p.ent) }

// splitResp splits per-response-token values by sequence.
func splitResp(seqs []seqInfo, v []float32) [][]float32 {
	out := make([][]float32, len(seqs))
	for i, si := range seqs {
		out[i] = append([]float32(nil), v[si.resp:si.resp+si.rlen]...)
	}
	return out
}

// llmDims are the sizes of a pass.
type llmDims struct {
	D, H, KV, hd, F, V, ld, od int
	eps                        float32
}

func (lt *LLMTrainer) dims() llmDims {
	c := lt.cfg
	return llmDims{D: c.Hidden, H: c.Heads, KV: c.KVHeads, hd: c.HeadDim, F: c.Intermediate, V: c.Vocab,
		ld: (c.Heads + 2*c.KVHeads) * c.HeadDim, od: c.Heads * c.HeadDim, eps: float32(c.RMSNormEps)}
}

// rms runs rms_fwd over rows×heads segments of d words (rows ldx apart).
func (l *launcher) rms(x, w, w2, y, xhat, rstd ir.Ptr, rows, heads, d, ldx, nw int, eps float32) {
	if rows == 0 {
		return
	}
	l.launch("rms_fwd", [3]int{rows, heads, 1}, [3]int{kernels.RowThreads, 1, 1}, ir.ArgP(x), ir.ArgP(w), ir.ArgP(w2), ir.ArgP(y), ir.ArgP(xhat), ir.ArgP(rstd),
		ir.ArgI(d), ir.ArgI(ldx), ir.ArgI(nw), ir.ArgF(eps))
}

// rmsBack runs rms_bwd (acc: add into dx) and adds the weight gradients: heads [0, nw) into
// gw, [nw, heads) into gw2 (none into a 0 pointer: a frozen norm).
func (t *Trainer) rmsBack(l *launcher, dy, xhat, rstd, w, w2, dx ir.Ptr, rows, heads, d, ldx, nw int, acc bool, gw, gw2 ir.Ptr) {
	if rows == 0 {
		return
	}
	if gw != 0 {
		t.rmsDW(l, dy, xhat, rows, d, ldx, heads, 0, nw, gw)
	}
	if nw < heads && gw2 != 0 {
		t.rmsDW(l, dy, xhat, rows, d, ldx, heads, nw, heads, gw2)
	}
	a := 0
	if acc {
		a = 1
	}
	l.launch("rms_bwd", [3]int{rows, heads, 1}, [3]int{kernels.RowThreads, 1, 1}, ir.ArgP(dy), ir.ArgP(xhat), ir.ArgP(rstd), ir.ArgP(w), ir.ArgP(w2), ir.ArgP(dx),
		ir.ArgI(d), ir.ArgI(ldx), ir.ArgI(nw), ir.ArgI(a))
}

// rmsDW adds Σ dy·xhat over rows and heads [h0, h1) into out[d].
func (t *Trainer) rmsDW(l *launcher, dy, xhat ir.Ptr, rows, d, ldx, nh, h0, h1 int, out ir.Ptr) {
	chunks := ceil(rows, kernels.ColChunk)
	part := l.keep(t.buf("colsum", chunks*d))
	l.launch("rms_dw_part", [3]int{ceil(d, kernels.RowThreads), chunks, 1}, [3]int{kernels.RowThreads, 1, 1},
		ir.ArgP(dy), ir.ArgP(xhat), ir.ArgP(part), ir.ArgI(rows), ir.ArgI(d), ir.ArgI(ldx), ir.ArgI(nh), ir.ArgI(h0), ir.ArgI(h1))
	l.elementwise("colsum_final", d, ir.ArgP(part), ir.ArgP(out), ir.ArgI(chunks), ir.ArgI(d))
}

// Forward runs the batch on the device for model m (uploading its weights first when m is
// not the model last uploaded, or after MarkDirty). Log-probs and entropies come back to the host.
func (lt *LLMTrainer) Forward(m *model.LLM, seqs []model.Sequence, temperature float32) (*LLMPass, error) {
	t, c, d := lt.t, lt.cfg, lt.dims()
	if t.closed {
		return nil, fmt.Errorf("gpu engine: trainer closed")
	}
	if err := checkSeqs(model.Config{Vocab: c.Vocab, Context: c.Context}, seqs, temperature); err != nil {
		return nil, err
	}
	if t.dirty || m != lt.src {
		if err := lt.upload(m); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	defer func() { t.times.Forward += time.Since(start) }()
	t.gen++
	pk := pack(seqs)
	p := &LLMPass{lt: lt, gen: t.gen, temp: temperature, seqs: pk.seqs, n: pk.n, m: pk.m, toks: pk.toks, tabs: map[string]ir.Ptr{}}
	N, M := p.n, p.m
	if N > maxRows || M > maxRows {
		return nil, fmt.Errorf("gpu engine: %d positions above %d (grid limit): use smaller micro-batches", N, maxRows)
	}
	var err error
	if p.attn, err = newBlockedAttn(t, p.seqs, N, lt.attnRows, d.H, d.KV, d.hd); err != nil {
		return nil, err
	}
	for _, w := range []int{p.attn.att, N * d.ld, N * 2 * d.F, min(M, t.headChunk(d.V)) * d.V} {
		if w > maxWords {
			return nil, fmt.Errorf("gpu engine: the batch needs a buffer of %d words, above the kernels' int32 indexing (%d): use smaller micro-batches", w, maxWords)
		}
	}
	p.logp, p.ent = make([]float32, M), make([]float32, M)
	if M == 0 {
		return p, nil
	}
	if err := p.upload(pk.pos, pk.rows, pk.tgts); err != nil {
		return nil, err
	}
	l := t.launcher()
	need := func(name string, words int) ir.Ptr { return l.keep(t.buf(name, words)) }
	x := need("x", N*d.D)
	bd := p.block()
	bd.embedForward(l, x, p.tabs["toks"], 0)
	for li := 0; li < c.Layers; li++ {
		if err := bd.blockForward(l, li, x); err != nil {
			return nil, err
		}
	}
	if err := bd.headForward(l, x, p.rowsP, p.tgtP, M, d.V, temperature, p.logp, p.ent); err != nil {
		return nil, err
	}
	return p, nil
}

// block is the pass's description of the Llama block: RMSNorm, RoPE, grouped-query attention
// with q|k|v (and gate|up) adjacent on the device, optional q/k norms, SwiGLU, the adapter.
func (p *LLMPass) block() *blockDesc {
	lt := p.lt
	c, d := lt.cfg, lt.dims()
	bd := &blockDesc{t: lt.t, n: p.n, dim: d.D, ld: d.ld, od: d.od, ff: d.F, heads: d.H, kvHeads: d.KV, headDim: d.hd,
		vocab: d.V, context: c.Context, chunk: lt.vocabChunk, eps: d.eps, qkNorm: c.QKNorm, cos: p.cos, sin: p.sin, ad: lt.ad,
		attnFwd: p.attn.forward, attnBwd: p.attn.backward}
	return bd.names(c.Block(), c.Tie)
}

// upload sends the pass's integer inputs, GQA tables and RoPE tables (the CPU engine's, from
// the host) to the device.
func (p *LLMPass) upload(pos, rows, tgts []int32) error {
	t, c := p.lt.t, p.lt.cfg
	ints := []int32{}
	offs := map[string]int{}
	add := func(name string, v []int32) {
		offs[name] = len(ints)
		ints = append(ints, v...)
	}
	add("toks", p.toks)
	bindAttn := p.attn.tables(func(v []int32) int {
		o := len(ints)
		ints = append(ints, v...)
		return o
	})
	add("resp", rows)
	add("tgts", tgts)
	ib, err := t.buf("ints", len(ints))
	if err != nil {
		return err
	}
	if err := t.dev.WriteI32(ib, ints); err != nil {
		return fmt.Errorf("gpu engine: upload inputs: %w", err)
	}
	for name, o := range offs {
		p.tabs[name] = ib.Add(o)
	}
	bindAttn(ib)
	p.rowsP, p.tgtP = p.tabs["resp"], p.tabs["tgts"]
	cos, sin := model.BlockRef{HeadDim: c.HeadDim, RopeScaling: c.RopeScaling}.RopeTable(pos, c.RopeTheta)
	fb, err := t.buf("rope", 2*len(cos))
	if err != nil {
		return err
	}
	if err := t.dev.WriteF32(fb, append(cos, sin...)); err != nil {
		return fmt.Errorf("gpu engine: upload rope tables: %w", err)
	}
	p.cos, p.sin = fb, fb.Add(len(cos))
	return nil
}

// Backward accumulates into g the gradient of Σ dLogProb·logprob + Σ dEntropy·entropy, as
// model.LLMPass.Backward does (dEntropy may be nil): computed on the device, copied back and
// added into g.
func (p *LLMPass) Backward(dLogProb, dEntropy [][]float32, g *model.LLMGrads) error {
	lt := p.lt
	t := lt.t
	if g == nil {
		return fmt.Errorf("gpu engine: Backward: nil grads")
	}
	if p.frozen() {
		return fmt.Errorf("gpu engine: Backward: a LoRA pass has no base gradients (use LoRAPass.Backward)")
	}
	for name, i := range t.idx {
		if len(g.ByName(name)) != t.sizes[i] {
			return fmt.Errorf("gpu engine: Backward: grads do not match the model (tensor %s)", name)
		}
	}
	start := time.Now()
	defer func() { t.times.Backward += time.Since(start) }()
	if ran, err := p.launchBackward(dLogProb, dEntropy); err != nil || !ran {
		return err
	}
	host := make([]float32, t.total)
	if err := t.dev.ReadF32(host, t.g); err != nil {
		return fmt.Errorf("gpu engine: read gradients: %w", err)
	}
	for name, i := range t.idx {
		dst := g.ByName(name)
		for j, v := range host[t.off[i] : t.off[i]+t.sizes[i]] {
			dst[j] += v
		}
	}
	return nil
}

// launchBackward checks that p is the trainer's current pass and launches its backward into
// the device's gradient buffers; false when the pass scored no token (nothing to add).
func (p *LLMPass) launchBackward(dLogProb, dEntropy [][]float32) (bool, error) {
	t := p.lt.t
	if t.closed || p.gen != t.gen {
		return false, fmt.Errorf("gpu engine: Backward on a stale pass (another Forward ran since)")
	}
	dlp, dent, err := flatGrads(p.seqs, p.m, dLogProb, dEntropy)
	if err != nil || p.m == 0 {
		return false, err
	}
	return true, p.backward(dlp, dent)
}

// backward launches the backward pass into the trainer's gradient buffer (zeroed first).
func (p *LLMPass) backward(dlp, dent []float32) error {
	lt := p.lt
	t, c, d := lt.t, lt.cfg, lt.dims()
	N, M := p.n, p.m
	frozen := lt.ad != nil
	gp := func(name string) ir.Ptr {
		if frozen {
			return 0 // no gradient: weightGrad, biasGrad and rmsBack skip it
		}
		return t.g.Add(t.off[t.index(name)])
	}
	l := t.launcher()
	need := func(name string, words int) ir.Ptr { return l.keep(t.buf(name, words)) }
	bd := p.block()
	ints := bd.embedCSR(p.toks, nil)
	ib, fb := need("bints", len(ints)), need("bfloats", 2*M)
	if l.err != nil {
		return l.err
	}
	if err := t.dev.WriteI32(ib, ints); err != nil {
		return fmt.Errorf("gpu engine: upload: %w", err)
	}
	if err := t.dev.WriteF32(fb, append(dlp, dent...)); err != nil {
		return fmt.Errorf("gpu engine: upload: %w", err)
	}
	if err := t.dropSplitTables(N, M, d.V); err != nil {
		return err
	}
	if frozen {
		if err := lt.ad.zeroGrads(); err != nil {
			return err
		}
	} else if err := t.dev.Zero(t.g, t.total); err != nil {
		return fmt.Errorf("gpu engine: zero grads: %w", err)
	}
	dX := need("dX", N*d.D)
	bd.headBackward(l, gp, p.rowsP, p.tgtP, fb, M, d.V, p.temp, dX)
	bufs := bd.gradBufs(l, dX)
	if l.err != nil {
		return l.err
	}
	for li := c.Layers - 1; li >= 0; li-- {
		bd.blockBackward(l, li, gp, bufs)
	}
	bd.embedBackward(l, gp, dX, ib)
	return l.err
}

// frozen says the pass's base weights get no gradients (a LoRA's pass).
func (p *LLMPass) frozen() bool { return p.lt.ad != nil }

// weightGrad adds the weight gradient aᵀ·b [m×n] (k rows) into c, or launches nothing when c
// is 0 (a frozen weight).
func weightGrad(l *launcher, m, n, k int, a ir.Ptr, lda int, b ir.Ptr, ldb int, c ir.Ptr, ldc int) {
	if c != 0 {
		l.gemmW(true, false, m, n, k, 1, a, lda, b, ldb, 1, c, ldc)
	}
}

// packed is a batch laid out as the CPU engine packs it: each sequence's rows (prompt and
// response but the last token) back to back, no padding.
type packed struct {
	seqs                  []seqInfo
	n, m                  int // rows, scored tokens
	toks, pos, rows, tgts []int32
}

// pack lays out seqs.
func pack(seqs []model.Sequence) packed {
	pk := packed{seqs: make([]seqInfo, len(seqs))}
	for i, s := range seqs {
		si := seqInfo{start: pk.n, plen: len(s.Prompt), rlen: len(s.Response), resp: pk.m}
		if si.rlen > 0 {
			si.n = si.plen + si.rlen - 1
		}
		pk.n += si.n
		pk.m += si.rlen
		pk.seqs[i] = si
	}
	pk.toks, pk.pos = make([]int32, pk.n), make([]int32, pk.n)
	pk.rows, pk.tgts = make([]int32, pk.m), make([]int32, pk.m)
	for i, s := range seqs {
		si := pk.seqs[i]
		if si.n == 0 {
			continue
		}
		copy(pk.toks[si.start:], s.Prompt)
		copy(pk.toks[si.start+si.plen:si.start+si.n], s.Response)
		for k := 0; k < si.n; k++ {
			pk.pos[si.start+k] = int32(k)
		}
		for k := 0; k < si.rlen; k++ {
			pk.rows[si.resp+k] = int32(si.start + si.plen - 1 + k)
			pk.tgts[si.resp+k] = s.Response[k]
		}
	}
	return pk
}

// flatGrads checks dLogProb and dEntropy (which may be nil) against the pass's sequences and
// returns them as one value per scored token.
func flatGrads(seqs []seqInfo, m int, dLogProb, dEntropy [][]float32) (dlp, dent []float32, err error) {
	flat := func(name string, d [][]float32, optional bool) ([]float32, error) {
		out := make([]float32, m)
		if d == nil && optional {
			return out, nil
		}
		if len(d) != len(seqs) {
			return nil, fmt.Errorf("gpu engine: Backward: %s has %d sequences, want %d", name, len(d), len(seqs))
		}
		for i, si := range seqs {
			if len(d[i]) != si.rlen {
				return nil, fmt.Errorf("gpu engine: Backward: %s[%d] has %d tokens, want %d", name, i, len(d[i]), si.rlen)
			}
			copy(out[si.resp:], d[i])
		}
		return out, nil
	}
	if dlp, err = flat("dLogProb", dLogProb, false); err != nil {
		return nil, nil, err
	}
	if dent, err = flat("dEntropy", dEntropy, true); err != nil {
		return nil, nil, err
	}
	return dlp, dent, nil
}
