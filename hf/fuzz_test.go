package hf

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func allocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// fuzzSafetensorsSeeds are the checked-in seeds (hf_*) of safetensors.FuzzParse from hf's
// writer and hf's lying headers.
func fuzzSafetensorsSeeds(t testing.TB) map[string][]byte {
	cfg := tinyConfig(t.(*testing.T), "qwen3", false)
	var valid bytes.Buffer
	specs := cfg.Tensors()[:5]
	if err := writeSafetensors(&valid, specs, BF16, RandomTensors(cfg, 1)); err != nil {
		t.Fatal(err)
	}
	d16 := make([]byte, 16)
	return map[string][]byte{
		"valid_bf16":  valid.Bytes(),
		"valid_mixed": stFile(`{"__metadata__":{"format":"pt"},"b":{"dtype":"F16","shape":[2,2],"data_offsets":[8,16]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}  `, d16),
		"overlap":     stFile(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, d16),
		"huge_shape":  stFile(`{"a":{"dtype":"F32","shape":[1000000,1000000],"data_offsets":[0,16]}}`, d16),
		"header_lies": append([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, "{}"...),
		"duplicate":   stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, d16),
	}
}

// FuzzParseConfig: any bytes are refused with one line naming the file, or give a config whose
// tensors can be listed and whose written form parses back to the same config.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"model_type":"qwen2","hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":8,"vocab_size":4}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		before := allocated()
		c, err := ParseConfig(data, "fuzz/config.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz/config.json: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error not one line naming the file: %q", err)
			}
			return
		}
		specs := c.Tensors()
		if got := allocated() - before; got > 32<<20+1000*uint64(len(data)) {
			t.Fatalf("allocated %d bytes for %d", got, len(data))
		}
		if len(specs) < 2+c.Layers*9 {
			t.Fatalf("%d tensors for %d layers", len(specs), c.Layers)
		}
		js, err := c.JSON()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseConfig(js, "again")
		if err != nil || !equalConfig(c, back) {
			t.Fatalf("written back: %v\n%s", err, js)
		}
	})
}

var fuzzConfigSeeds = map[string]string{
	"rope_yarn":     `{"model_type":"qwen2","hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":8,"vocab_size":4,"rope_scaling":{"type":"yarn"}}`,
	"unknown_type":  `{"model_type":"gpt_neox","hidden_size":8}`,
	"many_layers":   `{"model_type":"qwen3","hidden_size":8,"num_hidden_layers":16777216,"num_attention_heads":2,"intermediate_size":8,"vocab_size":4}`,
	"rope_params":   `{"model_type":"qwen3","hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"head_dim":16,"intermediate_size":8,"vocab_size":4,"rope_parameters":{"rope_type":"default","rope_theta":5e5},"eos_token_id":[1,2]}`,
	"llama3_scale":  `{"model_type":"llama","hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":8,"vocab_size":4,"rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":64}}`,
	"llama3_params": `{"model_type":"llama","hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":8,"vocab_size":4,"rope_parameters":{"rope_type":"llama3","rope_theta":5e5,"factor":32,"low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":8192}}`,
	"deep":          strings.Repeat("[", 5000),
	"not_an_object": `null`,
}

// TestWriteFuzzSeeds regenerates testdata/fuzz (DRMAS_WRITE_FUZZ_SEEDS=1).
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("DRMAS_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set DRMAS_WRITE_FUZZ_SEEDS=1 to regenerate testdata/fuzz seeds")
	}
	write := func(target, name string, data []byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if target == "FuzzParse" { // the safetensors package's target
			dir, name = filepath.Join("..", "safetensors", "testdata", "fuzz", target), "hf_"+name
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range fuzzSafetensorsSeeds(t) {
		write("FuzzParse", name, data)
	}
	for name, js := range fuzzConfigSeeds {
		write("FuzzParseConfig", name, []byte(js))
	}
	for _, name := range []string{"qwen2.5-0.5b-instruct.json", "qwen3-0.6b.json", "qwen3-rope-parameters.json", "llama-3.2-1b.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "configs", name))
		if err != nil {
			t.Fatal(err)
		}
		write("FuzzParseConfig", strings.TrimSuffix(name, ".json"), data)
	}
}
