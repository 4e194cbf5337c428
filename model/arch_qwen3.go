package model

// Qwen3: attention_bias for all four projections, q_norm/k_norm, free head_dim.
func init() {
	registerArch(Arch{
		Name: "qwen3", Class: "Qwen3ForCausalLM", Block: LlamaBlock,
		AttentionBias: true, QKNorm: true, HeadDimFree: true,
		InitConfig: func(layers int) map[string]any {
			m := qwenInit(layers)
			m["rope_scaling"] = nil
			return m
		},
	})
}
