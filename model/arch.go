package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
)

// ArchConfig describes a Hugging Face decoder of the Llama family (Qwen2,
// Qwen2.5, Qwen3, Llama): pre-norm blocks of RMSNorm, rotary grouped-query
// attention and a SwiGLU MLP. Field names follow config.json: Hidden is
// hidden_size, Intermediate intermediate_size, KVHeads num_key_value_heads,
// Context max_position_embeddings.
type ArchConfig struct {
	Arch         string  `json:"arch"` // config.json's model_type, a registered architecture (archs.go)
	Hidden       int     `json:"hidden"`
	Layers       int     `json:"layers"`
	Heads        int     `json:"heads"`
	KVHeads      int     `json:"kv_heads"`
	HeadDim      int     `json:"head_dim"` // 0 = Hidden/Heads (WithDefaults)
	Intermediate int     `json:"intermediate"`
	Vocab        int     `json:"vocab"`
	Context      int     `json:"context"` // longest sequence; 0 = 32768 (WithDefaults)
	RMSNormEps   float64 `json:"rms_norm_eps"`
	RopeTheta    float64 `json:"rope_theta"`
	Tie          bool    `json:"tie_word_embeddings"`
	QKVBias      bool    `json:"qkv_bias"` // q/k/v projections have biases
	OBias        bool    `json:"o_bias"`   // o_proj has a bias
	QKNorm       bool    `json:"qk_norm"`  // per-head RMSNorm of q and k before RoPE

	// RopeScaling rescales the rotary frequencies (zero: plain RoPE).
	RopeScaling RopeScaling `json:"rope_scaling,omitzero"`
}

// WithDefaults fills what the architecture fixes or config.json may omit:
// HeadDim (Hidden/Heads), Context (32768), RMSNormEps (1e-6), RopeTheta
// (10000), and what the registered architecture fixes: fixed q/k/v biases,
// q/k norms, and OBias where attention_bias sets it with QKVBias.
func (c ArchConfig) WithDefaults() ArchConfig {
	if c.HeadDim == 0 && c.Heads > 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	if c.Context == 0 {
		c.Context = 32768
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.RopeScaling == (RopeScaling{Type: "default"}) {
		c.RopeScaling = RopeScaling{}
	}
	if a, ok := registry[c.Arch]; ok {
		if !a.AttentionBias {
			c.QKVBias = a.QKVBias
		}
		c.QKNorm = a.QKNorm
		c.OBias = a.AttentionBias && c.QKVBias
	}
	return c
}

// Limits of ArchConfig.Validate (they keep a hostile config from asking for
// absurd allocations).
const (
	MaxArchVocab  = 1 << 22
	MaxArchParams = 1 << 34 // float32 parameters (64 GiB)
)

// Validate reports every problem with c at once (errors.Join).
func (c ArchConfig) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("arch config: "+format, a...)) }
	a, ok := registry[c.Arch]
	if !ok {
		bad("architecture %q not supported (supported: %v)", c.Arch, ArchNames())
	}
	inRange := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			bad("%s %d out of range [%d, %d]", name, v, lo, hi)
		}
	}
	inRange("hidden", c.Hidden, 1, MaxDim)
	inRange("layers", c.Layers, 1, MaxLayers)
	inRange("heads", c.Heads, 1, 1024)
	inRange("kv_heads", c.KVHeads, 1, 1024)
	inRange("intermediate", c.Intermediate, 1, 1<<17)
	inRange("vocab", c.Vocab, 2, MaxArchVocab)
	inRange("context", c.Context, 2, 1<<20)
	inRange("head_dim", c.HeadDim, 2, 1024)
	if c.HeadDim%2 != 0 {
		bad("head_dim %d must be even (rotary embedding)", c.HeadDim)
	}
	if c.Heads >= 1 && c.KVHeads >= 1 && c.Heads%c.KVHeads != 0 {
		bad("heads %d not divisible by kv_heads %d", c.Heads, c.KVHeads)
	}
	if !(c.RMSNormEps > 0) || math.IsInf(c.RMSNormEps, 0) {
		bad("rms_norm_eps %v must be finite and > 0", c.RMSNormEps)
	}
	if !(c.RopeTheta > 1) || math.IsInf(c.RopeTheta, 0) {
		bad("rope_theta %v must be finite and > 1", c.RopeTheta)
	}
	if err := c.RopeScaling.Validate(); err != nil {
		bad("%w", err)
	}
	if ok {
		if !a.AttentionBias && c.QKVBias != a.QKVBias {
			bad("%s has qkv_bias=%v", c.Arch, a.QKVBias)
		}
		if c.QKNorm != a.QKNorm {
			bad("%s has qk_norm=%v", c.Arch, a.QKNorm)
		}
		if c.OBias != (a.AttentionBias && c.QKVBias) {
			bad("%s: o_bias must be %v when qkv_bias is %v", c.Arch, a.AttentionBias && c.QKVBias, c.QKVBias)
		}
	}
	if len(errs) == 0 {
		if n := c.NumParams(); n > MaxArchParams {
			bad("%d parameters exceed the limit %d", n, int64(MaxArchParams))
		}
	}
	return errors.Join(errs...)
}

// TensorSpec is one tensor of an architecture: its Hugging Face name and
// shape ([out, in] for a linear weight).
type TensorSpec struct {
	Name  string
	Shape []int
	// Decay: AdamW applies weight decay (linear weights and an untied head).
	Decay bool
	kind  initKind
}

// TensorSpecs lists c's tensors in the model's storage order. q, k and v
// weights (and their biases) are adjacent, as are gate and up: each group is
// then one matrix to multiply by.
func (c ArchConfig) TensorSpecs() []TensorSpec {
	D, hd, F := c.Hidden, c.HeadDim, c.Intermediate
	qd, kvd := c.Heads*hd, c.KVHeads*hd
	tn := c.Block().Names
	s := []TensorSpec{{Name: tn.Embed, Shape: []int{c.Vocab, D}, kind: initNormal}}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf(tn.Layer, l)
		add := func(name string, kind initKind, decay bool, shape ...int) {
			s = append(s, TensorSpec{Name: p + name, Shape: shape, Decay: decay, kind: kind})
		}
		add(tn.Norm1+wSfx, initOne, false, D)
		add(tn.QKV+wSfx, initNormal, true, qd, D)
		add(tn.K+wSfx, initNormal, true, kvd, D)
		add(tn.V+wSfx, initNormal, true, kvd, D)
		if c.QKVBias {
			add(tn.QKV+bSfx, initZero, false, qd)
			add(tn.K+bSfx, initZero, false, kvd)
			add(tn.V+bSfx, initZero, false, kvd)
		}
		add(tn.O+wSfx, initResidual, true, D, qd)
		if c.OBias {
			add(tn.O+bSfx, initZero, false, D)
		}
		if c.QKNorm {
			add(tn.QNorm+wSfx, initOne, false, hd)
			add(tn.KNorm+wSfx, initOne, false, hd)
		}
		add(tn.Norm2+wSfx, initOne, false, D)
		add(tn.Up+wSfx, initNormal, true, F, D)
		add(tn.Up2+wSfx, initNormal, true, F, D)
		add(tn.Down+wSfx, initResidual, true, D, F)
	}
	s = append(s, TensorSpec{Name: tn.Final + wSfx, Shape: []int{D}, kind: initOne})
	if !c.Tie {
		s = append(s, TensorSpec{Name: tn.Head, Shape: []int{c.Vocab, D}, Decay: true, kind: initNormal})
	}
	return s
}

// NumParams is the number of float32 parameters (int64: no overflow).
func (c ArchConfig) NumParams() int64 {
	var n int64
	for _, s := range c.TensorSpecs() {
		p := int64(1)
		for _, d := range s.Shape {
			p *= int64(d)
		}
		n += p
	}
	return n
}

// blockW holds views of one block's tensors (weights or gradients). qkvW is
// q, k and v weights as one [(H+2·KV)·hd × D] matrix (qkvB likewise, nil
// without biases); gateUp is gate then up as one [2F × D] matrix.
// inB, postB, upB and downB are the norms' biases (LayerNorm) and the MLP
// projections' biases (the built-in model); nil in the Llama family.
// In a model stored in BF16 (bf16.go) the four matrices are qkvH, oH, gateUpH
// and downH instead, and their float32 views are nil.
type blockW struct {
	in, qkvW, qkvB, oW, oB, qn, kn, post, gateUp, down []float32
	inB, postB, upB, downB                             []float32
	qkvH, oH, gateUpH, downH                           bf16W
}

// llmW holds views of every tensor of a model-shaped buffer (embedH and
// headH instead of embed and head in a model stored in BF16).
type llmW struct {
	embed, norm, head []float32 // head aliases embed when tied
	pos, normB        []float32 // learned positions, final norm's bias: the built-in model
	embedH, headH     bf16W
	blocks            []blockW
}

// llmViews slices buf (laid out as c.TensorSpecs()) into per-tensor parts
// and the grouped views the passes use. With hbuf (a model stored in BF16)
// the matrices (isMatrix) are laid out in hbuf instead, in the same order,
// and their views are hparts and the H fields.
func llmViews(c ArchConfig, specs []TensorSpec, buf []float32, hbuf []uint16) (llmW, [][]float32, [][]uint16) {
	parts, hparts := make([][]float32, len(specs)), make([][]uint16, len(specs))
	byName, inH := make(map[string]int, len(specs)), make(map[string]bool, len(specs))
	index := make(map[string]int, len(specs))
	off, hoff := 0, 0
	for i, s := range specs {
		n := prod(s.Shape)
		index[s.Name] = i
		if hbuf != nil && isMatrix(s) {
			hparts[i] = hbuf[hoff : hoff+n : hoff+n]
			byName[s.Name], inH[s.Name] = hoff, true
			hoff += n
			continue
		}
		parts[i] = buf[off : off+n : off+n]
		byName[s.Name] = off
		off += n
	}
	// span returns buf from tensor name's start through n floats; spanH
	// hbuf's.
	span := func(name string, n int) []float32 {
		if o, ok := byName[name]; ok && !inH[name] {
			return buf[o : o+n : o+n]
		}
		return nil
	}
	// spanH's matrix stacks the tensors it spans, each packed on its own.
	spanH := func(name string, n int) bf16W {
		o, ok := byName[name]
		if !ok || !inH[name] {
			return bf16W{}
		}
		w := bf16W{bits: hbuf[o : o+n : o+n], in: specs[index[name]].Shape[1]}
		for i, got := index[name], 0; got < n; i++ {
			w.segs = append(w.segs, specs[i].Shape[0])
			got += prod(specs[i].Shape)
		}
		return w
	}
	D, hd, F := c.Hidden, c.HeadDim, c.Intermediate
	qkv := (c.Heads + 2*c.KVHeads) * hd
	tn := c.Block().Names
	w := llmW{embed: span(tn.Embed, c.Vocab*D), embedH: spanH(tn.Embed, c.Vocab*D), norm: span(tn.Final+wSfx, D), blocks: make([]blockW, c.Layers)}
	for l := range w.blocks {
		p := fmt.Sprintf(tn.Layer, l)
		qkvN, oN, guN, dN := p+tn.QKV+wSfx, p+tn.O+wSfx, p+tn.Up+wSfx, p+tn.Down+wSfx
		w.blocks[l] = blockW{
			in: span(p+tn.Norm1+wSfx, D), qkvW: span(qkvN, qkv*D), qkvB: span(p+tn.QKV+bSfx, qkv),
			oW: span(oN, D*c.Heads*hd), oB: span(p+tn.O+bSfx, D),
			qn: span(p+tn.QNorm+wSfx, hd), kn: span(p+tn.KNorm+wSfx, hd), post: span(p+tn.Norm2+wSfx, D),
			gateUp: span(guN, 2*F*D), down: span(dN, D*F),
			qkvH: spanH(qkvN, qkv*D), oH: spanH(oN, D*c.Heads*hd), gateUpH: spanH(guN, 2*F*D), downH: spanH(dN, D*F),
		}
	}
	if c.Tie {
		w.head, w.headH = w.embed, w.embedH
	} else {
		w.head, w.headH = span(tn.Head, c.Vocab*D), spanH(tn.Head, c.Vocab*D)
	}
	return w, parts, hparts
}

// LLM is a model of the Llama family (ArchConfig) on the CPU engine. Its
// methods may be called concurrently as long as nothing modifies the
// parameters at the same time.
type LLM struct {
	cfg    ArchConfig
	d      netDesc // what the passes follow (descOf(cfg); builtinDesc for Model's core)
	specs  []TensorSpec
	buf    []float32
	parts  [][]float32
	hbuf   []uint16 // the matrices of a model stored in BF16 (bf16.go); nil: float32
	w      llmW
	gemm   GEMM
	params []Param
	ad     *loraRun // a LoRA's adapter on this view of the base (lora.go); nil: none
	ckpt   bool     // activation checkpointing (recompute.go)
}

func newLLM(c ArchConfig) (*LLM, error) { return newLLMStored(c, false) }

// newLLMStored is newLLM with the matrices in bfloat16 when bf16.
func newLLMStored(c ArchConfig, bf16 bool) (*LLM, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	m := &LLM{cfg: c, d: descOf(c), specs: c.TensorSpecs(), gemm: DefaultGEMM}
	n := int(c.NumParams())
	if bf16 {
		nh := 0
		for _, s := range m.specs {
			if isMatrix(s) {
				nh += prod(s.Shape)
			}
		}
		m.hbuf, n = make([]uint16, nh), n-nh
	}
	m.buf = make([]float32, n)
	var hparts [][]uint16
	m.w, m.parts, hparts = llmViews(c, m.specs, m.buf, m.hbuf)
	m.params = make([]Param, len(m.specs))
	for i, s := range m.specs {
		m.params[i] = Param{Name: s.Name, Shape: slices.Clone(s.Shape), Data: m.parts[i], BF16: hparts[i], Decay: s.Decay}
	}
	return m, nil
}

// NewLLM builds a model with c (after c.Validate) and fills every tensor
// through get(name, dst) by its Hugging Face name; dst has the tensor's
// element count. An error from get is returned wrapped with the name.
func NewLLM(c ArchConfig, get func(name string, dst []float32) error) (*LLM, error) {
	m, err := newLLM(c)
	if err != nil {
		return nil, err
	}
	for i, s := range m.specs {
		if err := get(s.Name, m.parts[i]); err != nil {
			return nil, fmt.Errorf("model: tensor %s %v: %w", s.Name, s.Shape, err)
		}
	}
	return m, nil
}

// InitLLM builds a model with random weights from seed: linear weights and
// embeddings N(0, 0.02), the residual projections (o_proj, down_proj)
// N(0, 0.02/sqrt(2·Layers)), biases 0, norm weights 1.
func InitLLM(c ArchConfig, seed uint64) (*LLM, error) {
	m, err := newLLM(c)
	if err != nil {
		return nil, err
	}
	kinds := make([]initKind, len(m.specs))
	for i, s := range m.specs {
		kinds[i] = s.kind
	}
	initTensors(m.parts, kinds, seed, c.Layers)
	return m, nil
}

// Config returns the model's configuration.
func (m *LLM) Config() ArchConfig { return m.cfg }

// Params returns the tensors in storage order, by Hugging Face name. Data
// aliases the model.
func (m *LLM) Params() []Param { return m.params }

// NumParams is the total number of parameters.
func (m *LLM) NumParams() int { return len(m.buf) + len(m.hbuf) }

// Tensors returns every parameter as an F32 tensor by Hugging Face name,
// ready for WriteSafetensors. The tensors are encoded copies (as much memory
// again as the model): a writer of large models streams Params instead.
func (m *LLM) Tensors() []Tensor {
	out := make([]Tensor, len(m.params))
	for i, p := range m.params {
		out[i] = F32Tensor(p.Name, p.Shape, p.Float32())
	}
	return out
}

// SetGEMM replaces the matrix-multiply kernel (nil restores DefaultGEMM).
func (m *LLM) SetGEMM(g GEMM) {
	if g == nil {
		g = DefaultGEMM
	}
	m.gemm = g
}

// LLMGrads holds one gradient tensor per parameter, laid out like the model.
type LLMGrads struct {
	cfg   ArchConfig
	specs []TensorSpec
	buf   []float32
	parts [][]float32
	w     llmW
}

// NewGrads returns zeroed gradients shaped like m.
func (m *LLM) NewGrads() *LLMGrads {
	g := &LLMGrads{cfg: m.cfg, specs: m.specs, buf: make([]float32, m.NumParams())}
	g.w, g.parts, _ = llmViews(m.cfg, m.specs, g.buf, nil)
	return g
}

// Zero sets every gradient to 0.
func (g *LLMGrads) Zero() { clear(g.buf) }

// Norm is the L2 norm over all gradients, summed in storage order in float64.
func (g *LLMGrads) Norm() float64 {
	var s float64
	for _, v := range g.buf {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// Add adds o into g; the configs must match.
func (g *LLMGrads) Add(o *LLMGrads) error {
	if o.cfg != g.cfg {
		return fmt.Errorf("model: LLMGrads.Add: config mismatch")
	}
	for i, v := range o.buf {
		g.buf[i] += v
	}
	return nil
}

// Scale multiplies every gradient by f (with ClipScale: gradient clipping).
func (g *LLMGrads) Scale(f float32) {
	for i := range g.buf {
		g.buf[i] *= f
	}
}

// ByName returns the gradient of the named tensor, or nil.
func (g *LLMGrads) ByName(name string) []float32 {
	for i, s := range g.specs {
		if s.Name == name {
			return g.parts[i]
		}
	}
	return nil
}

// Policy is what the stages need from a model, whichever the architecture:
// the built-in Model and LLM both implement it.
type Policy interface {
	Score(seqs []Sequence, temperature float32) ([][]float32, [][]float32, error)
	Sample(ctx context.Context, reqs []SampleRequest, opts SampleOptions) ([]SampleResult, error)
	Tensors() []Tensor
}

var (
	_ Policy = (*Model)(nil)
	_ Policy = (*LLM)(nil)
)
