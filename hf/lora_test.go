package hf

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/model"
)

// writeAdapter writes an adapter folder: config JSON and tensors (name → shape and values) in
// dtype.
func writeAdapter(t *testing.T, config string, dtype string, tensors map[string]TensorSpec, vals map[string][]float32) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, AdapterConfigFile), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var specs []TensorSpec
	for _, s := range tensors {
		specs = append(specs, s)
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	f, err := os.Create(filepath.Join(dir, AdapterWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := writeSafetensors(f, specs, dtype, func(n string) []float32 { return vals[n] }); err != nil {
		t.Fatal(err)
	}
	return dir
}

const q0 = "base_model.model.model.layers.0.self_attn.q_proj"

// handAdapter is r = 2 on layer 0's q_proj [32, 16] of tinyConfig's qwen3: A has A[0][1] = 0.5
// and A[1][3] = -1, B has B[2][0] = 1 and B[5][1] = 2, all else 0. So (B·A)[2][1] = 0.5,
// (B·A)[5][3] = -2, and with lora_alpha 6 (scale 6/2 = 3) the merge adds 1.5 to W[2][1] and
// -6 to W[5][3], and nothing elsewhere.
func handAdapter(t *testing.T, config string) string {
	a, b := make([]float32, 2*16), make([]float32, 32*2)
	a[0*16+1], a[1*16+3] = 0.5, -1
	b[2*2+0], b[5*2+1] = 1, 2
	return writeAdapter(t, config, BF16, map[string]TensorSpec{
		"a": {q0 + ".lora_A.weight", []int{2, 16}}, "b": {q0 + ".lora_B.weight", []int{32, 2}},
	}, map[string][]float32{q0 + ".lora_A.weight": a, q0 + ".lora_B.weight": b})
}

func tinyLLM(t *testing.T) (*model.LLM, map[string][]float32) {
	t.Helper()
	m, err := model.InitLLM(tinyConfig(t, "qwen3", false).ArchConfig(), 3)
	if err != nil {
		t.Fatal(err)
	}
	before := map[string][]float32{}
	for _, p := range m.Params() {
		before[p.Name] = append([]float32(nil), p.Data...)
	}
	return m, before
}

// TestApplyAdapterHandWorked: the merge changes exactly the two elements worked by hand, by
// the amounts worked by hand (also with use_rslora: scale 6/sqrt(2)).
func TestApplyAdapterHandWorked(t *testing.T) {
	for _, tc := range []struct {
		config string
		scale  float64
	}{
		{`{"peft_type": "LORA", "r": 2, "lora_alpha": 6, "target_modules": ["q_proj", "v_proj"], "bias": "none"}`, 3},
		{`{"r": 2, "lora_alpha": 6, "target_modules": ".*\\.q_proj", "use_rslora": true}`, 6 / math.Sqrt2},
	} {
		m, before := tinyLLM(t)
		if err := ApplyAdapter(m, handAdapter(t, tc.config)); err != nil {
			t.Fatal(err)
		}
		for _, p := range m.Params() {
			for i, v := range p.Data {
				want := before[p.Name][i]
				if p.Name == "model.layers.0.self_attn.q_proj.weight" {
					switch i {
					case 2*16 + 1:
						want = float32(float64(want) + 0.5*tc.scale)
					case 5*16 + 3:
						want = float32(float64(want) - 2*tc.scale)
					}
				}
				if v != want {
					t.Fatalf("%s: %s[%d] = %v, want %v", tc.config, p.Name, i, v, want)
				}
			}
		}
	}
}

// TestApplyAdapterRefuses: adapters drmas cannot merge are one line naming the problem, and
// the model is left unchanged.
func TestApplyAdapterRefuses(t *testing.T) {
	ok := `{"r": 2, "lora_alpha": 6, "target_modules": ["q_proj"]}`
	a, b := make([]float32, 2*16), make([]float32, 32*2)
	for _, tc := range []struct {
		dir  func() string
		want error
		msg  string
	}{
		{func() string { return handAdapter(t, `{"r": 2, "lora_alpha": 6, "use_dora": true}`) }, ErrUnsupported, "use_dora true is not supported"},
		{func() string { return handAdapter(t, `{"r": 2, "lora_alpha": 6, "target_modules": ["k_proj"]}`) }, ErrFormat, "is not selected by target_modules [k_proj]"},
		{func() string { return handAdapter(t, `{"r": 4, "lora_alpha": 6}`) }, ErrFormat, "has shape [2 16], want [4 16]"},
		{func() string { return handAdapter(t, `{"lora_alpha": 6}`) }, ErrFormat, "r is missing"},
		{func() string { return handAdapter(t, `{"r": 2, "lora_alpha": 6, "peft_type": "IA3"}`) }, ErrUnsupported, `peft_type "IA3"`},
		{func() string {
			return writeAdapter(t, ok, F32, map[string]TensorSpec{"a": {q0 + ".lora_A.weight", []int{2, 16}}}, map[string][]float32{q0 + ".lora_A.weight": a})
		}, ErrFormat, "has only one of lora_A and lora_B"},
		{func() string {
			n := "base_model.model.model.layers.9.self_attn.q_proj.lora_B.weight"
			return writeAdapter(t, ok, F32, map[string]TensorSpec{"b": {n, []int{32, 2}}}, map[string][]float32{n: b})
		}, ErrFormat, "the model has no linear layer model.layers.9.self_attn.q_proj"},
		{func() string { return t.TempDir() }, os.ErrNotExist, "adapter_config.json"},
	} {
		m, before := tinyLLM(t)
		err := ApplyAdapter(m, tc.dir())
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
			t.Errorf("got %v, want %v with %q", err, tc.want, tc.msg)
		}
		for _, p := range m.Params() {
			for i, v := range p.Data {
				if v != before[p.Name][i] {
					t.Fatalf("%s changed after a refused adapter", p.Name)
				}
			}
		}
	}
}

// FuzzParseAdapterConfig: any bytes are refused with one line naming the file, or give a
// positive rank and a finite scale.
func FuzzParseAdapterConfig(f *testing.F) {
	f.Add([]byte(`{"peft_type": "LORA", "r": 16, "lora_alpha": 32, "target_modules": ["q_proj", "v_proj"], "bias": "none"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseAdapterConfig(data, "fuzz/adapter_config.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz/adapter_config.json: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error not one line naming the file: %q", err)
			}
			return
		}
		if s := a.Scale(); a.R < 1 || math.IsNaN(s) || math.IsInf(s, 0) {
			t.Fatalf("r %d, scale %v", a.R, s)
		}
	})
}
