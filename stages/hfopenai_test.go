package stages_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/serve"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// TestHFOpenAIBackend: an HF model on backend openai encodes with its own chat tokenizer and
// asks drmas serve --hf to serve the step's folder under the store as the config names it
// (store_path when set): reloaded for a full fine-tune, loaded as <model>@step=N for LoRA. A
// step folder the server cannot read fails the stage, naming the folder; a full fine-tune
// without reload is refused, saying what to set.
func TestHFOpenAIBackend(t *testing.T) {
	base := stagetest.TinyHF(t, filepath.Join(t.TempDir(), "q"), stagetest.TinyTokenizer(), 1)
	m, hc, err := hf.LoadLLM(base)
	if err != nil {
		t.Fatal(err)
	}
	_, url := stagetest.Serve(t, serve.Options{HF: base, Poll: -1, Name: "q"})
	set := &checkpoints.Set{Step: 4, HF: map[string]*checkpoints.HFModel{"q": {Base: base, Dir: base, Config: hc, Model: m}}}
	for _, c := range []struct {
		name string
		m    configs.Model
		want string
	}{
		{"reload", configs.Model{OpenAI: configs.OpenAI{Reload: configs.ReloadSGLang}},
			"reload the weights of checkpoint step 4 from s3://bucket/pre/runs/r/checkpoints/step=000004/q"},
		{"store_path", configs.Model{OpenAI: configs.OpenAI{Reload: configs.ReloadSGLang, StorePath: "/mnt/store/"}},
			"from /mnt/store/runs/r/checkpoints/step=000004/q"},
		{"lora", configs.Model{LoRA: &configs.LoRA{R: 4}},
			"load LoRA adapter q@step=4 of checkpoint step 4 from s3://bucket/pre/runs/r/checkpoints/step=000004/q"},
		{"full", configs.Model{},
			"set models.q.openai.reload: sglang"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := stagetest.Config(t, "math")
			cfg.Run, cfg.Store = "r", "s3://bucket/pre"
			mc := c.m
			mc.HF, mc.Backend, mc.OpenAI.Endpoint, mc.OpenAI.Retries = base, configs.BackendOpenAI, url, -1
			cfg.Models = map[string]configs.Model{"q": mc}
			cfg.Agents = map[string]configs.Agent{"solver": {Model: "q"}, "verifier": {Model: "q"}}
			bes, err := stages.Backends(cfg, set)
			if c.name == "full" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("Backends: %v, want an error with %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			be := bes["solver"]
			if _, ok := actors.TokenizerOf(be).(actors.Chat); !ok || be != bes["verifier"] {
				t.Fatalf("tokenizer %T, backends %v %v", actors.TokenizerOf(be), be, bes["verifier"])
			}
			ids, err := actors.TokenizerOf(be).PromptIDs("solver", "What is 1+1?")
			if err != nil {
				t.Fatal(err)
			}
			_, err = be.Generate(context.Background(), []actors.Request{{Agent: "solver", Prompt: ids, Seed: 1}}, actors.Sampling{Temperature: 1, TopP: 1, MaxTokens: 2})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Generate: %v, want an error with %q", err, c.want)
			}
		})
	}
}
