package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/actors/openai"
	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/tokenizer"
)

// TestChatTokenizerStopsAtItsEOS: a backend given the model's Chat tokenizer is that model's
// tokenizer for rollout (actors.TokenizerOf) and sends its end of turn (<|im_end|>) as vLLM's
// stop_token_ids; chat mode refuses it.
func TestChatTokenizerStopsAtItsEOS(t *testing.T) {
	bpe, err := tokenizer.LoadDir(oracles.Qwen3TokenizerDir(t))
	if err != nil {
		t.Fatal(err)
	}
	eos, ok := bpe.TokenID("<|im_end|>")
	if !ok {
		t.Fatal("no <|im_end|> in the Qwen3 tokenizer")
	}
	var sent openai.CompletionRequest
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if err := json.Unmarshal(body, &sent); err != nil {
			t.Error(err)
		}
		reply(200, fixture(t, "vllm_completions_response.json"))(w, r, body)
	})
	tok := actors.Chat{BPE: bpe}
	b := backend(t, openai.Options{Endpoint: s.URL, Tokenizer: tok})
	if _, ok := actors.TokenizerOf(b).(actors.Chat); !ok {
		t.Fatalf("TokenizerOf = %T, want the Chat given", actors.TokenizerOf(b))
	}
	if _, err := b.Generate(context.Background(), oneRequest(), sampling); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sent.StopTokenIDs, []int32{eos}) {
		t.Errorf("stop_token_ids %v, want [%d]", sent.StopTokenIDs, eos)
	}
	if _, ok := actors.TokenizerOf(backend(t, openai.Options{Endpoint: s.URL})).(actors.Bytes); !ok {
		t.Error("without a tokenizer the backend does not read bytes")
	}
	for _, o := range []openai.Options{{Tokenizer: tok}, {LoRAPath: "/adapters/step=1"}} {
		o.ID, o.Endpoint, o.Mode = "m", s.URL, openai.ModeChat
		if _, err := openai.New(o); err == nil || !strings.Contains(err.Error(), "need mode completions") {
			t.Errorf("chat mode with %+v: %v", o, err)
		}
	}
}
