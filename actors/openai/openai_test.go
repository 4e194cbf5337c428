package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/actors/openai"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/normalize"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var sampling = actors.Sampling{Temperature: 1, TopP: 1, MaxTokens: 12}

func oneRequest() []actors.Request {
	return []actors.Request{{Agent: "solver", Prompt: actors.PromptIDs("solver", "2+2"), Seed: 42}}
}

// server is a real HTTP server on 127.0.0.1 answering every request with h, recording bodies.
type server struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	hits   atomic.Int64
}

func newServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request, body []byte)) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.hits.Add(1)
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		s.mu.Unlock()
		h(w, r, body)
	}))
	t.Cleanup(s.Close)
	return s
}

func reply(status int, body []byte) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
}

func backend(t *testing.T, o openai.Options) *openai.Backend {
	t.Helper()
	if o.ID == "" {
		o.ID = "m1"
	}
	if o.Backoff == 0 {
		o.Backoff = time.Millisecond
	}
	b, err := openai.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParsesVLLMResponseAndSendsVLLMRequest: the client sends the documented vLLM request and
// reads the documented vLLM response (token ids from "token_id:N", exact float32 log-probs).
func TestParsesVLLMResponseAndSendsVLLMRequest(t *testing.T) {
	s := newServer(t, reply(200, fixture(t, "vllm_completions_response.json")))
	b := backend(t, openai.Options{Endpoint: s.URL + "/v1"})
	res, err := b.Generate(context.Background(), oneRequest(), sampling)
	if err != nil {
		t.Fatal(err)
	}
	want := actors.Response{Tokens: []int32{52, 258}, LogProbs: []float32{-0.0123456789, -1.5e-05}, FinishReason: "stop"}
	if !reflect.DeepEqual(res[0], want) {
		t.Fatalf("got %+v, want %+v", res[0], want)
	}
	var got, doc map[string]any
	if err := json.Unmarshal(s.bodies[0], &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(fixture(t, "vllm_completions_request.json"), &doc); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, doc) {
		t.Fatalf("request differs from the documented vLLM request:\ngot %s\ndoc %s", s.bodies[0], fixture(t, "vllm_completions_request.json"))
	}
}

func TestBadResponsesAreClearErrors(t *testing.T) {
	twoChoices := strings.Replace(string(fixture(t, "vllm_completions_response.json")), `"choices": [`, `"choices": [{"index":1,"text":"","logprobs":{"tokens":[],"token_logprobs":[]},"finish_reason":"stop"},`, 1)
	for _, c := range []struct {
		name   string
		status int
		body   string
		want   []string
		hits   int64
	}{
		{"openai-text-tokens", 200, string(fixture(t, "openai_completions_response.json")), []string{`"\n\n", not "token_id:N"`, "return_tokens_as_token_ids"}, 1},
		{"no-logprobs", 200, string(fixture(t, "openai_completions_nologprobs.json")), []string{"choice 0 has no log-probs", "logprobs=1"}, 1},
		{"malformed", 200, `{"id": "cmpl-1", "choices": [`, []string{"malformed JSON response", `"{\"id\": \"cmpl-1\", \"choices\": ["`}, 1},
		{"choice-count", 200, twoChoices, []string{"2 choices for 1 prompts"}, 1},
		{"bad-request", 400, string(fixture(t, "vllm_error_response.json")), []string{"HTTP 400 Bad Request", "maximum context length is 96 tokens"}, 1},
		{"legacy-error", 404, string(fixture(t, "vllm_error_response_legacy.json")), []string{"HTTP 404", "The model `m2` does not exist."}, 1},
		{"server-error", 500, "boom: CUDA out of memory", []string{"HTTP 500 Internal Server Error", `"boom: CUDA out of memory"`, "gave up after 3 attempts"}, 3},
		{"overloaded", 429, `{"error":{"message":"too many requests"}}`, []string{"HTTP 429", "too many requests", "gave up after 3 attempts"}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, reply(c.status, []byte(c.body)))
			b := backend(t, openai.Options{Endpoint: s.URL, Retries: 2})
			_, err := b.Generate(context.Background(), oneRequest(), sampling)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if !strings.Contains(err.Error(), "model m1 ("+s.URL+")") {
				t.Errorf("error does not name the backend: %v", err)
			}
			if s.hits.Load() != c.hits {
				t.Errorf("%d attempts, want %d", s.hits.Load(), c.hits)
			}
		})
	}
}

func TestRetriesThenSucceeds(t *testing.T) {
	var n atomic.Int64
	ok := fixture(t, "vllm_completions_response.json")
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch n.Add(1) {
		case 1:
			reply(503, []byte("warming up"))(w, r, body)
		case 2:
			// Drop the connection: a connection error.
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			_ = conn.Close()
		default:
			reply(200, ok)(w, r, body)
		}
	})
	b := backend(t, openai.Options{Endpoint: s.URL})
	if _, err := b.Generate(context.Background(), oneRequest(), sampling); err != nil {
		t.Fatal(err)
	}
	if req, retries := b.Stats(); req != 3 || retries != 2 {
		t.Fatalf("%d attempts, %d retries; want 3, 2", req, retries)
	}
}

func TestConnectionRefusedAndTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	b := backend(t, openai.Options{Endpoint: "http://" + addr, Retries: 1})
	_, err = b.Generate(context.Background(), oneRequest(), sampling)
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "gave up after 2 attempts") {
		t.Fatalf("refused: %v", err)
	}

	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	b = backend(t, openai.Options{Endpoint: s.URL, Timeout: 100 * time.Millisecond})
	start := time.Now()
	_, err = b.Generate(context.Background(), oneRequest(), sampling)
	if err == nil || !strings.Contains(err.Error(), "no response within the timeout of 100ms") {
		t.Fatalf("timeout: %v", err)
	}
	if s.hits.Load() != 1 || time.Since(start) > 3*time.Second {
		t.Fatalf("timeouts are not retried: %d attempts in %s", s.hits.Load(), time.Since(start))
	}
}

func TestAPIKeyFromEnvNeverLeaks(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	var auth atomic.Value
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		auth.Store(r.Header.Get("Authorization"))
		reply(401, []byte(`{"error":{"message":"invalid key `+key+`"}}`))(w, r, body)
	})
	env := func(name string) (string, bool) {
		if name == "MY_KEY" {
			return key, true
		}
		return "", false
	}
	cfg := configs.Model{Backend: configs.BackendOpenAI, OpenAI: configs.OpenAI{Endpoint: s.URL, APIKeyEnv: "MY_KEY"}}
	b, err := openai.FromConfig("m1", cfg, openai.Checkpoint{}, 1, env, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Generate(context.Background(), oneRequest(), sampling)
	if err == nil || strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "invalid key <redacted>") {
		t.Fatalf("error: %v", err)
	}
	if auth.Load() != "Bearer "+key {
		t.Fatalf("Authorization %q", auth.Load())
	}
	if strings.Contains(b.Describe(), key) {
		t.Fatal("Describe shows the key")
	}
	cfg.OpenAI.APIKeyEnv = "UNSET_KEY"
	if _, err := openai.FromConfig("m1", cfg, openai.Checkpoint{}, 1, env, nil); err == nil || !strings.Contains(err.Error(), "UNSET_KEY, which is not set") {
		t.Fatalf("unset key env: %v", err)
	}
}

// TestSecretsNeverLeakAtTheEdges: a key that an error body echoes across the 300-byte cut of
// the excerpt is still redacted (whole, not half), and a password in the endpoint URL never
// appears in Describe or in errors.
func TestSecretsNeverLeakAtTheEdges(t *testing.T) {
	const key = "sk-SECRETKEY-0123456789"
	s := newServer(t, reply(400, []byte(`{"error":{"message":"`+strings.Repeat("x", 290)+key+`"}}`)))
	b := backend(t, openai.Options{Endpoint: s.URL, APIKey: key})
	_, err := b.Generate(context.Background(), oneRequest(), sampling)
	if err == nil || strings.Contains(err.Error(), key[:10]) {
		t.Fatalf("a key across the excerpt's cut leaked: %v", err)
	}

	u := strings.Replace(s.URL, "http://", "http://user:hunter2@", 1)
	b = backend(t, openai.Options{Endpoint: u})
	if d := b.Describe(); strings.Contains(d, "hunter2") || !strings.Contains(d, "user:xxxxx@") {
		t.Fatalf("Describe: %s", d)
	}
	if _, err := b.Generate(context.Background(), oneRequest(), sampling); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // refused: the transport's own error text
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	b = backend(t, openai.Options{Endpoint: "http://user:hunter2@" + addr})
	if _, err := b.Generate(context.Background(), oneRequest(), sampling); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error: %v", err)
	}
}

// TestConcurrencyBudget: one backend shared by two concurrent Generate calls (two agents)
// never has more than Concurrency requests in flight.
func TestConcurrencyBudget(t *testing.T) {
	var inflight, peak atomic.Int64
	ok := fixture(t, "vllm_completions_response.json")
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		n := inflight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		inflight.Add(-1)
		reply(200, ok)(w, r, body)
	})
	b := backend(t, openai.Options{Endpoint: s.URL, Concurrency: 3})
	reqs := make([]actors.Request, 8)
	for i := range reqs {
		reqs[i] = oneRequest()[0]
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Generate(context.Background(), reqs, sampling); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if peak.Load() != 3 || s.hits.Load() != 16 {
		t.Fatalf("peak in flight %d (want 3), %d requests (want 16)", peak.Load(), s.hits.Load())
	}
}

// TestFailureCancelsTheRest: one failing request fails Generate and stops the others early.
func TestFailureCancelsTheRest(t *testing.T) {
	var n atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if n.Add(1) == 1 {
			reply(400, []byte(`{"error":{"message":"bad prompt"}}`))(w, r, body)
			return
		}
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	b := backend(t, openai.Options{Endpoint: s.URL, Concurrency: 4})
	reqs := make([]actors.Request, 4)
	for i := range reqs {
		reqs[i] = oneRequest()[0]
	}
	start := time.Now()
	_, err := b.Generate(context.Background(), reqs, sampling)
	if err == nil || !strings.Contains(err.Error(), "bad prompt") || errors.Is(err, context.Canceled) {
		t.Fatalf("error: %v", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatal("the other requests were not cancelled")
	}
}

func TestChatModeReEncodes(t *testing.T) {
	s := newServer(t, reply(200, fixture(t, "vllm_chat_response.json")))
	b := backend(t, openai.Options{Endpoint: s.URL, Mode: openai.ModeChat})
	res, err := b.Generate(context.Background(), oneRequest(), sampling)
	if err != nil {
		t.Fatal(err)
	}
	want := actors.Response{Tokens: []int32{'4', model.EOS}, FinishReason: "stop", ReEncoded: true}
	if !reflect.DeepEqual(res[0], want) {
		t.Fatalf("got %+v want %+v", res[0], want)
	}
	var req openai.ChatRequest
	if err := json.Unmarshal(s.bodies[0], &req); err != nil {
		t.Fatal(err)
	}
	if len(req.Messages) != 1 || req.Messages[0] != (openai.ChatMessage{Role: "user", Content: "2+2"}) || *req.Seed != 42 {
		t.Fatalf("chat request %s", s.bodies[0])
	}
	if !strings.Contains(b.Describe(), "no log-probs") {
		t.Fatal(b.Describe())
	}
}

func TestBatchModeNeedsDrmasServe(t *testing.T) {
	s := newServer(t, reply(200, fixture(t, "vllm_completions_response.json")))
	b := backend(t, openai.Options{Endpoint: s.URL, Batch: true})
	reqs := append(oneRequest(), oneRequest()...)
	_, err := b.Generate(context.Background(), reqs, sampling)
	if err == nil || !strings.Contains(err.Error(), "set batch: false for vLLM") {
		t.Fatalf("error: %v", err)
	}
}

// TestRequireVersionUsesServersWithoutVersions: a backend that requires a version takes a
// server that reports none (vLLM's /v1/models, or no /v1/models at all) as it is: it does not
// wait, and records Options.Version. One that reports a version in its responses only (not on
// /v1/models) fails on a response of another step, and succeeds on one of the right step.
func TestRequireVersionUsesServersWithoutVersions(t *testing.T) {
	good := fixture(t, "vllm_completions_response.json")
	var resp map[string]any
	if err := json.Unmarshal(good, &resp); err != nil {
		t.Fatal(err)
	}
	resp["drmas_policy_version"] = 6
	stepSix, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	noModels := func(body []byte) func(http.ResponseWriter, *http.Request, []byte) {
		return func(w http.ResponseWriter, r *http.Request, b []byte) {
			if r.URL.Path == "/v1/models" {
				reply(404, []byte(`{"detail":"Not Found"}`))(w, r, b)
				return
			}
			reply(200, body)(w, r, b)
		}
	}
	for _, c := range []struct {
		name    string
		h       func(http.ResponseWriter, *http.Request, []byte)
		version int64
		want    string
	}{
		{"vllm", asVLLM(t, reply(200, good)), 7, ""},
		{"no-models-endpoint", noModels(good), 7, ""},
		{"response-of-another-step", noModels(stepSix), 7, "sampled by checkpoint step 6, but this stage samples from and records step 7"},
		{"response-of-the-step", noModels(stepSix), 6, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, c.h)
			var log []string
			b := backend(t, openai.Options{Endpoint: s.URL, Version: c.version, RequireVersion: true, VersionWait: time.Minute,
				Logf: func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }})
			start := time.Now()
			res, err := b.Generate(context.Background(), oneRequest(), sampling)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) || res != nil {
					t.Fatalf("error %v, want %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.Version() != c.version || len(log) != 0 || time.Since(start) > 10*time.Second {
				t.Fatalf("version %d (want %d), notices %q, %s", b.Version(), c.version, log, time.Since(start))
			}
		})
	}
}

// ---- through the rollout stage ----

// warmEnv returns a warmed-up local store and the config pointing its model at url.
func warmEnv(t *testing.T) *stages.Env {
	t.Helper()
	env := stagetest.Env(t, stagetest.Config(t, "math"))
	if _, err := warmup.Run(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	return env
}

func pointAt(env *stages.Env, o configs.OpenAI) {
	c := *env.Config
	c.Models = map[string]configs.Model{}
	for id, m := range env.Config.Models {
		m.Backend, m.OpenAI = configs.BackendOpenAI, o
		c.Models[id] = m
	}
	env.Config = &c
}

func keys(t *testing.T, env *stages.Env, prefix string) []string {
	t.Helper()
	var out []string
	if err := env.Bucket.Iter(context.Background(), prefix, func(k string) error { out = append(out, k); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// asVLLM answers GET /v1/models as vLLM does (the model, no drmas_policy_version) and every
// other request with h.
func asVLLM(t *testing.T, h func(w http.ResponseWriter, r *http.Request, body []byte)) func(w http.ResponseWriter, r *http.Request, body []byte) {
	models := fixture(t, "vllm_models.json")
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
			reply(200, models)(w, r, body)
			return
		}
		h(w, r, body)
	}
}

// TestFailedRolloutWritesNothing: a server that fails (500, timeout, malformed JSON, missing
// log-probs, wrong choice count) fails the rollout with a clear error, and the rollout folder
// stays empty: no parts, no manifest.
func TestFailedRolloutWritesNothing(t *testing.T) {
	good := fixture(t, "vllm_completions_response.json")
	var served atomic.Int64
	// One warmed-up store for every case: each checks that its failure left it empty.
	warm := warmEnv(t)
	for _, c := range []struct {
		name string
		h    func(w http.ResponseWriter, r *http.Request, body []byte)
		want string
	}{
		{"500", reply(500, []byte(`{"error":{"message":"engine dead"}}`)), "HTTP 500 Internal Server Error: \"engine dead\""},
		{"timeout", func(w http.ResponseWriter, r *http.Request, _ []byte) { <-r.Context().Done() }, "no response within the timeout of 150ms"},
		{"malformed", reply(200, []byte(`{"choices":[{"index":0,`)), "malformed JSON response"},
		{"no-logprobs", reply(200, fixture(t, "openai_completions_nologprobs.json")), "has no log-probs"},
		{"text-tokens", reply(200, fixture(t, "openai_completions_response.json")), "return_tokens_as_token_ids"},
		// Succeeds for a while, then fails: earlier responses must not be written either.
		{"late-500", func(w http.ResponseWriter, r *http.Request, body []byte) {
			if served.Add(1) > 20 {
				reply(502, []byte("bad gateway"))(w, r, body)
				return
			}
			reply(200, good)(w, r, body)
		}, "HTTP 502 Bad Gateway"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, asVLLM(t, c.h))
			env := &stages.Env{Bucket: warm.Bucket, Config: warm.Config}
			pointAt(env, configs.OpenAI{Endpoint: s.URL, Retries: 1, Backoff: time.Millisecond, Timeout: 150 * time.Millisecond})
			_, err := rollout.Run(context.Background(), env, rollout.Options{Step: stages.LatestStep})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "rollout iter 0: model m1") {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			if k := keys(t, env, layout.IterDir(env.Config.Run, 0)); len(k) != 0 {
				t.Fatalf("a failed rollout wrote %v", k)
			}
		})
	}
}

// TestChatRowsAreRefusedByTheLearner: a chat-mode rollout commits rows without log-probs;
// the learner refuses them, naming the backend as the cause.
func TestChatRowsAreRefusedByTheLearner(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var req openai.ChatRequest
		_ = json.Unmarshal(body, &req)
		answer := "approve"
		if !strings.Contains(req.Messages[0].Content, "answer") {
			answer = "7"
		}
		stop := "stop"
		data, _ := json.Marshal(openai.ChatResponse{ID: "chatcmpl-1", Object: "chat.completion", Model: req.Model,
			Choices: []openai.ChatChoice{{Message: &openai.ChatMessage{Role: "assistant", Content: answer}, FinishReason: &stop}}})
		reply(200, data)(w, r, body)
	})
	env := warmEnv(t)
	pointAt(env, configs.OpenAI{Endpoint: s.URL, Mode: "chat"})
	ctx := context.Background()
	res, err := rollout.Run(ctx, env, rollout.Options{Step: stages.LatestStep})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows == 0 {
		t.Fatal("no rows")
	}
	if _, err := normalize.Run(ctx, env, normalize.Options{}); err != nil {
		t.Fatal(err)
	}
	_, err = learn.Run(ctx, env, learn.Options{})
	if err == nil || !strings.Contains(err.Error(), "no behaviour log-probs") || !strings.Contains(err.Error(), "backend") {
		t.Fatalf("learner: %v", err)
	}
	t.Logf("learner refuses: %v", err)
}

// TestRefusedNamesTheServerToCheck: a server that refuses connections keeps the dial's address
// in the error's chain (the text stays redacted), so a stage's error says which server to check
// ("check that the server at ADDR is up"), as it does for the store.
func TestRefusedNamesTheServerToCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	b := backend(t, openai.Options{Endpoint: "http://user:hunter2@" + addr, Retries: 1})
	_, err = b.Generate(context.Background(), oneRequest(), sampling)
	if err == nil {
		t.Skip("a closed port accepted a connection")
	}
	got := stages.Fail(context.Background(), "rollout iter 0", err).Error()
	if want := "check that the server at " + addr + " is up and reachable"; !strings.Contains(got, want) || strings.Contains(got, "hunter2") {
		t.Fatalf("refused: %q\nwant it to say %q (and no password)", got, want)
	}
}
