package model

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Mistral: the Llama block without biases (transformers' MistralConfig has
// no attention_bias), free head_dim, and a sliding window this engine does
// not implement: a config is refused unless its window covers the context.
func init() {
	registerArch(Arch{
		Name: "mistral", Class: "MistralForCausalLM", Block: LlamaBlock,
		HeadDimFree: true,
		// Mistral 7B v0.3's config: RoPE θ 10⁶, RMSNorm ε 10⁻⁵, no window.
		InitConfig: func(int) map[string]any {
			return map[string]any{
				"hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 1e6, "sliding_window": nil,
				"initializer_range": 0.02, "attention_dropout": 0.0, "use_cache": true,
			}
		},
		Refuse: refuseWindow,
	})
}

// refuseWindow refuses a sliding_window shorter than max_position_embeddings
// (attention would skip the keys further back than the window).
func refuseWindow(raw map[string]any) string {
	v, present := raw["sliding_window"]
	if !present || v == nil {
		return ""
	}
	w, _ := v.(json.Number)
	if m, ok := raw["max_position_embeddings"].(json.Number); ok {
		wi, err1 := strconv.ParseInt(string(w), 10, 64)
		mi, err2 := strconv.ParseInt(string(m), 10, 64)
		if err1 == nil && err2 == nil && wi >= mi {
			return ""
		}
	}
	return fmt.Sprintf("sliding_window %v is not supported (only null or at least max_position_embeddings)", v)
}
