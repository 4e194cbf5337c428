package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/client"
	"github.com/drmas-dev/drmas/storage/miniotest"
	"github.com/drmas-dev/drmas/storage/s3store"
)

var tinyTokenizer = filepath.Join("..", "..", "hf", "testdata", "tinytok")

func initArgs(arch, tokenizer, out, seed string, extra ...string) []string {
	return append([]string{"model", "init", "--arch", arch, "--hidden", "64", "--layers", "2", "--heads", "4", "--kv-heads", "2",
		"--intermediate", "128", "--tokenizer", tokenizer, "--seed", seed, "--out", out}, extra...)
}

// TestModelInitInspect: `model init` writes a folder that `model inspect` reads, locally and
// from the store, with the sizes asked for and the parameter count worked by hand; the same
// seed gives the same bytes, another seed others.
func TestModelInitInspect(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "m")
	out, _, err := execute(t, initArgs("qwen3", tinyTokenizer, dir, "5", "--head-dim", "32")...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "119,232 parameters, vocab 320") {
		t.Errorf("init said %q", out)
	}
	// By hand: embeddings 320×64 = 20,480 (tied); a layer has q 128×64, k and v 64×64 each,
	// o 64×128, q/k norms 32 each, gate/up/down 3×64×128 and two norms of 64: 49,344; two
	// layers and the final norm: 20,480 + 98,688 + 64 = 119,232.
	for _, model := range []string{dir, "file://" + filepath.ToSlash(dir)} {
		out, _, err = execute(t, "model", "inspect", "--model", model, "--cache", filepath.Join(tmp, "cache"))
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		for _, want := range []string{
			"architecture  qwen3 (Qwen3ForCausalLM)",
			"hidden 64, layers 2, heads 4, kv heads 2, head dim 32, intermediate 128, vocab 320",
			"q/k/v bias no, o bias no, q/k norm yes", "tied embeddings yes",
			"parameters    119,232 (119K)", "weights       BF16, ", "in model.safetensors",
			"tokenizer     tokenizer.json, tokenizer_config.json: BPE, 264 tokens + 3 added = 267 ids",
			"LoRA r=16",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: inspect lacks %q:\n%s", model, want, out)
			}
		}
	}
	same := filepath.Join(tmp, "same")
	other := filepath.Join(tmp, "other")
	if _, _, err := execute(t, initArgs("qwen3", tinyTokenizer, same, "5", "--head-dim", "32")...); err != nil {
		t.Fatal(err)
	}
	if _, _, err := execute(t, initArgs("qwen3", tinyTokenizer, other, "6", "--head-dim", "32")...); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	b, _ := os.ReadFile(filepath.Join(same, "model.safetensors"))
	c, _ := os.ReadFile(filepath.Join(other, "model.safetensors"))
	if !bytes.Equal(a, b) || bytes.Equal(a, c) || len(a) != len(c) {
		t.Errorf("determinism: same seed equal %v, other seed equal %v", bytes.Equal(a, b), bytes.Equal(a, c))
	}
}

// TestModelInspectJSON: --json reports the numbers of an untied qwen2 in F32.
func TestModelInspectJSON(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if _, _, err := execute(t, initArgs("qwen2", tinyTokenizer, dir, "1", "--dtype", "f32", "--untied")...); err != nil {
		t.Fatal(err)
	}
	out, _, err := execute(t, "model", "inspect", "--model", dir, "--json", "--lora-rank", "4", "--tokens", "8")
	if err != nil {
		t.Fatal(err)
	}
	var r inspectReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	// Untied: embeddings and lm_head 2×320×64; a layer: q, o 64×64, k, v 32×64, q/k/v biases
	// 64+32+32, MLP 3×64×128, norms 2×64: 40,960 + 2×(8,192+4,096+128+24,576+128) + 64 = 115,264.
	if r.Params != 115264 || r.Tied || !r.QKVBias || r.OBias || r.QKNorm || r.HeadDim != 16 || r.Dtypes[0] != "F32" || r.WeightBytes < 4*115264 {
		t.Errorf("%+v", r)
	}
	// LoRA r=4 on q, k, v, o, gate, up, down: 4×((64+64)+2(64+32)+(64+64)+2(64+128)+(128+64)) per layer.
	if r.LoRAAdapterParams != 2*4*(128+2*96+128+2*192+192) || r.FullStepBytes <= 16*r.Params || r.LoRAStepBytes >= r.FullStepBytes {
		t.Errorf("memory: %+v", r)
	}
	// With checkpointing both steps keep less: hf.CheckpointedStepOf's totals.
	if r.FullStepBytesCheckpointed >= r.FullStepBytes || r.LoRAStepBytesCheckpointed >= r.LoRAStepBytes || r.LoRAStepBytesCheckpointed >= r.FullStepBytesCheckpointed {
		t.Errorf("memory with checkpointing: %+v", r)
	}
}

// TestModelErrors: bad input is one line naming what is wrong.
func TestModelErrors(t *testing.T) {
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "bad")
	_ = os.MkdirAll(bad, 0o755)
	_ = os.WriteFile(filepath.Join(bad, "config.json"), []byte(`{"model_type": "mamba"}`), 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"model", "inspect", "--model", bad}, `model_type "mamba" is not supported (supported: ` + strings.Join(model.ArchNames(), ", ") + `)`},
		{[]string{"model", "inspect", "--model", filepath.Join(tmp, "none")}, "no such file"},
		{[]string{"model", "inspect"}, `required flag(s) "model" not set`},
		{initArgs("gpt2", tinyTokenizer, filepath.Join(tmp, "x"), "1"), `--arch "gpt2": want one of ` + strings.Join(model.ArchNames(), ", ")},
		{initArgs("qwen3", tmp, filepath.Join(tmp, "x"), "1"), "no tokenizer.json"},
		{initArgs("qwen2", tinyTokenizer, filepath.Join(tmp, "x"), "1", "--head-dim", "8"), "qwen2 has head_dim = hidden/heads"},
		{initArgs("qwen3", tinyTokenizer, filepath.Join(tmp, "x"), "1", "--dtype", "int4"), `dtype "int4" is not supported`},
		{initArgs("qwen3", tinyTokenizer, bad, "1"), "exists and is not empty"},
		{initArgs("qwen3", tinyTokenizer, "~/m", "1"), "--out ~/m: ~ is not expanded here"},
		{[]string{"model", "nope"}, `unknown command "nope" for "drmas model"`},
	}
	for _, c := range cases {
		_, _, err := execute(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: got %v, want one line with %q", c.args, err, c.want)
		}
	}
}

// TestModelInitRealQwen3Tokenizer: with the real Qwen3 tokenizer files, vocab_size is its
// 151,669 ids rounded up to 151,680, and the special ids are Qwen's.
func TestModelInitRealQwen3Tokenizer(t *testing.T) {
	tok := oracles.Qwen3TokenizerDir(t)
	dir := filepath.Join(t.TempDir(), "m")
	if _, _, err := execute(t, "model", "init", "--arch", "qwen2", "--hidden", "16", "--layers", "1", "--heads", "2", "--kv-heads", "1",
		"--intermediate", "32", "--tokenizer", tok, "--seed", "1", "--out", dir); err != nil {
		t.Fatal(err)
	}
	out, _, err := execute(t, "model", "inspect", "--model", dir, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r inspectReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Vocab != 151680 || r.TokenizerVocab != 151643 || r.TokenizerAdded != 26 {
		t.Errorf("vocab %d, tokenizer %d + %d", r.Vocab, r.TokenizerVocab, r.TokenizerAdded)
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if !strings.Contains(string(cfg), `"bos_token_id": 151643`) || !strings.Contains(string(cfg), `"eos_token_id": 151645`) {
		t.Errorf("special ids:\n%s", cfg)
	}
}

// TestModelInspectOnMinIO: --model s3://… downloads the folder from a real S3 server (MinIO)
// into the cache, with the endpoint and credentials from DRMAS_S3_*, and inspects it; a second
// run finds it cached.
func TestModelInspectOnMinIO(t *testing.T) {
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "m")
	if _, _, err := execute(t, initArgs("qwen2", tinyTokenizer, dir, "3")...); err != nil {
		t.Fatal(err)
	}
	b, err := client.Open(ctx, "s3://"+bucket+"/models/tiny", s3store.Config{
		Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Insecure: true, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		if err := storage.PutBytes(ctx, b, e.Name(), data); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("DRMAS_S3_ENDPOINT", srv.Endpoint)
	t.Setenv("DRMAS_S3_ACCESS_KEY", srv.AccessKey)
	t.Setenv("DRMAS_S3_SECRET_KEY", srv.SecretKey)
	t.Setenv("DRMAS_S3_INSECURE", "true")
	t.Setenv("DRMAS_S3_PATH_STYLE", "true")
	cache := filepath.Join(t.TempDir(), "cache")
	for _, want := range []string{"4 downloaded, 0 cached", "0 downloaded, 4 cached"} {
		out, errOut, err := execute(t, "model", "inspect", "--model", "s3://"+bucket+"/models/tiny", "--cache", cache)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(errOut, want) || !strings.Contains(out, "architecture  qwen2 (Qwen2ForCausalLM)") {
			t.Errorf("want %q:\n%s\n%s", want, errOut, out)
		}
	}
	a, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	c, _ := os.ReadFile(filepath.Join(cache, "model.safetensors"))
	if !bytes.Equal(a, c) {
		t.Error("the cached weights differ from the uploaded ones")
	}
}
