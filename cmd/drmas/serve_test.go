package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/model"
)

// TestServeHF: `drmas serve --hf DIR` serves a `model init` folder under its base name and
// loads a LoRA adapter given as a store path (file://…) from a run's checkpoints in --store
// (the default --adapter-root), read in place: nothing is copied into the cache. An adapter
// outside the store's checkpoints is refused.
func TestServeHF(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "tiny")
	if _, _, err := execute(t, initArgs("qwen3", tinyTokenizer, dir, "1")...); err != nil {
		t.Fatal(err)
	}
	adapter := filepath.Join(tmp, "store", "runs", "r1", "checkpoints", "step=000001", "tiny")
	if err := os.MkdirAll(adapter, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(adapter, hf.AdapterConfigFile), []byte(`{"peft_type": "LORA", "r": 1, "lora_alpha": 2, "target_modules": ["v_proj"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// v_proj of initArgs' sizes: [kv-heads 2 · head_dim 16, hidden 64].
	const v = "base_model.model.model.layers.1.self_attn.v_proj"
	var buf bytes.Buffer
	if err := model.WriteSafetensors(&buf, []model.Tensor{
		model.F32Tensor(v+".lora_A.weight", []int{1, 64}, make([]float32, 64)),
		model.F32Tensor(v+".lora_B.weight", []int{32, 1}, make([]float32, 32)),
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(adapter, hf.AdapterWeightsFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", filepath.Join(tmp, "cache"))
	t.Setenv("HOME", tmp)

	outside := filepath.Join(tmp, "store", "runs", "r1", "rollouts")
	if err := os.CopyFS(outside, os.DirFS(adapter)); err != nil {
		t.Fatal(err)
	}
	base, stderr := startServe(t, "--hf", dir, "--max-loras", "1", "--store", filepath.Join(tmp, "store"))
	ob, _ := json.Marshal(map[string]string{"lora_name": "x", "lora_path": outside})
	if resp, err := http.Post(base+"/v1/load_lora_adapter", "application/json", bytes.NewReader(ob)); err != nil || resp.StatusCode != 403 {
		t.Fatalf("an adapter outside the store's checkpoints: %v %v", resp, err)
	}
	var list struct {
		Data []struct{ ID, Parent, Root string }
	}
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Data) != 1 || list.Data[0].ID != "tiny" {
		t.Fatalf("/v1/models: %+v", list)
	}
	u := (&url.URL{Scheme: "file", Path: adapter}).String()
	body, _ := json.Marshal(map[string]string{"lora_name": "tiny@step=1", "lora_path": u})
	resp, err = http.Post(base+"/v1/load_lora_adapter", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(raw), "added successfully") {
		t.Fatalf("load %s: %d %s\n%s", u, resp.StatusCode, raw, stderr.String())
	}
	body, _ = json.Marshal(map[string]any{"model": "tiny@step=1", "prompt": "hello", "max_tokens": 2})
	resp, err = http.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(raw), `"model":"tiny@step=1"`) {
		t.Fatalf("completion with the adapter: %d %s", resp.StatusCode, raw)
	}
	if cached, _ := filepath.Glob(filepath.Join(tmp, "cache", "drmas", "*", "*", hf.AdapterWeightsFile)); len(cached) > 0 {
		t.Fatalf("the adapter was copied into the cache: %v", cached)
	}
}

// TestServeFlagErrors: --hf with --model, --max-loras below 1 and a negative
// --prefix-cache-bytes are one-line errors.
func TestServeFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--hf", "/m", "--model", "m1"}, "--hf /m and --model m1"},
		{[]string{"serve", "--hf", "/m", "--max-loras", "0"}, "--max-loras 0: must be ≥ 1"},
		{[]string{"serve", "--hf", "/m", "--prefix-cache-bytes", "-1"}, "--prefix-cache-bytes -1: must be ≥ 0"},
		{[]string{"serve", "--hf", filepath.Join(t.TempDir(), "none")}, "config.json"},
	} {
		_, _, err := execute(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line with %q", c.args, err, c.want)
		}
	}
}

// TestServePrefixCacheFlag: by default a repeated 40-token prompt takes its two whole blocks
// from the prefix cache (usage.prompt_tokens_details.cached_tokens 32); with
// --prefix-cache-bytes 0 it takes none.
func TestServePrefixCacheFlag(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if _, _, err := execute(t, initArgs("qwen3", tinyTokenizer, dir, "1")...); err != nil {
		t.Fatal(err)
	}
	prompt := make([]int, 40)
	for i := range prompt {
		prompt[i] = 5 + i
	}
	cached := func(base string) int {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 1, "seed": 1})
		resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Usage struct {
				Details struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %v", resp.StatusCode, err)
		}
		return r.Usage.Details.Cached
	}
	for _, c := range []struct {
		args []string
		want int
	}{{nil, 32}, {[]string{"--prefix-cache-bytes", "0"}, 0}} {
		base, _ := startServe(t, append([]string{"--hf", dir}, c.args...)...)
		cached(base)
		if got := cached(base); got != c.want {
			t.Errorf("%v: a repeated prompt took %d tokens from the cache, want %d", c.args, got, c.want)
		}
	}
}
