package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/storage/filestore"
)

// hfRunConfig is a math run of two tiny Hugging Face models, one per agent, each its own
// learning rate; %s is the base folder.
const hfRunConfig = `run: hf
seed: 3
iterations: 2
workflow: {name: math, max_loop: 2}
models:
  solver_m: {hf: %[1]s}
  verifier_m: {hf: %[1]s}
agents:
  solver: {model: solver_m, lr: 1.0e-3}
  verifier: {model: verifier_m, lr: 3.0e-4}
tasks: {per_iteration: 2, eval_size: 2}
rollout: {group_size: 4, parts: 1, max_tokens: 16}
warmup: {steps: 60, batch: 4, demos: 8, lr: 2.0e-2}
evaluate: {every: 1, k: 1, top_p: 1.0}
learn: {micro_batch: 2, keep_checkpoints: 3}
`

// TestRunHFModels is the end-to-end smoke of Hugging Face models trained in full, in process:
// `model init` makes a tiny random Qwen3 with the real Qwen3 tokenizer; `drmas run --iters 2`
// warms it up, rolls out through its chat template, normalizes, learns (each agent's model at
// its own learning rate) and evaluates; every published step folder is an HF folder that
// hf.LoadLLM reads as it is and `model score` scores, from the store, as the engine scores the
// loaded model; the rows carry the model's own token ids; `drmas analyze` reads the shards.
func TestRunHFModels(t *testing.T) {
	tok := oracles.Qwen3TokenizerDir(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	tmp := t.TempDir()
	base := filepath.Join(tmp, "base")
	if _, _, err := execute(t, "model", "init", "--arch", "qwen3", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
		"--head-dim", "16", "--intermediate", "64", "--max-positions", "2048", "--tokenizer", tok, "--seed", "1", "--out", base); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(tmp, "hf.yaml")
	if err := os.WriteFile(cfgFile, fmt.Appendf(nil, hfRunConfig, base), 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(tmp, "store")
	out, errOut, err := execute(t, "--config", cfgFile, "--store", store, "run", "--iters", "2")
	if err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, out, errOut)
	}
	ctx := context.Background()
	b, err := filestore.New(store)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := checkpoints.Steps(ctx, b, "hf")
	if err != nil || len(steps) != 3 || steps[2] != 2 {
		t.Fatalf("steps %v %v, want 0..2", steps, err)
	}
	set, err := checkpoints.LoadStep(ctx, b, "hf", 2, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.HF) != 2 || set.Optims["solver_m"] == nil || set.Optims["verifier_m"] == nil {
		t.Fatalf("step 2 holds %v, optimizers %v", set.ModelNames(), len(set.Optims))
	}
	// RL moved each agent's model (the warm-up teaches the random model enough of the format
	// that rewards differ within a group), at its own pace.
	step0 := map[string]*model.LLM{}
	for _, id := range []string{"solver_m", "verifier_m"} {
		m, _, err := hf.LoadLLM(filepath.Join(store, filepath.FromSlash(layout.CheckpointDir("hf", 0)), id))
		if err != nil {
			t.Fatal(err)
		}
		step0[id] = m
	}
	moved := map[string]float64{}
	for _, id := range []string{"solver_m", "verifier_m"} {
		folder := filepath.Join(store, filepath.FromSlash(layout.CheckpointDir("hf", 2)), id)
		m, _, err := hf.LoadLLM(folder) // the folder in the store as a server reads it
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		for i, p := range m.Params() {
			for j, v := range p.Data {
				d := float64(v - step0[id].Params()[i].Data[j])
				moved[id] += d * d
			}
		}
		// model score on the store folder equals the engine's score of the loaded model.
		scoresAsInProcess(t, m, "file://"+filepath.ToSlash(folder), filepath.Join(tmp, "cache-"+id), id+": the engine")
	}
	if moved["solver_m"] == 0 || moved["verifier_m"] == 0 || moved["solver_m"] == moved["verifier_m"] {
		t.Errorf("squared distance of step 2 from step 0: %v", moved)
	}
	got, _, err := execute(t, "--config", cfgFile, "--store", store, "analyze", "--format", "csv", "--sql",
		"select model, sum(grad_norm) > 0 from metrics where agent = '*' group by model order by model")
	if err != nil || got != "model,(sum(grad_norm) > 0)\nsolver_m,true\nverifier_m,true\n" {
		t.Errorf("analyze metrics: %q %v", got, err)
	}
	// The rows hold Qwen token ids (past the built-in policy's 264) and their log-probs.
	got, _, err = execute(t, "--config", cfgFile, "--store", store, "analyze", "--format", "csv", "--sql",
		"select max(list_max(prompt_ids)) > 264, count(*) > 0, bool_and(len(response_logprobs) = len(response_ids)) from rollouts")
	if err != nil {
		t.Fatalf("analyze: %v", err)
	}
	if !strings.Contains(got, "true,true,true") {
		t.Errorf("analyze said %q", got)
	}
}

func ids(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, ",")
}

// scoresAsInProcess checks that `drmas model score --model url` prints, for a short chat
// prompt and response, exactly the log-probs policy computes in process (what names it in
// errors).
func scoresAsInProcess(t *testing.T, policy model.Policy, url, cache, what string) {
	t.Helper()
	prompt, resp := []int32{151644, 872, 198, 3838}, []int32{151645, 198}
	lp, _, err := policy.Score([]model.Sequence{{Prompt: prompt, Response: resp}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := execute(t, "model", "score", "--model", url, "--cache", cache,
		"--prompt-ids", ids(prompt), "--response-ids", ids(resp))
	if err != nil {
		t.Fatalf("model score %s: %v", url, err)
	}
	var want strings.Builder
	for _, v := range lp[0] {
		want.WriteString(strconv.FormatFloat(float64(v), 'f', -1, 32) + "\n")
	}
	if got != want.String() {
		t.Errorf("model score printed %q, %s %q", got, what, want.String())
	}
}
