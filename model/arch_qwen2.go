package model

// Qwen2 and Qwen2.5: q/k/v with biases, o_proj without, head_dim = hidden/heads.
func init() {
	registerArch(Arch{
		Name: "qwen2", Class: "Qwen2ForCausalLM", Block: LlamaBlock,
		QKVBias:    true,
		GGUF:       "qwen2",
		InitConfig: qwenInit,
	})
}

// qwenInit is the config.json of the released Qwen2.5 and Qwen3 models,
// less the sizes: RoPE θ 10⁶, RMSNorm ε 10⁻⁶, no sliding window.
func qwenInit(layers int) map[string]any {
	return map[string]any{
		"hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 1e6, "initializer_range": 0.02,
		"attention_dropout": 0.0, "use_cache": true, "use_sliding_window": false,
		"sliding_window": nil, "max_window_layers": layers,
	}
}
