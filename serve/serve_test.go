package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
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
	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/serve"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/evaluate"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
)

// start runs a drmas serve on a free 127.0.0.1 port until the test ends.
func start(t *testing.T, o serve.Options) (*serve.Server, string) {
	t.Helper()
	return stagetest.Serve(t, o)
}

// warm returns an environment on a fresh store with checkpoint step 0 published.
func warm(t *testing.T, cfg *configs.Config) *stages.Env {
	t.Helper()
	env := stagetest.Env(t, cfg)
	if _, err := warmup.Run(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	return env
}

func viaHTTP(cfg *configs.Config, url string, o configs.OpenAI) *configs.Config {
	c := *cfg
	c.Models = map[string]configs.Model{}
	for id, m := range cfg.Models {
		m.Backend = configs.BackendOpenAI
		m.OpenAI = o
		m.OpenAI.Endpoint = url
		c.Models[id] = m
	}
	return &c
}

func readRollout(t *testing.T, env *stages.Env) (*commit.Manifest, []shards.Row) {
	t.Helper()
	return readIteration(t, env, 0)
}

// readIteration returns the committed rollout of iteration iter.
func readIteration(t *testing.T, env *stages.Env, iter int) (*commit.Manifest, []shards.Row) {
	t.Helper()
	ctx := context.Background()
	dir := layout.RolloutDir(env.Config.Run, iter)
	m, _, err := commit.Read(ctx, env.Bucket, dir)
	if err != nil {
		t.Fatal(err)
	}
	var rows []shards.Row
	for _, f := range m.Files {
		data, err := commit.ReadFile(ctx, env.Bucket, dir, f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := shards.ReadTrajectories(bytes.NewReader(data), int64(len(data)), f.Name)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r...)
	}
	return m, rows
}

// TestRolloutThroughServeMatchesLocal rolls out the same iteration in process and through
// drmas serve (one request per prompt, and batched requests): same rows, same bytes.
func TestRolloutThroughServeMatchesLocal(t *testing.T) {
	ctx := context.Background()
	for _, wf := range []string{"math", "search"} {
		t.Run(wf, func(t *testing.T) {
			cfg := stagetest.Config(t, wf)
			local := warm(t, cfg)
			if _, err := rollout.Run(ctx, local, rollout.Options{Step: stages.LatestStep}); err != nil {
				t.Fatal(err)
			}
			wantM, want := readRollout(t, local)
			for _, mode := range []struct {
				name string
				o    configs.OpenAI
			}{
				{"per-prompt", configs.OpenAI{Concurrency: 8}},
				{"batched", configs.OpenAI{Batch: true, MaxBatch: 64, Concurrency: 2}},
			} {
				if wf == "search" && mode.o.Batch { // math covers batching; keep the test fast
					continue
				}
				t.Run(mode.name, func(t *testing.T) {
					// The server serves the store the stage reads (a checkpoint of another
					// store is another checkpoint, even with the same weights).
					remote := warm(t, cfg)
					srv, url := start(t, serve.Options{Bucket: remote.Bucket, Run: cfg.Run, Poll: -1})
					remote.Config = viaHTTP(cfg, url, mode.o)
					if _, err := rollout.Run(ctx, remote, rollout.Options{Step: stages.LatestStep}); err != nil {
						t.Fatal(err)
					}
					gotM, got := readRollout(t, remote)
					if len(got) != len(want) || len(want) == 0 {
						t.Fatalf("%d rows through HTTP, %d in process", len(got), len(want))
					}
					tokens := 0
					for i := range want {
						w, g := want[i], got[i]
						if !reflect.DeepEqual(w.ResponseIDs, g.ResponseIDs) || !reflect.DeepEqual(w.PromptIDs, g.PromptIDs) {
							t.Fatalf("row %d: tokens differ:\nlocal %v\nhttp  %v", i, w.ResponseIDs, g.ResponseIDs)
						}
						for j := range w.ResponseLogprobs {
							if w.ResponseLogprobs[j] != g.ResponseLogprobs[j] {
								t.Fatalf("row %d token %d: log-prob %v through HTTP, %v in process", i, j, g.ResponseLogprobs[j], w.ResponseLogprobs[j])
							}
						}
						if !reflect.DeepEqual(w, g) {
							t.Fatalf("row %d differs:\nlocal %+v\nhttp  %+v", i, w, g)
						}
						tokens += len(g.ResponseIDs)
					}
					for i := range wantM.Files {
						if wantM.Files[i].SHA256 != gotM.Files[i].SHA256 {
							t.Errorf("part %d: sha256 differs between local and HTTP rollouts", i)
						}
					}
					st := srv.Stats()
					t.Logf("%s %s: %d rows, %d tokens identical; server: %d requests, %d prompts in %d decode steps (largest %d)",
						wf, mode.name, len(got), tokens, st.Requests, st.Prompts, st.Batches, st.MaxBatch)
					if st.Prompts != int64(len(got)) {
						t.Errorf("server sampled %d prompts for %d rows", st.Prompts, len(got))
					}
					if st.Batches >= int64(tokens) || st.MaxBatch < 2 { // one step per token: no batching
						t.Errorf("no batching: %+v for %d tokens", st, tokens)
					}
					if mode.o.Batch && st.Requests >= st.Prompts {
						t.Errorf("batched mode sent %d requests for %d prompts", st.Requests, st.Prompts)
					}
				})
			}
		})
	}
}

func TestBackendPlanDescribesSharing(t *testing.T) {
	env := warm(t, stagetest.Config(t, "math"))
	cfg := env.Config
	// An external model (no sizes, no checkpoint) on a vLLM server, next to the local one.
	cfg.Models["m2"] = configs.Model{Backend: "openai", OpenAI: configs.OpenAI{Endpoint: "http://127.0.0.1:9/v1", Model: "qwen", Concurrency: 4}}
	cfg.Agents["verifier"] = configs.Agent{Model: "m2"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	set, err := stages.LoadPolicy(context.Background(), env, stages.LatestStep, false)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	env.Log = &log
	bes, err := stages.BackendsLogged(env, set)
	if err != nil {
		t.Fatal(err)
	}
	want := "model m1 (local, step 0): solver\nmodel m2 (openai http://127.0.0.1:9, model qwen, concurrency 4): verifier\n"
	if log.String() != want {
		t.Fatalf("plan:\n%s\nwant:\n%s", log.String(), want)
	}
	if bes["solver"].Model() != "m1" || bes["verifier"].Model() != "m2" {
		t.Fatal("wrong mapping")
	}
}

func post(t *testing.T, url string, body any) (int, map[string]any) {
	t.Helper()
	data, ok := body.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: not JSON: %s", url, raw)
	}
	return resp.StatusCode, m
}

// shape is a JSON value's structure: object keys (recursively, first array element), types.
func shape(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = shape(e)
		}
		return out
	case []any:
		if len(x) == 0 {
			return []any{}
		}
		return []any{shape(x[0])}
	case nil:
		return nil
	default:
		return reflect.TypeOf(x).String()
	}
}

// covers reports the fixture keys (a path) missing from got's shape, ignoring null fixture
// values (optional fields) and fields vLLM adds that OpenAI clients ignore.
func covers(want, got any, path string, optional map[string]bool) []string {
	var missing []string
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{path + " (not an object)"}
		}
		for k, wv := range w {
			if wv == nil || optional[k] || strings.HasPrefix(k, openai.TokenIDPrefix) {
				continue
			}
			gv, ok := g[k]
			if !ok {
				missing = append(missing, path+"."+k)
				continue
			}
			missing = append(missing, covers(wv, gv, path+"."+k, optional)...)
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{path + " (not an array)"}
		}
		if len(w) > 0 && len(g) > 0 {
			missing = append(missing, covers(w[0], g[0], path+"[]", optional)...)
		}
	default:
		if want != got {
			missing = append(missing, path+" is "+toString(got)+", want "+toString(want))
		}
	}
	return missing
}

func toString(v any) string { b, _ := json.Marshal(v); return string(b) }

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "actors", "openai", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func decodeShape(t *testing.T, data []byte) any {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return shape(v)
}

// TestServerSpeaksVLLM sends the documented vLLM request to drmas serve and checks that the
// answer has the documented response shape; also /v1/models, /health and errors.
func TestServerSpeaksVLLM(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	env := warm(t, cfg)
	_, url := start(t, serve.Options{Bucket: env.Bucket, Run: cfg.Run, Poll: -1})
	optional := map[string]bool{"service_tier": true, "system_fingerprint": true, "kv_transfer_params": true, "stop_reason": true, "prompt_logprobs": true, "prompt_tokens_details": true, "root": true, "permission": true}

	status, got := post(t, url+"/v1/completions", fixture(t, "vllm_completions_request.json"))
	if status != 200 {
		t.Fatalf("status %d: %v", status, got)
	}
	if miss := covers(decodeShape(t, fixture(t, "vllm_completions_response.json")), shape(got), "", optional); len(miss) > 0 {
		t.Errorf("response lacks the vLLM shape: %v\n%s", miss, toString(got))
	}
	var typed openai.CompletionResponse
	if err := json.Unmarshal([]byte(toString(got)), &typed); err != nil {
		t.Fatal(err)
	}
	ch := typed.Choices[0]
	if typed.Object != "text_completion" || ch.Logprobs == nil || len(ch.Logprobs.Tokens) == 0 || !strings.HasPrefix(ch.Logprobs.Tokens[0], "token_id:") ||
		len(ch.Logprobs.TopLogprobs) != len(ch.Logprobs.Tokens) || *ch.FinishReason == "" || typed.Usage.PromptTokens != 12 {
		t.Fatalf("unexpected response %s", toString(got))
	}
	// The same request again: the seed fixes the answer.
	_, again := post(t, url+"/v1/completions", fixture(t, "vllm_completions_request.json"))
	if toString(again["choices"]) != toString(got["choices"]) {
		t.Fatal("same seed, different answer")
	}

	// Text prompts, without token ids: tokens are byte strings, text skips special tokens.
	status, txt := post(t, url+"/v1/completions", map[string]any{"model": "m1", "prompt": []string{"<|bos|>solver<|sep|>1+1<|sep|>", "<|bos|>solver<|sep|>2+2<|sep|>"}, "max_tokens": 4, "logprobs": 0, "seed": -3})
	if status != 200 || len(txt["choices"].([]any)) != 2 {
		t.Fatalf("text prompts: %d %v", status, txt)
	}

	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if miss := covers(decodeShape(t, fixture(t, "vllm_models.json")), decodeShape(t, raw), "", map[string]bool{"owned_by": true, "created": true, "id": true, "max_model_len": true, "root": true, "permission": true}); len(miss) > 0 || !strings.Contains(string(raw), `"id":"m1"`) || !strings.Contains(string(raw), `"max_model_len":96`) {
		t.Errorf("/v1/models: %v %s", miss, raw)
	}
	// Both name the checkpoint served: step, run and manifest sha256 (what a stage checks).
	set, err := checkpoints.LoadStep(context.Background(), env.Bucket, cfg.Run, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	var list openai.ModelList
	if err := json.Unmarshal(raw, &list); err != nil || len(list.Data) != 1 {
		t.Fatalf("/v1/models: %v %s", err, raw)
	}
	if c := list.Data[0]; c.DrmasPolicyVersion == nil || *c.DrmasPolicyVersion != 0 || c.DrmasRun != "t" || c.DrmasCheckpointSHA256 != set.ManifestSHA256 || set.ManifestSHA256 == "" {
		t.Errorf("/v1/models does not name checkpoint step 0 of run t (sha256 %s): %s", set.ManifestSHA256, raw)
	}
	resp, err = http.Get(url + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health: %v %v", err, resp)
	}
	var health map[string]any
	err = json.NewDecoder(resp.Body).Decode(&health)
	resp.Body.Close()
	if err != nil || health["status"] != "ok" || health["policy_version"] != 0.0 || health["run"] != "t" || health["checkpoint_sha256"] != set.ManifestSHA256 {
		t.Errorf("/health: %v %v", err, health)
	}

	for _, c := range []struct {
		body   string
		status int
		msg    string
	}{
		{`{"model":"m2","prompt":[1,2]}`, 404, "does not exist"},
		{`{"model":"m1","prompt":[1,2],"n":2}`, 400, "n must be 1"},
		{`{"model":"m1","prompt":[1,99999]}`, 400, "out of vocabulary"},
		{`{"model":"m1","prompt":[` + strings.Repeat("1,", 96) + `1]}`, 400, "maximum context length is 96"},
		{`{"model":"m1","prompt":[1,2]`, 400, "malformed JSON"},
		{`{"model":"m1","prompt":[[1],[2]],"drmas_seeds":[1]}`, 400, "drmas_seeds has 1 seeds for 2 prompts"},
		{`{"model":"m1","prompt":[1,2],"temperature":1e300}`, 400, "temperature must be a finite number"},
		{`{"model":"m1","prompt":[1,2],"temperature":-1}`, 400, "temperature must be a finite number"},
	} {
		status, e := post(t, url+"/v1/completions", []byte(c.body))
		if status != c.status || !strings.Contains(toString(e), c.msg) {
			t.Errorf("%s: %d %v, want %d %q", c.body, status, e, c.status, c.msg)
		}
		if miss := covers(decodeShape(t, fixture(t, "vllm_error_response.json")), shape(e), "", map[string]bool{"message": true, "code": true, "type": true}); len(miss) > 0 {
			t.Errorf("error shape: %v", miss)
		}
	}
}

// TestConcurrentRequestsShareOneSample: 16 concurrent single-prompt requests of 8 tokens are
// decoded together (few decode steps, not one per token), each exactly as when sent alone.
func TestConcurrentRequestsShareOneSample(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	env := warm(t, cfg)
	srv, url := start(t, serve.Options{Bucket: env.Bucket, Run: cfg.Run, Poll: -1, Window: 50 * time.Millisecond})
	req := func(seed int64) map[string]any {
		return map[string]any{"model": "m1", "prompt": actors.PromptIDs("solver", "3+4="), "max_tokens": 8, "logprobs": 1, "seed": seed, "return_tokens_as_token_ids": true}
	}
	const n = 16
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, r := post(t, url+"/v1/completions", req(int64(i)))
			got[i] = toString(r["choices"])
		}()
	}
	wg.Wait()
	st := srv.Stats()
	t.Logf("%d concurrent requests → %d decode steps (largest %d prompts)", n, st.Batches, st.MaxBatch)
	if st.Batches > n*8/2 || st.MaxBatch < 4 {
		t.Errorf("requests were not batched: %+v", st)
	}
	for i := range n {
		_, r := post(t, url+"/v1/completions", req(int64(i)))
		if toString(r["choices"]) != got[i] {
			t.Fatalf("request %d alone differs from batched:\n%s\n%s", i, toString(r["choices"]), got[i])
		}
	}
}

// TestMaxBatchCapsEverySampleCall: a request with more prompts than MaxBatch is decoded at most
// MaxBatch prompts a step, with the same results as sent in small requests.
func TestMaxBatchCapsEverySampleCall(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	env := warm(t, cfg)
	srv, url := start(t, serve.Options{Bucket: env.Bucket, Run: cfg.Run, Poll: -1, MaxBatch: 4})
	prompts := make([][]int32, 10)
	seeds := make([]uint64, len(prompts))
	for i := range prompts {
		prompts[i] = actors.PromptIDs("solver", fmt.Sprintf("%d+4=", i))
		seeds[i] = uint64(100 + i)
	}
	status, r := post(t, url+"/v1/completions", map[string]any{"model": "m1", "prompt": prompts, "drmas_seeds": seeds, "max_tokens": 6, "return_tokens_as_token_ids": true, "logprobs": 1})
	if status != 200 || len(r["choices"].([]any)) != len(prompts) {
		t.Fatalf("%d %v", status, r)
	}
	if st := srv.Stats(); st.MaxBatch > 4 || st.Batches < 3 || st.Prompts != int64(len(prompts)) {
		t.Fatalf("10 prompts with MaxBatch 4: %+v, want ≥ 3 steps of ≤ 4 prompts", st)
	}
	for i := range prompts {
		_, one := post(t, url+"/v1/completions", map[string]any{"model": "m1", "prompt": [][]int32{prompts[i]}, "drmas_seeds": []uint64{seeds[i]}, "max_tokens": 6, "return_tokens_as_token_ids": true, "logprobs": 1})
		a, b := r["choices"].([]any)[i].(map[string]any), one["choices"].([]any)[0].(map[string]any)
		if toString(a["text"]) != toString(b["text"]) || toString(a["logprobs"]) != toString(b["logprobs"]) {
			t.Fatalf("prompt %d in a big request differs from alone:\n%v\n%v", i, a, b)
		}
	}
}

// TestReloadsLatest publishes a new checkpoint and sees the server swap to it.
func TestReloadsLatest(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	env := warm(t, cfg)
	srv, url := start(t, serve.Options{Bucket: env.Bucket, Run: cfg.Run, Poll: 20 * time.Millisecond})
	if srv.Version() != 0 {
		t.Fatalf("version %d", srv.Version())
	}
	ctx := context.Background()
	set, err := checkpoints.LoadStep(ctx, env.Bucket, cfg.Run, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	set.Step, set.Parent = 1, 0
	if _, err := checkpoints.Publish(ctx, env.Bucket, cfg.Run, set, "x"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for srv.Version() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("server did not reload LATEST")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, r := post(t, url+"/v1/completions", map[string]any{"prompt": []int{257, 1}, "max_tokens": 2, "seed": 1})
	if r["drmas_policy_version"] != 1.0 || srv.Stats().Reloads != 1 {
		t.Fatalf("after reload: %v %+v", r, srv.Stats())
	}
	// The backend records the version the server reports.
	be, err := openai.New(openai.Options{ID: "m1", Endpoint: url, Version: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := be.Generate(ctx, []actors.Request{{Agent: "solver", Prompt: actors.PromptIDs("solver", "1"), Seed: 3}}, actors.Sampling{Temperature: 1, TopP: 1, MaxTokens: 3}); err != nil {
		t.Fatal(err)
	}
	if be.Version() != 1 {
		t.Fatalf("backend version %d, want 1", be.Version())
	}
}

// TestGracefulShutdown: cancelling the context ends Serve; later connections are refused.
func TestGracefulShutdown(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	env := warm(t, cfg)
	s, err := serve.New(context.Background(), serve.Options{Bucket: env.Bucket, Run: cfg.Run})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()
	if status, _ := post(t, url+"/v1/completions", map[string]any{"prompt": []int{257, 1}, "max_tokens": 2}); status != 200 {
		t.Fatal(status)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	if _, err := http.Get(url + "/health"); err == nil {
		t.Fatal("server still answers after shutdown")
	}
}

func TestNewErrors(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	env := stagetest.Env(t, cfg)
	_, err := serve.New(context.Background(), serve.Options{Bucket: env.Bucket, Run: cfg.Run})
	if !errors.Is(err, checkpoints.ErrNone) {
		t.Fatalf("no checkpoint: %v", err)
	}
	env = warm(t, cfg)
	if _, err := serve.New(context.Background(), serve.Options{Bucket: env.Bucket, Run: cfg.Run, Model: "zz"}); err == nil || !strings.Contains(err.Error(), `no model "zz"`) {
		t.Fatalf("unknown model: %v", err)
	}
}

// TestSlowBodyGetsATimeout: a client that sends its header and then trickles (or stops
// sending) the body gets 408 after BodyTimeout instead of holding a handler for ever; and the
// body's deadline is lifted once the body is read, so a request answered after more than
// BodyTimeout (here held by a long batching window) still gets its 200.
func TestSlowBodyGetsATimeout(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	env := warm(t, cfg)
	const bodyTimeout = 300 * time.Millisecond
	_, url := start(t, serve.Options{Bucket: env.Bucket, Run: cfg.Run, BodyTimeout: bodyTimeout, Window: 4 * bodyTimeout})

	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: drmas\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\":")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	raw, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("the server did not close the slow connection after answering: %v (read %q)", err, raw)
	}
	if !strings.HasPrefix(string(raw), "HTTP/1.1 408 ") || !strings.Contains(string(raw), "request body not received within 300ms") {
		t.Fatalf("slow body: got %q, want 408 naming the timeout", raw)
	}
	if d := time.Since(start); d < bodyTimeout {
		t.Fatalf("answered after %s, before the %s body timeout", d, bodyTimeout)
	}

	start = time.Now()
	status, m := post(t, url+"/v1/completions", map[string]any{"prompt": []int{257, 1}, "max_tokens": 2})
	if status != http.StatusOK || len(m["choices"].([]any)) != 1 {
		t.Fatalf("request answered after the window: status %d, %v", status, m)
	}
	if d := time.Since(start); d < 4*bodyTimeout {
		t.Fatalf("answered after %s: the window (%s) did not hold it past the body timeout, so the test shows nothing", d, 4*bodyTimeout)
	}
}

// TestOversizedBody: a body over the 64 MiB cap is refused with 413, not read on.
func TestOversizedBody(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	env := warm(t, cfg)
	_, url := start(t, serve.Options{Bucket: env.Bucket, Run: cfg.Run})
	body := bytes.Repeat([]byte(" "), 64<<20+1)
	resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(raw), "request body over 67108864 bytes") {
		t.Fatalf("oversized body: %d %s", resp.StatusCode, raw)
	}
}

// publish publishes step as a copy of step 0's weights, as a learner would (the server
// tells checkpoints apart by their step).
func publish(t *testing.T, env *stages.Env, step int64) {
	t.Helper()
	ctx := context.Background()
	set, err := checkpoints.LoadStep(ctx, env.Bucket, env.Config.Run, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	set.Step, set.Parent = step, step-1
	if _, err := checkpoints.Publish(ctx, env.Bucket, env.Config.Run, set, "x"); err != nil {
		t.Fatal(err)
	}
}

// logBuffer collects notices written from several goroutines.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.Split(strings.TrimSuffix(string(p), "\n"), "\n")...)
	return len(p), nil
}

func (l *logBuffer) Logf(format string, args ...any) { fmt.Fprintf(l, format+"\n", args...) }

// has reports whether a line contains s.
func (l *logBuffer) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// waitFor waits until a line contains s.
func (l *logBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !l.has(s) {
		if time.Now().After(deadline) {
			t.Fatalf("no notice %q in:\n%s", s, strings.Join(l.lines, "\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBackendSamplesOnlyTheRequiredStep: a backend that requires checkpoint step 1 from a
// drmas serve that lags on step 0 waits for it (a notice says so), then fails with what to
// check if the server never loads it, or samples once it does; a server on a newer step is
// an error at once, and so is a response sampled after the server moved to another step. No
// completion is sampled by a wrong step.
func TestBackendSamplesOnlyTheRequiredStep(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	env := warm(t, cfg)
	srv, url := start(t, serve.Options{Bucket: env.Bucket, Run: cfg.Run, Poll: -1}) // reloads only when told
	publish(t, env, 1)
	reqs := []actors.Request{{Agent: "solver", Prompt: actors.PromptIDs("solver", "1+1"), Seed: 3}}
	smp := actors.Sampling{Temperature: 1, TopP: 1, MaxTokens: 3}
	newBackend := func(version int64, wait time.Duration) (*openai.Backend, *logBuffer) {
		var log logBuffer
		be, err := openai.New(openai.Options{ID: "m1", Endpoint: url, Version: version, RequireVersion: true, VersionWait: wait, Logf: log.Logf})
		if err != nil {
			t.Fatal(err)
		}
		return be, &log
	}

	// The server never reloads: the backend waits the config's version_wait, then says what
	// to check.
	m := cfg.Models["m1"]
	m.Backend, m.OpenAI = configs.BackendOpenAI, configs.OpenAI{Endpoint: url, VersionWait: 300 * time.Millisecond}
	log := &logBuffer{}
	be, err := openai.FromConfig("m1", m, openai.Checkpoint{Step: 1, Run: cfg.Run}, 1, nil, log.Logf)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = be.Generate(ctx, reqs, smp)
	if err == nil || !strings.Contains(err.Error(), "drmas serve (run t) still serves checkpoint step 0, want 1 (waited 300ms, models.m1.openai.version_wait)") ||
		!strings.Contains(err.Error(), "--run") || !strings.Contains(err.Error(), "--poll") {
		t.Fatalf("error %v", err)
	}
	if time.Since(start) < 300*time.Millisecond || !log.has("waiting up to 300ms for drmas serve at "+url+" to load checkpoint step 1 (it serves step 0") {
		t.Fatalf("did not wait (%s): %q", time.Since(start), log.lines)
	}
	if n := srv.Stats().Requests; n != 0 {
		t.Fatalf("step 0 sampled %d requests for a backend that requires step 1", n)
	}

	// The server reloads while the backend waits: it samples with step 1.
	be, log = newBackend(1, time.Minute)
	errc := make(chan error, 1)
	go func() { _, err := be.Generate(ctx, reqs, smp); errc <- err }()
	log.waitFor(t, "waiting up to 1m0s")
	if srv.Stats().Requests != 0 {
		t.Fatal("sampled before the server loaded step 1")
	}
	if _, err := srv.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if be.Version() != 1 || srv.Stats().Requests != 1 || !log.has("now serves checkpoint step 1") {
		t.Fatalf("version %d, %d requests, notices %q", be.Version(), srv.Stats().Requests, log.lines)
	}

	// A server on a newer step than the stage records: an error at once, nothing sampled.
	old, log := newBackend(0, time.Minute)
	start = time.Now()
	if _, err := old.Generate(ctx, reqs, smp); err == nil || !strings.Contains(err.Error(), "serves checkpoint step 1, newer than step 0") {
		t.Fatalf("error %v", err)
	}
	if time.Since(start) > 10*time.Second || len(log.lines) != 0 || srv.Stats().Requests != 1 {
		t.Fatalf("waited %s, notices %q, %d requests", time.Since(start), log.lines, srv.Stats().Requests)
	}

	// An external model (an openai model without sizes: drmas holds no checkpoint of it)
	// keeps recording the version the server reports.
	ext, err := openai.FromConfig("m1", configs.Model{Backend: configs.BackendOpenAI, OpenAI: configs.OpenAI{Endpoint: url}}, openai.Checkpoint{Step: 0}, 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ext.Generate(ctx, reqs, smp); err != nil || ext.Version() != 1 {
		t.Fatalf("external model: %v, version %d, want the server's 1", err, ext.Version())
	}

	// The server moves on after the backend found its step: the response is refused.
	publish(t, env, 2)
	if _, err := srv.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := be.Generate(ctx, reqs, smp); err == nil || !strings.Contains(err.Error(), "sampled by checkpoint step 2, but this stage samples from and records step 1") {
		t.Fatalf("error %v", err)
	}
}

// TestStagesWaitForTheServer: rollout and evaluate through a drmas serve that still serves
// the previous checkpoint wait for it to load the step they record, and every row records the
// step that sampled it; a stage of an older step than the server's fails and commits nothing.
func TestStagesWaitForTheServer(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	local := warm(t, cfg)
	srv, url := start(t, serve.Options{Bucket: local.Bucket, Run: cfg.Run, Poll: -1}) // reloads only when told
	var log logBuffer
	env := &stages.Env{Bucket: local.Bucket, Config: viaHTTP(cfg, url, configs.OpenAI{Concurrency: 4}), Log: &log}
	publish(t, env, 1)
	reload := func() {
		t.Helper()
		if _, err := srv.Reload(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Another run at the same step (its own store): the server's step 0 is not its step 0.
	ocfg := stagetest.Config(t, "math")
	ocfg.Run = "u"
	other := warm(t, ocfg)
	other.Config = viaHTTP(ocfg, url, configs.OpenAI{Concurrency: 4})
	if _, err := rollout.Run(ctx, other, rollout.Options{Step: 0}); err == nil ||
		!strings.Contains(err.Error(), "drmas serve serves checkpoint step 0 of run t, but this stage samples from step 0 of run u") || !strings.Contains(err.Error(), "point the server at this run (--run u) and store") {
		t.Fatalf("rollout of run u through a server of run t: %v", err)
	}
	if n := srv.Stats().Requests; n != 0 {
		t.Fatalf("the server of run t sampled %d requests for run u", n)
	}

	// Rollout of iteration 1 from step 1 while the server lags on step 0.
	errc := make(chan error, 1)
	go func() {
		_, err := rollout.Run(ctx, env, rollout.Options{Iteration: 1, Step: 1})
		errc <- err
	}()
	log.waitFor(t, "to load checkpoint step 1 (it serves step 0")
	if n := srv.Stats().Requests; n != 0 {
		t.Fatalf("the server sampled %d requests with step 0 for a rollout of step 1", n)
	}
	reload()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	m, rows := readIteration(t, env, 1)
	if m.Params["policy_version"] != "1" || len(rows) == 0 {
		t.Fatalf("manifest policy_version %s, %d rows", m.Params["policy_version"], len(rows))
	}
	for _, r := range rows {
		if r.PolicyVersion != 1 {
			t.Fatalf("row %d has policy_version %d, want 1", r.RowID, r.PolicyVersion)
		}
	}

	// Evaluation of step 2 while the server lags on step 1.
	publish(t, env, 2)
	type evalResult struct {
		rows []evaluate.ResultRow
		err  error
	}
	evc := make(chan evalResult, 1)
	go func() {
		rows, err := evaluate.Run(ctx, env, evaluate.Options{Step: 2})
		evc <- evalResult{rows, err}
	}()
	log.waitFor(t, "to load checkpoint step 2 (it serves step 1")
	reload()
	if r := <-evc; r.err != nil || len(r.rows) == 0 || r.rows[0].Step != 2 {
		t.Fatalf("evaluate: %v %+v", r.err, r.rows)
	}

	// Stages of an older step than the server's fail at once and commit nothing.
	before := srv.Stats().Requests
	if _, err := rollout.Run(ctx, env, rollout.Options{Iteration: 0, Step: 0}); err == nil || !strings.Contains(err.Error(), "serves checkpoint step 2, newer than step 0") {
		t.Fatalf("rollout of step 0: %v", err)
	}
	if _, err := evaluate.Run(ctx, env, evaluate.Options{Step: 1}); err == nil || !strings.Contains(err.Error(), "serves checkpoint step 2, newer than step 1") {
		t.Fatalf("evaluate of step 1: %v", err)
	}
	if srv.Stats().Requests != before {
		t.Fatal("the server sampled for a stage of an older step")
	}
	for _, dir := range []string{layout.RolloutDir(cfg.Run, 0), layout.EvalDir(cfg.Run, 1)} {
		if err := env.Bucket.Iter(ctx, dir+"/", func(k string) error { return fmt.Errorf("a failed stage wrote %s", k) }); err != nil {
			t.Fatal(err)
		}
	}
}

// front forwards every request to one drmas serve, then (after a Store) to another: a server
// restarted at the same address.
type front struct{ target atomic.Pointer[url.URL] }

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	httputil.NewSingleHostReverseProxy(f.target.Load()).ServeHTTP(w, r)
}

func (f *front) point(t *testing.T, raw string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	f.target.Store(u)
}

// TestBackendRefusesAnotherCheckpointAfterARestart: a backend found its checkpoint on the
// server, then the server restarts (same address) on another checkpoint of the same step (a
// run recreated under the same name, another store): its responses are refused, not
// recorded as the stage's checkpoint.
func TestBackendRefusesAnotherCheckpointAfterARestart(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	a := warm(t, cfg)
	ocfg := stagetest.Config(t, "math")
	ocfg.Seed++ // the same run name and step, other weights
	b := warm(t, ocfg)
	sets := make([]*checkpoints.Set, 2)
	for i, env := range []*stages.Env{a, b} {
		set, err := checkpoints.LoadStep(ctx, env.Bucket, cfg.Run, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		sets[i] = set
	}
	if sets[0].ManifestSHA256 == sets[1].ManifestSHA256 {
		t.Fatal("the two checkpoints are the same: the test shows nothing")
	}
	_, urlA := start(t, serve.Options{Bucket: a.Bucket, Run: cfg.Run, Poll: -1})
	srvB, urlB := start(t, serve.Options{Bucket: b.Bucket, Run: cfg.Run, Poll: -1})
	var f front
	f.point(t, urlA)
	fs := httptest.NewServer(&f)
	defer fs.Close()
	be, err := openai.New(openai.Options{ID: "m1", Endpoint: fs.URL, Version: 0, RequireVersion: true, CheckpointSHA256: sets[0].ManifestSHA256})
	if err != nil {
		t.Fatal(err)
	}
	reqs := []actors.Request{{Agent: "solver", Prompt: actors.PromptIDs("solver", "1+1"), Seed: 3}}
	smp := actors.Sampling{Temperature: 1, TopP: 1, MaxTokens: 3}
	if _, err := be.Generate(ctx, reqs, smp); err != nil {
		t.Fatal(err)
	}
	f.point(t, urlB) // restarted on the other checkpoint
	res, err := be.Generate(ctx, reqs, smp)
	if err == nil || !strings.Contains(err.Error(), "sampled by a checkpoint step 0 whose manifest has sha256 "+sets[1].ManifestSHA256) ||
		!strings.Contains(err.Error(), sets[0].ManifestSHA256) || !strings.Contains(err.Error(), "restarted") {
		t.Fatalf("a response of another checkpoint of step 0: %v (%d responses, %d sampled by it)", err, len(res), srvB.Stats().Requests)
	}

	// A new backend finds the other checkpoint before it samples: nothing more is sampled.
	before := srvB.Stats().Requests
	be, err = openai.New(openai.Options{ID: "m1", Endpoint: fs.URL, Version: 0, RequireVersion: true, Run: cfg.Run, CheckpointSHA256: sets[0].ManifestSHA256})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := be.Generate(ctx, reqs, smp); err == nil || !strings.Contains(err.Error(), "serves a checkpoint step 0 whose manifest has sha256 "+sets[1].ManifestSHA256) {
		t.Fatalf("a server on another checkpoint of step 0: %v", err)
	}
	if n := srvB.Stats().Requests; n != before {
		t.Fatalf("sampled %d requests from another checkpoint", n-before)
	}
}

// TestBackendRefusesAServerOfAnotherRun: a drmas serve of another run never serves this run's
// step, whichever step it is on: the backend says so at once, instead of waiting out
// VersionWait for it to load a step it never will (an older step), or advising an older step
// with backend: local (a newer one).
func TestBackendRefusesAServerOfAnotherRun(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	env := warm(t, cfg)
	srv, url := start(t, serve.Options{Bucket: env.Bucket, Run: cfg.Run, Poll: -1}) // run t, step 0
	reqs := []actors.Request{{Agent: "solver", Prompt: actors.PromptIDs("solver", "1+1"), Seed: 3}}
	smp := actors.Sampling{Temperature: 1, TopP: 1, MaxTokens: 3}
	for _, step := range []int64{2, 0} { // the server lags behind, then is ahead
		const wait = 3 * time.Second
		be, err := openai.New(openai.Options{ID: "m1", Endpoint: url, Version: step, RequireVersion: true, VersionWait: wait, Run: "u"})
		if err != nil {
			t.Fatal(err)
		}
		if step == 0 {
			publish(t, env, 1)
			if _, err := srv.Reload(ctx); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		_, err = be.Generate(ctx, reqs, smp)
		want := fmt.Sprintf("drmas serve serves checkpoint step %d of run t, but this stage samples from step %d of run u: point the server at this run (--run u) and store", srv.Version(), step)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("step %d of run u through a server of run t: %v, want %q", step, err, want)
		}
		if d := time.Since(start); d >= wait {
			t.Fatalf("step %d: answered after %s, having waited for the server", step, d)
		}
	}
	if n := srv.Stats().Requests; n != 0 {
		t.Fatalf("the server of run t sampled %d requests for run u", n)
	}
}

// TestBackendWaitsForAServerStillStarting: a `drmas serve … &` started beside the stage may
// not listen yet; connection refusals count toward the same wait instead of failing the stage.
func TestBackendWaitsForAServerStillStarting(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	env := warm(t, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there until the server below starts
	var log logBuffer
	be, err := openai.New(openai.Options{ID: "m1", Endpoint: "http://" + addr, Version: 0, RequireVersion: true, VersionWait: time.Minute, Logf: log.Logf})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- be.Ready(ctx) }()
	log.waitFor(t, "to answer")
	s, err := serve.New(ctx, serve.Options{Bucket: env.Bucket, Run: cfg.Run})
	if err != nil {
		t.Fatal(err)
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Serve(sctx, ln) }()
	defer func() { cancel(); <-done }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Ready once the server listens: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Ready did not return after the server started")
	}
	// Without a server for the whole wait, the error says what it tried.
	be, err = openai.New(openai.Options{ID: "m1", Endpoint: "http://" + addr + "0", Version: 0, RequireVersion: true, VersionWait: 200 * time.Millisecond, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Ready(ctx); err == nil {
		t.Fatal("Ready with no server succeeded")
	}
}
