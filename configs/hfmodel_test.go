package configs

import (
	"slices"
	"strings"
	"testing"
)

// TestHFModelKeys: an HF model loads with its folder and LoRA settings (defaults filled), and
// each misuse is reported by key with what to change.
func TestHFModelKeys(t *testing.T) {
	p := write(t, "hf.yaml", `models:
  solver_m: {hf: /models/qwen3, lora: {r: 8}}
  verifier_m: {hf: s3://bucket/qwen3}
agents:
  solver: {model: solver_m, lr: 1e-5}
  verifier: {model: verifier_m, lr: 2e-6}
`)
	c, err := Load(LoadOptions{File: p})
	if err != nil {
		t.Fatal(err)
	}
	m := c.Models["solver_m"]
	if !m.IsHF() || m.LoRA == nil || m.LoRA.R != 8 || m.External() {
		t.Fatalf("solver_m loaded as %+v", m)
	}
	l := m.LoRA.WithDefaults()
	if l.Alpha != 16 || !slices.Equal(l.TargetModules, LoRATargets) {
		t.Errorf("defaults: %+v", l)
	}
	if c.Models["verifier_m"].ChatDate != "" {
		t.Error("verifier_m got a chat date it was not given")
	}
	if c.Models["verifier_m"].LoRA != nil {
		t.Error("verifier_m got a LoRA it was not given")
	}
	cases := map[string]string{
		`m1: {hf: /q, dim: 64}`: "models.m1.hf is set and so are built-in size keys",
		`m1: {dim: 64, layers: 1, heads: 2, context: 32, ff_mult: 2, lora: {r: 4}}`: "models.m1.lora is set but models.m1.hf is not",
		`m1: {hf: /q, lora: {r: 0}}`:                                                            "models.m1.lora.r is 0",
		`m1: {hf: /q, lora: {r: 4, dropout: 1}}`:                                                "models.m1.lora.dropout is 1",
		`m1: {hf: /q, lora: {r: 4, alpha: -1}}`:                                                 "models.m1.lora.alpha is -1",
		`m1: {hf: /q, lora: {r: 4, target_modules: [qkv]}}`:                                     `models.m1.lora.target_modules: "qkv" is not a linear layer`,
		`m1: {hf: /q, lora: {r: 4, target_modules: [q_proj, q_proj]}}`:                          `names "q_proj" twice`,
		`m1: {dim: 64, layers: 1, heads: 2, context: 32, ff_mult: 2, chat_date: "01 Jan 2025"}`: "models.m1.chat_date is set but models.m1.hf is not",
		`m1: {hf: /q, chat_date: "01 Jan\n2025"}`:                                               "models.m1.chat_date: chat date",
	}
	for model, want := range cases {
		p := write(t, "bad.yaml", "models:\n  "+model+"\nagents:\n  solver: {model: m1}\n")
		_, err := Load(LoadOptions{File: p})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", model, err, want)
		}
	}
}
