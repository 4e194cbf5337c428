package hf

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/drmas-dev/drmas/model"
)

// llamaConfig is a small llama, with attention biases when bias is set.
func llamaConfig(t *testing.T, bias bool) Config {
	t.Helper()
	b := map[bool]string{true: "true", false: "false"}[bias]
	c, err := ParseConfig([]byte(`{"model_type": "llama", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
		"num_key_value_heads": 1, "intermediate_size": 24, "vocab_size": 40, "rms_norm_eps": 1e-5, "rope_theta": 500000,
		"attention_bias": `+b+`}`), "llama")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// specConfigs are the configs whose two tensor lists must agree: the released ones and small
// ones of every architecture, tied and untied, with and without biases.
func specConfigs(t *testing.T) map[string]Config {
	t.Helper()
	out := map[string]Config{
		"qwen2 untied": tinyConfig(t, "qwen2", true), "qwen2 tied": tinyConfig(t, "qwen2", false),
		"qwen3 untied": tinyConfig(t, "qwen3", true), "qwen3 tied": tinyConfig(t, "qwen3", false),
		"llama": llamaConfig(t, false), "llama bias": llamaConfig(t, true),
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "configs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		out[e.Name()] = readTestConfig(t, e.Name())
	}
	return out
}

// TestTensorSpecsAgree: the tensors the folder reader checks (Config.Tensors) are the tensors
// the engine asks for (ArchConfig.TensorSpecs), name for name and shape for shape, and the
// engine accepts the architecture.
func TestTensorSpecsAgree(t *testing.T) {
	for name, c := range specConfigs(t) {
		ac := c.ArchConfig()
		if err := ac.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		mine, theirs := c.Tensors(), ac.TensorSpecs()
		sort.Slice(theirs, func(i, j int) bool { return theirs[i].Name < theirs[j].Name })
		if len(mine) != len(theirs) {
			t.Errorf("%s: hf lists %d tensors, the engine %d", name, len(mine), len(theirs))
			continue
		}
		for i := range mine {
			if mine[i].Name != theirs[i].Name || !slices.Equal(mine[i].Shape, theirs[i].Shape) {
				t.Errorf("%s: hf %s %v, engine %s %v", name, mine[i].Name, mine[i].Shape, theirs[i].Name, theirs[i].Shape)
				break
			}
		}
		if c.Params() != ac.NumParams() {
			t.Errorf("%s: %d parameters in hf, %d in the engine", name, c.Params(), ac.NumParams())
		}
	}
}

// TestArchConfigReleased: the fields of the released configs, read off the files by hand.
func TestArchConfigReleased(t *testing.T) {
	for file, want := range map[string]model.ArchConfig{
		"qwen2.5-0.5b-instruct.json": {Arch: "qwen2", Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, HeadDim: 64,
			Intermediate: 4864, Vocab: 151936, Context: 32768, RMSNormEps: 1e-6, RopeTheta: 1e6, Tie: true, QKVBias: true},
		"qwen3-0.6b.json": {Arch: "qwen3", Hidden: 1024, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128,
			Intermediate: 3072, Vocab: 151936, Context: 40960, RMSNormEps: 1e-6, RopeTheta: 1e6, Tie: true, QKNorm: true},
		"qwen3-rope-parameters.json": {Arch: "qwen3", Hidden: 32, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
			Intermediate: 64, Vocab: 128, Context: 32768, RMSNormEps: 1e-5, RopeTheta: 500000, QKVBias: true, OBias: true, QKNorm: true},
	} {
		if got := readTestConfig(t, file).ArchConfig(); got != want {
			t.Errorf("%s:\n got  %+v\n want %+v", file, got, want)
		}
	}
}

// TestLoadWriteLLM: a folder of each dtype and architecture loads into the engine with every
// value as stored (the dtype's rounding of what was written), and WriteLLM writes it back in
// the source dtype with the same bytes.
func TestLoadWriteLLM(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		dtype string
	}{
		{"qwen2 untied bf16", tinyConfig(t, "qwen2", true), BF16},
		{"qwen3 tied f16", tinyConfig(t, "qwen3", false), F16},
		{"llama bias f32", llamaConfig(t, true), F32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := RandomTensors(tc.cfg, 7)
			dir := writeTestFolder(t, tc.cfg, tc.dtype, func(name string) []float32 {
				v := vals(name)
				for i := range v {
					v[i] += float32(i%5) * 0.01 // biases and norms not all 0 or 1
				}
				return v
			})
			m, cfg, err := LoadLLM(dir)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.TorchDtype != torchDtypes[tc.dtype] || m.Config() != tc.cfg.ArchConfig() {
				t.Fatalf("dtype %q, config %+v", cfg.TorchDtype, m.Config())
			}
			for _, p := range m.Params() {
				want := vals(p.Name)
				for i := range want {
					if w := roundTo(tc.dtype, want[i]+float32(i%5)*0.01); !sameBits(p.Data[i], w) {
						t.Fatalf("%s[%d] = %v, stored %v", p.Name, i, p.Data[i], w)
					}
				}
			}
			out := filepath.Join(t.TempDir(), "back")
			if err := WriteLLM(out, cfg, m, "", filepath.Join("testdata", "tinytok")); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{SingleFile, ConfigFile, "tokenizer.json"} {
				if fileHash(t, dir, f) != fileHash(t, out, f) {
					t.Errorf("%s differs after load and write", f)
				}
			}
		})
	}
}

// TestWriteLLMRefusesOtherConfig: a model written with a config of other sizes is refused.
func TestWriteLLMRefusesOtherConfig(t *testing.T) {
	cfg := tinyConfig(t, "qwen3", false)
	m, err := model.InitLLM(cfg.ArchConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.Intermediate++
	err = WriteLLM(filepath.Join(t.TempDir(), "m"), other, m, "", "")
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("got %v, want ErrMismatch", err)
	}
}

// TestLoadLLMRefusesWhatTheEngineCannotRun: a head_dim the engine's RoPE cannot pair is one line
// naming the problem, not a panic.
func TestLoadLLMRefusesWhatTheEngineCannotRun(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"model_type": "qwen3", "hidden_size": 12, "num_hidden_layers": 1, "num_attention_heads": 4,
		"head_dim": 3, "intermediate_size": 8, "vocab_size": 10}`), "odd")
	if err != nil {
		t.Fatal(err)
	}
	dir := writeTestFolder(t, cfg, F32, RandomTensors(cfg, 1))
	_, _, err = LoadLLM(dir)
	if err == nil || !errors.Is(err, ErrUnsupported) || bytes.ContainsRune([]byte(err.Error()), '\n') {
		t.Fatalf("got %v", err)
	}
	t.Log(err)
}

// TestArchConfigLongContext: a config allowing more positions than the engine's limit runs with
// the limit as its context instead of being refused.
func TestArchConfigLongContext(t *testing.T) {
	c := tinyConfig(t, "qwen2", false)
	c.MaxPositions = 10 << 20
	ac := c.ArchConfig()
	if err := ac.Validate(); err != nil || ac.Context != 1<<20 {
		t.Fatalf("context %d: %v", ac.Context, err)
	}
}

// TestLoadFrozenLLM: a frozen load of a BF16 folder keeps the matrices in BF16 and scores the
// bits of the float32 load; WriteLLM writes it back to the same file, and merging an adapter
// into it is refused. A folder in another dtype loads in float32.
func TestLoadFrozenLLM(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		dtype string
	}{
		{"qwen2 untied bf16", tinyConfig(t, "qwen2", true), BF16},
		{"qwen3 tied bf16", tinyConfig(t, "qwen3", false), BF16},
		{"llama bias f16", llamaConfig(t, true), F16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTestFolder(t, tc.cfg, tc.dtype, RandomTensors(tc.cfg, 7))
			want, _, err := LoadLLM(dir)
			if err != nil {
				t.Fatal(err)
			}
			m, cfg, err := LoadFrozenLLM(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			if m.StoredBF16() != (tc.dtype == BF16) || want.StoredBF16() {
				t.Fatalf("stored in BF16: frozen load %v, plain load %v", m.StoredBF16(), want.StoredBF16())
			}
			seqs := []model.Sequence{{Prompt: []int32{1, 2, 3}, Response: []int32{4, 5, 6, 7, 8, 9}}, {Prompt: []int32{9}, Response: []int32{3}}}
			lpA, enA, errA := want.Score(seqs, 1)
			lpB, enB, errB := m.Score(seqs, 1)
			if errA != nil || errB != nil {
				t.Fatal(errA, errB)
			}
			for i := range lpA {
				for j := range lpA[i] {
					if !sameBits(lpA[i][j], lpB[i][j]) || !sameBits(enA[i][j], enB[i][j]) {
						t.Fatalf("sequence %d token %d: frozen %v %v, float32 %v %v", i, j, lpB[i][j], enB[i][j], lpA[i][j], enA[i][j])
					}
				}
			}
			out := filepath.Join(t.TempDir(), "back")
			if err := WriteLLM(out, cfg, m, "", filepath.Join("testdata", "tinytok")); err != nil {
				t.Fatal(err)
			}
			if fileHash(t, dir, SingleFile) != fileHash(t, out, SingleFile) {
				t.Error("the frozen model writes other weights than it read")
			}
			if m.StoredBF16() {
				if err := ApplyAdapter(m, dir); !errors.Is(err, model.ErrStoredBF16) {
					t.Errorf("merging into a model stored in BF16: error %v, want model.ErrStoredBF16", err)
				}
			}
		})
	}
}
