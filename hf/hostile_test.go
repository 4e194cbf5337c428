//go:build unix

package hf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/internal/regular"
)

// TestTargetedPEFTRules: which modules an adapter_config.json selects, worked from PEFT's
// check_target_module_exists: a string is re.fullmatch on the module name; a list entry is the
// name or a dotted suffix, then layers_to_transform picks the index after layers_pattern.
func TestTargetedPEFTRules(t *testing.T) {
	const q0m, v1m, q1m = "model.layers.0.self_attn.q_proj", "model.layers.1.self_attn.v_proj", "model.layers.1.self_attn.q_proj"
	for _, c := range []struct {
		cfg  string
		want map[string]bool
	}{
		{`"target_modules": ".*\\.q_proj"`, map[string]bool{q0m: true, q1m: true, v1m: false}},
		{`"target_modules": "q_proj"`, map[string]bool{q0m: false, q1m: false}},                                // fullmatch, not search
		{`"target_modules": ".*\\.q_proj", "layers_to_transform": [1]`, map[string]bool{q0m: true, q1m: true}}, // ignored for a string
		{`"target_modules": ["q_proj", "v_proj"]`, map[string]bool{q0m: true, v1m: true, "model.layers.0.self_attn.xq_proj": false}},
		{`"target_modules": ["self_attn.q_proj"]`, map[string]bool{q0m: true, v1m: false}},
		{`"target_modules": ["q_proj", "v_proj"], "layers_to_transform": [1]`, map[string]bool{q0m: false, q1m: true, v1m: true}},
		{`"target_modules": ["q_proj"], "layers_to_transform": 0`, map[string]bool{q0m: true, q1m: false}},
		{`"target_modules": ["q_proj"], "layers_to_transform": []`, map[string]bool{q0m: true, q1m: true}},
		{`"target_modules": ["q_proj"], "layers_to_transform": [0], "layers_pattern": "layers"`, map[string]bool{q0m: true, q1m: false}},
		{`"target_modules": ["q_proj"], "layers_to_transform": [0], "layers_pattern": ["h", "blocks"]`, map[string]bool{q0m: false}},
		{`"target_modules": "all-linear"`, map[string]bool{q0m: true, "lm_head": false}},
		{``, map[string]bool{q0m: true, v1m: true, "model.layers.0.self_attn.k_proj": false}},
	} {
		js := `{"r": 2, "lora_alpha": 4` + map[bool]string{true: ", ", false: ""}[c.cfg != ""] + c.cfg + `}`
		ac, err := ParseAdapterConfig([]byte(js), "adapter_config.json")
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		for mod, want := range c.want {
			if got := ac.Targeted(mod); got != want {
				t.Errorf("%s: Targeted(%s) = %v, want %v", js, mod, got, want)
			}
		}
	}
	_, err := ParseAdapterConfig([]byte(`{"r": 2, "lora_alpha": 4, "target_modules": "(?=q)q_proj"}`), "adapter_config.json")
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "target_modules") {
		t.Errorf("a lookahead: %v", err)
	}
}

// TestApplyAdapterHostile: tensors of modules the config does not select, a rank above the
// layer's width and a NaN are refused by name, leaving the model unchanged.
func TestApplyAdapterHostile(t *testing.T) {
	v0 := "base_model.model.model.layers.0.self_attn.v_proj"
	a, b := make([]float32, 2*16), make([]float32, 32*2)
	bv := make([]float32, 16*2) // v_proj is [16, 16] in tinyConfig's qwen3 (2 kv heads × 8)
	withV := func(cfg string) string {
		return writeAdapter(t, cfg, F32, map[string]TensorSpec{
			"a": {q0 + ".lora_A.weight", []int{2, 16}}, "b": {q0 + ".lora_B.weight", []int{32, 2}},
			"c": {v0 + ".lora_A.weight", []int{2, 16}}, "d": {v0 + ".lora_B.weight", []int{16, 2}},
		}, map[string][]float32{q0 + ".lora_A.weight": a, q0 + ".lora_B.weight": b, v0 + ".lora_A.weight": a, v0 + ".lora_B.weight": bv})
	}
	nanB := append([]float32(nil), b...)
	nanB[5] = float32(math.NaN())
	bigA, bigB := make([]float32, 17*16), make([]float32, 32*17)
	for _, c := range []struct {
		dir func() string
		msg string
	}{
		{func() string { return withV(`{"r": 2, "lora_alpha": 4, "target_modules": ".*\\.q_proj"}`) }, "module model.layers.0.self_attn.v_proj is not selected by target_modules \".*\\\\.q_proj\""},
		{func() string {
			return withV(`{"r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "v_proj"], "layers_to_transform": [1]}`)
		}, "and layers_to_transform [1]"},
		{func() string {
			return writeAdapter(t, `{"r": 17, "lora_alpha": 4, "target_modules": ["q_proj"]}`, F32, map[string]TensorSpec{
				"a": {q0 + ".lora_A.weight", []int{17, 16}}, "b": {q0 + ".lora_B.weight", []int{32, 17}},
			}, map[string][]float32{q0 + ".lora_A.weight": bigA, q0 + ".lora_B.weight": bigB})
		}, "r 17 is more than model.layers.0.self_attn.q_proj's width 16"},
		{func() string {
			return writeAdapter(t, `{"r": 2, "lora_alpha": 4, "target_modules": ["q_proj"]}`, F32, map[string]TensorSpec{
				"a": {q0 + ".lora_A.weight", []int{2, 16}}, "b": {q0 + ".lora_B.weight", []int{32, 2}},
			}, map[string][]float32{q0 + ".lora_A.weight": a, q0 + ".lora_B.weight": nanB})
		}, "tensor " + q0 + ".lora_B.weight has NaN at index 5"},
	} {
		m, before := tinyLLM(t)
		err := ApplyAdapter(m, c.dir())
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("got %v, want ErrFormat with %q", err, c.msg)
		}
		for _, p := range m.Params() {
			for i, v := range p.Data {
				if v != before[p.Name][i] && !(v != v && before[p.Name][i] != before[p.Name][i]) {
					t.Fatalf("%s changed after a refused adapter", p.Name)
				}
			}
		}
	}
	m, _ := tinyLLM(t)
	if err := ApplyAdapter(m, withV(`{"r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "v_proj"], "layers_to_transform": [0]}`)); err != nil {
		t.Fatalf("layer 0 selected: %v", err)
	}
}

// TestOpenRefusesNotRegularFiles: a FIFO or a directory in place of a model's files is an
// error naming the file and what it is, returned at once (opening a FIFO used to block).
func TestOpenRefusesNotRegularFiles(t *testing.T) {
	cfg := tinyConfig(t, "qwen3", false)
	for _, c := range []struct {
		file string
		make func(string) error
		kind string
	}{
		{SingleFile, func(p string) error { return syscall.Mkfifo(p, 0o600) }, "a named pipe"},
		{ConfigFile, func(p string) error { return syscall.Mkfifo(p, 0o600) }, "a named pipe"},
		{SingleFile, func(p string) error { return os.Mkdir(p, 0o700) }, "a directory"},
		{"tokenizer.json", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "a named pipe"},
	} {
		dir := writeTestFolder(t, cfg, F32, RandomTensors(cfg, 1))
		p := filepath.Join(dir, c.file)
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := c.make(p); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			w, err := OpenWeights(dir)
			if err == nil {
				w.Close()
				_, err = ReadTokenizerInfo(dir)
			}
			done <- err
		}()
		select {
		case err := <-done:
			want := c.kind
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s as %s: %v, want ErrFormat naming it, with %q", c.file, c.kind, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s as %s: blocked", c.file, c.kind)
		}
	}
	if _, err := regular.ReadFile(t.Context(), "/dev/zero", 10); !errors.Is(err, regular.ErrNotRegular) {
		t.Fatal(err)
	}
}

// TestLoadLLMRefusesNonFinite: a NaN or an infinity in the weights is refused by tensor.
func TestLoadLLMRefusesNonFinite(t *testing.T) {
	cfg := tinyConfig(t, "qwen2", false)
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		rnd := RandomTensors(cfg, 1)
		dir := writeTestFolder(t, cfg, F32, func(name string) []float32 {
			v := rnd(name)
			if name == "model.layers.1.mlp.down_proj.weight" {
				v[7] = bad
			}
			return v
		})
		_, _, err := LoadLLM(dir)
		want := fmt.Sprintf("tensor model.layers.1.mlp.down_proj.weight has %v at index 7", bad)
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want %q", bad, err, want)
		}
	}
}

// TestIndexManyFiles: an index naming 200,000 files is read in one pass (a list search per
// entry took minutes); the error names the first missing file.
func TestIndexManyFiles(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString(`{"weight_map": {`)
	const n = 200_000
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"t%d.weight": "model-%06d.safetensors"`, i, i)
	}
	b.WriteString(`}}`)
	if err := os.WriteFile(filepath.Join(dir, IndexFile), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	files, index, err := weightFiles(t.Context(), dir)
	if err != nil || len(files) != n || len(index) != n || files[0] != "model-000000.safetensors" || files[n-1] != "model-199999.safetensors" {
		t.Fatalf("%d files, %d entries, %v", len(files), len(index), err)
	}
}

// TestHostileTensorNames: a tensor name with escapes and newlines, or of 1 MiB, comes back
// escaped and cut in a one-line error.
func TestHostileTensorNames(t *testing.T) {
	for _, name := range []string{"evil\x1b[2J\nname", strings.Repeat("n", 1<<20)} {
		hdr := fmt.Sprintf(`{%q: {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}}`, name)
		p := filepath.Join(t.TempDir(), "x.safetensors")
		if err := os.WriteFile(p, stFile(hdr, make([]byte, 8)), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = parseSafetensors(f, int64(len(hdr))+16, p)
		f.Close()
		msg := fmt.Sprint(err)
		if err == nil || strings.ContainsAny(msg, "\n\x1b") || len(msg) > 512 {
			t.Errorf("%d-byte name: %d-byte message %q", len(name), len(msg), msg[:min(len(msg), 200)])
		}
	}
}

// TestLoadLLMContextCancelled: a cancelled load stops with the context's error.
func TestLoadLLMContextCancelled(t *testing.T) {
	cfg := tinyConfig(t, "qwen2", false)
	dir := writeTestFolder(t, cfg, F32, RandomTensors(cfg, 1))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := LoadLLMContext(ctx, dir); !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
	if _, _, err := LoadLLMContext(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
}
