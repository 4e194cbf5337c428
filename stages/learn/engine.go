package learn

import (
	"fmt"
	"sync"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/gpu"
	gpuengine "github.com/drmas-dev/drmas/gpu/engine"
	"github.com/drmas-dev/drmas/model"
)

// Pass is one forward pass of an Engine: *model.Pass on the CPU engine.
type Pass interface {
	LogProbs() [][]float32
	Entropy() [][]float32
	Backward(dLogProb, dEntropy [][]float32, g *model.Grads) error
}

// Engine runs the learner's forward and backward passes. The weights, the gradients handed
// to AdamW and the optimizer state stay on the host (*model.Model, *model.Grads,
// *model.AdamW) whatever the engine, so checkpoints do not depend on it.
type Engine interface {
	Forward(m *model.Model, seqs []model.Sequence, temperature float32) (Pass, error)
	// Score returns the per-token log-probs of seqs without a backward pass.
	Score(m *model.Model, seqs []model.Sequence, temperature float32) ([][]float32, error)
	// Stepped says m's weights changed on the host (an optimizer step).
	Stepped(m *model.Model)
}

// CPU is the pure-Go engine (package model).
var CPU Engine = cpuEngine{}

type cpuEngine struct{}

func (cpuEngine) Forward(m *model.Model, seqs []model.Sequence, temperature float32) (Pass, error) {
	return m.Forward(seqs, temperature)
}

func (cpuEngine) Score(m *model.Model, seqs []model.Sequence, temperature float32) ([][]float32, error) {
	lp, _, err := m.Score(seqs, temperature)
	return lp, err
}

func (cpuEngine) Stepped(*model.Model) {}

// GPUEngine returns the Engine of a gpu/engine Trainer (on a GPU, or on the interpreter in
// tests).
func GPUEngine(t *gpuengine.Trainer) Engine { return gpuEng{t} }

type gpuEng struct{ t *gpuengine.Trainer }

func (g gpuEng) Forward(m *model.Model, seqs []model.Sequence, temperature float32) (Pass, error) {
	return g.t.Forward(m, seqs, temperature)
}

func (g gpuEng) Score(m *model.Model, seqs []model.Sequence, temperature float32) ([][]float32, error) {
	p, err := g.t.Forward(m, seqs, temperature)
	if err != nil {
		return nil, err
	}
	return p.LogProbs(), nil
}

func (g gpuEng) Stepped(*model.Model) { g.t.MarkDirty() }

var announced sync.Map // model id -> engine line already logged by this process

// engineFor returns model id's learner engine and a function that releases it. On a machine
// without a usable GPU it is the CPU engine; the choice is logged once per process and model
// as one line ("learner m: CPU engine (reason)" or "learner m: GPU engine on gpu:0 (...)").
func engineFor(cfg *configs.Config, id string, m *model.Model, logf func(string, ...any)) (Engine, func(), error) {
	c, err := gpu.OpenLearner(cfg, id)
	if err != nil {
		return nil, nil, fmt.Errorf("learn: %w", err)
	}
	if c.Device != nil {
		t, err := gpuengine.New(c.Device, m)
		if err == nil {
			announce(id, c.Line(id), logf)
			return gpuEng{t}, func() { _ = t.Close() }, nil
		}
		c = gpu.Choice{Where: "cpu", Reason: fmt.Sprintf("GPU engine failed to start: %v", err)}
	}
	announce(id, c.Line(id), logf)
	return CPU, func() {}, nil
}

func announce(id, line string, logf func(string, ...any)) {
	if prev, loaded := announced.LoadOrStore(id, line); !loaded || prev != line {
		announced.Store(id, line)
		logf("%s", line)
	}
}
