package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// conversations exercise every branch of Qwen's templates for role/content messages.
var conversations = [][]Message{
	{{"user", "Hi!"}},
	{{"system", "You are terse."}, {"user", "2+2?"}},
	{{"system", "S"}, {"user", "Q1"}, {"assistant", "A1"}, {"user", "Q2"}},
	{{"user", "Q1"}, {"assistant", "<think>\nplan\n</think>\n\nA1"}, {"user", "Q2"}, {"assistant", "<think>r2</think>A2"}},
	{{"user", "Q"}, {"assistant", "\n\nanswer with leading newlines"}},
	{{"user", "Q"}, {"assistant", "x</think>\n\ny</think>z"}},
	{{"user", "weather?"}, {"assistant", "calling"}, {"tool", "{\"t\": 21}"}, {"tool", "{\"t\": 22}"}, {"assistant", "<think>\nok\n</think>\n\n21 and 22"}},
	{{"user", "Q"}, {"assistant", "A"}, {"user", "<tool_response>\nr\n</tool_response>"}, {"assistant", "<think>k</think>B"}},
	{{"system", "first"}, {"user", "u"}, {"system", "second system"}, {"assistant", ""}},
	{{"user", "数学: 𝑥² + 1 = 0 🤔\n\n\tcode:\r\n"}, {"assistant", "<|im_end|> inside"}},
	{{"tool", "lonely tool"}},
	{{"assistant", "only an assistant"}},
}

type chatCase struct {
	Template            string    `json:"template,omitempty"`
	Messages            []Message `json:"messages"`
	AddGenerationPrompt bool      `json:"add_generation_prompt"`
	DateString          *string   `json:"date_string,omitempty"` // nil: not passed
}

// MarshalJSON writes messages the way the template engine reads them.
func (m Message) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"role": m.Role, "content": m.Content})
}

// checkChat renders every conversation with and without the generation prompt by tok and by
// @huggingface/jinja on template ("" = the model folder's own) and compares the strings.
func checkChat(t *testing.T, tok *BPE, dir, template string) {
	checkChatOf(t, tok, dir, template, conversations)
}

// checkChatOf is checkChat on convs.
func checkChatOf(t *testing.T, tok *BPE, dir, template string, convs [][]Message) {
	var cases []chatCase
	for _, msgs := range convs {
		for _, gen := range []bool{false, true} {
			cases = append(cases, chatCase{template, msgs, gen, nil})
		}
	}
	compareChat(t, tok, dir, cases)
}

// compareChat renders cases by tok and by @huggingface/jinja and compares the strings.
func compareChat(t *testing.T, tok *BPE, dir string, cases []chatCase) {
	t.Helper()
	var want []string
	runOracle(t, dir, "chat", cases, &want)
	for i, c := range cases {
		o := ChatOptions{AddGenerationPrompt: c.AddGenerationPrompt}
		if c.DateString != nil {
			o.Date = *c.DateString
		}
		got, err := tok.ChatPromptWith(c.Messages, o)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if got != want[i] {
			t.Errorf("case %d (gen %v, date %q) %q:\n got  %q\n want %q", i, c.AddGenerationPrompt, o.Date, c.Messages, got, want[i])
		}
	}
}

// TestChatPromptQwen3 compares with Qwen3's own chat_template rendered by HF's Jinja engine
// with enable_thinking=false.
func TestChatPromptQwen3(t *testing.T) {
	tok, dir := qwen3(t)
	checkChat(t, tok, dir, "")
	got, _ := tok.ChatPrompt([]Message{{"user", "hi"}}, true)
	if want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"; got != want {
		t.Errorf("generation prompt %q, want %q", got, want)
	}
}

// TestChatPromptQwen25 compares with Qwen2.5's template (testdata), which adds a default
// system message.
func TestChatPromptQwen25(t *testing.T) {
	dir := qwen3Dir(t)
	tmpl, err := os.ReadFile(filepath.Join("testdata", "qwen2.5_chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tok := loadWithTemplate(t, dir, string(tmpl))
	if tok.chat.defaultSystem != "You are Qwen, created by Alibaba Cloud. You are a helpful assistant." {
		t.Fatalf("default system message %q", tok.chat.defaultSystem)
	}
	checkChat(t, tok, dir, string(tmpl))
}

func qwen3Dir(t *testing.T) string {
	_, dir := qwen3(t)
	return dir
}

func loadWithTemplate(t *testing.T, dir, tmpl string) *BPE {
	t.Helper()
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"chat_template": tmpl, "eos_token": "<|endoftext|>"})
	tok, err := Load(tj, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestChatPromptPlain: without a template, plain ChatML turns (worked by hand); a template
// that is neither ChatML nor Llama 3 and an unknown role are refused.
func TestChatPromptPlain(t *testing.T) {
	tok := tinyTokenizer(t, nil)
	got, err := tok.ChatPrompt([]Message{{"system", "s"}, {"user", "u"}, {"assistant", "<think>a</think>b"}}, true)
	want := "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nu<|im_end|>\n<|im_start|>assistant\n<think>a</think>b<|im_end|>\n<|im_start|>assistant\n"
	if err != nil || got != want {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
	if _, err := tok.ChatPrompt([]Message{{"robot", "x"}}, false); err == nil {
		t.Error("role robot accepted")
	}
	mistral := tinyTokenizer(t, []byte(`{"chat_template": "{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}"}`))
	if _, err := mistral.ChatPrompt([]Message{{"user", "x"}}, false); !errors.Is(err, ErrChatTemplate) {
		t.Errorf("template neither ChatML nor Llama 3: %v", err)
	}
}

// TestChatTemplateFile: a folder whose template is in chat_template.jinja (newer transformers)
// renders as one whose tokenizer_config.json has it.
func TestChatTemplateFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tinyJSON(nil), 0o644); err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join("testdata", "qwen2.5_chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), tmpl, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tok.ChatPrompt([]Message{{"user", "hi"}}, true)
	want := "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
	if err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	if _, err := LoadDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("empty folder: %v", err)
	}
}
