package configs

import (
	"strings"
	"testing"
)

// TestOpenAIReload: models.<id>.openai.reload and store_path load; reload is sglang only, on
// an HF model trained in full; store_path is a full path.
func TestOpenAIReload(t *testing.T) {
	p := write(t, "ok.yaml", "models:\n  m1: {hf: /q, backend: openai, openai: {endpoint: http://h:30000, reload: sglang, store_path: /mnt/store}}\nagents:\n  solver: {model: m1}\n  verifier: {model: m1}\n")
	c, err := Load(LoadOptions{File: p})
	if err != nil {
		t.Fatal(err)
	}
	if o := c.Models["m1"].OpenAI; o.Reload != ReloadSGLang || o.StorePath != "/mnt/store" {
		t.Errorf("loaded %+v", o)
	}
	cases := map[string]string{
		`m1: {hf: /q, backend: openai, openai: {endpoint: http://h, reload: vllm}}`:                 `models.m1.openai.reload: "vllm" is not sglang`,
		`m1: {hf: /q, lora: {r: 4}, backend: openai, openai: {endpoint: http://h, reload: sglang}}`: "models.m1.openai.reload is for a Hugging Face model trained in full",
		`m1: {backend: openai, openai: {endpoint: http://h, reload: sglang}}`:                       "models.m1.openai.reload is for a Hugging Face model trained in full",
		`m1: {hf: /q, backend: openai, openai: {endpoint: http://h, store_path: ~/s}}`:              "models.m1.openai.store_path",
		`m1: {hf: /q, backend: openai, openai: {endpoint: http://h}}`:                               "set models.m1.openai.reload: sglang",
	}
	for model, want := range cases {
		p := write(t, "bad.yaml", "models:\n  "+model+"\nagents:\n  solver: {model: m1}\n")
		_, err := Load(LoadOptions{File: p})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", model, err, want)
		}
	}
}
