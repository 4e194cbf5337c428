package hf

import (
	"runtime"

	"github.com/drmas-dev/drmas/model"
)

// Step is one training step's memory on the CPU engine, in bytes, by what holds it: the
// tensors a step has live at its peak (the start of the backward), not an allocator's or a
// collector's overhead. Every term is linear in the micro-batch's tokens except Attention
// (each worker's block of rows of one sequence's map) and Head (one chunk of rows).
type Step struct {
	Weights     int64 // weights: float32, but a LoRA's frozen base from a BF16 folder keeps its matrices in BF16
	Optimizer   int64 // gradients and AdamW's two moments of what trains
	Activations int64 // what the forward keeps for the backward
	Scratch     int64 // the backward's per-token buffers and the GEMMs' packed operands
	Head        int64 // the output head's chunk buffers and its packed weight
	Attention   int64 // each worker's block of attention rows, forward and backward
}

// Total is the sum of the terms.
func (s Step) Total() int64 {
	return s.Weights + s.Optimizer + s.Activations + s.Scratch + s.Head + s.Attention
}

// StepOf estimates a training step on a micro-batch of seqs sequences of seqLen tokens, in
// full (lora 0) or of a LoRA adapter of rank lora on every linear layer of the blocks. A LoRA's
// base from a BF16 folder (BaseBF16) counts 2 bytes a matrix value.
func StepOf(cfg Config, lora, seqs, seqLen int) Step {
	s := StepOfArch(cfg.ArchConfig(), cfg.Params(), lora, seqs, seqLen)
	if lora > 0 && cfg.BaseBF16() {
		s = s.WithBF16Base(cfg.ArchConfig())
	}
	return s
}

// BaseBF16 reports whether a frozen model loaded from a folder with this config keeps its
// matrices in BF16 (LoadFrozenLLM): its torch_dtype is bfloat16, as the stored weights of such
// a folder are.
func (c Config) BaseBF16() bool { return c.TorchDtype == torchDtypes[BF16] }

// WithBF16Base is s with the frozen base's matrices (MatrixParams) at 2 bytes each rather
// than 4: a LoRA over a base stored in BF16.
func (s Step) WithBF16Base(a model.ArchConfig) Step {
	s.Weights -= 2 * MatrixParams(a)
	return s
}

// MatrixParams is the number of values in a's matrices (the block projections, the embedding,
// an untied head): what a model stored in BF16 holds in 2 bytes.
func MatrixParams(a model.ArchConfig) int64 {
	var n int64
	for _, s := range a.TensorSpecs() {
		if len(s.Shape) == 2 {
			n += int64(s.Shape[0]) * int64(s.Shape[1])
		}
	}
	return n
}

// StepOfArch is StepOf for the engine's description of a model of params parameters.
func StepOfArch(a model.ArchConfig, params int64, lora, seqs, seqLen int) Step {
	t := int64(seqs) * int64(seqLen)
	s := Step{Weights: 4 * params, Optimizer: 12 * params, Activations: activations(a, t)}
	if lora > 0 {
		ap := loraParams(a, lora)
		s.Weights, s.Optimizer = 4*params+4*ap, 12*ap
		s.Activations += 4 * t * 7 * int64(lora) * int64(a.Layers) // x·Aᵀ of each adapted layer
	}
	D, F, V := int64(a.Hidden), int64(a.Intermediate), int64(a.Vocab)
	ld, od := int64((a.Heads+2*a.KVHeads)*a.HeadDim), int64(a.Heads*a.HeadDim)
	// dX, dHf, dXg, dT, dAct, dAO, dQKV, dGU; the largest weight gradient packs its input
	// (down's, F a token); an input gradient of more rows than the GEMM streams in panels
	// packs its whole weight (gate|up's), one of fewer packs a panel at a time (negligible).
	s.Scratch = 4 * (t*(4*D+3*F+od+ld) + t*max(F, D) + packedWeight(t, 2*F*D))
	// The head holds three chunk buffers (logits, probabilities or their gradient, the GEMM's
	// transposed copy); a fourth counts the one its pool may be allocating again while the
	// collector recycles another (a head-dominated step's peak exceeds three).
	rows := min(t, int64(model.HeadRows(a.Vocab)))
	s.Head = 4 * (4*scratch(rows*V) + packedWeight(rows, scratch(V*D)))
	L := int64(seqLen)
	s.Attention = 4 * 3 * int64(runtime.GOMAXPROCS(0)) * min(L, int64(model.AttentionBlock())) * L
	return s
}

// packedWeight is the floats the GEMM packs for an input gradient dY·W of rows rows and a
// weight of w floats: all of W when rows exceed model.GEMMPanelRows, else nothing that counts.
func packedWeight(rows, w int64) int64 {
	if rows > int64(model.GEMMPanelRows()) {
		return w
	}
	return 0
}

// CheckpointedStepOf is StepOf with activation checkpointing: the forward keeps each block's
// input, and the backward recomputes one block's activations at a time.
func CheckpointedStepOf(cfg Config, lora, seqs, seqLen int) Step {
	s := StepOf(cfg, lora, seqs, seqLen) // with its BF16 base
	s.Activations = checkpointedActivations(cfg.ArchConfig(), lora, int64(seqs)*int64(seqLen))
	return s
}

// StepOfMode is CheckpointedStepOf when checkpointing is on, else StepOf.
func StepOfMode(cfg Config, lora, seqs, seqLen int, checkpointing bool) Step {
	if checkpointing {
		return CheckpointedStepOf(cfg, lora, seqs, seqLen)
	}
	return StepOf(cfg, lora, seqs, seqLen)
}

// CheckpointedStepOfArch is StepOfArch with activation checkpointing.
func CheckpointedStepOfArch(a model.ArchConfig, params int64, lora, seqs, seqLen int) Step {
	s := StepOfArch(a, params, lora, seqs, seqLen)
	s.Activations = checkpointedActivations(a, lora, int64(seqs)*int64(seqLen))
	return s
}

// StepOfArchMode is CheckpointedStepOfArch when checkpointing is on, else StepOfArch.
func StepOfArchMode(a model.ArchConfig, params int64, lora, seqs, seqLen int, checkpointing bool) Step {
	if checkpointing {
		return CheckpointedStepOfArch(a, params, lora, seqs, seqLen)
	}
	return StepOfArch(a, params, lora, seqs, seqLen)
}

// scratch is the floats the engine's scratch pools hold for a request of n.
func scratch(n int64) int64 { return int64(model.ScratchFloats(int(n))) }

// StepMemory estimates the bytes of one training step on a micro-batch of microBatchTokens
// tokens (one sequence), in full and with a LoRA adapter of rank lora (StepOf's totals).
func StepMemory(cfg Config, lora int, microBatchTokens int) (full, loraBytes int64) {
	return StepOf(cfg, 0, 1, microBatchTokens).Total(), StepOf(cfg, lora, 1, microBatchTokens).Total()
}

// LoRAParams is the number of adapter parameters of rank r on every linear layer of the blocks
// (q, k, v, o, gate, up, down): r × (in + out) each.
func LoRAParams(cfg Config, r int) int64 { return loraParams(cfg.ArchConfig(), r) }

func loraParams(a model.ArchConfig, r int) int64 {
	h, q, kv, in := int64(a.Hidden), int64(a.Heads*a.HeadDim), int64(a.KVHeads*a.HeadDim), int64(a.Intermediate)
	perLayer := (h + q) + 2*(h+kv) + (q + h) + 2*(h+in) + (in + h)
	return int64(r) * perLayer * int64(a.Layers)
}

// Activations estimates the bytes the forward keeps for the backward over t tokens: per block
// both norms' inputs normalised with their scales, their outputs, q|k|v, Qwen3's q/k norms,
// the attention output, gate|up and its product; then the residual stream, the final norm's
// input, normalised input and output, and the rotary angles. No attention map and no logits
// are kept: both are recomputed a block at a time.
func Activations(cfg Config, t int) int64 { return activations(cfg.ArchConfig(), int64(t)) }

func activations(a model.ArchConfig, t int64) int64 {
	return 4 * (blockActivations(a)*int64(a.Layers) + headActivations(a)) * t
}

// checkpointedActivations is activations with activation checkpointing: each block's input
// (D floats a token a block), one block's activations (recomputed in the backward), the rest
// as without, and with a LoRA of rank lora the adapter's x·Aᵀ of every layer, which the forward
// keeps (the backward's recomputation replaces them block by block).
func checkpointedActivations(a model.ArchConfig, lora int, t int64) int64 {
	perToken := int64(a.Hidden)*int64(a.Layers) + blockActivations(a) + headActivations(a)
	return 4*perToken*t + 4*t*7*int64(lora)*int64(a.Layers)
}

// blockActivations is the floats a token one block keeps: both norms' normalised inputs, scales
// and outputs, q|k|v, Qwen3's q/k norms, the attention output, gate|up and its product.
func blockActivations(a model.ArchConfig) int64 {
	D, F := int64(a.Hidden), int64(a.Intermediate)
	H, KV, hd := int64(a.Heads), int64(a.KVHeads), int64(a.HeadDim)
	block := 4*D + 2 + (H+2*KV)*hd + H*hd + 3*F
	if a.QKNorm {
		block += (H + KV) * (hd + 1)
	}
	return block
}

// headActivations is the floats a token the rest keeps: the residual stream, the final norm's
// input, normalised input and output, and the rotary angles.
func headActivations(a model.ArchConfig) int64 { return 5*int64(a.Hidden) + int64(a.HeadDim) + 8 }
