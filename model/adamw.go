package model

import (
	"errors"
	"fmt"
	"math"
)

// AdamWConfig holds AdamW's hyper-parameters.
type AdamWConfig struct {
	LR          float64 `json:"lr"`
	Beta1       float64 `json:"beta1"`
	Beta2       float64 `json:"beta2"`
	Eps         float64 `json:"eps"`
	WeightDecay float64 `json:"weight_decay"`
}

// DefaultAdamWConfig: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01.
func DefaultAdamWConfig() AdamWConfig {
	return AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
}

// Validate reports every out-of-range hyper-parameter at once (errors.Join):
// lr and weight_decay must be finite and ≥ 0, beta1 and beta2 in [0, 1),
// eps finite and > 0. (beta = 1 would divide by a zero bias correction, a
// negative second-moment decay or eps would take square roots of negative
// numbers: either turns every weight into NaN or Inf.)
func (c AdamWConfig) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("adamw config: "+format, a...)) }
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if !finite(c.LR) || c.LR < 0 {
		bad("lr %v must be finite and ≥ 0", c.LR)
	}
	if !(c.Beta1 >= 0 && c.Beta1 < 1) {
		bad("beta1 %v out of range [0, 1)", c.Beta1)
	}
	if !(c.Beta2 >= 0 && c.Beta2 < 1) {
		bad("beta2 %v out of range [0, 1)", c.Beta2)
	}
	if !finite(c.Eps) || c.Eps <= 0 {
		bad("eps %v must be finite and > 0", c.Eps)
	}
	if !finite(c.WeightDecay) || c.WeightDecay < 0 {
		bad("weight_decay %v must be finite and ≥ 0", c.WeightDecay)
	}
	return errors.Join(errs...)
}

// AdamW is decoupled-weight-decay Adam (Loshchilov & Hutter) with bias
// correction, as in PyTorch's torch.optim.AdamW. Weight decay applies only
// to parameters with Param.Decay (linear weight matrices), never to biases,
// LayerNorm parameters or embeddings. The hyper-parameters may be changed
// between steps (e.g. a learning-rate schedule).
type AdamW struct {
	AdamWConfig
	Steps int64 // number of steps taken (the bias-correction t)

	m  *Model // nil for an LLM's optimizer
	lm *LLM   // nil for a Model's optimizer
	// params are the parameters of an optimizer made by NewParamAdamW (nil for the built-in
	// model's), which names its saved state.
	params []Param
	parts  [][]float32 // the parameters updated, in storage order
	mom    []float32   // first moment, laid out like the model
	vel    []float32   // second moment
	mask   []bool      // per parameter tensor: decay?
}

// NewAdamW returns an optimizer for m with zero state.
func NewAdamW(m *Model, cfg AdamWConfig) *AdamW {
	o := newAdamW(cfg, m.parts, len(m.buf))
	o.m = m
	for i, s := range m.specs {
		o.mask[i] = s.decay
	}
	return o
}

// newAdamW returns zero state for n parameters in parts (mask to be set).
func newAdamW(cfg AdamWConfig, parts [][]float32, n int) *AdamW {
	return &AdamW{AdamWConfig: cfg, parts: parts, mom: make([]float32, n), vel: make([]float32, n), mask: make([]bool, len(parts))}
}

// NewLLMAdamW returns an optimizer for an LLM with zero state (weight decay
// on the tensors with TensorSpec.Decay); update it with StepLLM.
func NewLLMAdamW(m *LLM, cfg AdamWConfig) *AdamW {
	o := NewParamAdamW(m.Params(), cfg)
	o.lm = m
	return o
}

// AdamWStep holds the constants of one AdamW step, the same for every element of a tensor.
// A device implementation of the update (the GPU learner's) applies them with Step's
// float32 arithmetic: m = b1·m + (1−b1)·g, v = b2·v + (1−b2)·g²,
// p = p·decay − stepSize·m/(sqrt(v)·invBc2 + eps).
type AdamWStep struct {
	B1, B2, StepSize, InvBc2, Eps float32
	// Decay is per parameter tensor, in Params order: 1 − lr·weight_decay for tensors with
	// Param.Decay, else 1.
	Decay []float32
}

// Advance counts one step and returns its constants. Step calls it; a caller that runs the
// update elsewhere (the GPU engine) calls it once per update instead of Step. Hyper-parameters
// that fail AdamWConfig.Validate are an error, and nothing is counted.
func (o *AdamW) Advance() (AdamWStep, error) {
	if err := o.AdamWConfig.Validate(); err != nil {
		return AdamWStep{}, err
	}
	o.Steps++
	t := float64(o.Steps)
	bc1 := 1 - math.Pow(o.Beta1, t)
	bc2 := 1 - math.Pow(o.Beta2, t)
	s := AdamWStep{
		B1: float32(o.Beta1), B2: float32(o.Beta2), StepSize: float32(o.LR / bc1),
		InvBc2: float32(1 / math.Sqrt(bc2)), Eps: float32(o.Eps), Decay: make([]float32, len(o.mask)),
	}
	for i, d := range o.mask {
		s.Decay[i] = 1
		if d {
			s.Decay[i] = float32(1 - o.LR*o.WeightDecay)
		}
	}
	return s, nil
}

// Moments returns the first and second moments, laid out like the model's parameters. They
// are the optimizer's own slices: writing them changes its state (a device implementation
// copies its moments back this way).
func (o *AdamW) Moments() (mom, vel []float32) { return o.mom, o.vel }

// Model returns the model the optimizer updates.
func (o *AdamW) Model() *Model { return o.m }

// Step applies one update with gradients g (configs must match). It
// returns an error, changing nothing, when the hyper-parameters fail
// AdamWConfig.Validate.
func (o *AdamW) Step(g *Grads) error {
	if o.m == nil || g.cfg != o.m.cfg {
		return fmt.Errorf("model: AdamW.Step: grads do not match the model config")
	}
	return o.apply(g.buf)
}

// StepLLM is Step for the optimizer of an LLM (NewLLMAdamW).
func (o *AdamW) StepLLM(g *LLMGrads) error {
	if o.lm == nil || g.cfg != o.lm.cfg {
		return fmt.Errorf("model: AdamW.StepLLM: grads do not match the model config")
	}
	return o.apply(g.buf)
}

// apply runs one update with the gradients laid out like the parameters.
func (o *AdamW) apply(grads []float32) error {
	s, err := o.Advance()
	if err != nil {
		return fmt.Errorf("model: AdamW.Step: %w", err)
	}
	b1, b2, stepSize, invBc2, eps := s.B1, s.B2, s.StepSize, s.InvBc2, s.Eps
	off := 0
	for i, part := range o.parts {
		n := len(part)
		decay := s.Decay[i]
		p, gr := part, grads[off:off+n]
		mm, vv := o.mom[off:off+n], o.vel[off:off+n]
		// Element-wise: the split over cores cannot change any result.
		parallelRows(n, 1<<13, func(lo, hi int) {
			for j := lo; j < hi; j++ {
				// Each product is rounded by an explicit conversion, which the Go spec says
				// prevents fusing it into an FMA (arm64, GOAMD64=v3 do fuse otherwise): the
				// update is the same bits on every CPU and equals the GPU kernel's, which
				// rounds every mul and add.
				gj := gr[j]
				mj := float32(b1*mm[j]) + float32((1-b1)*gj)
				vj := float32(b2*vv[j]) + float32(float32((1-b2)*gj)*gj)
				mm[j], vv[j] = mj, vj
				den := float32(float32(math.Sqrt(float64(vj)))*invBc2) + eps
				p[j] = float32(p[j]*decay) - float32(stepSize*mj)/den
			}
		})
		off += n
	}
	return nil
}
