package hf

// StepMemory estimates the bytes of one training step on a micro-batch of microBatchTokens
// tokens (one sequence): full fine-tuning keeps float32 weights, gradients and the two AdamW
// moments (16 bytes a parameter); LoRA of rank lora on every linear layer keeps the frozen
// float32 weights and 16 bytes per adapter parameter. Both add the activations the backward
// pass reads (Activations). It is an estimate of the tensors, not of an allocator's overhead.
func StepMemory(cfg Config, lora int, microBatchTokens int) (full, loraBytes int64) {
	p := cfg.Params()
	act := Activations(cfg, microBatchTokens)
	full = 16*p + act
	loraBytes = 4*p + 16*LoRAParams(cfg, lora) + act
	return full, loraBytes
}

// LoRAParams is the number of adapter parameters of rank r on every linear layer of the blocks
// (q, k, v, o, gate, up, down): r × (in + out) each.
func LoRAParams(cfg Config, r int) int64 {
	h, q, kv, in := int64(cfg.Hidden), int64(cfg.Heads*cfg.HeadDim), int64(cfg.KVHeads*cfg.HeadDim), int64(cfg.Intermediate)
	perLayer := (h + q) + 2*(h+kv) + (q + h) + 2*(h+in) + (in + h)
	return int64(r) * perLayer * int64(cfg.Layers)
}

// Activations estimates the float32 values a backward pass reads for t tokens: per block the
// residual input, both norm outputs, q, k, v and the attention output, the attention
// probabilities (heads × t per token), gate, up and their product; then the final norm and
// the logits with their gradient.
func Activations(cfg Config, t int) int64 {
	h, q, kv, in := int64(cfg.Hidden), int64(cfg.Heads*cfg.HeadDim), int64(cfg.KVHeads*cfg.HeadDim), int64(cfg.Intermediate)
	perToken := 4*h + 2*q + 2*kv + int64(cfg.Heads)*int64(t) + 3*in
	block := perToken * int64(t) * int64(cfg.Layers)
	head := (2*h + 2*int64(cfg.Vocab)) * int64(t)
	return 4 * (block + head)
}
