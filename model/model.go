package model

import (
	"fmt"
	"math"
	"slices"
)

// Param is one named parameter tensor. Data aliases the model's storage:
// writing to it changes the model.
type Param struct {
	Name  string
	Shape []int
	Data  []float32
	// BF16 holds the tensor's bfloat16 bits instead of Data (nil then) in a
	// model stored in BF16 (LLM.FrozenBF16), packed in strips of 16 rows
	// (model/bf16strips.go): read it through Float32 or BF16Rows.
	BF16 []uint16
	// Decay reports whether AdamW applies weight decay to this tensor (true
	// only for the linear layers' weight matrices, including an untied head;
	// never for biases, LayerNorm parameters or embeddings).
	Decay bool
}

type initKind int

const (
	initNormal   initKind = iota // N(0, 0.02)
	initResidual                 // N(0, 0.02/sqrt(2L))
	initZero
	initOne
)

type paramSpec struct {
	name  string
	shape []int
	init  initKind
	decay bool
}

// builtinBlock is the built-in policy's block: LayerNorm with bias, learned
// positions, a GELU MLP, biases on every projection, and its tensor names.
var builtinBlock = Block{Norm: NormLayer, Pos: PosLearned, MLP: MLPGELU, Names: TensorNames{
	Layer: "blocks.%d.", Norm1: "ln1", Norm2: "ln2", QKV: "attn.qkv", O: "attn.proj",
	Up: "mlp.fc", Down: "mlp.proj", Embed: "tok_emb.weight", PosEmbed: "pos_emb.weight",
	Final: "ln_f", Head: "head.weight",
}}

// Block returns the built-in policy's block.
func (c Config) Block() Block { return builtinBlock }

// paramSpecs lists the parameters of a model with cfg in their fixed order.
func paramSpecs(c Config) []paramSpec {
	D, F := c.Dim, c.FFMult*c.Dim
	tn := builtinBlock.Names
	s := []paramSpec{
		{tn.Embed, []int{c.Vocab, D}, initNormal, false},
		{tn.PosEmbed, []int{c.Context, D}, initNormal, false},
	}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf(tn.Layer, l)
		s = append(s,
			paramSpec{p + tn.Norm1 + wSfx, []int{D}, initOne, false},
			paramSpec{p + tn.Norm1 + bSfx, []int{D}, initZero, false},
			paramSpec{p + tn.QKV + wSfx, []int{3 * D, D}, initNormal, true},
			paramSpec{p + tn.QKV + bSfx, []int{3 * D}, initZero, false},
			paramSpec{p + tn.O + wSfx, []int{D, D}, initResidual, true},
			paramSpec{p + tn.O + bSfx, []int{D}, initZero, false},
			paramSpec{p + tn.Norm2 + wSfx, []int{D}, initOne, false},
			paramSpec{p + tn.Norm2 + bSfx, []int{D}, initZero, false},
			paramSpec{p + tn.Up + wSfx, []int{F, D}, initNormal, true},
			paramSpec{p + tn.Up + bSfx, []int{F}, initZero, false},
			paramSpec{p + tn.Down + wSfx, []int{D, F}, initResidual, true},
			paramSpec{p + tn.Down + bSfx, []int{D}, initZero, false},
		)
	}
	s = append(s,
		paramSpec{tn.Final + wSfx, []int{D}, initOne, false},
		paramSpec{tn.Final + bSfx, []int{D}, initZero, false},
	)
	if !c.TiedHead {
		s = append(s, paramSpec{tn.Head, []int{c.Vocab, D}, initNormal, true})
	}
	return s
}

// builtinViews slices buf (laid out as paramSpecs(c)) into per-tensor
// parts and the views of the block skeleton (builtinDesc).
func builtinViews(c Config, buf []float32) (llmW, [][]float32) {
	specs := paramSpecs(c)
	parts := make([][]float32, len(specs))
	off := 0
	for i, s := range specs {
		n := prod(s.shape)
		parts[i] = buf[off : off+n : off+n]
		off += n
	}
	w := llmW{embed: parts[0], pos: parts[1], blocks: make([]blockW, c.Layers)}
	k := 2
	for l := range w.blocks {
		p := parts[k : k+12]
		w.blocks[l] = blockW{
			in: p[0], inB: p[1], qkvW: p[2], qkvB: p[3], oW: p[4], oB: p[5],
			post: p[6], postB: p[7], gateUp: p[8], upB: p[9], down: p[10], downB: p[11],
		}
		k += 12
	}
	w.norm, w.normB = parts[k], parts[k+1]
	k += 2
	if c.TiedHead {
		w.head = w.embed
	} else {
		w.head = parts[k]
	}
	return w, parts
}

// Model is the transformer. Its methods may be called concurrently as long as
// nothing modifies the parameters at the same time (AdamW.Step, Load).
type Model struct {
	cfg   Config
	specs []paramSpec
	buf   []float32
	parts [][]float32
	// core runs the block skeleton's passes (forward, backward, decoder)
	// over builtinDesc(cfg) on views of buf.
	core   *LLM
	params []Param
}

func newModel(cfg Config) *Model {
	m := &Model{cfg: cfg, specs: paramSpecs(cfg)}
	m.buf = make([]float32, cfg.NumParams())
	var w llmW
	w, m.parts = builtinViews(cfg, m.buf)
	m.core = &LLM{d: builtinDesc(cfg), buf: m.buf, parts: m.parts, w: w, gemm: DefaultGEMM}
	m.params = make([]Param, len(m.specs))
	for i, s := range m.specs {
		m.params[i] = Param{Name: s.name, Shape: slices.Clone(s.shape), Data: m.parts[i], Decay: s.decay}
	}
	return m
}

// New builds a model with GPT-2 style initialisation from seed: weights and
// embeddings N(0, 0.02), the two residual projections of each block scaled
// by 1/sqrt(2·Layers), biases 0, LayerNorm gains 1.
func New(cfg Config, seed uint64) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := newModel(cfg)
	kinds := make([]initKind, len(m.specs))
	for i, s := range m.specs {
		kinds[i] = s.init
	}
	initTensors(m.parts, kinds, seed, cfg.Layers)
	return m, nil
}

// initTensors fills parts in order from one RNG seeded with seed: normal
// N(0, 0.02), residual N(0, 0.02/sqrt(2·layers)), ones or zeros.
func initTensors(parts [][]float32, kinds []initKind, seed uint64, layers int) {
	rng := newRNG(seed)
	resid := 0.02 / math.Sqrt(2*float64(layers))
	for i, kind := range kinds {
		d := parts[i]
		switch kind {
		case initNormal:
			for j := range d {
				d[j] = float32(0.02 * rng.normal())
			}
		case initResidual:
			for j := range d {
				d[j] = float32(resid * rng.normal())
			}
		case initOne:
			for j := range d {
				d[j] = 1
			}
		case initZero:
		}
	}
}

// Config returns the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// Params returns the parameters in their fixed order. Data aliases the model.
func (m *Model) Params() []Param { return m.params }

// NumParams is the total number of float32 parameters.
func (m *Model) NumParams() int { return len(m.buf) }

// SetGEMM replaces the matrix-multiply kernel (nil restores DefaultGEMM).
func (m *Model) SetGEMM(g GEMM) { m.core.SetGEMM(g) }

// GEMM returns the kernel in use.
func (m *Model) GEMM() GEMM { return m.core.gemm }

// Clone returns a deep copy (same kernel).
func (m *Model) Clone() *Model {
	c := newModel(m.cfg)
	copy(c.buf, m.buf)
	c.core.gemm = m.core.gemm
	return c
}

// CopyFrom copies o's parameters into m; the configs must be equal.
func (m *Model) CopyFrom(o *Model) error {
	if m.cfg != o.cfg {
		return fmt.Errorf("model: CopyFrom: config mismatch")
	}
	copy(m.buf, o.buf)
	return nil
}

// rng is splitmix64 + Box-Muller: tiny, stable across Go releases.
type rng struct {
	s     uint64
	spare float64
	has   bool
}

func newRNG(seed uint64) *rng { return &rng{s: seed ^ 0x6a09e667f3bcc909} }

func (r *rng) uint64() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float64 returns a uniform value in [0,1).
func (r *rng) float64() float64 { return float64(r.uint64()>>11) / (1 << 53) }

func (r *rng) normal() float64 {
	if r.has {
		r.has = false
		return r.spare
	}
	u1 := 1 - r.float64() // (0,1]
	u2 := r.float64()
	rad := math.Sqrt(-2 * math.Log(u1))
	r.spare = rad * math.Sin(2*math.Pi*u2)
	r.has = true
	return rad * math.Cos(2*math.Pi*u2)
}
