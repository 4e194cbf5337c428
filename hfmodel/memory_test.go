package hfmodel_test

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/hfmodel"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// TestCheckMemory: a Qwen2.5-0.5B shape does not train in full under a 1 GiB limit (its
// float32 weights, gradients and moments alone are 16 bytes × 494 M parameters), and the
// refusal gives the figure and what to change (with activation checkpointing off, the step
// without it and the key); under a large limit it passes.
func TestCheckMemory(t *testing.T) {
	hc, err := hf.NewConfig(hf.Qwen25Shape)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stagetest.Config(t, "math")
	cfg.Models = map[string]configs.Model{"q": {HF: "/models/q"}}
	cfg.Agents = map[string]configs.Agent{"solver": {Model: "q", MicroBatch: 2}, "verifier": {Model: "q", MicroBatch: 2}}
	need := hfmodel.StepMemory(cfg, "q", hc)
	old := debug.SetMemoryLimit(1 << 30)
	defer debug.SetMemoryLimit(old)
	if w := 16 * hc.Params(); need <= w || hc.Params() < 490e6 {
		t.Fatalf("estimate %d for %d parameters: not above the %d bytes of weights, gradients and moments", need, hc.Params(), w)
	}
	err = hfmodel.CheckMemory(cfg, "q", hc)
	if err == nil {
		t.Fatal("a 0.5B full fine-tune passed under 1 GiB")
	}
	one := hfmodel.Step(cfg, "q", hc, 1, true).Total()
	for _, want := range []string{configs.Bytes(float64(one)), "GOMEMLIMIT", "models.q.lora", "rollout.max_tokens", "a micro-batch of 1 sequence"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	// A LoRA adapter keeps 4 bytes a frozen weight: 2 GB does not fit 1 GiB either, and the
	// advice is now the rank.
	cfg.Models["q"] = configs.Model{HF: "/models/q", LoRA: &configs.LoRA{R: 8}}
	lora := hfmodel.StepMemory(cfg, "q", hc)
	if lora >= need || lora <= 4*hc.Params() {
		t.Errorf("LoRA estimate %d, full %d, frozen weights %d", lora, need, 4*hc.Params())
	}
	if err := hfmodel.CheckMemory(cfg, "q", hc); err == nil || !strings.Contains(err.Error(), "lower models.q.lora.r") || !strings.Contains(err.Error(), configs.Bytes(float64(hfmodel.Step(cfg, "q", hc, 1, true).Total()))) {
		t.Errorf("LoRA refusal: %v", err)
	}
	// With activation checkpointing off the refusal counts the step without it and names the key.
	cfg.Learn.ActivationCheckpointing = "off"
	off := hfmodel.Step(cfg, "q", hc, 1, false).Total()
	if on := hfmodel.Step(cfg, "q", hc, 1, true).Total(); off <= on {
		t.Errorf("LoRA step %d bytes without checkpointing, %d with", off, on)
	}
	if err := hfmodel.CheckMemory(cfg, "q", hc); err == nil || !strings.Contains(err.Error(), "learn.activation_checkpointing: auto") || !strings.Contains(err.Error(), configs.Bytes(float64(off))) {
		t.Errorf("refusal with checkpointing off: %v", err)
	}
	debug.SetMemoryLimit(1 << 50)
	if err := hfmodel.CheckMemory(cfg, "q", hc); err != nil {
		t.Errorf("refused under 1 PiB: %v", err)
	}
}

// TestTrainableStepBF16Base: a LoRA over a base stored in BF16 is estimated with the base's
// matrices at 2 bytes (hf.MatrixParams of them fewer × 2 than over the float32 base); the
// plan-time estimate of a bfloat16 folder says the same.
func TestTrainableStepBF16Base(t *testing.T) {
	hc, err := hf.NewConfig(hf.InitSpec{Arch: "qwen2", Hidden: 32, Layers: 2, Heads: 4, KVHeads: 2, Intermediate: 64, Vocab: 256, MaxPositions: 512})
	if err != nil {
		t.Fatal(err)
	}
	base, err := model.InitLLM(hc.ArchConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	frozen, err := base.Float32().FrozenBF16() // InitLLM's values are not bfloat16
	if err == nil {
		t.Fatal("FrozenBF16 accepted float32 values that are not bfloat16")
	}
	for _, p := range base.Params() {
		for i, v := range p.Data {
			p.Data[i] = hf.Float32FromBF16(hf.BF16FromFloat32(v))
		}
	}
	if frozen, err = base.FrozenBF16(); err != nil {
		t.Fatal(err)
	}
	cfg := configs.Default()
	lc := model.LoRAConfig{R: 4, Alpha: 8}
	la, _ := model.NewLoRA(base, lc, 1)
	lb, _ := model.NewLoRA(frozen, lc, 1)
	a, okA := hfmodel.TrainableStep(cfg, la, 1, true)
	b, okB := hfmodel.TrainableStep(cfg, lb, 1, true)
	if !okA || !okB || a.Weights-b.Weights != 2*hf.MatrixParams(hc.ArchConfig()) || a.Total()-b.Total() != a.Weights-b.Weights {
		t.Errorf("weights over a float32 base %d, over a BF16 base %d: want %d apart", a.Weights, b.Weights, 2*hf.MatrixParams(hc.ArchConfig()))
	}
	hc.TorchDtype = "bfloat16"
	cfg.Models = map[string]configs.Model{"q": {HF: "/models/q", LoRA: &configs.LoRA{R: 4, Alpha: 8}}}
	if got := hfmodel.Step(cfg, "q", hc, 1, true); got.Weights != b.Weights {
		t.Errorf("plan-time estimate of a bfloat16 folder: weights %d, the loaded base %d", got.Weights, b.Weights)
	}
}
