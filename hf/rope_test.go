package hf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/model"
)

// TestLlama3Released: the released Llama 3.2 1B (tied) and Llama 3.1 8B (untied) configs,
// read off the files by hand: llama3 RoPE scaling, θ 500,000, 128,256 tokens, and the engine
// accepts both.
func TestLlama3Released(t *testing.T) {
	for file, want := range map[string]model.ArchConfig{
		"llama-3.2-1b.json": {Arch: "llama", Hidden: 2048, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64,
			Intermediate: 8192, Vocab: 128256, Context: 131072, RMSNormEps: 1e-5, RopeTheta: 5e5, Tie: true,
			RopeScaling: model.RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}},
		"llama-3.1-8b.json": {Arch: "llama", Hidden: 4096, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128,
			Intermediate: 14336, Vocab: 128256, Context: 131072, RMSNormEps: 1e-5, RopeTheta: 5e5,
			RopeScaling: model.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}},
	} {
		c := readTestConfig(t, file)
		if got := c.ArchConfig(); got != want {
			t.Errorf("%s:\n got  %+v\n want %+v", file, got, want)
		}
		if err := c.EngineCheck(); err != nil {
			t.Errorf("%s: %v", file, err)
		}
		hasHead := false
		for _, s := range c.Tensors() {
			hasHead = hasHead || s.Name == "lm_head.weight"
		}
		if hasHead == want.Tie {
			t.Errorf("%s: lm_head.weight listed %v with tie_word_embeddings %v", file, hasHead, want.Tie)
		}
		// Written back unchanged, the file keeps its rope_scaling object as it was.
		js, err := c.JSON()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join("testdata", "configs", file))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ropeObject(t, js, "rope_scaling"), ropeObject(t, raw, "rope_scaling"); got != want {
			t.Errorf("%s: rope_scaling written as %s, read as %s", file, got, want)
		}
	}
}

// ropeObject is key's object in the config js with sorted keys, numbers as written.
func ropeObject(t *testing.T, js []byte, key string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(m[key], &obj); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLlama3RopeForms: the scaling read from rope_scaling (old "type" key too) and from newer
// transformers' rope_parameters, both written back in their own form; a scaling changed in
// Config wins when written.
func TestLlama3RopeForms(t *testing.T) {
	base := `"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 128256`
	want := model.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 64}
	for _, tc := range []struct{ name, json, key string }{
		{"rope_scaling", `{` + base + `, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}`, "rope_scaling"},
		{"old type key", `{` + base + `, "rope_scaling": {"type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 64}}`, "rope_scaling"},
		{"rope_parameters", `{` + base + `, "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 64}}`, "rope_parameters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.json), "x")
			if err != nil {
				t.Fatal(err)
			}
			if c.RopeScaling != want || c.ArchConfig().RopeScaling != want {
				t.Fatalf("read %+v (engine %+v), want %+v", c.RopeScaling, c.ArchConfig().RopeScaling, want)
			}
			c.RopeScaling.Factor = 16
			js, err := c.JSON()
			if err != nil {
				t.Fatal(err)
			}
			var top map[string]any
			if err := json.Unmarshal(js, &top); err != nil {
				t.Fatal(err)
			}
			if tc.key == "rope_parameters" && top["rope_scaling"] != nil {
				t.Errorf("rope_scaling added beside rope_parameters:\n%s", js)
			}
			back, err := ParseConfig(js, "written")
			if err != nil {
				t.Fatal(err)
			}
			if w := (model.RopeScaling{Type: "llama3", Factor: 16, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 64}); back.RopeScaling != w {
				t.Errorf("written back as %+v, want %+v:\n%s", back.RopeScaling, w, js)
			}
			c.RopeScaling = model.RopeScaling{}
			if js, err = c.JSON(); err != nil {
				t.Fatal(err)
			}
			if back, err = ParseConfig(js, "written"); err != nil || back.RopeScaling != (model.RopeScaling{}) {
				t.Errorf("scaling removed in Config, written back as %+v (%v):\n%s", back.RopeScaling, err, js)
			}
		})
	}
}

// TestRopeScalingRefusedByName: every other scaling type is refused naming it and the
// supported ones; llama3's keys must all be there and make sense.
func TestRopeScalingRefusedByName(t *testing.T) {
	base := `"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 300`
	l3 := `"factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 64`
	cases := []struct{ json, want string }{
		{`"rope_scaling": {"rope_type": "linear", "factor": 2}`, `rope_scaling type "linear" is not supported (supported: default, llama3)`},
		{`"rope_scaling": {"rope_type": "dynamic", "factor": 2}`, `rope_scaling type "dynamic" is not supported`},
		{`"rope_scaling": {"rope_type": "yarn", "factor": 4}`, `rope_scaling type "yarn" is not supported`},
		{`"rope_scaling": {"rope_type": "longrope", "short_factor": [1], "long_factor": [1]}`, `rope_scaling type "longrope" is not supported`},
		{`"rope_parameters": {"rope_type": "ntk", "factor": 2}`, `rope_parameters type "ntk" is not supported`},
		{`"rope_scaling": {"factor": 2}`, `rope_scaling type (unnamed) is not supported`},
		{`"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4}`, "rope_scaling.original_max_position_embeddings is missing"},
		{`"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "original_max_position_embeddings": 64}`, "rope_scaling.high_freq_factor is missing"},
		{`"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 64.5}`, "original_max_position_embeddings is 64.5, want an integer"},
		{`"rope_scaling": {"rope_type": "llama3", "factor": "8", "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 64}`, `rope_scaling.factor is "8", want a positive number`},
		{`"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 1, "original_max_position_embeddings": 64}`, "0 < low < high"},
		{`"rope_scaling": {"rope_type": "llama3", "factor": 0.5, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 64}`, "factor 0.5 must be finite and >= 1"},
		{`"rope_scaling": {"rope_type": "llama3", ` + l3 + `}, "rope_parameters": {"rope_type": "llama3", "factor": 4, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 64}`, "rope_scaling and rope_parameters give different RoPE scalings"},
	}
	for _, c := range cases {
		js := `{` + base + `, ` + c.json + `}`
		_, err := ParseConfig([]byte(js), "x/config.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "x/config.json: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s:\n got %v\nwant one line with %q", c.json, err, c.want)
		}
	}
	// The same scaling under both keys is one scaling.
	c, err := ParseConfig([]byte(`{`+base+`, "rope_scaling": {"rope_type": "llama3", `+l3+`}, "rope_parameters": {"rope_type": "llama3", "rope_theta": 1e4, `+l3+`}}`), "x")
	if err != nil || c.RopeScaling.Factor != 8 {
		t.Errorf("both keys agreeing: %+v %v", c.RopeScaling, err)
	}
}

// TestLlama3VocabMemory: a small-hidden model with Llama 3's 128,256-token vocabulary is
// estimated at a size that fits a laptop (the head is chunked), not refused by its vocabulary.
func TestLlama3VocabMemory(t *testing.T) {
	c, err := ParseConfig([]byte(`{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
		"num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 128256, "max_position_embeddings": 131072,
		"tie_word_embeddings": true, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 32.0,
		"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}`), "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EngineCheck(); err != nil {
		t.Fatal(err)
	}
	s := StepOf(c, 0, 1, 2048)
	// Weights, gradients and AdamW's moments: 16 bytes for each of the 8.3M parameters.
	if s.Weights+s.Optimizer != 16*c.Params() || s.Total() > 1<<30 {
		t.Errorf("estimate %+v (total %.0f MiB) for %d parameters", s, float64(s.Total())/(1<<20), c.Params())
	}
	t.Logf("step of 2,048 tokens: %.0f MiB (%+v)", float64(s.Total())/(1<<20), s)
}

// TestLlama3LoadWrite: a Llama 3 folder loads into the engine with its scaling, and WriteLLM
// writes it back with the same rope_scaling object, which loads into the same model.
func TestLlama3LoadWrite(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"model_type": "llama", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
		"num_key_value_heads": 2, "intermediate_size": 24, "vocab_size": 40, "rope_theta": 500000.0, "tie_word_embeddings": false,
		"rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}}`), "llama3")
	if err != nil {
		t.Fatal(err)
	}
	dir := writeTestFolder(t, cfg, BF16, RandomTensors(cfg, 4))
	m, loaded, err := LoadLLM(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := (model.RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}); m.Config().RopeScaling != want {
		t.Fatalf("engine scaling %+v, want %+v", m.Config().RopeScaling, want)
	}
	back := filepath.Join(t.TempDir(), "back")
	if err := WriteLLM(back, loaded, m, "", dir); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, ConfigFile))
	b, _ := os.ReadFile(filepath.Join(back, ConfigFile))
	if x, y := ropeObject(t, a, "rope_scaling"), ropeObject(t, b, "rope_scaling"); x != y {
		t.Errorf("rope_scaling written back as %s, was %s", y, x)
	}
	m2, _, err := LoadLLM(back)
	if err != nil {
		t.Fatal(err)
	}
	if m2.Config() != m.Config() {
		t.Errorf("reloaded as %+v, was %+v", m2.Config(), m.Config())
	}
}
