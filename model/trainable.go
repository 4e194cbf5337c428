package model

import "fmt"

// Trainable is what the learner needs from a model, whichever the architecture and whichever
// tensors train: the built-in Model, an LLM trained in full, or an LLM whose LoRA adapter
// trains over frozen weights. The learner is written once against it.
type Trainable interface {
	Policy
	// TrainForward runs seqs (packed, no padding) keeping what Backward needs.
	TrainForward(seqs []Sequence, temperature float32) (TrainPass, error)
	// NewGradBuf returns zeroed gradients of the tensors that train.
	NewGradBuf() GradBuf
	// NewOptimizer returns AdamW over the tensors that train, with zero state; its Apply takes
	// a GradBuf of this model.
	NewOptimizer(cfg AdamWConfig) *AdamW
}

// TrainPass is one forward pass of a Trainable.
type TrainPass interface {
	// LogProbs and Entropy are per sequence and response token.
	LogProbs() [][]float32
	Entropy() [][]float32
	// Backward adds into g (a GradBuf of the same model) the gradient of
	// Σ dLogProb·logprob + Σ dEntropy·entropy; dEntropy may be nil.
	Backward(dLogProb, dEntropy [][]float32, g GradBuf) error
}

// GradBuf is the gradient of the tensors that train, flat in the optimizer's parameter order.
type GradBuf interface {
	Zero()
	Scale(f float32)
	// Norm is the L2 norm, summed in order in float64.
	Norm() float64
	// Flat is the gradient's own storage.
	Flat() []float32
}

// AddGrads adds src into dst, two gradients of one model.
func AddGrads(dst, src GradBuf) error {
	d, s := dst.Flat(), src.Flat()
	if len(d) != len(s) {
		return fmt.Errorf("model: AddGrads: %d values into %d: gradients of different models", len(s), len(d))
	}
	for i, v := range s {
		d[i] += v
	}
	return nil
}

// Apply runs one AdamW step with g, laid out like the optimizer's parameters (a GradBuf of the
// model that made the optimizer).
func (o *AdamW) Apply(g GradBuf) error {
	if f := g.Flat(); len(f) != len(o.mom) {
		return fmt.Errorf("model: AdamW.Apply: %d gradients for %d parameters", len(f), len(o.mom))
	}
	return o.apply(g.Flat())
}

// Flat is the gradients' own storage, in Params order.
func (g *Grads) Flat() []float32 { return g.buf }

// Flat is the gradients' own storage, in TensorSpecs order.
func (g *LLMGrads) Flat() []float32 { return g.buf }

var (
	_ Trainable = (*Model)(nil)
	_ Trainable = (*LLM)(nil)
)

// TrainForward is Forward as a TrainPass.
func (m *Model) TrainForward(seqs []Sequence, temperature float32) (TrainPass, error) {
	p, err := m.Forward(seqs, temperature)
	if err != nil {
		return nil, err
	}
	return AsTrainPass[*Pass, *Grads](p, "the built-in model"), nil
}

// NewGradBuf is NewGrads as a GradBuf.
func (m *Model) NewGradBuf() GradBuf { return m.NewGrads() }

// NewOptimizer is NewAdamW.
func (m *Model) NewOptimizer(cfg AdamWConfig) *AdamW { return NewAdamW(m, cfg) }

// TrainForward is Forward as a TrainPass: every weight trains.
func (m *LLM) TrainForward(seqs []Sequence, temperature float32) (TrainPass, error) {
	if m.StoredBF16() {
		return nil, fmt.Errorf("model: train every weight: %w (load it in float32, or train a LoRA adapter over it)", ErrStoredBF16)
	}
	p, err := m.Forward(seqs, temperature)
	if err != nil {
		return nil, err
	}
	return AsTrainPass[*LLMPass, *LLMGrads](p, "an LLM"), nil
}

// NewGradBuf is NewGrads as a GradBuf.
func (m *LLM) NewGradBuf() GradBuf { return m.NewGrads() }

// NewOptimizer is NewLLMAdamW.
func (m *LLM) NewOptimizer(cfg AdamWConfig) *AdamW { return NewLLMAdamW(m, cfg) }

// TypedPass is a forward pass whose Backward takes one kind of gradient, G.
type TypedPass[G GradBuf] interface {
	LogProbs() [][]float32
	Entropy() [][]float32
	Backward(dLogProb, dEntropy [][]float32, g G) error
}

// AsTrainPass is p as a TrainPass: its Backward refuses a GradBuf that is not a G, naming the
// models p's gradients belong to (what, e.g. "an LLM").
func AsTrainPass[P TypedPass[G], G GradBuf](p P, what string) TrainPass {
	return typedTrainPass[P, G]{p: p, what: what}
}

type typedTrainPass[P TypedPass[G], G GradBuf] struct {
	p    P
	what string
}

func (t typedTrainPass[P, G]) LogProbs() [][]float32 { return t.p.LogProbs() }

func (t typedTrainPass[P, G]) Entropy() [][]float32 { return t.p.Entropy() }

func (t typedTrainPass[P, G]) Backward(dLogProb, dEntropy [][]float32, g GradBuf) error {
	tg, ok := g.(G)
	if !ok {
		return fmt.Errorf("model: Backward: %T is not a gradient of %s", g, t.what)
	}
	return t.p.Backward(dLogProb, dEntropy, tg)
}
