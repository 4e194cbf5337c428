package hfmodel

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/model"
)

// promptAllowance is the prompt length the memory estimate assumes beside rollout.max_tokens.
const promptAllowance = 512

// CheckMemory refuses, before its weights are loaded, an HF model whose training step needs
// more memory than this process may use (GOMEMLIMIT, else the memory the machine has
// available) even on a micro-batch of one sequence of rollout.max_tokens and a prompt, with
// activation checkpointing unless learn.activation_checkpointing is off (hf.StepOf: float32
// weights, gradients and AdamW moments, activations, the head's chunk, the attention blocks).
// A larger micro_batch that does not fit is no refusal: the learner checkpoints or splits it
// into accumulation chunks that fit (MicroBatchFit). The error gives the figure and what to
// change. Nothing is checked when the limit is unknown.
func CheckMemory(cfg *configs.Config, id string, hc hf.Config) error {
	limit, by := memoryLimit()
	if limit <= 0 {
		return nil
	}
	ckpt := cfg.Learn.Checkpointing() != "off"
	need := Step(cfg, id, hc, 1, ckpt).Total()
	if float64(need) <= limit {
		return nil
	}
	what, change := "in full (float32 weights, gradients and AdamW moments", fmt.Sprintf("train a LoRA adapter (models.%s.lora)", id)
	if l := cfg.Models[id].LoRA; l != nil {
		weights := "float32 weights"
		if hc.BaseBF16() {
			weights = "the base's matrices in BF16"
		}
		what, change = fmt.Sprintf("with a LoRA adapter of rank %d (%s, the adapter's gradients and moments", l.R, weights), fmt.Sprintf("lower models.%s.lora.r", id)
	}
	if ckpt {
		what += ", activation checkpointing"
	} else {
		change = "set learn.activation_checkpointing: auto, " + change
	}
	return fmt.Errorf("model %s (%s parameters) needs about %s to train %s, and a micro-batch of 1 sequence of %d tokens), more than %s (%s): %s, lower rollout.max_tokens, or use a smaller model",
		id, strconv.FormatInt(hc.Params(), 10), configs.Bytes(float64(need)), what, stepTokens(cfg, hc), configs.Bytes(limit), by, change)
}

// StepMemory is the memory of one training step of model id at its micro_batch, with
// activation checkpointing when learn.activation_checkpointing is on.
func StepMemory(cfg *configs.Config, id string, hc hf.Config) int64 {
	return Step(cfg, id, hc, cfg.OptimOf(cfg.AgentsOf(id)[0]).MicroBatch, cfg.Learn.Checkpointing() == "on").Total()
}

// Step is hf.StepOf (hf.CheckpointedStepOf when ckpt) for model id on a micro-batch of micro
// sequences of rollout.max_tokens and a prompt (at most the model's context), with its LoRA
// rank.
func Step(cfg *configs.Config, id string, hc hf.Config, micro int, ckpt bool) hf.Step {
	r := 0
	if l := cfg.Models[id].LoRA; l != nil {
		r = l.R
	}
	return hf.StepOfMode(hc, r, micro, stepTokens(cfg, hc), ckpt)
}

func stepTokens(cfg *configs.Config, hc hf.Config) int { return archStepTokens(cfg, hc.ArchConfig()) }

// archStepTokens is the sequence length the step estimates assume: rollout.max_tokens and a
// prompt of promptAllowance tokens, at most the model's context.
func archStepTokens(cfg *configs.Config, a model.ArchConfig) int {
	return min(cfg.Rollout.MaxTokens+promptAllowance, a.Context)
}

// StepShape is the sequence that the step estimates assume for a model of architecture a
// under cfg: rollout.max_tokens of response after a prompt of promptAllowance tokens, cut to
// the model's context (the prompt first, keeping at least one token of each).
func StepShape(cfg *configs.Config, a model.ArchConfig) (prompt, response int) {
	tokens := max(2, archStepTokens(cfg, a))
	response = max(1, min(cfg.Rollout.MaxTokens, tokens-1))
	return tokens - response, response
}

// MicroBatchFit is the largest micro-batch of at most micro sequences whose step (step(n)
// bytes) fits the memory this process may use, at least 1; micro when the limit is unknown.
func MicroBatchFit(micro int, step func(n int) int64) int {
	limit, by := memoryLimit()
	if limit <= 0 {
		return micro
	}
	if by != "GOMEMLIMIT" {
		// The available memory excludes what this process already holds (the model's
		// weights, which the step counts).
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		limit += float64(ms.HeapInuse)
	}
	n := micro
	for n > 1 && float64(step(n)) > limit {
		n--
	}
	return n
}

// memoryLimit is GOMEMLIMIT when set, else MemAvailable of /proc/meminfo; 0 when unknown.
func memoryLimit() (float64, string) {
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
		return float64(l), "GOMEMLIMIT"
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "MemAvailable:"); ok {
			if kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64); err == nil {
				return kb * 1024, "the memory available on this machine"
			}
		}
	}
	return 0, ""
}

// TrainableStep is hf.StepOfArchMode for a loaded Hugging Face model (or a LoRA adapter over
// one) on micro sequences of rollout.max_tokens and a prompt, with activation checkpointing
// when ckpt; ok is false for any other model.
func TrainableStep(cfg *configs.Config, m model.Trainable, micro int, ckpt bool) (s hf.Step, ok bool) {
	var a model.ArchConfig
	var params int64
	rank := 0
	switch t := m.(type) {
	case *model.LLM:
		a, params = t.Config(), int64(t.NumParams())
	case *model.LoRA:
		a, params, rank = t.Base().Config(), int64(t.Base().NumParams()), t.Config().R
	default:
		return s, false
	}
	s = hf.StepOfArchMode(a, params, rank, micro, archStepTokens(cfg, a), ckpt)
	if l, ok := m.(*model.LoRA); ok && l.Base().StoredBF16() {
		s = s.WithBF16Base(a)
	}
	return s, true
}
