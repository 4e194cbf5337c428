package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/actors/openai"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/serve"
)

// otherWeights writes a folder of dir's config and tokenizer with weights drawn from seed.
func otherWeights(t *testing.T, dir string, seed uint64) string {
	t.Helper()
	cfg, err := hf.ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), fmt.Sprintf("step-%d", seed))
	if err := hf.WriteFolder(out, cfg, hf.F32, hf.RandomTensors(cfg, seed), oracles.Qwen3TokenizerDir(t)); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReloadWeights: a backend with ReloadPath makes drmas serve --hf serve that folder's
// weights (SGLang's /update_weights_from_disk) under the same name before it samples, and
// samples exactly as the folder in process; /get_model_info then reports the folder, and a
// second backend of the same step does not reload it again.
func TestReloadWeights(t *testing.T) {
	dir, bpe := tinyQwen3(t)
	_, url := start(t, serve.Options{HF: dir, Poll: -1, Name: "m"})
	step := otherWeights(t, dir, 9)
	tok := actors.Chat{BPE: bpe}
	s := actors.Sampling{Temperature: 1, TopP: 1, MaxTokens: 6}
	reqs := chatRequests(t, tok)
	if status, info := get(t, url+"/get_model_info"); status != 200 || info["model_path"] != dir {
		t.Fatalf("before the reload /get_model_info: %d %v, want model_path %s", status, info, dir)
	}
	var logs []string
	logf := func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }
	for i := range 2 {
		b := newBackend(t, openai.Options{ID: "m", Endpoint: url, Tokenizer: tok, Version: 3, ReloadPath: step, Logf: logf})
		got, err := b.Generate(context.Background(), reqs, s)
		if err != nil {
			t.Fatal(err)
		}
		want := inProcess(t, step, "", bpe, reqs, s)
		sameSamples(t, fmt.Sprintf("backend %d", i), got, want)
		if i == 0 && slices.Equal(inProcess(t, dir, "", bpe, reqs, s)[0].LogProbs, want[0].LogProbs) {
			t.Fatal("the two folders sample alike: the test cannot tell the weights were reloaded")
		}
	}
	if n := strings.Count(strings.Join(logs, "\n"), "reloaded its weights from "+step); n != 1 {
		t.Errorf("%d reloads for two backends of one step, want 1: %q", n, logs)
	}
	if _, info := get(t, url+"/get_model_info"); info["model_path"] != step {
		t.Errorf("after the reload /get_model_info: %v, want model_path %s", info, step)
	}
	if c := models(t, url)["m"]; c.ID != "m" || c.Root != step {
		t.Errorf("GET /v1/models: %+v, want m with root %s", c, step)
	}
}

// TestReloadWeightsErrors: SGLang's answers (400, success false, a message) for a missing
// model_path, a folder that is not there and one of other sizes; the served weights stay, and
// the backend's error says the server did not reload.
func TestReloadWeightsErrors(t *testing.T) {
	dir, bpe := tinyQwen3(t)
	_, url := start(t, serve.Options{HF: dir, Poll: -1, Name: "m"})
	tok := oracles.Qwen3TokenizerDir(t)
	info, err := hf.ReadTokenizerInfo(tok)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := hf.NewConfig(hf.InitSpec{Arch: "qwen3", Hidden: 32, Layers: 1, Heads: 2, KVHeads: 1, Intermediate: 32, HeadDim: 16, MaxPositions: 256, Vocab: hf.VocabFor(info)})
	if err != nil {
		t.Fatal(err)
	}
	bigger := filepath.Join(t.TempDir(), "bigger")
	if err := hf.WriteFolder(bigger, cfg, hf.F32, hf.RandomTensors(cfg, 1), tok); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "none")
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{}, "model_path must be provided"},
		{map[string]any{"model_path": missing}, "config.json"},
		{map[string]any{"model_path": bigger}, "start a server for it"},
		{map[string]any{"model_path": "s3://bucket/step"}, "local folders only"},
	} {
		status, resp := post(t, url+"/update_weights_from_disk", c.body)
		if msg, _ := resp["message"].(string); status != 400 || resp["success"] != false || !strings.Contains(msg, c.want) {
			t.Errorf("%v: %d %v, want 400 with success false and %q", c.body, status, resp, c.want)
		}
	}
	if _, info := get(t, url+"/get_model_info"); info["model_path"] != dir {
		t.Errorf("after failed reloads /get_model_info: %v, want model_path %s", info, dir)
	}
	b := newBackend(t, openai.Options{ID: "m", Endpoint: url, Tokenizer: actors.Chat{BPE: bpe}, Version: 2, ReloadPath: missing})
	_, err = b.Generate(context.Background(), chatRequests(t, actors.Chat{BPE: bpe}), actors.Sampling{Temperature: 1, TopP: 1, MaxTokens: 2})
	if err == nil || !strings.Contains(err.Error(), "reload the weights of checkpoint step 2 from "+missing) || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("Generate: %v", err)
	}
}

func get(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, out
}
