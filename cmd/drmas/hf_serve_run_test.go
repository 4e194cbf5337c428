package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/model"
)

// hfServeRunConfig is a math run of one tiny Hugging Face model shared by both agents and
// sampled on a server; %[1]s is the base folder, %[2]s the model's further keys (lora, and
// openai.reload for a full fine-tune), %[3]s the server's URL, %[4]s the agents' learning rate.
const hfServeRunConfig = `run: hfserve
seed: 5
iterations: 2
workflow: {name: math, max_loop: 2}
models:
  m:
    hf: %[1]s
    backend: openai
    openai: {endpoint: %[3]s, version_wait: 30s%[2]s}
agents:
  solver: {model: m, lr: %[4]s}
  verifier: {model: m, lr: %[4]s}
tasks: {per_iteration: 2, eval_size: 2}
rollout: {group_size: 4, parts: 1, max_tokens: 16, temperature: 1.0, top_p: 1.0}
warmup: {steps: 60, batch: 4, demos: 8, lr: 1.0e-2}
evaluate: {every: 1, k: 1, top_p: 1.0}
learn: {micro_batch: 2, keep_checkpoints: 3}
`

// startServe runs `drmas serve` with args on a free local port until the test ends and
// returns its base URL once it answers, and its log.
func startServe(t *testing.T, args ...string) (string, *bytes.Buffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	root := newRootCmd()
	var stderr bytes.Buffer
	root.SetOut(io.Discard)
	root.SetErr(&stderr)
	root.SetArgs(append([]string{"serve", "--addr", addr}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runRoot(ctx, root) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	base := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			return base, &stderr
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer: %v\n%s", err, stderr.String())
		}
	}
}

// runOnServe is the end-to-end setup of the smokes through drmas serve: `model init` makes a
// tiny random Qwen3 with the real Qwen3 tokenizer, `drmas serve --hf` hosts it as m, and
// `drmas run --iters 2` trains it with the config's model keys extra (hfServeRunConfig). It
// returns the store, the run's log, the server's URL and the run's error.
//
// With warm, the random model is first fine-tuned in full on the workflow's demonstrations
// (warmBaseConfig) and that step 0 is the base served and trained: it stands in for an instruct
// model, as a LoRA run needs (on the random model every response is invalid, every reward the
// same, and the adapter would not move).
func runOnServe(t *testing.T, extra, lr string, warm bool) (store, log, url string, runErr error) {
	tok := oracles.Qwen3TokenizerDir(t)
	tmp := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(tmp, "cache"))
	t.Setenv("HOME", tmp)
	base := filepath.Join(tmp, "base")
	random := base
	if warm {
		random = filepath.Join(tmp, "random")
	}
	if _, _, err := execute(t, "model", "init", "--arch", "qwen3", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
		"--head-dim", "16", "--intermediate", "64", "--max-positions", "2048", "--tokenizer", tok, "--seed", "1", "--out", random); err != nil {
		t.Fatal(err)
	}
	if warm {
		warmCfg, warmStore := filepath.Join(tmp, "warm.yaml"), filepath.Join(tmp, "warmstore")
		if err := os.WriteFile(warmCfg, fmt.Appendf(nil, warmBaseConfig, random), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, errOut, err := execute(t, "--config", warmCfg, "--store", warmStore, "run-stage", "warmup"); err != nil {
			t.Fatalf("warm up the base: %v\n%s\n%s", err, out, errOut)
		}
		if err := os.Rename(filepath.Join(warmStore, filepath.FromSlash(layout.CheckpointDir("full", 0)), "m"), base); err != nil {
			t.Fatal(err)
		}
	}
	store = filepath.Join(tmp, "store")
	url, serveLog := startServe(t, "--hf", base, "--served-model-name", "m", "--store", store)
	cfgFile := filepath.Join(tmp, "hf.yaml")
	if err := os.WriteFile(cfgFile, fmt.Appendf(nil, hfServeRunConfig, base, extra, url, lr), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := execute(t, "--config", cfgFile, "--store", store, "run", "--iters", "2")
	return store, out + errOut + "\nserve:\n" + serveLog.String(), url, err
}

// stepFolder is model m's folder of a step of run hfserve in store.
func stepFolder(store string, step int64) string {
	return filepath.Join(store, filepath.FromSlash(layout.CheckpointDir("hfserve", step)), "m")
}

// servedRow is a rollout row's policy version, token ids and log-probs.
type servedRow struct {
	PolicyVersion    int64     `json:"policy_version"`
	PromptIDs        []int32   `json:"prompt_ids"`
	ResponseIDs      []int32   `json:"response_ids"`
	ResponseLogprobs []float64 `json:"response_logprobs"`
}

// servedRows reads the rollout rows of run hfserve through `drmas analyze`.
func servedRows(t *testing.T, store string) []servedRow {
	t.Helper()
	js, _, err := execute(t, "--store", store, "--run", "hfserve", "analyze", "--format", "json", "--sql",
		"select policy_version, prompt_ids, response_ids, response_logprobs from rollouts order by policy_version, uid, agent, step")
	if err != nil {
		t.Fatalf("analyze: %v", err)
	}
	var rows []servedRow
	if err := json.Unmarshal([]byte(js), &rows); err != nil {
		t.Fatalf("analyze json: %v\n%.500s", err, js)
	}
	return rows
}

// onPolicy checks that every row's log-probs are those policy(step) scores, for the steps
// 0 and 1 the run sampled, and that policy(0) does not score step 1's rows so (learn moved
// the weights: a server that kept step 0's would have been caught).
func onPolicy(t *testing.T, rows []servedRow, policy func(step int64) *model.LLM, log string) {
	t.Helper()
	diff := func(m *model.LLM, r servedRow) float64 {
		lp, _, err := m.Score([]model.Sequence{{Prompt: r.PromptIDs, Response: r.ResponseIDs}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(lp[0]) != len(r.ResponseLogprobs) {
			t.Fatalf("%d log-probs for %d tokens", len(r.ResponseLogprobs), len(lp[0]))
		}
		d := 0.0
		for j, v := range lp[0] {
			d = max(d, math.Abs(float64(v)-r.ResponseLogprobs[j]))
		}
		return d
	}
	seen := map[int64]int{}
	worst, moved := 0.0, 0.0
	for _, r := range rows {
		seen[r.PolicyVersion]++
		worst = max(worst, diff(policy(r.PolicyVersion), r))
		if r.PolicyVersion == 1 {
			moved = max(moved, diff(policy(0), r))
		}
	}
	if seen[0] == 0 || seen[1] == 0 || len(seen) != 2 {
		t.Errorf("rows per policy version %v, want steps 0 and 1", seen)
	}
	if worst > 1e-4 {
		t.Errorf("rows' log-probs differ from the in-process score of their step by up to %g", worst)
	}
	if moved <= 1e-3 {
		t.Errorf("step 0 scores step 1's rows within %g: learn did not move the model, so the check above shows nothing; the run's log:\n%s", moved, log)
	}
	t.Logf("%d rows of steps %v: log-probs within %.2g of the in-process score of their step (step 0's differ on step 1's rows by %.2g)", len(rows), seen, worst, moved)
}

// cached memoizes a step's policy.
func cached(load func(step int64) (*model.LLM, error), t *testing.T) func(int64) *model.LLM {
	m := map[int64]*model.LLM{}
	return func(step int64) *model.LLM {
		if m[step] == nil {
			p, err := load(step)
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			m[step] = p
		}
		return m[step]
	}
}

// TestRunHFModelThroughServe is the end-to-end smoke of a Hugging Face model trained in full
// and sampled on a server: `drmas run --iters 2` with backend openai and reload: sglang makes
// `drmas serve --hf` reload each published step folder (/update_weights_from_disk) before
// rollout and evaluate sample from it, and every rollout row's log-probs are those the step's
// folder scores in process: the server sampled on-policy with the model's own token ids.
func TestRunHFModelThroughServe(t *testing.T) {
	store, log, url, err := runOnServe(t, ", reload: sglang", "1.0e-3", false)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log)
	}
	for _, step := range []int64{0, 1} {
		if want := "reloaded its weights from " + stepFolder(store, step); !strings.Contains(log, want) {
			t.Errorf("the run's log has no %q:\n%s", want, log)
		}
	}
	var info struct {
		ModelPath string `json:"model_path"`
	}
	resp, err := http.Get(url + "/get_model_info")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if err != nil || info.ModelPath != stepFolder(store, 2) { // the last evaluation samples step 2
		t.Errorf("the server serves %q (%v), want %s", info.ModelPath, err, stepFolder(store, 2))
	}
	onPolicy(t, servedRows(t, store), cached(func(step int64) (*model.LLM, error) {
		m, _, err := hf.LoadLLM(stepFolder(store, step))
		return m, err
	}, t), log)
}

// TestRunHFLoRAThroughServe is the smoke of a LoRA model sampled on a server with the adapter
// hot-swap: before each stage samples step N, the openai backend loads the step's PEFT adapter
// folder into `drmas serve --hf` as m@step=N (vLLM's /v1/load_lora_adapter) and unloads the
// older steps' adapters; the rows' log-probs are those of the base merged with that step's
// adapter in process.
func TestRunHFLoRAThroughServe(t *testing.T) {
	store, log, url, err := runOnServe(t, "}\n    lora: {r: 4", "1.0e-2", true) // an adapter learns at a higher rate
	if _, statErr := os.Stat(filepath.Join(stepFolder(store, 0), hf.AdapterConfigFile)); statErr != nil {
		t.Fatalf("step 0 of a LoRA model is not a PEFT adapter folder (%v); the run said: %v", statErr, err)
	}
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log)
	}
	for _, want := range []string{"loaded LoRA adapter m@step=0", "loaded LoRA adapter m@step=1", "unloaded LoRA adapter m@step=0 of an older step"} {
		if !strings.Contains(log, want) {
			t.Errorf("the run's log has no %q:\n%s", want, log)
		}
	}
	if ids := servedModels(t, url); strings.Join(ids, " ") != "m m@step=2" { // the last evaluation samples step 2
		t.Errorf("the server serves %v, want the base and step 2's adapter only", ids)
	}
	base := filepath.Join(filepath.Dir(store), "base")
	onPolicy(t, servedRows(t, store), cached(func(step int64) (*model.LLM, error) {
		m, _, err := hf.LoadLLM(base)
		if err == nil {
			err = hf.ApplyAdapter(m, stepFolder(store, step))
		}
		return m, err
	}, t), log)
}

// servedModels are the model ids GET /v1/models lists, in its order.
func servedModels(t *testing.T, url string) []string {
	t.Helper()
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Data []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list.Data {
		ids = append(ids, c.ID)
	}
	return ids
}
