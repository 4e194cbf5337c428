package actors_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/tokenizer"
)

// A backend that does not implement Tokenized, as the openai one.
type plainBackend struct{}

func (plainBackend) Model() string  { return "p" }
func (plainBackend) Version() int64 { return 0 }
func (plainBackend) Generate(context.Context, []actors.Request, actors.Sampling) ([]actors.Response, error) {
	return nil, nil
}

// TestBytesTokenizer: the built-in policy's ids are the package functions', byte for byte,
// whether a backend says so (Local) or not.
func TestBytesTokenizer(t *testing.T) {
	local := actors.NewLocal("m", 0, nil)
	for _, b := range []actors.Backend{local, plainBackend{}} {
		tok := actors.TokenizerOf(b)
		ids, err := tok.PromptIDs("solver", "Q: 1+1 é")
		if err != nil || !slices.Equal(ids, actors.PromptIDs("solver", "Q: 1+1 é")) {
			t.Fatalf("%T: PromptIDs %v, %v", b, ids, err)
		}
		if got := tok.TargetIDs("2"); !slices.Equal(got, []int32{'2', model.EOS}) {
			t.Errorf("%T: TargetIDs %v", b, got)
		}
		if got := tok.ResponseText([]int32{'o', 'k', model.EOS}); got != "ok" {
			t.Errorf("%T: ResponseText %q", b, got)
		}
	}
}

// TestChatTokenizer: on the real Qwen3 tokenizer a prompt is the ChatML user turn and the
// generation prompt with thinking off, a target ends with <|im_end|>, and response text drops
// special tokens.
func TestChatTokenizer(t *testing.T) {
	bpe, err := tokenizer.LoadDir(oracles.Qwen3TokenizerDir(t))
	if err != nil {
		t.Fatal(err)
	}
	var tok actors.Tokenizer = actors.Chat{BPE: bpe}
	ids, err := tok.PromptIDs("solver", "2+2?")
	if err != nil {
		t.Fatal(err)
	}
	want := bpe.Encode("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
	if !slices.Equal(ids, want) || ids[0] != 151644 {
		t.Errorf("PromptIDs %v, want %v", ids, want)
	}
	target := tok.TargetIDs("héllo 你好")
	if target[len(target)-1] != 151645 {
		t.Errorf("TargetIDs %v does not end with <|im_end|>", target)
	}
	if got := tok.ResponseText(append(target, 151643)); got != "héllo 你好" {
		t.Errorf("ResponseText %q", got)
	}
}

// TestChatTokenizerDate: with a Llama 3.2 Instruct template, a prompt's system preamble holds
// Chat.Date, or the templates' fallback date when it is empty (worked by hand).
func TestChatTokenizerDate(t *testing.T) {
	dir := oracles.Llama3TokenizerDir(t)
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "llama3.2_chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]string{"chat_template": string(tmpl), "bos_token": "<|begin_of_text|>"})
	bpe, err := tokenizer.Load(tj, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for date, shown := range map[string]string{"": "26 Jul 2024", "01 Jan 2025": "01 Jan 2025"} {
		ids, err := actors.Chat{BPE: bpe, Date: date}.PromptIDs("verifier", "ok?")
		want := bpe.Encode("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: " + shown +
			"\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nok?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
		if err != nil || !slices.Equal(ids, want) {
			t.Errorf("date %q: PromptIDs %v, %v; want %v", date, ids, err, want)
		}
	}
	if _, err := (actors.Chat{BPE: bpe, Date: "26\nJul"}).PromptIDs("verifier", "ok?"); err == nil {
		t.Error("a date of two lines accepted")
	}
}
