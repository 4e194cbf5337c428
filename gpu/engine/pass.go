package engine

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/model"
)

type seqInfo struct {
	start, n, plen, rlen, resp int
}

// Pass is the result of Forward, like *model.Pass: log-probs and entropies on the host, the
// activations on the device.
type Pass struct {
	t    *Trainer
	gen  int
	temp float32
	seqs []seqInfo
	n, m int
	attn *blockedAttn // attention by blocks of query rows
	logp []float32
	ent  []float32
	toks []int32
	pos  []int32
	rows []int32
	tgts []int32
}

// Tokens is the number of response tokens scored.
func (p *Pass) Tokens() int { return p.m }

// LogProbs returns, per sequence and response token, log softmax(logits/T)[token].
func (p *Pass) LogProbs() [][]float32 { return p.split(p.logp) }

// Entropy returns, per sequence and response token, the entropy of the same distribution.
func (p *Pass) Entropy() [][]float32 { return p.split(p.ent) }

func (p *Pass) split(v []float32) [][]float32 { return splitResp(p.seqs, v) }

// Forward runs the batch on the device for model m (uploading its weights first when m is
// not the model last uploaded, or after MarkDirty; when the device holds Step's updates of
// another model, they are Synced to that model first). Log-probs and entropies come back to the
// host; the activations stay on the device for Backward until the next Forward.
func (t *Trainer) Forward(m *model.Model, seqs []model.Sequence, temperature float32) (*Pass, error) {
	p, err := t.newPass(m, seqs, temperature)
	if err != nil || p.m == 0 {
		return p, err
	}
	start := time.Now()
	defer func() { t.times.Forward += time.Since(start) }()
	in, err := p.uploadInputs()
	if err != nil {
		return nil, err
	}
	l := t.launcher()
	x := l.keep(t.buf("x", p.n*t.cfg.Dim))
	bd := p.block()
	bd.embedForward(l, x, in.tok, in.pos)
	for li := 0; li < t.cfg.Layers; li++ {
		if err := bd.blockForward(l, li, x); err != nil {
			return nil, err
		}
	}
	if err := bd.headForward(l, x, in.rows, in.tgt, p.m, t.cfg.Vocab, p.temp, p.logp, p.ent); err != nil {
		return nil, err
	}
	return p, nil
}

// newPass checks the inputs, binds m's weights and packs seqs; a pass of no response tokens
// needs no launch.
func (t *Trainer) newPass(m *model.Model, seqs []model.Sequence, temperature float32) (*Pass, error) {
	if t.closed {
		return nil, fmt.Errorf("gpu engine: trainer closed")
	}
	if err := checkSeqs(t.cfg, seqs, temperature); err != nil {
		return nil, err
	}
	if err := t.use(m); err != nil {
		return nil, err
	}
	t.gen++
	pk := pack(seqs)
	p := &Pass{t: t, gen: t.gen, temp: temperature, seqs: pk.seqs, n: pk.n, m: pk.m,
		toks: pk.toks, pos: pk.pos, rows: pk.rows, tgts: pk.tgts}
	H := t.cfg.Heads
	var err error
	if p.attn, err = newBlockedAttn(t, p.seqs, p.n, t.attnRows, H, H, t.cfg.Dim/H); err != nil {
		return nil, err
	}
	if err := p.checkSizes(t.cfg); err != nil {
		return nil, err
	}
	p.logp, p.ent = make([]float32, p.m), make([]float32, p.m)
	return p, nil
}

// passInputs are the device addresses of a pass's integer inputs.
type passInputs struct{ tok, pos, rows, tgt ir.Ptr }

// uploadInputs uploads the integer inputs and the attention tables in one write.
func (p *Pass) uploadInputs() (passInputs, error) {
	t := p.t
	N, M := p.n, p.m
	ints := append(append(append(append([]int32(nil), p.toks...), p.pos...), p.rows...), p.tgts...)
	bindAttn := p.attn.tables(func(v []int32) int {
		o := len(ints)
		ints = append(ints, v...)
		return o
	})
	ib, err := t.buf("ints", len(ints))
	if err != nil {
		return passInputs{}, err
	}
	if err := t.dev.WriteI32(ib, ints); err != nil {
		return passInputs{}, fmt.Errorf("gpu engine: upload inputs: %w", err)
	}
	bindAttn(ib)
	return passInputs{tok: ib, pos: ib.Add(N), rows: ib.Add(2 * N), tgt: ib.Add(2*N + M)}, nil
}

// block is the pass's description of the built-in block: LayerNorm, learned positions (added
// with the token embedding, before the blocks), fused q|k|v, GELU.
func (p *Pass) block() *blockDesc {
	c := p.t.cfg
	D := c.Dim
	bd := &blockDesc{t: p.t, n: p.n, dim: D, ld: 3 * D, od: D, ff: c.FFMult * D, heads: c.Heads, headDim: D / c.Heads,
		vocab: c.Vocab, context: c.Context, chunk: 65535, attnFwd: p.attn.forward, attnBwd: p.attn.backward}
	return bd.names(c.Block(), c.TiedHead)
}

// checkSizes refuses a batch whose activations the kernels cannot index: a buffer above
// maxWords words would wrap the kernels' int32 indices (a fault or a silent write into
// another buffer on a GPU), more than maxRows rows exceed a GEMM's grid.
func (p *Pass) checkSizes(c model.Config) error {
	if p.n > maxRows || p.m > maxRows {
		return fmt.Errorf("gpu engine: %d positions (%d scored) above %d (grid limit): use smaller micro-batches", p.n, p.m, maxRows)
	}
	for _, b := range []struct {
		what  string
		words int
	}{
		{"attention scratch of a block", p.attn.att},
		{"qkv activations", p.n * 3 * c.Dim},
		{"MLP activations", p.n * c.FFMult * c.Dim},
		{"logits of a head chunk", min(p.m, p.t.headChunk(c.Vocab)) * c.Vocab},
	} {
		if b.words > maxWords {
			return fmt.Errorf("gpu engine: the batch's %s take %d words, above the kernels' int32 indexing (%d): use smaller micro-batches or shorter sequences", b.what, b.words, maxWords)
		}
	}
	return nil
}

// linear: y[n×out] = x[n×in]·Wᵀ + b for the parameters name.weight and, when the model
// has it, name.bias.
func (t *Trainer) linear(l *launcher, x ir.Ptr, n, in int, name string, out int, y ir.Ptr) {
	beta := float32(0)
	if t.has(name + ".bias") {
		l.elementwise("bias_rows", n*out, ir.ArgP(t.wp(name+".bias")), ir.ArgP(y), ir.ArgI(out))
		beta = 1
	}
	l.gemm(false, true, n, out, in, 1, x, in, t.wp(name+".weight"), in, beta, y, out)
}

// csr lists, for each of rows ids, the positions in ids that hold it (in order).
func csr(ids []int32, rows int) (ptr, idx []int32) {
	ptr = make([]int32, rows+1)
	for _, v := range ids {
		ptr[v+1]++
	}
	for i := 0; i < rows; i++ {
		ptr[i+1] += ptr[i]
	}
	idx = make([]int32, len(ids))
	fill := append([]int32(nil), ptr[:rows]...)
	for r, v := range ids {
		idx[fill[v]] = int32(r)
		fill[v]++
	}
	return ptr, idx
}

// Backward accumulates into g the gradient of Σ dLogProb·logprob + Σ dEntropy·entropy, as
// model.Pass.Backward does. dEntropy may be nil. The gradient is computed on the device and
// copied back to be added into g; BackwardInto keeps it on the device.
func (p *Pass) Backward(dLogProb, dEntropy [][]float32, g *model.Grads) error {
	t := p.t
	if !t.matches(g) {
		return fmt.Errorf("gpu engine: Backward: grads do not match the model config")
	}
	start := time.Now()
	defer func() { t.times.Backward += time.Since(start) }()
	if ran, err := p.backward(dLogProb, dEntropy, t.g, true); err != nil || !ran {
		return err
	}
	if len(t.host) < t.total {
		t.host = make([]float32, t.total)
	}
	if err := t.dev.ReadF32(t.host[:t.total], t.g); err != nil {
		return fmt.Errorf("gpu engine: read gradients: %w", err)
	}
	// Add into g in parallel over fixed chunks (element-wise, so the split does not change
	// the result).
	const chunk = 1 << 16
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range t.off {
		dst := g.Tensor(i)
		src := t.host[t.off[i] : t.off[i]+t.sizes[i]]
		for lo := 0; lo < len(src); lo += chunk {
			hi := min(lo+chunk, len(src))
			wg.Add(1)
			sem <- struct{}{}
			go func(d, s []float32) {
				defer wg.Done()
				for j, v := range s {
					d[j] += v
				}
				<-sem
			}(dst[lo:hi], src[lo:hi])
		}
	}
	wg.Wait()
	return nil
}

// BackwardInto is Backward with the gradient accumulated into g on the device (GEMMs with
// β = 1 and column sums added into g's tensors), so nothing but dLogProb and dEntropy
// crosses the bus. It waits for the device, so Timings.Backward includes the kernels.
func (p *Pass) BackwardInto(dLogProb, dEntropy [][]float32, g *Grads) error {
	t := p.t
	if err := g.check(t); err != nil {
		return err
	}
	start := time.Now()
	defer func() { t.times.Backward += time.Since(start) }()
	if ran, err := p.backward(dLogProb, dEntropy, g.p, false); err != nil || !ran {
		return err
	}
	if err := t.dev.Sync(); err != nil {
		return fmt.Errorf("gpu engine: backward: %w", err)
	}
	return nil
}

// backward launches the backward pass, adding the gradient into the model-shaped buffer at
// base (zeroed first when zero). ran is false when the pass scored no token.
func (p *Pass) backward(dLogProb, dEntropy [][]float32, base ir.Ptr, zero bool) (ran bool, err error) {
	t := p.t
	if t.closed || p.gen != t.gen {
		return false, fmt.Errorf("gpu engine: Backward on a stale pass (another Forward ran since)")
	}
	gp := func(name string) ir.Ptr { return base.Add(t.off[t.index(name)]) }
	dlp, dent, err := flatGrads(p.seqs, p.m, dLogProb, dEntropy)
	if err != nil {
		return false, err
	}
	if p.m == 0 {
		return false, nil
	}
	c := t.cfg
	D, V := c.Dim, c.Vocab
	N, M := p.n, p.m
	l := t.launcher()
	need := func(name string, words int) ir.Ptr { return l.keep(t.buf(name, words)) }
	// Host inputs: dlp, dent as floats; CSR lists of token and position rows.
	bd := p.block()
	ints := bd.embedCSR(p.toks, p.pos)
	ib := need("bints", len(ints))
	fb := need("bfloats", 2*M)
	if l.err != nil {
		return false, l.err
	}
	if err := t.dev.WriteI32(ib, ints); err != nil {
		return false, fmt.Errorf("gpu engine: upload: %w", err)
	}
	if err := t.dev.WriteF32(fb, append(dlp, dent...)); err != nil {
		return false, fmt.Errorf("gpu engine: upload: %w", err)
	}
	if err := t.dropSplitTables(N, M, V); err != nil {
		return false, err
	}
	if zero {
		if err := t.dev.Zero(base, t.total); err != nil {
			return false, fmt.Errorf("gpu engine: zero grads: %w", err)
		}
	}
	rowsP, tgtP := t.bufs["ints"].p.Add(2*N), t.bufs["ints"].p.Add(2*N+M)
	dX := need("dX", N*D)
	bd.headBackward(l, gp, rowsP, tgtP, fb, M, V, p.temp, dX)
	s := bd.gradBufs(l, dX)
	if l.err != nil {
		return false, l.err
	}
	for li := c.Layers - 1; li >= 0; li-- {
		bd.blockBackward(l, li, gp, s)
	}
	bd.embedBackward(l, gp, dX, ib)
	if l.err != nil {
		return false, l.err
	}
	return true, nil
}
