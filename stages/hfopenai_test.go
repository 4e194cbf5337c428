package stages_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/actors/openai"
	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/hf/hftest"
	"github.com/drmas-dev/drmas/hfmodel"
	"github.com/drmas-dev/drmas/model"
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
	base := hftest.TinyHF(t, filepath.Join(t.TempDir(), "q"), hftest.TinyTokenizer(), 1)
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

// writeStepAdapter writes a PEFT adapter (r 2 on layer 0's q_proj of hftest.TinyHF, A and B
// drawn from seed) as model q's folder of a step.
func writeStepAdapter(t *testing.T, dir string, seed uint64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `{"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj"], "base_model_name_or_path": "q"}`
	if err := os.WriteFile(filepath.Join(dir, hf.AdapterConfigFile), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	normal := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64() * 0.5)
		}
		return out
	}
	const q = "base_model.model.model.layers.0.self_attn.q_proj" // [heads 4 · head_dim 16, hidden 32]
	var buf bytes.Buffer
	if err := model.WriteSafetensors(&buf, []model.Tensor{
		model.F32Tensor(q+".lora_A.weight", []int{2, 32}, normal(64)),
		model.F32Tensor(q+".lora_B.weight", []int{64, 2}, normal(128)),
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, hf.AdapterWeightsFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHFOpenAIBackendSwapsAdapters: a LoRA model's backend of step 4 loads the step's adapter
// folder from the store into drmas serve --hf as q@step=4 and samples with it (the log-probs
// are those of the base merged with that adapter in process, not the base's); the backend of
// step 5 loads q@step=5 and unloads q@step=4.
func TestHFOpenAIBackendSwapsAdapters(t *testing.T) {
	tmp := t.TempDir()
	base := hftest.TinyHF(t, filepath.Join(tmp, "q"), hftest.TinyTokenizer(), 1)
	m, hc, err := hf.LoadLLM(base)
	if err != nil {
		t.Fatal(err)
	}
	_, url := stagetest.Serve(t, serve.Options{HF: base, Poll: -1, Name: "q"})
	cfg := stagetest.Config(t, "math")
	cfg.Run, cfg.Store = "r", filepath.Join(tmp, "store")
	cfg.Models = map[string]configs.Model{"q": {HF: base, LoRA: &configs.LoRA{R: 2}, Backend: configs.BackendOpenAI, OpenAI: configs.OpenAI{Endpoint: url, Retries: -1}}}
	cfg.Agents = map[string]configs.Agent{"solver": {Model: "q"}, "verifier": {Model: "q"}}
	for _, step := range []int64{4, 5} {
		folder := hfmodel.StepFolder(cfg.Store, "", "r", step, "q")
		writeStepAdapter(t, folder, uint64(step))
		set := &checkpoints.Set{Step: step, HF: map[string]*checkpoints.HFModel{"q": {Base: base, Dir: base, Config: hc, Model: m}}}
		bes, err := stages.Backends(cfg, set)
		if err != nil {
			t.Fatal(err)
		}
		be := bes["solver"]
		ids, err := actors.TokenizerOf(be).PromptIDs("solver", "What is 1+1?")
		if err != nil {
			t.Fatal(err)
		}
		got, err := be.Generate(context.Background(), []actors.Request{{Agent: "solver", Prompt: ids, Seed: 1}}, actors.Sampling{Temperature: 1, TopP: 1, MaxTokens: 4})
		if err != nil {
			t.Fatal(err)
		}
		merged, _, err := hf.LoadLLM(base)
		if err == nil {
			err = hf.ApplyAdapter(merged, folder)
		}
		if err != nil {
			t.Fatal(err)
		}
		seq := []model.Sequence{{Prompt: ids, Response: got[0].Tokens}}
		want, _, err := merged.Score(seq, 1)
		if err != nil {
			t.Fatal(err)
		}
		plain, _, err := m.Score(seq, 1)
		if err != nil {
			t.Fatal(err)
		}
		var d, dBase float64
		for j, v := range want[0] {
			d = max(d, math.Abs(float64(v-got[0].LogProbs[j])))
			dBase = max(dBase, math.Abs(float64(plain[0][j]-got[0].LogProbs[j])))
		}
		if d > 1e-4 || dBase < 1e-3 {
			t.Errorf("step %d: log-probs %v differ by %g from the merged adapter's, by %g from the base's", step, got[0].LogProbs, d, dBase)
		}
	}
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list openai.ModelList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range list.Data {
		names = append(names, c.ID)
	}
	if strings.Join(names, " ") != "q q@step=5" {
		t.Errorf("the server serves %v, want q and q@step=5", names)
	}
}
