package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/model"
)

// llama3Folder writes a small Llama 3-shaped folder (random weights, the tiny tokenizer) whose
// config.json carries the given rope_scaling object.
func llama3Folder(t *testing.T, scaling string) string {
	t.Helper()
	cfg, err := hf.ParseConfig([]byte(`{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 32,
		"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 64, "vocab_size": 320,
		"max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": true,
		"rope_scaling": `+scaling+`}`), "llama3")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "llama3")
	if err := hf.WriteFolder(dir, cfg, hf.BF16, hf.RandomTensors(cfg, 3), tinyTokenizer); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestModelLlama3Folder: inspect prints a Llama 3 folder's RoPE scaling (text and --json),
// score runs it, and a folder with another scaling type is refused by both, by name.
func TestModelLlama3Folder(t *testing.T) {
	dir := llama3Folder(t, `{"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}`)
	out, _, err := execute(t, "model", "inspect", "--model", dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := "RoPE scaling  llama3: factor 32, low/high frequency factors 1/4, original context 8192"; !strings.Contains(out, want) {
		t.Errorf("inspect lacks %q:\n%s", want, out)
	}
	out, _, err = execute(t, "model", "inspect", "--model", dir, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		RopeScaling model.RopeScaling `json:"rope_scaling"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if want := (model.RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}); r.RopeScaling != want {
		t.Errorf("--json rope_scaling %+v, want %+v", r.RopeScaling, want)
	}
	if _, _, err := execute(t, "model", "score", "--model", dir, "--prompt-ids", "1,2,3", "--response-ids", "4,5"); err != nil {
		t.Errorf("score: %v", err)
	}
	yarn := llama3Folder(t, `null`)
	name := filepath.Join(yarn, "config.json")
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	c["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 4.0}
	if b, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"model", "inspect", "--model", yarn}, {"model", "score", "--model", yarn, "--prompt-ids", "1", "--response-ids", "2"}} {
		_, _, err := execute(t, args...)
		if want := `rope_scaling type "yarn" is not supported (supported: default, llama3)`; err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s of a yarn folder: %v, want one line with %q", args[1], err, want)
		}
	}
}
