package openai

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/drmas-dev/drmas/actors"
)

// FuzzParseCompletionResponse: a completion response body from a server (vLLM, SGLang, drmas
// serve or anything else at the endpoint) either fails with an error or fills every prompt's
// response with as many token ids (≥ 0) as finite log-probs, and what it accepted, written back
// as the server would write it, reads back the same. Run with:
// go test ./actors/openai -run '^$' -fuzz '^FuzzParseCompletionResponse$' -fuzztime 30s
func FuzzParseCompletionResponse(f *testing.F) {
	for _, name := range []string{"vllm_completions_response.json", "openai_completions_response.json", "openai_completions_nologprobs.json"} {
		f.Add(golden(f, name), uint8(1))
	}
	f.Add([]byte(`{"choices":[{"index":1,"text":"","logprobs":{"tokens":["token_id:7"],"token_logprobs":[-0.5]},"finish_reason":"length"},{"index":0,"text":"","logprobs":{"tokens":[],"token_logprobs":[]},"finish_reason":null}],"drmas_policy_version":3}`), uint8(2))
	f.Add([]byte(`{"choices":[{"index":0,"logprobs":{"tokens":["token_id:+7","token_id:-1","7"],"token_logprobs":[null,1e39,-9999]}}]}`), uint8(1))
	f.Fuzz(func(t *testing.T, raw []byte, n uint8) {
		n = n%8 + 1
		var resp CompletionResponse
		if json.Unmarshal(raw, &resp) != nil {
			return
		}
		out := make([]actors.Response, n)
		if err := parseChoices(resp.Choices, out, "http://x"); err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		back := CompletionResponse{Choices: make([]CompletionChoice, n)}
		for i, r := range out {
			if r.Tokens == nil || len(r.Tokens) != len(r.LogProbs) {
				t.Fatalf("response %d: %d tokens, %d log-probs", i, len(r.Tokens), len(r.LogProbs))
			}
			lp := &Logprobs{}
			for j, tok := range r.Tokens {
				v := r.LogProbs[j]
				if tok < 0 || math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("response %d token %d: id %d log-prob %v", i, j, tok, v)
				}
				lp.Tokens = append(lp.Tokens, TokenIDString(tok))
				lp.TokenLogprobs = append(lp.TokenLogprobs, LogProb{V: v})
			}
			fr := r.FinishReason
			back.Choices[i] = CompletionChoice{Index: i, Text: strings.Repeat("x", len(r.Tokens)), Logprobs: lp, FinishReason: &fr}
		}
		data, err := json.Marshal(back)
		if err != nil {
			t.Fatal(err)
		}
		var resp2 CompletionResponse
		if err := json.Unmarshal(data, &resp2); err != nil {
			t.Fatal(err)
		}
		again := make([]actors.Response, n)
		if err := parseChoices(resp2.Choices, again, "http://x"); err != nil {
			t.Fatalf("re-read of the accepted response: %v", err)
		}
		if !reflect.DeepEqual(again, out) {
			t.Fatalf("responses changed through a write and read:\n%v\n%v", out, again)
		}
	})
}

// FuzzErrorExcerpt: the excerpt of an error body quoted in an error message is the body's
// start (cut at a character boundary after at most 300 bytes, the API key redacted), never
// an empty or shortened stand-in for a long body. Run with:
// go test ./actors/openai -run '^$' -fuzz '^FuzzErrorExcerpt$' -fuzztime 30s
func FuzzErrorExcerpt(f *testing.F) {
	f.Add([]byte(`{"error":{"message":"bad","type":"BadRequestError","code":400}}`), "sk-1")
	f.Add([]byte(`{"message":"legacy sk-1"}`), "sk-1")
	f.Add([]byte("\xff"+strings.Repeat("a", 400)), "")
	f.Add([]byte(strings.Repeat("日", 120)), "")
	f.Fuzz(func(t *testing.T, raw []byte, key string) {
		_ = errorMessage(raw, key)
		ex := excerpt(raw, key)
		s, err := strconv.Unquote(ex)
		if err != nil {
			if ex == "(empty body)" {
				return
			}
			t.Fatalf("excerpt %s is not quoted", ex)
		}
		full := redact(string(raw), key)
		if len(full) <= 300 {
			if s != full {
				t.Fatalf("short body %q excerpted as %q", full, s)
			}
			return
		}
		body, ok := strings.CutSuffix(s, "…")
		if !ok || !strings.HasPrefix(full, body) || len(body) < 300-3 || len(body) > 300 {
			t.Fatalf("excerpt of a %d-byte body is %d bytes %q", len(full), len(body), body)
		}
		if utf8.ValidString(full) && !utf8.ValidString(body) {
			t.Fatalf("excerpt %q of a UTF-8 body cuts a character", body)
		}
	})
}

func golden(f *testing.F, name string) []byte {
	f.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		f.Fatal(err)
	}
	return data
}
