package model

// Llama: attention_bias for all four projections, free head_dim.
func init() {
	registerArch(Arch{
		Name: "llama", Class: "LlamaForCausalLM", Block: LlamaBlock,
		AttentionBias: true, HeadDimFree: true,
		// Llama 3's released configs: RoPE θ 5·10⁵, RMSNorm ε 10⁻⁵ (RoPE
		// scaling left out: a config without it is plain RoPE).
		InitConfig: func(int) map[string]any {
			return map[string]any{
				"hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "rope_scaling": nil,
				"initializer_range": 0.02, "attention_dropout": 0.0, "use_cache": true,
				"mlp_bias": false, "pretraining_tp": 1,
			}
		},
	})
}
