package tokenizer

import (
	"strings"
	"unicode"
)

// Llama 3's turn markers.
const (
	llama3Header    = "<|start_header_id|>"
	llama3HeaderEnd = "<|end_header_id|>"
	llama3EOT       = "<|eot_id|>"
	llama3BOS       = "<|begin_of_text|>"
)

// llama3DatedMark is what Llama 3.1 and later templates write in their system preamble.
const llama3DatedMark = "Cutting Knowledge Date"

// setLlama3Template reads a Llama 3 template ("" = none: the form of Meta's Llama 3 Instruct
// template, with the tokenizer's <|begin_of_text|>).
func (t *BPE) setLlama3Template(tmpl string) {
	t.chat.format = llama3Chat
	switch {
	case strings.Contains(tmpl, llama3DatedMark):
		t.chat.refused = "Llama 3.1 and later templates (a \"" + llama3DatedMark + "\" system preamble, tool calls) are not implemented, only Llama 3's"
	case tmpl == "":
		if _, ok := t.TokenID(llama3BOS); ok {
			t.chat.bos = llama3BOS
		}
	case strings.Contains(tmpl, "bos_token"):
		t.chat.bos = t.bosToken
	}
	t.chat.genAlways = tmpl != "" && !strings.Contains(tmpl, "add_generation_prompt")
}

// llama3Prompt renders msgs as Llama 3's (3.0) chat template does: bos_token, then each turn as
// "<|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|>"; with
// addGenerationPrompt (always, when the template does not test add_generation_prompt, as the
// original Llama 3 Instruct release's does not) the prompt ends with the assistant's header
// "<|start_header_id|>assistant<|end_header_id|>\n\n". There is no default system message.
// Trimming is Jinja's trim filter as Python runs it (str.strip: Unicode White_Space and
// U+001C to U+001F).
func (t *BPE) llama3Prompt(msgs []Message, addGenerationPrompt bool) string {
	var b strings.Builder
	for i, m := range msgs {
		if i == 0 {
			b.WriteString(t.chat.bos)
		}
		b.WriteString(llama3Header + m.Role + llama3HeaderEnd + "\n\n" + pyStrip(m.Content) + llama3EOT)
	}
	if addGenerationPrompt || t.chat.genAlways {
		b.WriteString(llama3Header + "assistant" + llama3HeaderEnd + "\n\n")
	}
	return b.String()
}

// pyStrip is Python's str.strip(): the characters str.isspace accepts removed from both ends.
func pyStrip(s string) string { return strings.TrimFunc(s, pyIsSpace) }

func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }
