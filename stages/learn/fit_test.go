package learn

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hfmodel"
	"github.com/drmas-dev/drmas/model"
)

// TestPlanStepsSplits: on the CPU engine with learn.activation_checkpointing off, a Hugging
// Face model whose step at micro_batch 8 does not fit the memory limit while one of 2 sequences
// does trains in chunks of 2 (and says so); under a large limit, on another engine, or for the
// built-in model, micro_batch stands.
func TestPlanStepsSplits(t *testing.T) {
	m := fitTestModel(t)
	cfg := configs.Default()
	cfg.Rollout.MaxTokens = 1024
	cfg.Learn.ActivationCheckpointing = "off"
	s2, _ := hfmodel.TrainableStep(cfg, m, 2, false)
	s3, ok := hfmodel.TrainableStep(cfg, m, 3, false)
	if !ok || s3.Total() <= s2.Total() {
		t.Fatalf("steps of 2 and 3 sequences: %d, %d bytes", s2.Total(), s3.Total())
	}
	old := debug.SetMemoryLimit((s2.Total() + s3.Total()) / 2)
	defer debug.SetMemoryLimit(old)
	var said string
	logf := func(f string, a ...any) { said = f }
	if got := planSteps(cfg, "q", m, CPU, 8, logf); got != (stepPlan{micro: 2}) || !strings.Contains(said, "accumulation chunks") || m.ActivationCheckpointing() {
		t.Errorf("plan %+v (said %q, model checkpointing %v), want 2 sequences without", got, said, m.ActivationCheckpointing())
	}
	if got := planSteps(cfg, "q", m, nil, 8, nil); got != (stepPlan{micro: 8}) {
		t.Errorf("another engine: plan %+v, want 8 sequences", got)
	}
	builtin, err := model.New(model.DefaultConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := planSteps(cfg, "q", builtin, CPU, 8, nil); got != (stepPlan{micro: 8}) {
		t.Errorf("built-in model: plan %+v, want 8 sequences", got)
	}
	debug.SetMemoryLimit(1 << 50)
	if got := planSteps(cfg, "q", m, CPU, 8, nil); got != (stepPlan{micro: 8}) {
		t.Errorf("under 1 PiB: plan %+v, want 8 sequences", got)
	}
}

// TestPlanStepsCheckpointing: auto checkpoints a micro-batch of 8 that fits with checkpointing
// and not without (and says so), and splits with checkpointing on where 8 does not fit even
// then; under a large limit auto leaves it off and on turns it on; the model follows the plan.
func TestPlanStepsCheckpointing(t *testing.T) {
	m := fitTestModel(t)
	cfg := configs.Default()
	cfg.Rollout.MaxTokens = 1024
	if cfg.Learn.Checkpointing() != "auto" {
		t.Fatalf("default learn.activation_checkpointing %q, want auto", cfg.Learn.Checkpointing())
	}
	step := func(n int, ckpt bool) int64 { s, _ := hfmodel.TrainableStep(cfg, m, n, ckpt); return s.Total() }
	if step(8, true) >= step(8, false) {
		t.Fatalf("8 sequences: %d bytes with checkpointing, %d without", step(8, true), step(8, false))
	}
	old := debug.SetMemoryLimit((step(8, true) + step(8, false)) / 2)
	defer debug.SetMemoryLimit(old)
	var said []string
	logf := func(f string, a ...any) { said = append(said, f) }
	if got := planSteps(cfg, "q", m, CPU, 8, logf); got != (stepPlan{micro: 8, ckpt: true}) || len(said) != 1 || !strings.Contains(said[0], "activation checkpointing on") || !m.ActivationCheckpointing() {
		t.Errorf("plan %+v (said %q, model checkpointing %v), want 8 sequences checkpointed", got, said, m.ActivationCheckpointing())
	}
	debug.SetMemoryLimit((step(2, true) + step(3, true)) / 2)
	if got := planSteps(cfg, "q", m, CPU, 8, nil); got != (stepPlan{micro: 2, ckpt: true}) {
		t.Errorf("plan %+v, want 2 sequences checkpointed", got)
	}
	debug.SetMemoryLimit(1 << 50)
	if got := planSteps(cfg, "q", m, CPU, 8, nil); got != (stepPlan{micro: 8}) || m.ActivationCheckpointing() {
		t.Errorf("auto under 1 PiB: plan %+v (model checkpointing %v), want 8 sequences without", got, m.ActivationCheckpointing())
	}
	cfg.Learn.ActivationCheckpointing = "on"
	if got := planSteps(cfg, "q", m, CPU, 8, nil); got != (stepPlan{micro: 8, ckpt: true}) || !m.ActivationCheckpointing() {
		t.Errorf("on under 1 PiB: plan %+v (model checkpointing %v), want 8 sequences checkpointed", got, m.ActivationCheckpointing())
	}
}

func fitTestModel(t *testing.T) *model.LLM {
	m, err := model.InitLLM(model.ArchConfig{Arch: "qwen3", Hidden: 32, Layers: 2, Heads: 2, KVHeads: 1, Intermediate: 64, Vocab: 512, Context: 2048,
		RopeTheta: 1e4}.WithDefaults(), 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
