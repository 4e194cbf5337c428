package hf

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/model"
)

// trainedLoRA is an adapter of tinyLLM's model with B drawn away from 0 (as after training).
func trainedLoRA(t *testing.T, m *model.LLM, cfg model.LoRAConfig, seed uint64) *model.LoRA {
	t.Helper()
	l, err := model.NewLoRA(m, cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 1))
	for _, p := range l.Params() {
		if strings.HasSuffix(p.Name, ".lora_B.weight") {
			for j := range p.Data {
				p.Data[j] = float32(r.NormFloat64() * 0.1)
			}
		}
	}
	return l
}

func copyLLM(t *testing.T, m *model.LLM) *model.LLM {
	t.Helper()
	byName := map[string][]float32{}
	for _, p := range m.Params() {
		byName[p.Name] = p.Data
	}
	c, err := model.NewLLM(m.Config(), func(name string, dst []float32) error { copy(dst, byName[name]); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWriteAdapterRoundTrip: a written adapter reads back with the same tensors and config,
// ApplyAdapter of it gives Merged's bits, its config is PEFT's plain LoRA, and the same adapter
// writes the same bytes.
func TestWriteAdapterRoundTrip(t *testing.T) {
	m, _ := tinyLLM(t)
	cfg := model.LoRAConfig{R: 3, Alpha: 12, Dropout: 0.05, Targets: []string{"v_proj", "q_proj", "down_proj", "o_proj"}}
	l := trainedLoRA(t, m, cfg, 5)
	dir := filepath.Join(t.TempDir(), "step=1", "solver")
	if err := WriteAdapter(dir, "Qwen/Qwen3-0.6B", l); err != nil {
		t.Fatal(err)
	}
	back, err := ReadAdapter(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := back.Config(), l.Config(); got.R != want.R || got.Alpha != want.Alpha || got.Dropout != want.Dropout || !slices.Equal(got.Targets, want.Targets) {
		t.Fatalf("config %+v, want %+v", got, want)
	}
	for i, p := range l.Params() {
		q := back.Params()[i]
		if q.Name != p.Name || !slices.Equal(q.Shape, p.Shape) || !slices.Equal(q.Data, p.Data) {
			t.Fatalf("%s does not read back", p.Name)
		}
	}
	merged, err := l.Merged()
	if err != nil {
		t.Fatal(err)
	}
	applied := copyLLM(t, m)
	if err := ApplyAdapter(applied, dir); err != nil {
		t.Fatal(err)
	}
	for i, p := range merged.Params() {
		if !slices.Equal(p.Data, applied.Params()[i].Data) {
			t.Fatalf("%s: ApplyAdapter of the written adapter differs from Merged", p.Name)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, AdapterConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var pc map[string]any
	if err := json.Unmarshal(raw, &pc); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"peft_type": "LORA", "r": 3.0, "lora_alpha": 12.0, "lora_dropout": 0.05, "bias": "none",
		"task_type": "CAUSAL_LM", "base_model_name_or_path": "Qwen/Qwen3-0.6B", "use_rslora": false, "use_dora": false,
		"fan_in_fan_out": false, "modules_to_save": nil} {
		if pc[k] != want {
			t.Errorf("adapter_config.json %s = %v, want %v", k, pc[k], want)
		}
	}
	if tm, _ := json.Marshal(pc["target_modules"]); string(tm) != `["q_proj","v_proj","o_proj","down_proj"]` {
		t.Errorf("target_modules %s", tm)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("%d files in the adapter folder, want 2", len(entries))
	}
	again := filepath.Join(t.TempDir(), "again")
	if err := WriteAdapter(again, "Qwen/Qwen3-0.6B", trainedLoRA(t, m, cfg, 5)); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other")
	if err := WriteAdapter(other, "Qwen/Qwen3-0.6B", trainedLoRA(t, m, cfg, 6)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{AdapterConfigFile, AdapterWeightsFile} {
		a, _ := os.ReadFile(filepath.Join(dir, f))
		b, _ := os.ReadFile(filepath.Join(again, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the same adapter wrote different bytes", f)
		}
	}
	a, _ := os.ReadFile(filepath.Join(dir, AdapterWeightsFile))
	b, _ := os.ReadFile(filepath.Join(other, AdapterWeightsFile))
	if bytes.Equal(a, b) {
		t.Error("adapters of different seeds wrote the same weights")
	}
}

// TestReadAdapterRefuses: adapters drmas cannot train on are one line naming the problem; a
// non-empty target folder is refused.
func TestReadAdapterRefuses(t *testing.T) {
	m, _ := tinyLLM(t)
	l := trainedLoRA(t, m, model.LoRAConfig{R: 2, Alpha: 4, Targets: []string{"q_proj"}}, 1)
	dir := filepath.Join(t.TempDir(), "a")
	if err := WriteAdapter(dir, "base", l); err != nil {
		t.Fatal(err)
	}
	if err := WriteAdapter(dir, "base", l); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("overwrote a non-empty folder: %v", err)
	}
	withConfig := func(config string) string {
		d := t.TempDir()
		w, _ := os.ReadFile(filepath.Join(dir, AdapterWeightsFile))
		if err := os.WriteFile(filepath.Join(d, AdapterWeightsFile), w, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, AdapterConfigFile), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, tc := range []struct {
		dir  string
		want error
		msg  string
	}{
		{withConfig(`{"r": 2, "lora_alpha": 4, "target_modules": ["q_proj"], "use_rslora": true}`), ErrUnsupported, "use_rslora true"},
		{withConfig(`{"r": 2, "lora_alpha": 4, "target_modules": ".*q_proj"}`), ErrUnsupported, "regular expression"},
		{withConfig(`{"r": 2, "lora_alpha": 4, "target_modules": ["q_proj"], "lora_dropout": "x"}`), ErrFormat, "lora_dropout"},
		{withConfig(`{"r": 2, "lora_alpha": 4, "target_modules": ["q_proj"], "lora_dropout": 1}`), ErrFormat, "dropout 1 out of range"},
		{withConfig(`{"r": 3, "lora_alpha": 4, "target_modules": ["q_proj"]}`), ErrFormat, "want [3 16]"},
		{handAdapter(t, `{"r": 2, "lora_alpha": 6, "target_modules": ["q_proj"]}`), ErrUnsupported, "module model.layers.1.self_attn.q_proj has no lora_A/lora_B"},
	} {
		_, err := ReadAdapter(tc.dir, m)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
			t.Errorf("got %v, want %v with %q", err, tc.want, tc.msg)
		}
	}
}

// TestLoRAParamsMatchesModel: StepMemory's adapter size is the model's for every target.
func TestLoRAParamsMatchesModel(t *testing.T) {
	for _, arch := range []string{"qwen2", "qwen3"} {
		cfg := tinyConfig(t, arch, true)
		m, err := model.InitLLM(cfg.ArchConfig(), 1)
		if err != nil {
			t.Fatal(err)
		}
		l, err := model.NewLoRA(m, model.LoRAConfig{R: 5, Alpha: 10}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := int64(l.NumParams()), LoRAParams(cfg, 5); got != want {
			t.Errorf("%s: LoRA has %d parameters, LoRAParams says %d", arch, got, want)
		}
	}
}

// FuzzReadAdapter: any adapter_config.json and adapter_model.safetensors bytes over a tiny
// base are refused with one line, or load as an adapter of that base with PEFT's tensor count.
func FuzzReadAdapter(f *testing.F) {
	c, err := NewConfig(InitSpec{Arch: "qwen3", Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, Intermediate: 24, Vocab: 40, HeadDim: 8})
	if err != nil {
		f.Fatal(err)
	}
	m, err := model.InitLLM(c.ArchConfig(), 3)
	if err != nil {
		f.Fatal(err)
	}
	for _, targets := range [][]string{{"q_proj"}, {"k_proj", "up_proj", "down_proj"}} {
		l, err := model.NewLoRA(m, model.LoRAConfig{R: 2, Alpha: 4, Targets: targets}, 1)
		if err != nil {
			f.Fatal(err)
		}
		dir := filepath.Join(f.TempDir(), strings.Join(targets, "_"))
		if err := WriteAdapter(dir, "base", l); err != nil {
			f.Fatal(err)
		}
		cb, _ := os.ReadFile(filepath.Join(dir, AdapterConfigFile))
		wb, _ := os.ReadFile(filepath.Join(dir, AdapterWeightsFile))
		f.Add(cb, wb)
	}
	f.Fuzz(func(t *testing.T, config, weights []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, AdapterConfigFile), config, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, AdapterWeightsFile), weights, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := ReadAdapter(dir, m)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of several lines: %q", err)
			}
			return
		}
		cfg := l.Config()
		if want := 2 * 2 * len(cfg.Targets); len(l.Params()) != want { // A and B, 2 layers
			t.Fatalf("%d tensors, want %d", len(l.Params()), want)
		}
	})
}

// TestReadAdapterBF16: an adapter PEFT saved in BF16 (names in any order) loads with each value
// the BF16 number it holds.
func TestReadAdapterBF16(t *testing.T) {
	m, _ := tinyLLM(t)
	specs := map[string]TensorSpec{}
	vals := map[string][]float32{}
	for layer := 1; layer >= 0; layer-- {
		for _, ab := range []struct {
			suffix string
			shape  []int
		}{{"lora_B.weight", []int{16, 2}}, {"lora_A.weight", []int{2, 16}}} {
			name := "base_model.model.model.layers." + string(rune('0'+layer)) + ".self_attn.v_proj." + ab.suffix
			v := make([]float32, ab.shape[0]*ab.shape[1])
			for i := range v {
				v[i] = float32(i%7) - 2.5 + float32(layer) // halves: exact in BF16
			}
			specs[name], vals[name] = TensorSpec{name, ab.shape}, v
		}
	}
	dir := writeAdapter(t, `{"r": 2, "lora_alpha": 4, "target_modules": ["v_proj"]}`, BF16, specs, vals)
	l, err := ReadAdapter(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Params() {
		if !slices.Equal(p.Data, vals[p.Name]) {
			t.Fatalf("%s: %v, want %v", p.Name, p.Data, vals[p.Name])
		}
	}
}
