package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/workflows"
)

// tinyAgents serves agents solver and verifier with one small random built-in model.
func tinyAgents(t testing.TB) map[string]actors.Backend {
	t.Helper()
	m, err := model.New(model.Config{Vocab: model.VocabSize, Context: 256, Dim: 16, Layers: 1, Heads: 2, FFMult: 2, TiedHead: true}, 7)
	if err != nil {
		t.Fatal(err)
	}
	be := actors.NewLocal("m", 0, m)
	return map[string]actors.Backend{"solver": be, "verifier": be}
}

var sampling = actors.Sampling{Temperature: 1, TopP: 1, MaxTokens: 8}

// post sends body to the episode's route with token and returns the status and decoded body.
func post(t *testing.T, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("body %q: %v", data, err)
	}
	return resp.StatusCode, out
}

func errorOf(body map[string]any) map[string]any {
	e, _ := body["error"].(map[string]any)
	return e
}

// TestBadClients: malformed JSON, an unknown agent, a wrong key and an episode's key reused
// after it ended get OpenAI error bodies and record nothing; a good call still works.
func TestBadClients(t *testing.T) {
	g, err := Start(Config{Agents: tinyAgents(t), Sampling: sampling, MaxCalls: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ep := g.Open(func(i int) uint64 { return uint64(i) })
	url := ep.BaseURL() + "/chat/completions"
	good := `{"model": "solver", "messages": [{"role": "user", "content": "2+2"}]}`
	cases := []struct {
		name, token, body string
		status            int
		code, typ, has    string
	}{
		{"malformed JSON", ep.Token(), `{"model": "solver", "messages": [`, 400, "", "invalid_request_error", "not valid JSON"},
		{"unknown agent", ep.Token(), `{"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}`, 404, "model_not_found", "invalid_request_error", "solver, verifier"},
		{"bad role", ep.Token(), `{"model": "solver", "messages": [{"role": "robot", "content": "x"}]}`, 400, "", "invalid_request_error", "robot"},
		{"wrong key", "drmas-nope", good, 401, "invalid_api_key", "invalid_request_error", "one running episode"},
	}
	for _, c := range cases {
		status, body := post(t, url, c.token, c.body)
		e := errorOf(body)
		if status != c.status || e == nil || e["type"] != c.typ || !strings.Contains(fmt.Sprint(e["message"]), c.has) || (c.code != "" && e["code"] != c.code) {
			t.Errorf("%s: status %d, body %v", c.name, status, body)
		}
	}
	if status, body := post(t, url, ep.Token(), good); status != 200 {
		t.Fatalf("good call after bad ones: %d %v", status, body)
	}
	calls, overflow := ep.Close()
	if len(calls) != 1 || calls[0].Index != 0 || overflow {
		t.Fatalf("recorded %d calls (overflow %v), want the good one only", len(calls), overflow)
	}
	if status, body := post(t, url, ep.Token(), good); status != 401 || errorOf(body)["code"] != "invalid_api_key" {
		t.Errorf("key reused after its episode: %d %v", status, body)
	}
}

// counting counts the batches a backend generates.
type counting struct {
	actors.Backend
	mu      sync.Mutex
	batches int
}

func (c *counting) Generate(ctx context.Context, reqs []actors.Request, s actors.Sampling) ([]actors.Response, error) {
	c.mu.Lock()
	c.batches++
	c.mu.Unlock()
	return c.Backend.Generate(ctx, reqs, s)
}

// TestConcurrentCalls: 100 calls of one episode at once are each served and recorded once,
// with indices 0..99, in fewer batches than calls, and each equals the sequential sampling of
// its prompt with its call's seed (no dependence on arrival order or batching); nothing is left
// running after Close.
func TestConcurrentCalls(t *testing.T) {
	before := runtime.NumGoroutine()
	agents := tinyAgents(t)
	be := &counting{Backend: agents["solver"]}
	agents = map[string]actors.Backend{"solver": be, "verifier": be}
	g, err := Start(Config{Agents: agents, Sampling: sampling, MaxCalls: 100})
	if err != nil {
		t.Fatal(err)
	}
	seed := func(i int) uint64 { return 1000 + uint64(i) }
	ep := g.Open(seed)
	var wg sync.WaitGroup
	texts := make([]string, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			agent := []string{"solver", "verifier"}[i%2]
			status, body := post(t, ep.BaseURL()+"/chat/completions", ep.Token(),
				fmt.Sprintf(`{"model": %q, "messages": [{"role": "user", "content": "q%d"}]}`, agent, i))
			if status != 200 {
				t.Errorf("call %d: %d %v", i, status, body)
				return
			}
			msg := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
			texts[i] = msg["content"].(string)
		}()
	}
	wg.Wait()
	if status, _ := post(t, ep.BaseURL()+"/chat/completions", ep.Token(), `{"model": "solver", "messages": [{"role": "user", "content": "one more"}]}`); status != 400 {
		t.Errorf("call 101 of max_calls 100: status %d, want 400", status)
	}
	calls, overflow := ep.Close()
	if len(calls) != 100 || !overflow {
		t.Fatalf("%d calls recorded (overflow %v), want 100 and the 101st refused", len(calls), overflow)
	}
	if be.batches >= 100 || be.batches < 1 {
		t.Errorf("100 calls in %d batches, want fewer batches than calls", be.batches)
	}
	t.Logf("100 concurrent calls in %d batches", be.batches)
	got := map[string]bool{}
	for i, c := range calls {
		if c.Index != i {
			t.Fatalf("call %d has index %d", i, c.Index)
		}
		want, err := agents[c.Agent].Generate(context.Background(), []actors.Request{{Agent: c.Agent, Prompt: c.PromptIDs, Seed: seed(i)}}, sampling)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(want[0].Tokens, c.Response.Tokens) || !slices.Equal(want[0].LogProbs, c.Response.LogProbs) {
			t.Errorf("call %d: %v, sequential sampling with its seed gives %v", i, c.Response.Tokens, want[0].Tokens)
		}
		if c.Text != jsonText(actors.ResponseText(c.Response.Tokens)) {
			t.Errorf("call %d: text %q is not its decoded ids", i, c.Text)
		}
		got[c.Text] = true
	}
	for i, s := range texts {
		if !got[s] {
			t.Errorf("client %d received %q, which no recorded call decodes to", i, s)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	http.DefaultClient.CloseIdleConnections()
	waitGoroutines(t, before)
}

// waitGoroutines waits for the goroutines to fall back to n (a few for the runtime's slack).
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n+2 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines left, want ≤ %d:\n%s", runtime.NumGoroutine(), n+2, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runMode runs the helper program in mode for one task and two samples.
func runMode(t *testing.T, mode string, mut func(*workflows.ProgramOptions)) ([]Outcome, string, string) {
	t.Helper()
	dir := t.TempDir()
	p := workflows.ProgramOptions{Command: []string{os.Args[0], "program", mode}, Dir: dir, Timeout: 20 * time.Second, Concurrency: 2, MaxCalls: 3}
	if mut != nil {
		mut(&p)
	}
	var log bytes.Buffer
	var mu sync.Mutex
	outs, err := Run(context.Background(), RunOptions{Program: p, Agents: tinyAgents(t), Sampling: sampling,
		Tasks: []workflows.Task{{ID: "t1", Question: "1+1", Answer: "2", DataSource: "math"}}, Samples: 2,
		Seed: func(task workflows.Task, sample, call int) uint64 { return uint64(100*sample + call) },
		Logf: func(f string, a ...any) { mu.Lock(); fmt.Fprintf(&log, f+"\n", a...); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	return outs, log.String(), dir
}

// TestRunTeam: a program's calls become the episode's calls, its reward line the reward and
// its penalties per call; the same program gives the same calls again.
func TestRunTeam(t *testing.T) {
	outs, log, _ := runMode(t, "team", nil)
	again, _, _ := runMode(t, "team", nil)
	if len(outs) != 2 || log != "" {
		t.Fatalf("%d outcomes, log %q", len(outs), log)
	}
	for s, oc := range outs {
		if oc.Failed || oc.Sample != s || oc.Reward != 0.75 || !slices.Equal(oc.Penalties, []float64{0, 0.25}) || len(oc.Calls) != 2 ||
			oc.Calls[0].Agent != "solver" || oc.Calls[1].Agent != "verifier" {
			t.Fatalf("sample %d: %+v", s, oc)
		}
		for i, c := range oc.Calls {
			if !slices.Equal(c.Response.Tokens, again[s].Calls[i].Response.Tokens) || c.PromptText != again[s].Calls[i].PromptText {
				t.Errorf("sample %d call %d differs between two runs", s, i)
			}
		}
	}
	if slices.Equal(outs[0].Calls[0].Response.Tokens, outs[1].Calls[0].Response.Tokens) {
		t.Error("the two samples sampled the same tokens: seeds are not per sample")
	}
}

// TestRunEnvironment: the program sees the episode's variables and PATH only, and the task
// without its answer unless reveal_answer.
func TestRunEnvironment(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	_, log, _ := runMode(t, "env", nil)
	want := "DRMAS_TASK,OPENAI_AGENTS_DISABLE_TRACING,OPENAI_API_KEY,OPENAI_BASE_URL,PATH " +
		`{"data_source":"math","id":"t1","question":"1+1"}`
	if !strings.Contains(log, want) || strings.Contains(log, "secret") {
		t.Errorf("log %q, want the program's stderr %q", log, want)
	}
	_, log, _ = runMode(t, "env", func(p *workflows.ProgramOptions) { p.RevealAnswer = true })
	if !strings.Contains(log, `"answer":"2"`) {
		t.Errorf("reveal_answer: log %q", log)
	}
}

// TestRunFailures: every way a program fails is an outcome: dropped and logged with its
// stderr, or scored with failure_reward.
func TestRunFailures(t *testing.T) {
	for _, c := range []struct{ mode, why string }{
		{"exit", "exited with exit status 2"},
		{"noreward", "printed no reward"},
		{"malformed", "malformed reward line"},
		{"calls", "more calls than workflow.max_calls"},
	} {
		outs, log, _ := runMode(t, c.mode, nil)
		for _, oc := range outs {
			if !oc.Failed || !oc.Dropped || oc.Calls != nil || !strings.Contains(oc.Why, c.why) {
				t.Errorf("%s: %+v", c.mode, oc)
			}
		}
		if strings.Count(log, "dropped") != 2 || (c.mode == "exit" && !strings.Contains(log, "stderr: Traceback: boom")) {
			t.Errorf("%s: log %q", c.mode, log)
		}
	}
	fr := -1.0
	outs, log, _ := runMode(t, "calls", func(p *workflows.ProgramOptions) { p.FailureReward = &fr })
	if oc := outs[0]; !oc.Failed || oc.Dropped || oc.Reward != -1 || len(oc.Calls) != 3 || !strings.Contains(log, "reward -1 (workflow.failure_reward)") {
		t.Errorf("failure_reward: %+v, log %q", oc, log)
	}
}

// TestRunTimeoutAndForks: a program that never exits is killed at its timeout, and a child a
// program forked (holding its stdout) is killed with it; the stage goes on.
func TestRunTimeoutAndForks(t *testing.T) {
	start := time.Now()
	outs, _, _ := runMode(t, "sleep", func(p *workflows.ProgramOptions) { p.Timeout = 300 * time.Millisecond })
	if !outs[0].Dropped || !strings.Contains(outs[0].Why, "timed out after 300ms") || time.Since(start) > 10*time.Second {
		t.Errorf("sleep: %+v after %v", outs[0], time.Since(start))
	}
	outs, _, dir := runMode(t, "fork", func(p *workflows.ProgramOptions) { p.Concurrency = 1; p.Timeout = time.Minute })
	if outs[0].Failed || outs[0].Reward != 1 || len(outs[0].Calls) != 1 {
		t.Errorf("fork: %+v", outs[0])
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("the forked child held the episode open for %v", time.Since(start))
	}
	data, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(data))
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the forked child %d is still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// TestCompletionsStreamModels: /v1/completions answers with the recorded text and honours a
// lower max_tokens; a streamed chat call's deltas add up to the recorded text, with a usage
// chunk and [DONE]; /v1/models lists the agents; a body over the cap is refused unrecorded.
func TestCompletionsStreamModels(t *testing.T) {
	g, err := Start(Config{Agents: tinyAgents(t), Sampling: sampling, MaxCalls: 8, MaxBody: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ep := g.Open(func(i int) uint64 { return uint64(i) })
	status, body := post(t, ep.BaseURL()+"/completions", ep.Token(), `{"model": "verifier", "prompt": "abc", "max_tokens": 3}`)
	if status != 200 || body["object"] != "text_completion" {
		t.Fatalf("completions: %d %v", status, body)
	}
	text := body["choices"].([]any)[0].(map[string]any)["text"].(string)

	req, _ := http.NewRequest(http.MethodPost, ep.BaseURL()+"/chat/completions", strings.NewReader(
		`{"model": "solver", "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}`))
	req.Header.Set("Authorization", "Bearer "+ep.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var streamed string
	var usage, done bool
	for _, ev := range strings.Split(strings.TrimSpace(string(raw)), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("event %q", ev)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Usage *struct{ CompletionTokens int } `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			streamed += ch.Delta.Content
		}
		usage = usage || c.Usage != nil
	}
	if resp.Header.Get("Content-Type") != "text/event-stream" || !usage || !done {
		t.Errorf("stream: %s usage %v done %v:\n%s", resp.Header.Get("Content-Type"), usage, done, raw)
	}
	if status, _ := post(t, ep.BaseURL()+"/chat/completions", ep.Token(), `{"model": "solver", "messages": [{"role": "user", "content": "`+strings.Repeat("x", 2000)+`"}]}`); status != 400 {
		t.Errorf("body over MaxBody: status %d", status)
	}
	r, err := http.NewRequest(http.MethodGet, ep.BaseURL()+"/models", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+ep.Token())
	mr, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	models, _ := io.ReadAll(mr.Body)
	mr.Body.Close()
	if !strings.Contains(string(models), `"id":"solver"`) || !strings.Contains(string(models), `"id":"verifier"`) {
		t.Errorf("models: %s", models)
	}
	calls, _ := ep.Close()
	if len(calls) != 2 || calls[0].Text != text || len(calls[0].Response.Tokens) > 3 || calls[0].PromptText != "abc" || calls[1].Text != streamed {
		t.Fatalf("calls %+v; completions text %q, streamed %q", calls, text, streamed)
	}
}

// TestRunMissingProgram: a program that is not there fails Run before any episode, naming the
// key.
func TestRunMissingProgram(t *testing.T) {
	for _, cmd := range []string{"no-such-program-x", "./team.mjs"} {
		_, err := Run(context.Background(), RunOptions{Program: workflows.ProgramOptions{Command: []string{cmd}, Dir: t.TempDir()},
			Agents: tinyAgents(t), Tasks: []workflows.Task{{ID: "t"}}, Samples: 1})
		if err == nil || !strings.Contains(err.Error(), "workflow.command") {
			t.Errorf("%s: %v", cmd, err)
		}
	}
}

// TestRunEscapedChild: a child that left the program's process group (setsid) and holds its
// stdout does not hold the episode: the pipes are closed after drainWait and the reward read.
func TestRunEscapedChild(t *testing.T) {
	start := time.Now()
	outs, _, dir := runMode(t, "escape", func(p *workflows.ProgramOptions) { p.Concurrency = 1 })
	data, err := os.ReadFile(filepath.Join(dir, "children.pid"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(line); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL) // escaped the group: the test cleans up
		}
	}
	if outs[0].Failed || outs[0].Reward != 0.5 || outs[1].Reward != 0.5 {
		t.Errorf("outcomes %+v", outs)
	}
	if d := time.Since(start); d < drainWait || d > 4*drainWait+5*time.Second {
		t.Errorf("two episodes took %v, want about 2 × drainWait (%v)", d, drainWait)
	}
}
