package hf

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/model"
)

func readTestConfig(t *testing.T, name string) Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "configs", name))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(data, name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestReleasedConfigs: the released Qwen2.5-0.5B-Instruct and Qwen3-0.6B configs parse to
// their sizes, and their parameter counts are the published ones (494,032,768: the model card's
// 0.49B, and the 988,065,536 BF16 bytes of its model.safetensors; 596,049,920 for Qwen3-0.6B).
func TestReleasedConfigs(t *testing.T) {
	q2 := readTestConfig(t, "qwen2.5-0.5b-instruct.json")
	want2 := Config{ModelType: "qwen2", Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, HeadDim: 64, Intermediate: 4864,
		Vocab: 151936, MaxPositions: 32768, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, TorchDtype: "bfloat16",
		BOS: []int{151643}, EOS: []int{151645}}
	checkConfig(t, q2, want2)
	if !q2.QKVBias() || q2.OBias() || q2.QKNorm() {
		t.Errorf("qwen2 biases/norms: qkv %v o %v qknorm %v", q2.QKVBias(), q2.OBias(), q2.QKNorm())
	}
	if p := q2.Params(); p != 494032768 {
		t.Errorf("Qwen2.5-0.5B has %d parameters, want 494,032,768", p)
	}
	q3 := readTestConfig(t, "qwen3-0.6b.json")
	want3 := Config{ModelType: "qwen3", Hidden: 1024, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128, Intermediate: 3072,
		Vocab: 151936, MaxPositions: 40960, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, TorchDtype: "bfloat16",
		BOS: []int{151643}, EOS: []int{151645}}
	checkConfig(t, q3, want3)
	if q3.QKVBias() || q3.OBias() || !q3.QKNorm() {
		t.Errorf("qwen3 biases/norms: qkv %v o %v qknorm %v", q3.QKVBias(), q3.OBias(), q3.QKNorm())
	}
	if p := q3.Params(); p != 596049920 {
		t.Errorf("Qwen3-0.6B has %d parameters, want 596,049,920", p)
	}
	// Qwen3-0.6B per layer: q [2048,1024], k,v [1024,1024], o [1024,2048], q/k norms [128].
	specs := map[string][]int{}
	for _, s := range q3.Tensors() {
		specs[s.Name] = s.Shape
	}
	for name, shape := range map[string][]int{
		"model.layers.27.self_attn.q_proj.weight": {2048, 1024}, "model.layers.0.self_attn.k_proj.weight": {1024, 1024},
		"model.layers.3.self_attn.o_proj.weight": {1024, 2048}, "model.layers.3.self_attn.q_norm.weight": {128},
		"model.layers.3.mlp.down_proj.weight": {1024, 3072}, "model.embed_tokens.weight": {151936, 1024},
	} {
		if !slices.Equal(specs[name], shape) {
			t.Errorf("%s: %v, want %v", name, specs[name], shape)
		}
	}
	if specs["lm_head.weight"] != nil || specs["model.layers.28.input_layernorm.weight"] != nil || specs["model.layers.0.self_attn.q_proj.bias"] != nil {
		t.Error("tensors a tied Qwen3 without biases does not have are listed")
	}
	if len(specs) != 3+28*11-1 {
		t.Errorf("%d tensors, want %d", len(specs), 3+28*11-1)
	}
}

func checkConfig(t *testing.T, got, want Config) {
	t.Helper()
	got.Raw = nil
	if !equalConfig(got, want) {
		t.Errorf("config:\n got %+v\nwant %+v", got, want)
	}
}

func equalConfig(a, b Config) bool {
	return slices.Equal(a.BOS, b.BOS) && slices.Equal(a.EOS, b.EOS) && a.ModelType == b.ModelType && a.Hidden == b.Hidden &&
		a.Layers == b.Layers && a.Heads == b.Heads && a.KVHeads == b.KVHeads && a.HeadDim == b.HeadDim &&
		a.Intermediate == b.Intermediate && a.Vocab == b.Vocab && a.MaxPositions == b.MaxPositions &&
		a.RMSNormEps == b.RMSNormEps && a.RopeTheta == b.RopeTheta && a.TieWordEmbeddings == b.TieWordEmbeddings &&
		a.AttentionBias == b.AttentionBias && a.TorchDtype == b.TorchDtype && a.RopeScaling == b.RopeScaling
}

// TestRopeParametersForm: newer transformers write rope_parameters instead of rope_theta (and
// dtype for torch_dtype); attention_bias gives qwen3 all four biases; an untied model lists
// lm_head; eos_token_id may be a list. Writing it back keeps the form and loads the same.
func TestRopeParametersForm(t *testing.T) {
	c := readTestConfig(t, "qwen3-rope-parameters.json")
	want := Config{ModelType: "qwen3", Hidden: 32, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Intermediate: 64, Vocab: 128,
		RMSNormEps: 1e-5, RopeTheta: 5e5, AttentionBias: true, TorchDtype: "bfloat16", EOS: []int{151645, 151643}}
	checkConfig(t, c, want)
	names := map[string]bool{}
	for _, s := range c.Tensors() {
		names[s.Name] = true
	}
	for _, n := range []string{"lm_head.weight", "model.layers.1.self_attn.o_proj.bias", "model.layers.1.self_attn.q_proj.bias", "model.layers.0.self_attn.k_norm.weight"} {
		if !names[n] {
			t.Errorf("%s missing", n)
		}
	}
	js, err := c.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal(js, &top); err != nil || top["rope_theta"] != nil || top["rope_parameters"] == nil {
		t.Errorf("written back without the rope_parameters form:\n%s", js)
	}
	back, err := ParseConfig(js, "written")
	if err != nil {
		t.Fatal(err)
	}
	checkConfig(t, back, want)
}

// TestConfigErrors: each bad config is refused with one line naming the problem.
func TestConfigErrors(t *testing.T) {
	base := `"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 300`
	cases := []struct{ json, want string }{
		{`{"model_type": "gemma", ` + base + `}`, `model_type "gemma" is not supported (supported: ` + strings.Join(model.ArchNames(), ", ") + `)`},
		{`{` + base + `}`, `model_type "" is not supported`},
		{`{"model_type": "qwen2", ` + base + `, "rope_scaling": {"type": "yarn", "factor": 4}}`, `rope_scaling type "yarn" is not supported (supported: default, llama3)`},
		{`{"model_type": "llama", ` + base + `, "rope_scaling": {"rope_type": "llama3"}}`, "rope_scaling.factor is missing (llama3 RoPE needs it)"},
		{`{"model_type": "qwen3", ` + base + `, "rope_parameters": {"rope_type": "dynamic", "rope_theta": 1}}`, `rope_parameters type "dynamic" is not supported`},
		{`{"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 300}`, "num_hidden_layers is missing"},
		{`{"model_type": "qwen2", ` + base + `, "num_key_value_heads": 3}`, "num_attention_heads 4 is not a multiple of num_key_value_heads 3"},
		{`{"model_type": "qwen2", ` + base + `, "num_key_value_heads": 0}`, "num_key_value_heads is 0"},
		{`{"model_type": "qwen2", ` + base + `, "hidden_act": "gelu"}`, `hidden_act "gelu" is not supported`},
		{`{"model_type": "qwen2", ` + base + `, "use_sliding_window": true}`, "use_sliding_window true is not supported"},
		{`{"model_type": "qwen2", ` + base + `, "rope_theta": -1}`, "rope_theta is -1, want a positive number"},
		{`{"model_type": "qwen2", ` + base + `, "tie_word_embeddings": "yes"}`, "tie_word_embeddings is a string"},
		{`{"model_type": "qwen2", ` + base + `, "eos_token_id": [1, "x"]}`, `eos_token_id holds "x"`},
		{`{"model_type": "qwen2", "hidden_size": 99999999999, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 300}`, "hidden_size is 99999999999"},
		{`{"model_type": "qwen2", "hidden_size": 66, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 300}`, "hidden_size 66 is not a multiple of num_attention_heads 4"},
		{`[1, 2]`, "not a JSON object"},
		{`{"model_type": "qwen2"} {}`, "data after the JSON object"},
	}
	for _, c := range cases {
		_, err := ParseConfig([]byte(c.json), "x/config.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "x/config.json: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s:\n got %v\nwant one line with %q", c.json, err, c.want)
		}
		if err != nil && !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) {
			t.Errorf("%v matches neither ErrFormat nor ErrUnsupported", err)
		}
	}
	// head_dim may differ from hidden/heads when given (Qwen3), and defaults to it.
	c, err := ParseConfig([]byte(`{"model_type": "llama", `+base+`, "rope_scaling": null}`), "ok")
	if err != nil || c.HeadDim != 16 || c.KVHeads != 4 || c.RopeTheta != 10000 || c.TieWordEmbeddings {
		t.Errorf("llama defaults: %+v %v", c, err)
	}
}

func TestNewConfig(t *testing.T) {
	c, err := NewConfig(InitSpec{Arch: "qwen2", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, Intermediate: 96, Vocab: 320, BOS: []int{1}, EOS: []int{2}})
	if err != nil {
		t.Fatal(err)
	}
	checkConfig(t, c, Config{ModelType: "qwen2", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Intermediate: 96,
		Vocab: 320, MaxPositions: 32768, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, BOS: []int{1}, EOS: []int{2}})
	for _, s := range []struct {
		spec InitSpec
		want string
	}{
		{InitSpec{Arch: "qwen2", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, Intermediate: 96, Vocab: 320, HeadDim: 32}, "qwen2 has head_dim = hidden/heads"},
		{InitSpec{Arch: "qwen3", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 3, Intermediate: 96, Vocab: 320}, "--heads 4 is not a multiple of --kv-heads 3"},
		{InitSpec{Arch: "qwen3", Hidden: 64, Layers: 0, Heads: 4, KVHeads: 2, Intermediate: 96, Vocab: 320}, "--layers 0"},
		{InitSpec{Arch: "gpt2", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, Intermediate: 96, Vocab: 320}, `--arch "gpt2"`},
	} {
		if _, err := NewConfig(s.spec); err == nil || !strings.Contains(err.Error(), s.want) {
			t.Errorf("%+v: %v, want %q", s.spec, err, s.want)
		}
	}
}

// TestLlamaTensors: llama has no biases unless attention_bias (then on all four projections),
// and no q/k norms.
func TestLlamaTensors(t *testing.T) {
	base := `"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16, "vocab_size": 10`
	for bias, want := range map[string]int{"false": 3 + 9, "true": 3 + 9 + 4} {
		c, err := ParseConfig([]byte(`{`+base+`, "attention_bias": `+bias+`}`), "llama")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range c.Tensors() {
			names = append(names, s.Name)
			if strings.Contains(s.Name, "_norm.") && strings.Contains(s.Name, "self_attn") {
				t.Errorf("llama has %s", s.Name)
			}
		}
		if len(names) != want || bias == "true" && !slices.Contains(names, "model.layers.0.self_attn.o_proj.bias") {
			t.Errorf("attention_bias %s: %v", bias, names)
		}
	}
}
