package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/hf/hftest"
	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/tokenizer"
)

// mixedRunConfig is a math run of a mixed team: the solver a Qwen3 model trained as a LoRA
// adapter, the verifier a Llama 3-shaped model trained in full, each with its own tokenizer,
// chat format and end-of-turn ids (as configs/mixed-qwen-llama.yaml); %[1]s and %[2]s are the
// base folders, %[3]s and %[4]s each model's further keys (a server to sample it on).
const mixedRunConfig = `run: mixed
seed: 3
iterations: 2
workflow: {name: math, max_loop: 2}
models:
  solver_m: {hf: %[1]s, lora: {r: 4}%[3]s}
  verifier_m: {hf: %[2]s%[4]s}
agents:
  solver: {model: solver_m, lr: 1.0e-2}
  verifier: {model: verifier_m, lr: 1.0e-3}
tasks: {per_iteration: 2, eval_size: 2}
rollout: {group_size: 4, parts: 1, max_tokens: 12}
warmup: {steps: 0}
evaluate: {every: 1, k: 1, top_p: 1.0}
learn: {micro_batch: 4, keep_checkpoints: 3}
`

// mixedBases makes the team's two random models with `drmas model init`: a Qwen3 with the
// real Qwen3 tokenizer and a Llama with the tiny Llama 3 tokenizer.
func mixedBases(t *testing.T) (qwen, llama string) {
	t.Helper()
	tmp := t.TempDir()
	qwen, llama = filepath.Join(tmp, "qwen"), filepath.Join(tmp, "llama")
	tok := hftest.TinyLlama3Tokenizer(t, filepath.Join(tmp, "llamatok"))
	for _, m := range []struct{ arch, tok, out string }{{"qwen3", oracles.Qwen3TokenizerDir(t), qwen}, {"llama", tok, llama}} {
		if _, errOut, err := execute(t, "model", "init", "--arch", m.arch, "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
			"--head-dim", "16", "--intermediate", "64", "--max-positions", "2048", "--tokenizer", m.tok, "--seed", "1", "--out", m.out); err != nil {
			t.Fatalf("model init --arch %s: %v\n%s", m.arch, err, errOut)
		}
	}
	return qwen, llama
}

// runMixed runs `drmas run --iters 2` of mixedRunConfig and returns the store and the log.
func runMixed(t *testing.T, qwen, llama, solverKeys, verifierKeys, store string) string {
	t.Helper()
	cfgFile := filepath.Join(t.TempDir(), "mixed.yaml")
	if err := os.WriteFile(cfgFile, fmt.Appendf(nil, mixedRunConfig, qwen, llama, solverKeys, verifierKeys), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := execute(t, "--config", cfgFile, "--store", store, "run", "--iters", "2")
	if err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, out, errOut)
	}
	return out + errOut
}

// teamMember is what a mixed team's agent's rows must show of its model.
type teamMember struct {
	tok    *tokenizer.BPE
	vocab  int
	head   []int32 // the ids every prompt starts with
	suffix string  // the text every prompt ends with: the generation prompt
	stop   []int32 // the ids a response finished by "stop" ends with
}

func member(t *testing.T, dir string, head []string, suffix string) teamMember {
	t.Helper()
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, cfg, err := hf.LoadLLM(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := teamMember{tok: tok, vocab: cfg.Vocab, suffix: suffix, stop: []int32{tok.EOS()}}
	for _, e := range cfg.EOS {
		m.stop = append(m.stop, int32(e))
	}
	for _, s := range head {
		id, ok := tok.TokenID(s)
		if !ok {
			t.Fatalf("%s has no token %s", dir, s)
		}
		m.head = append(m.head, id)
	}
	return m
}

// checkMixedRun checks a mixed team's run: every step's solver_m folder is a PEFT adapter and
// verifier_m a full Llama folder; every rollout row of each agent was made with its own
// model's tokenizer and chat format (the prompt's first ids and its generation prompt), holds
// ids of its own vocabulary only, and a response finished by "stop" ends at one of its own
// model's stop ids; the solver's responses use Qwen ids past the Llama vocabulary.
func checkMixedRun(t *testing.T, store, qwen, llama string) {
	t.Helper()
	team := map[string]teamMember{
		"solver":   member(t, qwen, []string{"<|im_start|>"}, "<|im_start|>assistant\n<think>\n\n</think>\n\n"),
		"verifier": member(t, llama, []string{"<|begin_of_text|>", "<|start_header_id|>"}, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"),
	}
	if v := team["verifier"]; !slices.Contains(v.stop, 309) || !slices.Contains(v.stop, 301) || v.tok.EOS() != 309 {
		t.Fatalf("the Llama model stops at %v (EOS %d), want <|eot_id|> 309 and <|end_of_text|> 301", v.stop, v.tok.EOS())
	}
	for step := range int64(3) {
		dir := filepath.Join(store, filepath.FromSlash(layout.CheckpointDir("mixed", step)))
		if _, err := os.Stat(filepath.Join(dir, "solver_m", hf.AdapterConfigFile)); err != nil {
			t.Errorf("step %d: solver_m is not a PEFT adapter folder: %v", step, err)
		}
		if _, cfg, err := hf.LoadLLM(filepath.Join(dir, "verifier_m")); err != nil || cfg.ModelType != "llama" {
			t.Errorf("step %d: verifier_m is not a full Llama folder: %v", step, err)
		}
	}
	seen, qwenIDs := map[string]int{}, 0
	for iter := range 2 {
		for _, r := range readRows(t, filepath.Join(store, filepath.FromSlash(layout.RolloutDir("mixed", iter)))) {
			m, ok := team[r.Agent]
			if !ok {
				t.Fatalf("row of agent %q", r.Agent)
			}
			seen[r.Agent]++
			prompt := m.tok.Decode(r.PromptIDs)
			if !slices.Equal(r.PromptIDs[:len(m.head)], m.head) || !strings.HasSuffix(prompt, m.suffix) {
				t.Errorf("%s row %d: prompt %v… %q is not in its model's chat format", r.Agent, r.RowID, r.PromptIDs[:len(m.head)], prompt)
			}
			ids := append(slices.Clone(r.PromptIDs), r.ResponseIDs...)
			if len(ids) > 0 && int(slices.Max(ids)) >= m.vocab {
				t.Errorf("%s row %d: id %d past its model's vocabulary %d", r.Agent, r.RowID, slices.Max(ids), m.vocab)
			}
			if r.FinishReason == "stop" && !slices.Contains(m.stop, r.ResponseIDs[len(r.ResponseIDs)-1]) {
				t.Errorf("%s row %d: finished by stop at id %d, not one of %v", r.Agent, r.RowID, r.ResponseIDs[len(r.ResponseIDs)-1], m.stop)
			}
			if r.Agent == "solver" {
				for _, id := range r.ResponseIDs {
					if int(id) >= team["verifier"].vocab {
						qwenIDs++
					}
				}
			}
		}
	}
	if seen["solver"] == 0 || seen["verifier"] == 0 || qwenIDs == 0 {
		t.Errorf("rows per agent %v, solver ids past the Llama vocabulary %d", seen, qwenIDs)
	}
	t.Logf("rows per agent %v: each in its own model's chat format and vocabulary", seen)
}

// TestRunMixedTeam is the end-to-end smoke of a mixed team in process: `drmas run --iters 2`
// of a Qwen3 solver trained as a LoRA adapter and a Llama verifier trained in full, each agent
// prompted through its own model's chat template and stopped at its own end-of-turn ids.
func TestRunMixedTeam(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	qwen, llama := mixedBases(t)
	store := filepath.Join(t.TempDir(), "store")
	runMixed(t, qwen, llama, "", "", store)
	checkMixedRun(t, store, qwen, llama)
	got, _, err := execute(t, "--store", store, "--run", "mixed", "analyze", "--format", "csv", "--sql",
		"select model, count(*) from metrics where agent = '*' group by model order by model")
	if err != nil || got != "model,count_star()\nsolver_m,2\nverifier_m,2\n" {
		t.Errorf("learn metrics per model: %q %v; want two learn steps of each", got, err)
	}
}

// TestRunMixedTeamThroughServe is the mixed team's smoke through `drmas serve --hf`, one
// server per model: the Qwen3 solver's server hot-swaps each step's LoRA adapter (vLLM's
// /v1/load_lora_adapter), the Llama verifier's reloads each step's full folder (sglang's
// /update_weights_from_disk); each server renders and stops with its own model's tokenizer.
func TestRunMixedTeamThroughServe(t *testing.T) {
	qwen, llama := mixedBases(t) // before HOME moves: the oracles are under it
	tmp := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(tmp, "cache"))
	t.Setenv("HOME", tmp)
	store := filepath.Join(tmp, "store")
	qURL, qLog := startServe(t, "--hf", qwen, "--served-model-name", "solver_m", "--store", store)
	lURL, lLog := startServe(t, "--hf", llama, "--served-model-name", "verifier_m", "--store", store)
	log := runMixed(t, qwen, llama,
		", backend: openai, openai: {endpoint: "+qURL+", version_wait: 30s}",
		", backend: openai, openai: {endpoint: "+lURL+", version_wait: 30s, reload: sglang}", store)
	log += "\nsolver's server:\n" + qLog.String() + "\nverifier's server:\n" + lLog.String()
	want := []string{"loaded LoRA adapter solver_m@step=0", "loaded LoRA adapter solver_m@step=1"}
	for _, step := range []int64{0, 1} {
		want = append(want, "reloaded its weights from "+filepath.Join(store, filepath.FromSlash(layout.CheckpointDir("mixed", step)), "verifier_m"))
	}
	for _, w := range want {
		if !strings.Contains(log, w) {
			t.Errorf("the logs have no %q:\n%s", w, log)
		}
	}
	checkMixedRun(t, store, qwen, llama)
	stepDir := func(step int64, id string) string {
		return filepath.Join(store, filepath.FromSlash(layout.CheckpointDir("mixed", step)), id)
	}
	policies := map[string]func(int64) *model.LLM{
		"solver": cached(func(step int64) (*model.LLM, error) {
			m, _, err := hf.LoadLLM(qwen)
			if err == nil {
				err = hf.ApplyAdapter(m, stepDir(step, "solver_m"))
			}
			return m, err
		}, t),
		"verifier": cached(func(step int64) (*model.LLM, error) {
			m, _, err := hf.LoadLLM(stepDir(step, "verifier_m"))
			return m, err
		}, t),
	}
	worst := 0.0
	for iter := range 2 {
		for _, r := range readRows(t, filepath.Join(store, filepath.FromSlash(layout.RolloutDir("mixed", iter)))) {
			lp, _, err := policies[r.Agent](r.PolicyVersion).Score([]model.Sequence{{Prompt: r.PromptIDs, Response: r.ResponseIDs}}, 1)
			if err != nil || len(lp[0]) != len(r.ResponseLogprobs) {
				t.Fatalf("%s row %d: %v, %d log-probs for %d", r.Agent, r.RowID, err, len(r.ResponseLogprobs), len(lp))
			}
			for j, v := range lp[0] {
				worst = max(worst, math.Abs(float64(v)-float64(r.ResponseLogprobs[j])))
			}
		}
	}
	if worst > 1e-4 {
		t.Errorf("rows' log-probs differ from the in-process score of their agent's model at their step by up to %g", worst)
	}
	t.Logf("served log-probs within %.2g of each agent's own model at the row's step", worst)
}
