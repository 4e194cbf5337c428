package hf

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/model"
)

// initFolder writes a folder the way drmas model init does (NewConfig, RandomTensors) with
// edit applied to the config, and loads it back into the engine.
func initFolder(t *testing.T, s InitSpec, seed uint64, edit func(*Config)) (*model.LLM, Config) {
	t.Helper()
	cfg, err := NewConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&cfg)
	}
	dir := writeTestFolder(t, cfg, F32, RandomTensors(cfg, seed))
	m, got, err := LoadLLM(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m, got
}

// TestMistralIsLlamaWithoutBiases: a tiny Mistral folder from NewConfig loads, names itself
// MistralForCausalLM without attention_bias, and scores exactly (bit for bit) as a Llama folder
// with the same weights (same seed and tensor names), RoPE θ and RMSNorm ε.
func TestMistralIsLlamaWithoutBiases(t *testing.T) {
	for _, untied := range []bool{false, true} {
		s := InitSpec{Hidden: 32, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 12, Intermediate: 48, Vocab: 64, Untied: untied}
		s.Arch = "mistral"
		mm, mc := initFolder(t, s, 7, nil)
		var raw map[string]any
		js, _ := mc.JSON()
		if err := json.Unmarshal(js, &raw); err != nil {
			t.Fatal(err)
		}
		if a := raw["architectures"].([]any); len(a) != 1 || a[0] != "MistralForCausalLM" || raw["model_type"] != "mistral" || raw["attention_bias"] != nil || raw["head_dim"] != 12.0 {
			t.Fatalf("mistral config.json: %s", js)
		}
		s.Arch = "llama"
		lm, lc := initFolder(t, s, 7, func(c *Config) { c.RopeTheta, c.RMSNormEps = mc.RopeTheta, mc.RMSNormEps })
		if lc.AttentionBias || lc.QKVBias() || mc.QKVBias() || mc.OBias() || mc.QKNorm() {
			t.Fatalf("biases: llama %v, mistral qkv %v o %v qknorm %v", lc.AttentionBias, mc.QKVBias(), mc.OBias(), mc.QKNorm())
		}
		if !slices.EqualFunc(mc.Tensors(), lc.Tensors(), func(a, b TensorSpec) bool { return a.Name == b.Name && slices.Equal(a.Shape, b.Shape) }) {
			t.Fatalf("tensors differ:\n%v\n%v", mc.Tensors(), lc.Tensors())
		}
		seqs := []model.Sequence{{Prompt: []int32{1, 5, 9, 2}, Response: []int32{7, 63, 0, 11, 4}}, {Prompt: []int32{3}, Response: []int32{8, 8}}}
		ml, me, err := mm.Score(seqs, 1)
		if err != nil {
			t.Fatal(err)
		}
		ll, le, err := lm.Score(seqs, 1)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i := range seqs {
			for j := range ml[i] {
				if math.Float32bits(ml[i][j]) != math.Float32bits(ll[i][j]) || math.Float32bits(me[i][j]) != math.Float32bits(le[i][j]) {
					t.Fatalf("untied %v seq %d token %d: mistral %v %v, llama %v %v", untied, i, j, ml[i][j], me[i][j], ll[i][j], le[i][j])
				}
				if !(ml[i][j] < 0) {
					t.Fatalf("log-prob %v not negative", ml[i][j])
				}
				n++
			}
		}
		if n != 7 {
			t.Fatalf("scored %d tokens, want 7", n)
		}
	}
}

// TestLlamaInit: drmas model init makes a Llama folder: LlamaForCausalLM, attention_bias false,
// head_dim stated, Llama 3's θ and ε, no RoPE scaling; it loads and scores.
func TestLlamaInit(t *testing.T) {
	m, c := initFolder(t, InitSpec{Arch: "llama", Hidden: 32, Layers: 1, Heads: 4, KVHeads: 1, HeadDim: 16, Intermediate: 48, Vocab: 64}, 3, nil)
	js, _ := c.JSON()
	for _, want := range []string{`"LlamaForCausalLM"`, `"attention_bias": false`, `"head_dim": 16`, `"rope_theta": 500000`, `"rms_norm_eps": 0.00001`, `"rope_scaling": null`, `"model_type": "llama"`} {
		if !strings.Contains(string(js), want) {
			t.Fatalf("config.json lacks %s:\n%s", want, js)
		}
	}
	lp, _, err := m.Score([]model.Sequence{{Prompt: []int32{1, 2}, Response: []int32{3}}}, 1)
	if err != nil || len(lp[0]) != 1 || !(lp[0][0] < 0) {
		t.Fatalf("score: %v %v", lp, err)
	}
}

// TestMistralSlidingWindow: a window shorter than the context changes attention, which the
// engine does not do: refused by name; null or a window covering the context is accepted.
func TestMistralSlidingWindow(t *testing.T) {
	base := `{"model_type": "mistral", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 300, "max_position_embeddings": 8192`
	for _, tc := range []struct{ window, err string }{
		{"null", ""}, {"8192", ""}, {"65536", ""},
		{"4096", "sliding_window 4096 is not supported"},
		{`"big"`, "sliding_window big is not supported"},
	} {
		_, err := ParseConfig([]byte(base+`, "sliding_window": `+tc.window+`}`), "mistral")
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("sliding_window %s: got %v, want %q", tc.window, err, tc.err)
		}
	}
	if _, err := ParseConfig([]byte(`{"model_type": "mistral", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 300, "sliding_window": 4096}`), "m"); err == nil {
		t.Error("a window without max_position_embeddings accepted")
	}
}

// TestRegistryDrivesConfig: every registered architecture makes a config through NewConfig
// that ParseConfig reads back with the registry's biases and q/k norms, and whose tensors
// are the engine's (model.ArchConfig.TensorSpecs).
func TestRegistryDrivesConfig(t *testing.T) {
	for _, name := range model.ArchNames() {
		a, _ := model.LookupArch(name)
		c, err := NewConfig(InitSpec{Arch: name, Hidden: 32, Layers: 1, Heads: 4, KVHeads: 2, Intermediate: 48, Vocab: 64})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.QKVBias() != a.QKVBias || c.OBias() || c.QKNorm() != a.QKNorm {
			t.Errorf("%s: qkv %v o %v qknorm %v", name, c.QKVBias(), c.OBias(), c.QKNorm())
		}
		js, _ := c.JSON()
		if !strings.Contains(string(js), `"`+a.Class+`"`) {
			t.Errorf("%s: config.json lacks %s", name, a.Class)
		}
		if err := c.EngineCheck(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSpecialIDsLlama3: with Llama 3's special tokens, drmas model init sets bos_token_id to
// <|begin_of_text|> and eos_token_id to <|eot_id|> (else <|end_of_text|>), as Llama 3.2
// Instruct's config does; Qwen's tokens keep Qwen's choice.
func TestSpecialIDsLlama3(t *testing.T) {
	llama := map[string]int{"<|begin_of_text|>": 128000, "<|end_of_text|>": 128001, "<|start_header_id|>": 128006, "<|eot_id|>": 128009}
	for _, tc := range []struct {
		tokens map[string]int
		bos    int
		eos    []int
	}{
		{llama, 128000, []int{128001, 128009}},
		{map[string]int{"<|begin_of_text|>": 128000, "<|end_of_text|>": 128001}, 128000, []int{128001}},
		{map[string]int{"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}, 151643, []int{151645}},
	} {
		bos, eos := SpecialIDs(TokenizerInfo{Tokens: tc.tokens})
		if !slices.Equal(bos, []int{tc.bos}) || !slices.Equal(eos, tc.eos) {
			t.Errorf("%v: bos %v eos %v, want %d %d", tc.tokens, bos, eos, tc.bos, tc.eos)
		}
	}
}
