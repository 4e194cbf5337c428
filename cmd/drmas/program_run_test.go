package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/storage/filestore"
	"github.com/drmas-dev/drmas/tokenizer"
	"github.com/drmas-dev/drmas/workflows"
)

// programRunConfig trains examples/math-team's program with two models: the solver's in full
// in process, the verifier's as a LoRA adapter; %[1]s is the base folder, %[2]s the run, %[3]s
// the verifier model's further keys (a server to sample it on).
const programRunConfig = `run: %[2]s
seed: 3
iterations: 2
workflow:
  name: program
  command: [node, team.mjs, --log, received.jsonl]
  reward: math
  timeout: 60s
  concurrency: 2
  max_calls: 4
models:
  solver_m: {hf: %[1]s}
  verifier_m: {hf: %[1]s, lora: {r: 4}%[3]s}
agents:
  solver: {model: solver_m, lr: 1.0e-3}
  verifier: {model: verifier_m, lr: 1.0e-2}
tasks: {per_iteration: 2, eval_size: 0}
rollout: {group_size: 2, parts: 1, max_tokens: 8}
warmup: {steps: 0}
evaluate: {every: 0}
learn: {micro_batch: 4}
`

// runMathTeam runs `drmas run --iters 2` of examples/math-team (programRunConfig) and returns
// the program's folder, the store and the base model's folder.
func runMathTeam(t *testing.T, run string, verifierKeys func(base, store string) string) (dir, store, base string) {
	t.Helper()
	dir = exampleFolder(t, "math-team")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	base = tinyQwen3(t, "1")
	store = filepath.Join(t.TempDir(), "store")
	cfgFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgFile, fmt.Appendf(nil, programRunConfig, base, run, verifierKeys(base, store)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := execute(t, "--config", cfgFile, "--store", store, "run", "--iters", "2"); err != nil || strings.Contains(out+errOut, "dropped") {
		t.Fatalf("run: %v\n%s\n%s", err, out, errOut)
	}
	return dir, store, base
}

// reply is a reply a program's client received, as team.mjs --log writes it.
type reply struct{ Agent, Text string }

// readReplies reads the replies logged in dir/received.jsonl.
func readReplies(t *testing.T, dir string) []reply {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "received.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []reply
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r reply
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// checkMathTeamRows checks both iterations' rows of runMathTeam: per iteration 2 tasks × 2
// samples of solver, verifier, solver, each row the decoded text of a reply a client received
// (each reply one row), with its log-probs and the step it was sampled from; it returns the
// rows by iteration.
func checkMathTeamRows(t *testing.T, dir, store, run, base string) [2][]shards.Row {
	t.Helper()
	bpe, err := tokenizer.LoadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	received := map[reply]int{}
	for _, r := range readReplies(t, dir) {
		received[r]++
	}
	var out [2][]shards.Row
	for iter := range 2 {
		out[iter] = readRows(t, filepath.Join(store, filepath.FromSlash(layout.RolloutDir(run, iter))))
		byTraj := map[string][]string{}
		for _, r := range out[iter] {
			byTraj[r.TrajUID] = append(byTraj[r.TrajUID], r.Agent) // rows are in step order
			key := reply{r.Agent, strings.ToValidUTF8(actors.Chat{BPE: bpe}.ResponseText(r.ResponseIDs), "\uFFFD")}
			if received[key] == 0 {
				t.Errorf("iteration %d: row %s %q is not a reply a client received", iter, r.Agent, r.ResponseText)
			}
			received[key]--
			if len(r.ResponseLogprobs) != len(r.ResponseIDs) || r.PolicyVersion != int64(iter) {
				t.Errorf("row %d: %d log-probs for %d ids, policy version %d", r.RowID, len(r.ResponseLogprobs), len(r.ResponseIDs), r.PolicyVersion)
			}
		}
		if len(byTraj) != 4 {
			t.Errorf("iteration %d: %d episodes, want 2 tasks × 2 samples", iter, len(byTraj))
		}
		for traj, agents := range byTraj {
			if !slices.Equal(agents, []string{"solver", "verifier", "solver"}) {
				t.Errorf("%s: calls by %v, want solver, verifier, solver", traj, agents)
			}
		}
	}
	for k, n := range received {
		if n != 0 {
			t.Errorf("a client received %q %d times more than rows hold", k, n)
		}
	}
	return out
}

// exampleFolder is a folder holding examples/<name>/team.mjs, ready to run with node.
func exampleFolder(t *testing.T, name string) string {
	return oracles.NodeProgram(t, filepath.Join("..", "..", "examples", name, "team.mjs"))
}

// tinyQwen3 makes a tiny random Qwen3 with the real Qwen3 tokenizer and returns its folder.
func tinyQwen3(t *testing.T, seed string) string {
	t.Helper()
	tok := oracles.Qwen3TokenizerDir(t)
	base := filepath.Join(t.TempDir(), "base")
	if _, _, err := execute(t, "model", "init", "--arch", "qwen3", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
		"--head-dim", "16", "--intermediate", "64", "--max-positions", "2048", "--tokenizer", tok, "--seed", seed, "--out", base); err != nil {
		t.Fatal(err)
	}
	return base
}

// TestRunProgram is the end-to-end smoke of an agent program: examples/math-team (the official
// openai client, a streamed call among them) run by `drmas run --iters 2` against a tiny random
// Qwen3, one model per agent (full and LoRA). Rows of both agents are written, one per call; the
// text each client received is the decoded response ids of a row; each row scores the math
// grade of its episode's last answer; the advantages are per agent; the published steps load.
func TestRunProgram(t *testing.T) {
	dir, store, base := runMathTeam(t, "team", func(string, string) string { return "" })
	ctx := context.Background()
	b, err := filestore.New(store)
	if err != nil {
		t.Fatal(err)
	}
	if steps, err := checkpoints.Steps(ctx, b, "team"); err != nil || !slices.Equal(steps, []int64{0, 1, 2}) {
		t.Fatalf("steps %v %v, want 0..2", steps, err)
	}
	if set, err := checkpoints.LoadStep(ctx, b, "team", 2, true); err != nil || len(set.HF) != 2 {
		t.Fatalf("load step 2: %v", err)
	}
	rows := checkMathTeamRows(t, dir, store, "team", base)
	for iter := range 2 {
		for _, r := range rows[iter] {
			if r.Score != r.EpisodeReward || (r.Score != 0 && r.Score != 1) {
				t.Errorf("%s: row score %v, episode reward %v, want the math grade of the last answer", r.TrajUID, r.Score, r.EpisodeReward)
			}
		}
		perAgent := map[string]int{}
		for _, a := range readAdvantages(t, filepath.Join(store, filepath.FromSlash(layout.AdvantageDir("team", iter, "drmas")))) {
			perAgent[a.Agent]++
		}
		if perAgent["solver"] != 8 || perAgent["verifier"] != 4 {
			t.Errorf("iteration %d: advantages per agent %v, want solver 8, verifier 4", iter, perAgent)
		}
	}
}

// readTable reads every Parquet file of a committed folder.
func readTable[T any](t *testing.T, dir string, read func(f *os.File, size int64, name string) ([]T, error)) []T {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.parquet"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Parquet files in %s (%v)", dir, err)
	}
	var out []T
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		rows, err := read(f, st.Size(), name)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
	}
	return out
}

func readRows(t *testing.T, dir string) []shards.Row {
	return readTable(t, dir, func(f *os.File, n int64, name string) ([]shards.Row, error) {
		return shards.ReadTrajectories(f, n, name)
	})
}

func readAdvantages(t *testing.T, dir string) []shards.AdvantageRow {
	return readTable(t, dir, func(f *os.File, n int64, name string) ([]shards.AdvantageRow, error) {
		return shards.ReadAdvantages(f, n, name)
	})
}

// exampleRolloutConfig rolls out one iteration of an example's program with one tiny model
// for both agents; %[1]s is the base folder, %[2]s and %[3]s the agents, %[4]s the reward.
const exampleRolloutConfig = `run: ex
seed: 5
workflow:
  name: program
  command: [node, team.mjs, --log, received.jsonl]
  reward: %[4]s
  timeout: 60s
  concurrency: 2
models:
  m: {hf: %[1]s}
agents:
  %[2]s: {model: m}
  %[3]s: {model: m}
tasks: {per_iteration: 2, eval_size: 0}
rollout: {group_size: 1, parts: 1, max_tokens: 8}
warmup: {steps: 0}
evaluate: {every: 0}
learn: {micro_batch: 2}
`

// rolloutExample rolls out iteration 0 of examples/<name> with a tiny random Qwen3 and returns
// its rows and the texts its clients received, by agent.
// With twice, it rolls out again into another store and checks that the parts are the same bytes.
func rolloutExample(t *testing.T, name, a1, a2, reward string, twice bool) ([]shards.Row, map[string][]string) {
	t.Helper()
	dir := exampleFolder(t, name)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	base := tinyQwen3(t, "2")
	cfgFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgFile, fmt.Appendf(nil, exampleRolloutConfig, base, a1, a2, reward), 0o644); err != nil {
		t.Fatal(err)
	}
	rollout := func() string {
		store := filepath.Join(t.TempDir(), "store")
		for _, stage := range [][]string{{"warmup"}, {"rollout", "--iter", "0"}} {
			args := append([]string{"--config", cfgFile, "--store", store, "run-stage"}, stage...)
			if out, errOut, err := execute(t, args...); err != nil || strings.Contains(out+errOut, "dropped") {
				t.Fatalf("%s: %v\n%s\n%s", stage[0], err, out, errOut)
			}
		}
		return filepath.Join(store, filepath.FromSlash(layout.RolloutDir("ex", 0)))
	}
	first := rollout()
	received := map[string][]string{}
	for _, r := range readReplies(t, dir) {
		received[r.Agent] = append(received[r.Agent], r.Text)
	}
	if twice { // the same program, seed and checkpoint: the same bytes
		if a, b := folderDigests(t, first), folderDigests(t, rollout()); !maps.Equal(a, b) {
			t.Errorf("two rollouts of one iteration differ: %v and %v", a, b)
		}
	}
	return readRows(t, first), received
}

// TestRunSearchTeamTools: examples/search-team's searcher calls carry the search tool, which
// reaches the model as Qwen's template renders tools; the answerer answers last; the texts the
// client received are the rows' decoded texts; a second rollout writes the same bytes.
func TestRunSearchTeamTools(t *testing.T) {
	rows, received := rolloutExample(t, "search-team", "searcher", "answerer", "search", true)
	got := map[string][]string{}
	for _, r := range rows {
		got[r.Agent] = append(got[r.Agent], r.ResponseText)
		if r.Agent == "searcher" && !strings.Contains(r.PromptText, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"search\", ") {
			t.Errorf("searcher prompt without the search tool:\n%s", r.PromptText)
		}
	}
	for _, a := range []string{"searcher", "answerer"} {
		g, w := slices.Sorted(slices.Values(got[a])), slices.Sorted(slices.Values(received[a]))
		if len(g) == 0 || !slices.Equal(g, w) {
			t.Errorf("%s: rows %q, client received %q", a, g, w)
		}
	}
}

// TestRunAgentsSDK: examples/agents-sdk on @openai/agents with a chat-completions model: its
// calls reach the gateway with the handoff to the verifier as a tool, and every reply the SDK
// received is a row's decoded text.
func TestRunAgentsSDK(t *testing.T) {
	rows, received := rolloutExample(t, "agents-sdk", "solver", "verifier", "math", false)
	var got []string
	for _, r := range rows {
		got = append(got, r.ResponseText)
		if r.Agent == "solver" && !strings.Contains(r.PromptText, `"name": "transfer_to_verifier"`) {
			t.Errorf("solver prompt without the handoff tool:\n%s", r.PromptText)
		}
	}
	var want []string
	for _, a := range []string{"solver", "verifier"} {
		want = append(want, received[a]...)
	}
	slices.Sort(got)
	slices.Sort(want)
	if len(got) == 0 || !slices.Equal(got, want) {
		t.Errorf("rows %q, the SDK received %q", got, want)
	}
}

// TestRunProgramThroughServe: the gateway samples an agent on an openai backend server (drmas
// serve, loading each step's LoRA adapter) beside an in-process one; every reply a client
// received is a row's decoded ids, which carry the server's log-probs.
func TestRunProgramThroughServe(t *testing.T) {
	var url string
	var serveLog *bytes.Buffer
	dir, store, base := runMathTeam(t, "teamserve", func(base, store string) string {
		// The server loads adapters only from a run's checkpoints in its store (--adapter-root's default).
		url, serveLog = startServe(t, "--hf", base, "--served-model-name", "verifier_m", "--store", store)
		return ", backend: openai, openai: {endpoint: " + url + ", version_wait: 30s}"
	})
	for _, want := range []string{"loaded LoRA adapter verifier_m@step=0", "loaded LoRA adapter verifier_m@step=1"} {
		if !strings.Contains(serveLog.String(), want) {
			t.Errorf("the server's log has no %q:\n%s", want, serveLog.String())
		}
	}
	checkMathTeamRows(t, dir, store, "teamserve", base)
}

// TestExampleConfigsLoad: each example's config loads as a program run of its team.mjs, in
// its folder, with a model per agent (one of them a LoRA adapter).
func TestExampleConfigsLoad(t *testing.T) {
	for _, name := range []string{"math-team", "search-team", "agents-sdk"} {
		file := filepath.Join("..", "..", "examples", name, "config.yaml")
		c, err := configs.Load(configs.LoadOptions{File: file, LookupEnv: func(string) (string, bool) { return "", false }})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		abs, _ := filepath.Abs(filepath.Dir(file))
		lora := 0
		for _, m := range c.Models {
			if m.LoRA != nil {
				lora++
			}
		}
		if c.Workflow.Name != "program" || !slices.Equal(c.Workflow.Command, []string{"node", "team.mjs"}) || c.Dir != abs ||
			len(c.Agents) != 2 || len(c.Models) != 2 || lora != 1 {
			t.Errorf("%s: workflow %+v, folder %s, agents %v, %d models (%d LoRA)", name, c.Workflow, c.Dir, c.AgentNames(), len(c.Models), lora)
		}
		if c.Tasks.Source != "generator" { // a tasks file beside the config, read from the example's folder
			tasks, err := workflows.LoadTasksFormat(filepath.Join(c.Dir, c.Tasks.Source), c.Tasks.Format)
			if err != nil || len(tasks) < c.Tasks.PerIteration {
				t.Errorf("%s: %d tasks in %s (%v), want ≥ %d", name, len(tasks), c.Tasks.Source, err, c.Tasks.PerIteration)
			}
		}
	}
}
