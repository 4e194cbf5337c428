package model

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// LoRATargets are the linear layers of a Llama-family block by their Hugging Face module names,
// in the order a LoRA lays out its parameters.
var LoRATargets = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// MaxLoRARank bounds LoRAConfig.R.
const MaxLoRARank = 4096

// LoRAConfig is a LoRA adapter's shape, with PEFT's meaning of each field: A [R, in] and
// B [out, R] per target module, the update scaled by Alpha/R, and dropout on A's input during
// training only. Empty Targets means every linear layer (LoRATargets).
type LoRAConfig struct {
	R       int
	Alpha   float64
	Dropout float64
	Targets []string
}

// Scale is the factor of B·A: Alpha/R.
func (c LoRAConfig) Scale() float64 { return c.Alpha / float64(c.R) }

// normalized returns c with Targets in LoRATargets order (all of them when empty), or an
// error naming every problem.
func (c LoRAConfig) normalized() (LoRAConfig, error) {
	var bad []string
	if c.R < 1 || c.R > MaxLoRARank {
		bad = append(bad, fmt.Sprintf("r %d out of range [1, %d]", c.R, MaxLoRARank))
	}
	if !(c.Alpha > 0) || math.IsInf(c.Alpha, 0) {
		bad = append(bad, fmt.Sprintf("alpha %v must be finite and > 0", c.Alpha))
	}
	if !(c.Dropout >= 0 && c.Dropout < 1) {
		bad = append(bad, fmt.Sprintf("dropout %v out of range [0, 1)", c.Dropout))
	}
	for i, t := range c.Targets {
		if !slices.Contains(LoRATargets, t) {
			bad = append(bad, fmt.Sprintf("target %q is not a linear layer of the block (have %s)", t, strings.Join(LoRATargets, ", ")))
		} else if slices.Contains(c.Targets[:i], t) {
			bad = append(bad, fmt.Sprintf("target %q named twice", t))
		}
	}
	if len(bad) > 0 {
		return c, fmt.Errorf("model: lora config: %s", strings.Join(bad, "; "))
	}
	targets := make([]string, 0, len(LoRATargets))
	for _, t := range LoRATargets {
		if len(c.Targets) == 0 || slices.Contains(c.Targets, t) {
			targets = append(targets, t)
		}
	}
	c.Targets = targets
	return c, nil
}

// loraModule is the adapter of one target module of one layer: A [r×in] and B [out×r] at
// offsets aOff and bOff of the LoRA's (and its gradients') storage; its output is columns
// col..col+out of the fused linear (q|k|v or gate|up) of the base.
type loraModule struct {
	name         string // "model.layers.N.self_attn.q_proj"
	in, out, col int
	aOff, bOff   int
	a, b         []float32
}

// loraSite is one fused linear of the base with the modules that add to its output.
type loraSite struct {
	ld   int
	mods []int
}

// LoRA is a LoRA adapter over a frozen LLM: every target linear computes
// y = x·Wᵀ (+ bias) + scale·(dropout(x)·Aᵀ)·Bᵀ. Only A and B train: its gradients, optimizer
// and Tensors hold the adapter alone (PEFT names). It implements Trainable; the base must not
// change while the LoRA is in use.
type LoRA struct {
	base   *LLM
	cfg    LoRAConfig
	scale  float32
	seed   uint64 // of the dropout masks
	buf    []float32
	params []Param
	mods   []loraModule
	// sites maps the first element of a fused base weight to the modules on that linear: the
	// base's linear finds its adapter by the weight it multiplies by.
	sites map[any]*loraSite
	// passes counts training forwards: each draws its dropout masks from (seed, count).
	passes atomic.Uint64
	ckpt   bool // activation checkpointing of the training forwards (recompute.go)
}

// NewLoRA returns an adapter for base: per layer and target module A [r, in] drawn as PEFT
// does (kaiming-uniform with a = √5, i.e. U(−1/√in, 1/√in)) from seed, and B = 0, so that the
// adapted model starts as the base.
func NewLoRA(base *LLM, cfg LoRAConfig, seed uint64) (*LoRA, error) {
	if base == nil {
		return nil, fmt.Errorf("model: NewLoRA: no base model")
	}
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	l := &LoRA{base: base, cfg: cfg, scale: float32(cfg.Scale()), seed: seed, sites: map[any]*loraSite{}}
	l.layout()
	r := newRNG(seed)
	for i := range l.mods {
		md := &l.mods[i]
		bound := 1 / math.Sqrt(float64(md.in))
		for j := range md.a {
			md.a[j] = float32((2*r.float64() - 1) * bound)
		}
		prefix := "base_model.model." + md.name
		l.params = append(l.params,
			Param{Name: prefix + ".lora_A.weight", Shape: []int{cfg.R, md.in}, Data: md.a, Decay: true},
			Param{Name: prefix + ".lora_B.weight", Shape: []int{md.out, cfg.R}, Data: md.b, Decay: true})
	}
	return l, nil
}

// loraGeom is where a target module sits in the base's block.
type loraGeom struct {
	parent       string // self_attn or mlp
	in, out, col int    // input and output widths, first column in the fused output
	ld           int    // the fused output's width
	fused        func(*blockW) weight
}

func loraGeometry(b blockDims) map[string]loraGeom {
	qd, kvd, ld := b.H*b.hd, b.KV*b.hd, b.ld()
	qkv := (*blockW).qkvM
	gu := (*blockW).gateUpM
	return map[string]loraGeom{
		"q_proj": {"self_attn", b.D, qd, 0, ld, qkv}, "k_proj": {"self_attn", b.D, kvd, qd, ld, qkv},
		"v_proj":    {"self_attn", b.D, kvd, qd + kvd, ld, qkv},
		"o_proj":    {"self_attn", qd, b.D, 0, b.D, (*blockW).oM},
		"gate_proj": {"mlp", b.D, b.F, 0, 2 * b.F, gu}, "up_proj": {"mlp", b.D, b.F, b.F, 2 * b.F, gu},
		"down_proj": {"mlp", b.F, b.D, 0, b.D, (*blockW).downM},
	}
}

// layout places A and B of every module (per layer, per target) in l.buf and registers each
// module with the fused linear of the base it adds to.
func (l *LoRA) layout() {
	geom, R := loraGeometry(dimsOf(l.base.cfg)), l.cfg.R
	n := 0
	for layer := range l.base.w.blocks {
		for _, t := range l.cfg.Targets {
			g := geom[t]
			md := loraModule{name: fmt.Sprintf("model.layers.%d.%s.%s", layer, g.parent, t), in: g.in, out: g.out, col: g.col,
				aOff: n, bOff: n + R*g.in}
			n = md.bOff + g.out*R
			key := g.fused(&l.base.w.blocks[layer]).key()
			if l.sites[key] == nil {
				l.sites[key] = &loraSite{ld: g.ld}
			}
			l.sites[key].mods = append(l.sites[key].mods, len(l.mods))
			l.mods = append(l.mods, md)
		}
	}
	l.buf = make([]float32, n)
	for i := range l.mods {
		md := &l.mods[i]
		end := md.bOff + md.out*R
		md.a, md.b = l.buf[md.aOff:md.bOff:md.bOff], l.buf[md.bOff:end:end]
	}
}

// Config returns the adapter's configuration (Targets in LoRATargets order).
func (l *LoRA) Config() LoRAConfig {
	c := l.cfg
	c.Targets = slices.Clone(c.Targets)
	return c
}

// Base returns the frozen model the adapter applies to.
func (l *LoRA) Base() *LLM { return l.base }

// Params returns A and B of every module (per layer, per target in LoRATargets order, A then
// B), named as PEFT's adapter_model.safetensors names them; Data aliases the adapter.
func (l *LoRA) Params() []Param { return l.params }

// NumParams is the number of trainable float32 parameters.
func (l *LoRA) NumParams() int { return len(l.buf) }

// Tensors returns the adapter's tensors (not the base's) as F32 copies by PEFT name.
func (l *LoRA) Tensors() []Tensor {
	out := make([]Tensor, len(l.params))
	for i, p := range l.params {
		out[i] = F32Tensor(p.Name, p.Shape, p.Data)
	}
	return out
}

// Modules lists the adapted modules' names ("model.layers.N.self_attn.q_proj"), in Params
// order.
func (l *LoRA) Modules() []string {
	out := make([]string, len(l.mods))
	for i, md := range l.mods {
		out[i] = md.name
	}
	return out
}

// TrainingPasses is the number of training forwards so far; the dropout masks of the next one
// are drawn from (seed, TrainingPasses). SetTrainingPasses restores it on resume.
func (l *LoRA) TrainingPasses() uint64 { return l.passes.Load() }

// SetTrainingPasses sets the count TrainingPasses reports.
func (l *LoRA) SetTrainingPasses(n uint64) { l.passes.Store(n) }

// SetDropoutSeed replaces the seed the dropout masks are drawn from (NewLoRA's seed, or 0
// for an adapter read from a folder): a resumed run sets its own.
func (l *LoRA) SetDropoutSeed(seed uint64) { l.seed = seed }

// view returns the base with run as its adapter (a copy of the LLM value sharing its weights).
func (l *LoRA) view(train bool, dropSeed uint64) (*LLM, *loraRun) {
	v := *l.base
	v.ckpt = train && l.ckpt
	run := &loraRun{l: l, gemm: v.gemm, train: train, drop: train && l.cfg.Dropout > 0, dropSeed: dropSeed}
	if train {
		run.u = make([][]float32, len(l.mods))
	}
	v.ad = run
	return &v, run
}

// Score is LLM.Score of the adapted model (no dropout).
func (l *LoRA) Score(seqs []Sequence, temperature float32) ([][]float32, [][]float32, error) {
	v, _ := l.view(false, 0)
	return v.Score(seqs, temperature)
}

// Sample is LLM.Sample (KV cache) of the adapted model (no dropout).
func (l *LoRA) Sample(ctx context.Context, reqs []SampleRequest, opts SampleOptions) ([]SampleResult, error) {
	v, _ := l.view(false, 0)
	return v.Sample(ctx, reqs, opts)
}

// TrainForward runs seqs keeping what Backward needs; with Dropout > 0 it draws this pass's
// masks (and counts the pass).
func (l *LoRA) TrainForward(seqs []Sequence, temperature float32) (TrainPass, error) {
	var dropSeed uint64
	if l.cfg.Dropout > 0 {
		dropSeed = mix64(l.seed ^ mix64(l.passes.Add(1)))
	}
	return l.trainForward(seqs, temperature, dropSeed)
}

func (l *LoRA) trainForward(seqs []Sequence, temperature float32, dropSeed uint64) (TrainPass, error) {
	v, run := l.view(true, dropSeed)
	p, err := v.Forward(seqs, temperature)
	if err != nil {
		return nil, err
	}
	return loraPass{p, run}, nil
}

// NewGradBuf returns zeroed gradients of A and B (nothing for the base), in Params order.
func (l *LoRA) NewGradBuf() GradBuf { return &LoRAGrads{l: l, buf: make([]float32, len(l.buf))} }

// NewOptimizer is AdamW over A and B (both with weight decay, as transformers' Trainer applies
// to them); its SaveState names the moments after the PEFT tensor names.
func (l *LoRA) NewOptimizer(cfg AdamWConfig) *AdamW { return NewParamAdamW(l.params, cfg) }

// Merged returns a copy of the base with every adapted weight W + scale·B·A (MergeLoRA: the
// arithmetic of hf.ApplyAdapter), for serving or scoring without the adapter. A base stored
// in BF16 is widened: the merged model is float32.
func (l *LoRA) Merged() (*LLM, error) {
	m := l.base.Float32()
	if m == l.base {
		var err error
		if m, err = newLLM(l.base.cfg); err != nil {
			return nil, err
		}
		copy(m.buf, l.base.buf)
		m.gemm = l.base.gemm
	}
	idx := make(map[string]int, len(m.specs))
	for i, s := range m.specs {
		idx[s.Name] = i
	}
	for _, md := range l.mods {
		MergeLoRA(m.parts[idx[md.name+".weight"]], md.a, md.b, l.cfg.R, l.cfg.Scale())
	}
	return m, nil
}

// MergeLoRA adds scale·B·A to w [out, in] (A [r, in], B [out, r]); each element's r products
// are summed in float64, in order, and rounded once.
func MergeLoRA(w, a, b []float32, r int, scale float64) {
	in := len(a) / r
	out := len(b) / r
	for o := 0; o < out; o++ {
		bo := b[o*r : (o+1)*r]
		row := w[o*in : (o+1)*in]
		for i := range row {
			var s float64
			for k, bk := range bo {
				s += float64(bk) * float64(a[k*in+i])
			}
			row[i] = float32(float64(row[i]) + scale*s)
		}
	}
}

// LoRAGrads is the gradient of a LoRA's A and B, flat in Params order.
type LoRAGrads struct {
	l   *LoRA
	buf []float32
}

// Zero sets every gradient to 0.
func (g *LoRAGrads) Zero() { clear(g.buf) }

// Scale multiplies every gradient by f.
func (g *LoRAGrads) Scale(f float32) {
	for i := range g.buf {
		g.buf[i] *= f
	}
}

// Norm is the L2 norm, summed in order in float64.
func (g *LoRAGrads) Norm() float64 {
	var s float64
	for _, v := range g.buf {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// Flat is the gradients' own storage, in Params order.
func (g *LoRAGrads) Flat() []float32 { return g.buf }

// sameLayout reports whether o's parameters are laid out as l's.
func (l *LoRA) sameLayout(o *LoRA) bool {
	return l == o || (l.base.cfg == o.base.cfg && l.cfg.R == o.cfg.R && slices.Equal(l.cfg.Targets, o.cfg.Targets))
}

var _ Trainable = (*LoRA)(nil)

// loraPass is a training forward of a LoRA: the base's pass whose linears carried run.
type loraPass struct {
	*LLMPass
	run *loraRun
}

// Backward adds the gradients of A and B into g (a GradBuf of this LoRA). The base's weight
// gradients are never formed: the pass runs LLMPass.Backward into frozenGrads.
func (p loraPass) Backward(dLogProb, dEntropy [][]float32, g GradBuf) error {
	lg, ok := g.(*LoRAGrads)
	if !ok || !lg.l.sameLayout(p.run.l) {
		return fmt.Errorf("model: Backward: %T is not a gradient of this LoRA adapter", g)
	}
	p.run.mu.Lock()
	defer p.run.mu.Unlock()
	p.run.grad = lg.buf
	defer func() { p.run.grad = nil }()
	return p.LLMPass.Backward(dLogProb, dEntropy, frozenGrads(p.run.l.base.cfg))
}

// frozenGrads is an LLMGrads with no weight, bias or embedding gradients (nil views: weightGrad,
// the embedding backward and the bias sums skip them). The norm weights' column sums, which the norm
// backward always forms, go to two small throw-away vectors.
func frozenGrads(c ArchConfig) *LLMGrads {
	d := make([]float32, c.Hidden)
	var hd []float32
	if c.QKNorm {
		hd = make([]float32, c.HeadDim)
	}
	g := &LLMGrads{cfg: c, w: llmW{norm: d, blocks: make([]blockW, c.Layers)}}
	for i := range g.w.blocks {
		g.w.blocks[i] = blockW{in: d, post: d, qn: hd, kn: hd}
	}
	return g
}

// loraRun is the adapter as the base's linears see it during one call: inference (Score,
// Sample) or one training forward, which keeps u = dropout(x)·Aᵀ per module for Backward.
type loraRun struct {
	l        *LoRA
	gemm     GEMM
	train    bool
	drop     bool // training with dropout
	dropSeed uint64
	u        [][]float32
	mu       sync.Mutex
	grad     []float32 // the LoRAGrads of the Backward in progress
}

// forward adds the adapter's output to y[n×ld] = x[n×in]·Wᵀ (+ b) when W is an adapted fused
// weight. A nil run (a plain LLM) does nothing.
func (r *loraRun) forward(x []float32, n, in int, W weight, ld int, y []float32) {
	if r == nil {
		return
	}
	site := r.l.sites[W.key()]
	if site == nil {
		return
	}
	R := r.l.cfg.R
	for _, k := range site.mods {
		md := &r.l.mods[k]
		xd, put := r.dropped(k, x, n, in)
		u := make([]float32, n*R)
		r.gemm.Sgemm(false, true, n, R, in, 1, xd, in, md.a, in, 0, u, R)
		put()
		r.gemm.Sgemm(false, true, n, md.out, R, r.l.scale, u, R, md.b, R, 1, y[md.col:], ld)
		if r.train {
			r.u[k] = u
		}
	}
}

// backward, for the adapted fused weight W with input x[n×in] and output gradient dY[n×ld],
// adds into the input gradient dx[n×in] the adapter's part and into the LoRA's gradients
// dB = scale·dYᵀ·u and dA = scale·(dY·B)ᵀ·dropout(x).
func (r *loraRun) backward(W weight, n int, x, dY, dx []float32) {
	if r == nil || r.grad == nil {
		return
	}
	site := r.l.sites[W.key()]
	if site == nil {
		return
	}
	R, s, ld := r.l.cfg.R, r.l.scale, site.ld
	vb := getScratch(n * R)
	defer putScratch(vb)
	v := *vb
	for _, k := range site.mods {
		md := &r.l.mods[k]
		in, dYm := md.in, dY[md.col:]
		r.gemm.Sgemm(false, false, n, R, md.out, 1, dYm, ld, md.b, R, 0, v, R)
		r.gemm.Sgemm(true, false, md.out, R, n, s, dYm, ld, r.u[k], R, 1, r.grad[md.bOff:md.bOff+md.out*R], R)
		xd, put := r.dropped(k, x, n, in)
		r.gemm.Sgemm(true, false, R, in, n, s, v, R, xd, in, 1, r.grad[md.aOff:md.bOff], in)
		put()
		if !r.drop {
			r.gemm.Sgemm(false, false, n, in, R, s, v, R, md.a, in, 1, dx, in)
			continue
		}
		tb := getScratch(n * in)
		r.gemm.Sgemm(false, false, n, in, R, s, v, R, md.a, in, 0, *tb, in)
		r.dropInto(k, *tb, dx, true)
		putScratch(tb)
	}
}

// dropped returns x with module k's dropout applied (x itself when the run has none) and the
// function that releases it.
func (r *loraRun) dropped(k int, x []float32, n, in int) ([]float32, func()) {
	if !r.drop {
		return x, func() {}
	}
	b := getScratch(n * in)
	clear(*b)
	r.dropInto(k, x, *b, false)
	return *b, func() { putScratch(b) }
}

// dropInto applies module k's dropout mask, scaled by 1/(1−p) as torch's Dropout, to src:
// dst = mask·src (or dst += with add). Each element's mask bit is a hash of (pass seed,
// module, element): the same in the forward and the backward, whatever the core count.
func (r *loraRun) dropInto(k int, src, dst []float32, add bool) {
	p := r.l.cfg.Dropout
	keep := float32(1 / (1 - p))
	cut := uint64(p * (1 << 53))
	ks := mix64(r.dropSeed ^ mix64(uint64(k)+1))
	parallelRows(len(src), 1<<14, func(lo, hi int) {
		for e := lo; e < hi; e++ {
			v := float32(0)
			if mix64(ks+uint64(e))>>11 >= cut {
				v = src[e] * keep
			}
			if add {
				dst[e] += v
			} else {
				dst[e] = v
			}
		}
	})
}

// mix64 is splitmix64's finalizer: a bijective hash of z.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
