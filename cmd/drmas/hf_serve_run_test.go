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

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/model"
)

// hfServeRunConfig is a math run of one tiny Hugging Face model, trained in full, shared by
// both agents and sampled on a server that reloads each step's folder; %[1]s is the base
// folder, %[2]s the server's URL.
const hfServeRunConfig = `run: hfserve
seed: 5
iterations: 2
workflow: {name: math, max_loop: 2}
models:
  m:
    hf: %[1]s
    backend: openai
    openai: {endpoint: %[2]s, reload: sglang, version_wait: 30s}
agents:
  solver: {model: m, lr: 1.0e-3}
  verifier: {model: m, lr: 1.0e-3}
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

// TestRunHFModelThroughServe is the end-to-end smoke of a Hugging Face model trained in full
// and sampled on a server: `drmas serve --hf` hosts a tiny random Qwen3 (the real Qwen3
// tokenizer); `drmas run --iters 2` with backend openai and reload: sglang makes the server
// reload each published step folder (/update_weights_from_disk) before rollout and evaluate
// sample from it (a warm-up long enough that rewards differ within a group, so learn moves the
// weights); every rollout row's log-probs are those the step's folder scores in process,
// so the server sampled on-policy with the model's own token ids.
func TestRunHFModelThroughServe(t *testing.T) {
	tok := oracles.Qwen3TokenizerDir(t)
	tmp := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(tmp, "cache"))
	t.Setenv("HOME", tmp)
	base := filepath.Join(tmp, "base")
	if _, _, err := execute(t, "model", "init", "--arch", "qwen3", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
		"--head-dim", "16", "--intermediate", "64", "--max-positions", "2048", "--tokenizer", tok, "--seed", "1", "--out", base); err != nil {
		t.Fatal(err)
	}
	url, serveLog := startServe(t, "--hf", base, "--served-model-name", "m")
	cfgFile := filepath.Join(tmp, "hf.yaml")
	if err := os.WriteFile(cfgFile, fmt.Appendf(nil, hfServeRunConfig, base, url), 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(tmp, "store")
	out, errOut, err := execute(t, "--config", cfgFile, "--store", store, "run", "--iters", "2")
	if err != nil {
		t.Fatalf("run: %v\n%s\n%s\nserve:\n%s", err, out, errOut, serveLog)
	}
	folder := func(step int64) string {
		return filepath.Join(store, filepath.FromSlash(commit.CheckpointDir("hfserve", step)), "m")
	}
	for _, step := range []int64{0, 1} {
		if want := "reloaded its weights from " + folder(step); !strings.Contains(errOut, want) {
			t.Errorf("the run's log has no %q:\n%s", want, errOut)
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
	if err != nil || info.ModelPath != folder(2) { // the last evaluation samples step 2
		t.Errorf("the server serves %q (%v), want %s", info.ModelPath, err, folder(2))
	}
	js, _, err := execute(t, "--config", cfgFile, "--store", store, "analyze", "--format", "json", "--sql",
		"select policy_version, prompt_ids, response_ids, response_logprobs from rollouts order by policy_version, uid, agent, step")
	if err != nil {
		t.Fatalf("analyze: %v", err)
	}
	var rows []struct {
		PolicyVersion    int64     `json:"policy_version"`
		PromptIDs        []int32   `json:"prompt_ids"`
		ResponseIDs      []int32   `json:"response_ids"`
		ResponseLogprobs []float64 `json:"response_logprobs"`
	}
	if err := json.Unmarshal([]byte(js), &rows); err != nil {
		t.Fatalf("analyze json: %v\n%.500s", err, js)
	}
	steps := map[int64]*model.LLM{}
	seen := map[int64]int{}
	worst := 0.0
	for i, r := range rows {
		m := steps[r.PolicyVersion]
		if m == nil {
			if m, _, err = hf.LoadLLM(folder(r.PolicyVersion)); err != nil {
				t.Fatalf("row %d: step %d: %v", i, r.PolicyVersion, err)
			}
			steps[r.PolicyVersion] = m
		}
		seen[r.PolicyVersion]++
		lp, _, err := m.Score([]model.Sequence{{Prompt: r.PromptIDs, Response: r.ResponseIDs}}, 1)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if len(lp[0]) != len(r.ResponseLogprobs) {
			t.Fatalf("row %d: %d log-probs for %d tokens", i, len(r.ResponseLogprobs), len(lp[0]))
		}
		for j, v := range lp[0] {
			worst = max(worst, math.Abs(float64(v)-r.ResponseLogprobs[j]))
		}
	}
	// Step 1 scores step 0's rows otherwise: learn moved the weights, so a server that did not
	// reload would have sampled step 1's rows with step 0's log-probs.
	moved := 0.0
	for _, r := range rows {
		if r.PolicyVersion != 1 {
			continue
		}
		lp, _, err := steps[0].Score([]model.Sequence{{Prompt: r.PromptIDs, Response: r.ResponseIDs}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range lp[0] {
			moved = max(moved, math.Abs(float64(v)-r.ResponseLogprobs[j]))
		}
	}
	if moved <= 1e-3 {
		t.Errorf("step 0 scores step 1's rows within %g: learn did not move the model, so the check above shows nothing; the run's log:\n%s", moved, errOut)
	}
	if seen[0] == 0 || seen[1] == 0 || len(seen) != 2 {
		t.Errorf("rows per policy version %v, want steps 0 and 1", seen)
	}
	if worst > 1e-4 {
		t.Errorf("rows' log-probs differ from the in-process score of their step by up to %g", worst)
	}
	t.Logf("%d rows of steps %v: log-probs within %.2g of the in-process score of their step (step 0 differs on step 1's rows by %.2g)", len(rows), seen, worst, moved)
}
