package learn

import (
	"fmt"
	"sync"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/gpu"
	gpuengine "github.com/drmas-dev/drmas/gpu/engine"
	"github.com/drmas-dev/drmas/model"
)

// Pass is one forward pass of an Engine: the model's model.TrainPass on the CPU engine.
type Pass = model.TrainPass

// Engine runs the learner's forward and backward passes of a model.Trainable. The host model
// and *model.AdamW are the source of truth for checkpoints whatever the engine: the CPU engine
// updates them directly; the GPU engine (built-in models only) runs the optimizer step on its
// device (UpdateOn) and copies the result back on Sync.
type Engine interface {
	Forward(m model.Trainable, seqs []model.Sequence, temperature float32) (Pass, error)
	// Score returns the per-token log-probs of seqs without a backward pass.
	Score(m model.Trainable, seqs []model.Sequence, temperature float32) ([][]float32, error)
	// Stepped says m's weights changed on the host (an optimizer step).
	Stepped(m model.Trainable)
	// Sync brings the host model and optimizer up to date with the optimizer steps the
	// engine ran on its device; a no-op on the CPU engine. Call it before reading the model
	// on the host (checkpoints).
	Sync() error
}

// CPU is the pure-Go engine (package model): any model.Trainable.
var CPU Engine = cpuEngine{}

type cpuEngine struct{}

func (cpuEngine) Forward(m model.Trainable, seqs []model.Sequence, temperature float32) (Pass, error) {
	return m.TrainForward(seqs, temperature)
}

func (cpuEngine) Score(m model.Trainable, seqs []model.Sequence, temperature float32) ([][]float32, error) {
	lp, _, err := m.Score(seqs, temperature)
	return lp, err
}

func (cpuEngine) Stepped(model.Trainable) {}

func (cpuEngine) Sync() error { return nil }

// GPUEngine returns the Engine of a gpu/engine Trainer (on a GPU, or on the interpreter in
// tests), which runs the built-in model. UpdateOn keeps the gradients, their norms, clipping
// and AdamW on the device, so a step moves only token ids and per-token loss gradients across
// the bus; Sync copies the weights and optimizer moments back.
func GPUEngine(t *gpuengine.Trainer) Engine { return &gpuEng{t: t} }

// GPUEngineHostOptimizer is GPUEngine with the optimizer on the host: each backward pass
// copies the gradient back and AdamW runs on the CPU, as before the device optimizer (for
// comparisons).
func GPUEngineHostOptimizer(t *gpuengine.Trainer) Engine { return &gpuEng{t: t, hostOpt: true} }

type gpuEng struct {
	t       *gpuengine.Trainer
	hostOpt bool
	store   *gpuGrads // the device optimizer's gradients, allocated at the first update
}

// builtin returns m as the built-in model the GPU engine runs.
func builtin(m model.Trainable) (*model.Model, error) {
	bm, ok := m.(*model.Model)
	if !ok {
		return nil, fmt.Errorf("gpu engine: %T is not the built-in model (Hugging Face models train on the CPU engine)", m)
	}
	return bm, nil
}

func (g *gpuEng) Forward(m model.Trainable, seqs []model.Sequence, temperature float32) (Pass, error) {
	bm, err := builtin(m)
	if err != nil {
		return nil, err
	}
	p, err := g.t.Forward(bm, seqs, temperature)
	if err != nil {
		return nil, err
	}
	return gpuPass{p}, nil
}

func (g *gpuEng) Score(m model.Trainable, seqs []model.Sequence, temperature float32) ([][]float32, error) {
	p, err := g.Forward(m, seqs, temperature)
	if err != nil {
		return nil, err
	}
	return p.LogProbs(), nil
}

func (g *gpuEng) Stepped(model.Trainable) { g.t.MarkDirty() }

func (g *gpuEng) Sync() error { return g.t.Sync() }

// GPULLMEngine returns the Engine of a gpu/engine LLMTrainer: an LLM's forward and backward
// passes on the device (or the interpreter in tests); each backward copies the gradient back
// and AdamW runs on the host, which then marks the device's weights stale.
func GPULLMEngine(t *gpuengine.LLMTrainer) Engine {
	return hostOptEngine[*model.LLM, *gpuengine.LLMPass, *model.LLMGrads]{t: t, what: "an LLM"}
}

// GPULoRAEngine returns the Engine of a gpu/engine LoRATrainer: a LoRA adapter's forward and
// backward passes on the device over its frozen base; each backward copies the gradients of A
// and B back and AdamW runs on the host, which then marks the device's adapter stale.
func GPULoRAEngine(t *gpuengine.LoRATrainer) Engine {
	return hostOptEngine[*model.LoRA, *gpuengine.LoRAPass, *model.LoRAGrads]{t: t, what: "a LoRA adapter"}
}

// deviceTrainer is a GPU-engine trainer of models M whose passes P back-propagate into host
// gradients G (LLMTrainer, LoRATrainer).
type deviceTrainer[M model.Trainable, P model.TypedPass[G], G model.GradBuf] interface {
	Forward(m M, seqs []model.Sequence, temperature float32) (P, error)
	MarkDirty()
}

// hostOptEngine is the Engine of a deviceTrainer with the optimizer on the host: the host
// holds the weights and moments (Sync has nothing to do), and a step marks the device stale.
type hostOptEngine[M model.Trainable, P model.TypedPass[G], G model.GradBuf] struct {
	t    deviceTrainer[M, P, G]
	what string // the models it trains, for errors
}

func (e hostOptEngine[M, P, G]) Forward(m model.Trainable, seqs []model.Sequence, temperature float32) (Pass, error) {
	tm, ok := m.(M)
	if !ok {
		return nil, fmt.Errorf("gpu engine: %T is not %s", m, e.what)
	}
	p, err := e.t.Forward(tm, seqs, temperature)
	if err != nil {
		return nil, err
	}
	return model.AsTrainPass[P, G](p, e.what), nil
}

func (e hostOptEngine[M, P, G]) Score(m model.Trainable, seqs []model.Sequence, temperature float32) ([][]float32, error) {
	p, err := e.Forward(m, seqs, temperature)
	if err != nil {
		return nil, err
	}
	return p.LogProbs(), nil
}

func (e hostOptEngine[M, P, G]) Stepped(model.Trainable) { e.t.MarkDirty() }

func (e hostOptEngine[M, P, G]) Sync() error { return nil }

// gpuPass is a gpu/engine pass as a model.TrainPass: its host backward fills the built-in
// model's gradients.
type gpuPass struct{ *gpuengine.Pass }

func (p gpuPass) Backward(dLogProb, dEntropy [][]float32, g model.GradBuf) error {
	mg, ok := g.(*model.Grads)
	if !ok {
		return fmt.Errorf("gpu engine: Backward: %T is not a gradient of the built-in model", g)
	}
	return p.Pass.Backward(dLogProb, dEntropy, mg)
}

// storeFor returns where UpdateOn accumulates gradients on eng.
func storeFor(eng Engine, m model.Trainable) (gradStore, error) {
	g, ok := eng.(*gpuEng)
	if _, isBuiltin := m.(*model.Model); !ok || g.hostOpt || !isBuiltin {
		return newHostGrads(eng, m), nil
	}
	if g.store == nil {
		total, err := g.t.NewGrads()
		if err != nil {
			return nil, err
		}
		cur, err := g.t.NewGrads()
		if err != nil {
			_ = total.Free()
			return nil, err
		}
		g.store = &gpuGrads{t: g.t, total: total, cur: cur}
	}
	if err := g.store.total.Zero(); err != nil {
		return nil, err
	}
	return g.store, nil
}

// gpuGrads keeps an update's gradients on the GPU engine's device: each agent's micro-batches
// accumulate into cur, which is then added into total; clipping scales total and the
// Trainer's Step runs AdamW with it.
type gpuGrads struct {
	t          *gpuengine.Trainer
	total, cur *gpuengine.Grads
}

func (g *gpuGrads) begin() error { return g.cur.Zero() }

func (g *gpuGrads) backward(p Pass, d, de [][]float32) error {
	gp, ok := p.(gpuPass)
	if !ok {
		return fmt.Errorf("gpu engine: a %T pass in a device update", p)
	}
	return gp.BackwardInto(d, de, g.cur)
}

func (g *gpuGrads) end(string) (float64, error) {
	n, err := g.cur.Norm()
	if err != nil {
		return 0, err
	}
	return n, g.total.Add(g.cur)
}

func (g *gpuGrads) totalNorm() (float64, error) { return g.total.Norm() }

func (g *gpuGrads) step(m model.Trainable, opt *model.AdamW, clip float32) error {
	bm, err := builtin(m)
	if err != nil {
		return err
	}
	if clip != 1 {
		if err := g.total.Scale(clip); err != nil {
			return err
		}
	}
	return g.t.Step(bm, opt, g.total)
}

// testDevice, set by tests only, replaces NVML placement and CUDA: every learner runs the GPU
// engine on the device it returns (the gpu/ir interpreter), so the stage's GPU path, the
// device optimizer and its Sync before publishing run on machines without a GPU.
var testDevice func() gpuengine.Device

var announced sync.Map // model id -> engine line already logged by this process

// engineFor returns model id's learner engine and a function that releases it. On a machine
// without a usable GPU it is the CPU engine; the choice is logged once per process and model
// as one line ("learner m: CPU engine (reason)" or "learner m: GPU engine on gpu:0 (...)").
func engineFor(cfg *configs.Config, id string, m model.Trainable, logf func(string, ...any)) (Engine, func(), error) {
	start := gpuStarter(cfg, m)
	if start == nil {
		announce(id, fmt.Sprintf("learner %s: CPU engine (the GPU engine does not run a %T)", id, m), logf)
		return CPU, func() {}, nil
	}
	if testDevice != nil {
		eng, release, err := start(testDevice())
		if err != nil {
			return nil, nil, fmt.Errorf("model %s: %w", id, err)
		}
		announce(id, fmt.Sprintf("learner %s: GPU engine on the test device", id), logf)
		return eng, release, nil
	}
	c, err := gpu.OpenLearner(cfg, id)
	if err != nil {
		return nil, nil, fmt.Errorf("model %s: %w", id, err)
	}
	if c.Device != nil {
		eng, release, err := start(c.Device)
		if err == nil {
			announce(id, c.Line(id), logf)
			return eng, release, nil
		}
		if c, err = startFailed(gpu.Required(), err); err != nil {
			return nil, nil, fmt.Errorf("model %s: %w", id, err)
		}
	}
	announce(id, c.Line(id), logf)
	return CPU, func() {}, nil
}

// gpuStarter returns what starts the GPU engine of m on a device (the built-in model's
// Trainer, an LLM's LLMTrainer, a LoRA's LoRATrainer), or nil when the GPU engine does not run m.
// An LLM's engine on a device that reports its memory checks that a step fits it (startLLM).
func gpuStarter(cfg *configs.Config, m model.Trainable) func(gpuengine.Device) (Engine, func(), error) {
	switch m := m.(type) {
	case *model.Model:
		return func(d gpuengine.Device) (Engine, func(), error) {
			t, err := gpuengine.New(d, m)
			if err != nil {
				return nil, nil, err
			}
			return GPUEngine(t), func() { _ = t.Close() }, nil
		}
	case *model.LLM:
		return func(d gpuengine.Device) (Engine, func(), error) { return startLLM(cfg, d, m) }
	case *model.LoRA:
		return func(d gpuengine.Device) (Engine, func(), error) {
			t, err := gpuengine.NewLoRA(d, m)
			if err != nil {
				return nil, nil, err
			}
			return GPULoRAEngine(t), func() { _ = t.Close() }, nil
		}
	}
	return nil
}

// startFailed is the choice after a GPU was placed and opened but its engine failed to start:
// the CPU engine with the reason, or, when the GPU is required (DRMAS_LEARNER_ENGINE=gpu), the
// error, as the setting promises.
func startFailed(required bool, err error) (gpu.Choice, error) {
	if required {
		return gpu.Choice{}, fmt.Errorf("%s=gpu but the GPU engine failed to start: %w", gpu.EngineEnv, err)
	}
	return gpu.Choice{Where: "cpu", Reason: fmt.Sprintf("GPU engine failed to start: %v", err)}, nil
}

func announce(id, line string, logf func(string, ...any)) {
	if prev, loaded := announced.LoadOrStore(id, line); !loaded || prev != line {
		announced.Store(id, line)
		logf("%s", line)
	}
}
