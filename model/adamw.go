package model

import (
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

// AdamW is decoupled-weight-decay Adam (Loshchilov & Hutter) with bias
// correction, as in PyTorch's torch.optim.AdamW. Weight decay applies only
// to parameters with Param.Decay (linear weight matrices), never to biases,
// LayerNorm parameters or embeddings. The hyper-parameters may be changed
// between steps (e.g. a learning-rate schedule).
type AdamW struct {
	AdamWConfig
	Steps int64 // number of steps taken (the bias-correction t)

	m    *Model
	mom  []float32 // first moment, laid out like the model
	vel  []float32 // second moment
	mask []bool    // per parameter tensor: decay?
}

// NewAdamW returns an optimizer for m with zero state.
func NewAdamW(m *Model, cfg AdamWConfig) *AdamW {
	o := &AdamW{AdamWConfig: cfg, m: m, mom: make([]float32, len(m.buf)), vel: make([]float32, len(m.buf))}
	o.mask = make([]bool, len(m.specs))
	for i, s := range m.specs {
		o.mask[i] = s.decay
	}
	return o
}

// Step applies one update with gradients g (configs must match).
func (o *AdamW) Step(g *Grads) error {
	if g.cfg != o.m.cfg {
		return fmt.Errorf("model: AdamW.Step: grads do not match the model config")
	}
	o.Steps++
	t := float64(o.Steps)
	bc1 := 1 - math.Pow(o.Beta1, t)
	bc2 := 1 - math.Pow(o.Beta2, t)
	b1, b2 := float32(o.Beta1), float32(o.Beta2)
	stepSize := float32(o.LR / bc1)
	invBc2 := float32(1 / math.Sqrt(bc2))
	eps := float32(o.Eps)
	off := 0
	for i, part := range o.m.parts {
		n := len(part)
		decay := float32(1)
		if o.mask[i] {
			decay = float32(1 - o.LR*o.WeightDecay)
		}
		p, gr := part, g.buf[off:off+n]
		mm, vv := o.mom[off:off+n], o.vel[off:off+n]
		// Element-wise: the split over cores cannot change any result.
		parallelRows(n, 1<<13, func(lo, hi int) {
			for j := lo; j < hi; j++ {
				gj := gr[j]
				mj := b1*mm[j] + (1-b1)*gj
				vj := b2*vv[j] + (1-b2)*gj*gj
				mm[j], vv[j] = mj, vj
				den := float32(math.Sqrt(float64(vj)))*invBc2 + eps
				p[j] = p[j]*decay - stepSize*mj/den
			}
		})
		off += n
	}
	return nil
}
