package configs

import (
	"errors"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/hf"
)

// TestMemoryCountsHFModels: with its HF models' configs, the learn estimate of the default
// config pointed at a Qwen2.5-0.5B shape counts 16 bytes a parameter (weights, gradients, two
// moments) and a reference, or with LoRA r 16 the frozen weights (2 bytes a matrix value from a
// BF16 folder) and the adapter, each doubled
// for the collector, plus a step's activations (with activation checkpointing unless
// learn.activation_checkpointing is off, a quarter or less of those without); without the configs the model counts nothing;
// a 4 GiB limit refuses the full fine-tune naming models.<id>.hf.
func TestMemoryCountsHFModels(t *testing.T) {
	hc, err := hf.NewConfig(hf.Qwen25Shape)
	if err != nil {
		t.Fatal(err)
	}
	c := Default()
	hfs := HFConfigs{}
	for _, name := range c.ModelNames() {
		c.Models[name] = Model{HF: "/models/q"}
		hfs[name] = hc
	}
	n := float64(len(hfs))
	p := float64(hc.Params())
	tokens := min(c.Rollout.MaxTokens+512, hc.ArchConfig().Context)
	var learn MemoryEstimate
	// auto (the default) and on count the step with activation checkpointing, off without.
	for _, mode := range []string{"off", "on", "auto"} {
		c.Learn.ActivationCheckpointing = mode
		learn = c.MemoryOf("learn", hfs)
		step := hf.StepOfMode(hc, 0, 1, tokens, mode != "off")
		acts := float64(step.Total() - step.Weights - step.Optimizer)
		if want := gcHeadroom * (n*4*p*optimizerCopies + acts); learn.Bytes < want || learn.Bytes > want*1.01 {
			t.Errorf("%s: learn estimate %s, want weights, gradients, moments and a reference of %.0f parameters and %s of activations, doubled: %s",
				mode, Bytes(learn.Bytes), p, Bytes(acts), Bytes(want))
		}
	}
	if off, on := hf.StepOf(hc, 0, 1, tokens), hf.CheckpointedStepOf(hc, 0, 1, tokens); on.Activations >= off.Activations/4 {
		t.Errorf("activations %d bytes with checkpointing, %d without", on.Activations, off.Activations)
	}
	if bare := c.Memory("learn"); bare.Bytes >= learn.Bytes/10 {
		t.Errorf("without the HF configs the estimate is %s", Bytes(bare.Bytes))
	}
	err = c.CheckMemoryOf(MemoryStages, 4<<30, "--memory-limit", hfs)
	var fe *FitError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), ".hf") {
		t.Errorf("a 0.5B full fine-tune under 4 GiB: %v", err)
	}
	for _, name := range c.ModelNames() {
		c.Models[name] = Model{HF: "/models/q", LoRA: &LoRA{R: 16}}
	}
	lora := c.MemoryOf("learn", hfs)
	if lora.Bytes >= learn.Bytes/2 || lora.Bytes < gcHeadroom*n*4*p {
		t.Errorf("LoRA learn estimate %s (full %s)", Bytes(lora.Bytes), Bytes(learn.Bytes))
	}
	// A base from a BF16 folder keeps its matrices in BF16: 2 bytes fewer each, per model.
	hc.TorchDtype = "bfloat16"
	for name := range hfs {
		hfs[name] = hc
	}
	bf16 := c.MemoryOf("learn", hfs)
	if got, want := lora.Bytes-bf16.Bytes, gcHeadroom*n*2*float64(hf.MatrixParams(hc.ArchConfig())); got < want*0.999 || got > want*1.001 {
		t.Errorf("LoRA over BF16 bases: %s less than over float32 ones, want %s", Bytes(got), Bytes(want))
	}
}
