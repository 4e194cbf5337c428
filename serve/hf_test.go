package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/actors/openai"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/hfmodel"
	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/serve"
	"github.com/drmas-dev/drmas/tokenizer"
)

// tinyQwen3 writes a random Qwen3 folder (hidden 16, one layer) with the real Qwen3 tokenizer,
// as drmas model init does; eos, when given, replaces config.json's eos_token_id.
func tinyQwen3(t *testing.T, eos ...int) (string, *tokenizer.BPE) {
	t.Helper()
	tok := oracles.Qwen3TokenizerDir(t)
	info, err := hf.ReadTokenizerInfo(tok)
	if err != nil {
		t.Fatal(err)
	}
	s := hf.InitSpec{Arch: "qwen3", Hidden: 16, Layers: 1, Heads: 2, KVHeads: 1, Intermediate: 32, HeadDim: 8, MaxPositions: 256, Vocab: hf.VocabFor(info)}
	s.BOS, s.EOS = hf.SpecialIDs(info)
	if eos != nil {
		s.EOS = eos
	}
	cfg, err := hf.NewConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny-qwen3")
	if err := hf.WriteFolder(dir, cfg, hf.F32, hf.RandomTensors(cfg, 7), tok); err != nil {
		t.Fatal(err)
	}
	bpe, err := tokenizer.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, bpe
}

// writeAdapter writes a PEFT LoRA adapter folder by hand: r = 2, lora_alpha 4, on layer 0's
// q_proj and down_proj of tinyQwen3, with normal(0, 0.5) A and B drawn from seed.
func writeAdapter(t *testing.T, seed uint64) string {
	t.Helper()
	dir := t.TempDir()
	cfg := `{"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "down_proj"], "bias": "none", "base_model_name_or_path": "tiny-qwen3"}`
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
	// q_proj is [heads·head_dim = 16, hidden 16]; down_proj [hidden 16, intermediate 32].
	const q, d = "base_model.model.model.layers.0.self_attn.q_proj", "base_model.model.model.layers.0.mlp.down_proj"
	tensors := []model.Tensor{
		model.F32Tensor(d+".lora_A.weight", []int{2, 32}, normal(64)),
		model.F32Tensor(d+".lora_B.weight", []int{16, 2}, normal(32)),
		model.F32Tensor(q+".lora_A.weight", []int{2, 16}, normal(32)),
		model.F32Tensor(q+".lora_B.weight", []int{16, 2}, normal(32)),
	}
	var buf bytes.Buffer
	if err := model.WriteSafetensors(&buf, tensors, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, hf.AdapterWeightsFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// inProcess samples reqs with the folder's model (merged with adapter, if given) as the server
// must: the same seeds, options and stop ids.
func inProcess(t *testing.T, dir, adapter string, bpe *tokenizer.BPE, reqs []actors.Request, s actors.Sampling) []model.SampleResult {
	t.Helper()
	m, cfg, err := hf.LoadLLM(dir)
	if err != nil {
		t.Fatal(err)
	}
	if adapter != "" {
		if err := hf.ApplyAdapter(m, adapter); err != nil {
			t.Fatal(err)
		}
	}
	var sr []model.SampleRequest
	for _, r := range reqs {
		sr = append(sr, model.SampleRequest{Prompt: r.Prompt, Seed: r.Seed})
	}
	out, err := m.Sample(context.Background(), sr, model.SampleOptions{Temperature: float32(s.Temperature), TopP: float32(s.TopP), MaxTokens: s.MaxTokens, Stop: hfmodel.StopIDs(bpe, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func chatRequests(t *testing.T, tok actors.Tokenizer) []actors.Request {
	t.Helper()
	var reqs []actors.Request
	for i, q := range []string{"What is 1+1?", "Name a prime number.", "Say hello in French."} {
		ids, err := tok.PromptIDs("solver", q)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, actors.Request{Agent: "solver", Prompt: ids, Seed: uint64(11 + i)})
	}
	return reqs
}

func sameSamples(t *testing.T, what string, got []actors.Response, want []model.SampleResult) {
	t.Helper()
	for i := range want {
		if !slices.Equal(got[i].Tokens, want[i].Tokens) || !slices.Equal(got[i].LogProbs, want[i].LogProbs) || got[i].FinishReason != want[i].FinishReason {
			t.Fatalf("%s: request %d: server %v %v %s, in process %v %v %s", what, i, got[i].Tokens, got[i].LogProbs, got[i].FinishReason, want[i].Tokens, want[i].LogProbs, want[i].FinishReason)
		}
	}
}

func newBackend(t *testing.T, o openai.Options) *openai.Backend {
	t.Helper()
	o.Retries = -1
	b, err := openai.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHFServeMatchesInProcess: drmas serve --hf samples a Qwen3 folder as model.LLM does in
// process (tokens and log-probs bit for bit, seeded), prompts encoded by the backend with the
// folder's chat tokenizer; a text prompt is encoded with the same tokenizer.
func TestHFServeMatchesInProcess(t *testing.T) {
	dir, bpe := tinyQwen3(t)
	srv, url := start(t, serve.Options{HF: dir, Poll: -1})
	if srv.Name() != "tiny-qwen3" {
		t.Fatalf("served as %q, want the folder's base name", srv.Name())
	}
	tok := actors.Chat{BPE: bpe}
	b := newBackend(t, openai.Options{ID: "m", Endpoint: url, ServerModel: "tiny-qwen3", Tokenizer: tok, Batch: true})
	if _, ok := actors.TokenizerOf(b).(actors.Chat); !ok {
		t.Fatalf("the backend's tokenizer is %T, want the Chat it was given", actors.TokenizerOf(b))
	}
	reqs := chatRequests(t, actors.TokenizerOf(b))
	s := actors.Sampling{Temperature: 1, TopP: 1, MaxTokens: 5}
	got, err := b.Generate(context.Background(), reqs, s)
	if err != nil {
		t.Fatal(err)
	}
	sameSamples(t, "chat prompts", got, inProcess(t, dir, "", bpe, reqs, s))

	text, err := bpe.ChatPrompt([]tokenizer.Message{{Role: "user", Content: "What is 1+1?"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	status, resp := post(t, url+"/v1/completions", map[string]any{"model": "tiny-qwen3", "prompt": text, "max_tokens": 5, "seed": 11, "logprobs": 1, "return_tokens_as_token_ids": true})
	if status != 200 {
		t.Fatalf("text prompt: %d %v", status, resp)
	}
	if n := resp["usage"].(map[string]any)["prompt_tokens"]; n != float64(len(reqs[0].Prompt)) {
		t.Errorf("text prompt has %v tokens, the chat tokenizer makes %d", n, len(reqs[0].Prompt))
	}
	var ids []int32
	for _, s := range resp["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)["tokens"].([]any) {
		id, _ := openai.ParseTokenID(s.(string))
		ids = append(ids, id)
	}
	if !slices.Equal(ids, got[0].Tokens) {
		t.Errorf("text prompt sampled %v, its ids %v", ids, got[0].Tokens)
	}
	if txt := resp["choices"].([]any)[0].(map[string]any)["text"]; txt != tok.ResponseText(got[0].Tokens) {
		t.Errorf("text %q, want %q", txt, tok.ResponseText(got[0].Tokens))
	}
}

// TestHFServeStopsAtTheConfigsEOS: the same weights with config.json's eos_token_id set to the
// token greedy decoding draws first stop after that token; stop_token_ids does the same.
func TestHFServeStopsAtTheConfigsEOS(t *testing.T) {
	dir, bpe := tinyQwen3(t)
	_, url := start(t, serve.Options{HF: dir, Poll: -1})
	prompt, err := actors.Chat{BPE: bpe}.PromptIDs("solver", "hi")
	if err != nil {
		t.Fatal(err)
	}
	greedy := func(url string, body map[string]any) []any {
		t.Helper()
		body["prompt"], body["max_tokens"], body["temperature"], body["logprobs"], body["return_tokens_as_token_ids"] = prompt, 4, 0, 1, true
		status, resp := post(t, url+"/v1/completions", body)
		if status != 200 {
			t.Fatalf("%d %v", status, resp)
		}
		c := resp["choices"].([]any)[0].(map[string]any)
		toks := c["logprobs"].(map[string]any)["tokens"].([]any)
		return append(toks, c["finish_reason"])
	}
	free := greedy(url, map[string]any{})
	if len(free) != 5 || free[4] != "length" {
		t.Fatalf("greedy without a stop: %v", free)
	}
	first, _ := openai.ParseTokenID(free[0].(string))
	if got := greedy(url, map[string]any{"stop_token_ids": []int32{first}}); len(got) != 2 || got[0] != free[0] || got[1] != "stop" {
		t.Errorf("stop_token_ids [%d]: %v", first, got)
	}
	dir2, _ := tinyQwen3(t, int(first))
	_, url2 := start(t, serve.Options{HF: dir2, Poll: -1})
	if got := greedy(url2, map[string]any{}); len(got) != 2 || got[0] != free[0] || got[1] != "stop" {
		t.Errorf("eos_token_id %d: %v", first, got)
	}
}

// postRaw posts body and returns the status and the body as text.
func postRaw(t *testing.T, url string, body any) (int, string) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func models(t *testing.T, url string) map[string]openai.ModelCard {
	t.Helper()
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list openai.ModelList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	out := map[string]openai.ModelCard{}
	for _, c := range list.Data {
		out[c.ID] = c
	}
	return out
}

// TestLoRAHotSwap: the backend loads the adapter of step 1 as m@step=1 and samples with it
// exactly as the base merged with it in process (and as Score rates those tokens); step 2
// loads m@step=2 and unloads m@step=1; a response naming another model is refused.
func TestLoRAHotSwap(t *testing.T) {
	dir, bpe := tinyQwen3(t)
	_, base := start(t, serve.Options{HF: dir, Poll: -1, Name: "m"})
	tok := actors.Chat{BPE: bpe}
	a, b := writeAdapter(t, 1), writeAdapter(t, 2)
	s := actors.Sampling{Temperature: 1, TopP: 1, MaxTokens: 6}
	reqs := chatRequests(t, tok)

	var logs []string
	logf := func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }
	b1 := newBackend(t, openai.Options{ID: "m", Endpoint: base, ServerModel: "m", Tokenizer: tok, Version: 1, LoRAPath: a, Logf: logf})
	got, err := b1.Generate(context.Background(), reqs, s)
	if err != nil {
		t.Fatal(err)
	}
	want := inProcess(t, dir, a, bpe, reqs, s)
	sameSamples(t, "adapter A", got, want)
	if base := inProcess(t, dir, "", bpe, reqs, s); slices.Equal(base[0].LogProbs, want[0].LogProbs) {
		t.Fatal("the adapter does not change the samples: the test cannot tell it was merged")
	}
	merged, _, err := hf.LoadLLM(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := hf.ApplyAdapter(merged, a); err != nil {
		t.Fatal(err)
	}
	var seqs []model.Sequence
	for i, r := range reqs {
		seqs = append(seqs, model.Sequence{Prompt: r.Prompt, Response: got[i].Tokens})
	}
	scored, _, err := merged.Score(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range seqs {
		for j, lp := range scored[i] {
			if math.Abs(float64(lp-got[i].LogProbs[j])) > 1e-4 {
				t.Fatalf("request %d token %d: served log-prob %v, Score %v", i, j, got[i].LogProbs[j], lp)
			}
		}
	}
	ms := models(t, base)
	if c, ok := ms["m@step=1"]; !ok || c.Parent == nil || *c.Parent != "m" || c.Root != a || ms["m"].Parent != nil {
		t.Fatalf("/v1/models after step 1: %+v", ms)
	}

	b2 := newBackend(t, openai.Options{ID: "m", Endpoint: base, ServerModel: "m", Tokenizer: tok, Version: 2, LoRAPath: b, Logf: logf})
	got2, err := b2.Generate(context.Background(), reqs, s)
	if err != nil {
		t.Fatal(err)
	}
	sameSamples(t, "adapter B", got2, inProcess(t, dir, b, bpe, reqs, s))
	if ms := models(t, base); len(ms) != 2 || ms["m@step=2"].Root != b {
		t.Fatalf("/v1/models after step 2: want m and m@step=2 only: %+v", ms)
	}
	joined := strings.Join(logs, "\n")
	for _, w := range []string{"loaded LoRA adapter m@step=1 (checkpoint step 1)", "loaded LoRA adapter m@step=2", "unloaded LoRA adapter m@step=1 of an older step"} {
		if !strings.Contains(joined, w) {
			t.Errorf("logs lack %q:\n%s", w, joined)
		}
	}
	// A backend of the same step finds its adapter loaded and does not load it again.
	b2again := newBackend(t, openai.Options{ID: "m", Endpoint: base, ServerModel: "m", Tokenizer: tok, Version: 2, LoRAPath: b})
	if _, err := b2again.Generate(context.Background(), reqs[:1], s); err != nil {
		t.Fatal(err)
	}

	// The name m@step=2 loaded from another path (a run recreated under the same name) is
	// unloaded and loaded again from this stage's path.
	bOther := newBackend(t, openai.Options{ID: "m", Endpoint: base, ServerModel: "m", Tokenizer: tok, Version: 2, LoRAPath: a})
	got3, err := bOther.Generate(context.Background(), reqs, s)
	if err != nil {
		t.Fatal(err)
	}
	sameSamples(t, "step 2 from another path", got3, want)
	if ms := models(t, base); len(ms) != 2 || ms["m@step=2"].Root != a {
		t.Fatalf("/v1/models after reloading step 2 from %s: %+v", a, ms)
	}

	// A proxy that sends every completion to the base model: the answer names "m".
	target, _ := url.Parse(base)
	proxy := httputil.NewSingleHostReverseProxy(target)
	rewrite := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/completions" {
			var body map[string]any
			_ = json.NewDecoder(r.Body).Decode(&body)
			body["model"] = "m"
			data, _ := json.Marshal(body)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(data)), int64(len(data))
		}
		proxy.ServeHTTP(w, r)
	}))
	defer rewrite.Close()
	b3 := newBackend(t, openai.Options{ID: "m", Endpoint: rewrite.URL, ServerModel: "m", Tokenizer: tok, Version: 2, LoRAPath: a})
	if _, err := b3.Generate(context.Background(), reqs[:1], s); err == nil || !strings.Contains(err.Error(), `sampled by model "m", but this stage samples with LoRA adapter m@step=2 (checkpoint step 2)`) {
		t.Fatalf("a response of the base model: %v", err)
	}
}

// TestLoRAEndpointsAnswerAsVLLM: the status codes and messages of vLLM's serving_models for a
// missing field, a duplicate load, an unknown unload and an unknown model; the cap
// (--max-loras); a missing and a malformed adapter.
func TestLoRAEndpointsAnswerAsVLLM(t *testing.T) {
	dir, _ := tinyQwen3(t)
	_, url := start(t, serve.Options{HF: dir, Poll: -1, Name: "m", MaxLoRAs: 2})
	a := writeAdapter(t, 1)
	bad := writeAdapter(t, 3)
	if err := os.WriteFile(filepath.Join(bad, hf.AdapterConfigFile), []byte(`{"r": 4, "lora_alpha": 4, "target_modules": "all-linear"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   string
		body   map[string]string
		status int
		msg    string
	}{
		{"load", map[string]string{"lora_name": "x"}, 400, "Both 'lora_name' and 'lora_path' must be provided."},
		{"load", map[string]string{"lora_name": "x", "lora_path": a}, 200, "Success: LoRA adapter 'x' added successfully."},
		{"load", map[string]string{"lora_name": "x", "lora_path": a}, 400, "The lora adapter 'x' has already been loaded."},
		{"load", map[string]string{"lora_name": "m", "lora_path": a}, 400, "The lora adapter 'm' has already been loaded."},
		{"load", map[string]string{"lora_name": "y", "lora_path": filepath.Join(a, "nope")}, 404, "No adapter found"},
		{"load", map[string]string{"lora_name": "y", "lora_path": "s3://bucket/adapter"}, 400, "this server reads local folders only"},
		{"load", map[string]string{"lora_name": "y", "lora_path": bad}, 400, "want [4 32]"},
		{"load", map[string]string{"lora_name": "y", "lora_path": a}, 200, "Success"},
		{"load", map[string]string{"lora_name": "z", "lora_path": a}, 400, "the most this server holds (--max-loras 2)"},
		{"unload", map[string]string{"lora_name": "nope"}, 404, "The lora adapter 'nope' cannot be found."},
		{"unload", map[string]string{}, 400, "needs to be provided"},
		{"unload", map[string]string{"lora_name": "y"}, 200, "Success: LoRA adapter 'y' removed successfully."},
		{"load", map[string]string{"lora_name": "z", "lora_path": a}, 200, "Success"},
	} {
		status, body := postRaw(t, url+"/v1/"+c.path+"_lora_adapter", c.body)
		if status != c.status || !strings.Contains(body, c.msg) {
			t.Errorf("%s %v: %d %s, want %d %q", c.path, c.body, status, body, c.status, c.msg)
		}
		if status != 200 {
			var e openai.ErrorResponse
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Message == "" || e.Error.Code != float64(status) {
				t.Errorf("%s %v: error body %s is not {\"error\": {message, type, code}}", c.path, c.body, body)
			}
		}
	}
	status, resp := post(t, url+"/v1/completions", map[string]any{"model": "y", "prompt": []int{1, 2}})
	if status != 404 || !strings.Contains(toString(resp), "The model `y` does not exist") {
		t.Errorf("an unloaded adapter: %d %v", status, resp)
	}
	status, resp = post(t, url+"/v1/completions", map[string]any{"model": "z", "prompt": []int{1, 2}, "max_tokens": 2})
	if status != 200 || resp["model"] != "z" {
		t.Errorf("a loaded adapter: %d %v", status, resp)
	}
}

// TestLoadDoesNotBlockServing: while an adapter is being fetched (FetchAdapter blocks), the base
// and the loaded adapters keep answering.
func TestLoadDoesNotBlockServing(t *testing.T) {
	dir, _ := tinyQwen3(t)
	release := make(chan struct{})
	a := writeAdapter(t, 1)
	_, url := start(t, serve.Options{HF: dir, Poll: -1, Name: "m", FetchAdapter: func(ctx context.Context, u, dst string) error {
		<-release
		return os.CopyFS(dst, os.DirFS(a))
	}})
	done := make(chan int, 1)
	go func() {
		status, _ := postRaw(t, url+"/v1/load_lora_adapter", map[string]string{"lora_name": "slow", "lora_path": "s3://bucket/slow"})
		done <- status
	}()
	time.Sleep(50 * time.Millisecond)
	if status, resp := post(t, url+"/v1/completions", map[string]any{"model": "m", "prompt": []int{1, 2}, "max_tokens": 2}); status != 200 {
		t.Fatalf("during a load: %d %v", status, resp)
	}
	select {
	case s := <-done:
		t.Fatalf("the load ended (%d) before its fetch", s)
	default:
	}
	close(release)
	if s := <-done; s != 200 {
		t.Fatalf("load: %d", s)
	}
	if _, ok := models(t, url)["slow"]; !ok {
		t.Fatal("the adapter is not listed after its load")
	}
}
