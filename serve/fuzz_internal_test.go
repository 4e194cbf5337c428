package serve

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/actors/openai"
	"github.com/drmas-dev/drmas/model"
)

// FuzzParseCompletionRequest: any request body either fails with a 4xx error and no item, or
// gives an item that model.Sample accepts and that honours the request: every prompt non-empty,
// shorter than the context and in the vocabulary; sampling options as asked (a top_p in (0, 1]
// stays a nucleus, never "off"); the seeds asked for; and, seeded, the same item every time.
// Run with: go test ./serve -run '^$' -fuzz '^FuzzParseCompletionRequest$' -fuzztime 30s
func FuzzParseCompletionRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":[257,104,105,259],"max_tokens":4,"temperature":1,"top_p":1,"logprobs":1,"seed":7,"return_tokens_as_token_ids":true,"skip_special_tokens":false}`,
		`{"prompt":"hi<|sep|>","seed":-1}`,
		`{"prompt":["a","<|eos|>b"],"drmas_seeds":[1,18446744073709551615],"temperature":0}`,
		`{"prompt":[[1,2],[3]],"drmas_seeds":[5,6],"top_p":0.5,"max_tokens":1}`,
		`{"prompt":[1],"top_p":1e-300,"seed":1}`,
		`{"prompt":[1],"temperature":1e300,"seed":1}`,
		`{"prompt":[],"seed":1}`,
		`{"prompt":[[]],"seed":1}`,
		`{"prompt":[264],"seed":1}`,
		`{"prompt":null}`,
		`{"model":"other","prompt":"x"}`,
		`{"prompt":"x","n":2}`,
		`{"prompt":"x","stream":true}`,
		`{"prompt":"x","logprobs":-1}`,
		`{"prompt":"x","max_tokens":0}`,
		`{"prompt":[1,2],"stop_token_ids":[5,3,5],"seed":2}`,
		`{"prompt":[1],"stop_token_ids":[99999]}`,
	} {
		f.Add([]byte(s))
	}
	cfg := model.Config{Vocab: model.VocabSize, Context: 16, Dim: 8, Layers: 1, Heads: 2, FFMult: 2, TiedHead: true}
	m, err := model.New(cfg, 1)
	if err != nil {
		f.Fatal(err)
	}
	s := newServer(Options{Name: "m", MaxPrompts: DefaultMaxPrompts, MaxPromptTokens: DefaultMaxPromptTokens}, builtinCodec{})
	s.cur.Store(&policy{name: "m", m: m, context: cfg.Context, vocab: cfg.Vocab, versioned: true})
	f.Fuzz(func(t *testing.T, body []byte) {
		var req openai.CompletionRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		it, herr := s.parse(&req)
		if herr != nil {
			if it != nil {
				t.Fatalf("rejected (%s) with an item", herr.msg)
			}
			if herr.status < 400 || herr.status >= 500 || herr.msg == "" {
				t.Fatalf("rejection %d %q is not a client error with a message", herr.status, herr.msg)
			}
			if strings.HasPrefix(herr.msg, "temperature") && *req.Temperature >= 0 && *req.Temperature <= math.MaxFloat32 {
				t.Fatalf("temperature %v rejected: %s", *req.Temperature, herr.msg)
			}
			return
		}
		if it == nil || len(it.reqs) == 0 {
			t.Fatal("accepted without prompts")
		}
		total := 0
		for i, r := range it.reqs {
			if len(r.Prompt) == 0 || len(r.Prompt) >= cfg.Context {
				t.Fatalf("prompt %d has %d tokens (context %d)", i, len(r.Prompt), cfg.Context)
			}
			for _, tok := range r.Prompt {
				if tok < 0 || int(tok) >= cfg.Vocab {
					t.Fatalf("prompt %d: token %d out of vocabulary", i, tok)
				}
			}
			switch {
			case req.DrmasSeeds != nil:
				if r.Seed != req.DrmasSeeds[i] {
					t.Fatalf("prompt %d: seed %d, asked %d", i, r.Seed, req.DrmasSeeds[i])
				}
			case req.Seed != nil:
				if r.Seed != uint64(*req.Seed) {
					t.Fatalf("prompt %d: seed %d, asked %d", i, r.Seed, *req.Seed)
				}
			}
			total += len(r.Prompt)
		}
		o := it.opts
		if !(o.Temperature >= 0) || math.IsInf(float64(o.Temperature), 0) {
			t.Fatalf("temperature %v", o.Temperature)
		}
		if req.TopP != nil && !(o.TopP > 0 && o.TopP <= 1) {
			t.Fatalf("top_p %v became %v: not a nucleus in (0, 1] (model.Sample reads ≤ 0 as off)", *req.TopP, o.TopP)
		}
		if o.MaxTokens < 1 || (req.MaxTokens != nil && o.MaxTokens != *req.MaxTokens) {
			t.Fatalf("max_tokens %d", o.MaxTokens)
		}
		if req.DrmasSeeds != nil || req.Seed != nil {
			again, herr := s.parse(&req)
			if herr != nil || !reflect.DeepEqual(again.reqs, it.reqs) || !reflect.DeepEqual(again.opts, it.opts) {
				t.Fatal("the same seeded request parsed differently")
			}
		}
		// What parse accepts, Sample must accept too (else the client gets a 500 for a bad
		// request). Keep the per-input cost small.
		if total <= 64 && len(it.reqs) <= 4 {
			o.MaxTokens = min(o.MaxTokens, 2)
			res, err := m.Sample(context.Background(), it.reqs, o)
			if err != nil {
				t.Fatalf("accepted request fails in Sample: %v", err)
			}
			if len(res) != len(it.reqs) {
				t.Fatalf("%d results for %d prompts", len(res), len(it.reqs))
			}
		}
	})
}
