package tokenizer

import (
	"fmt"
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

// Llama 3.1 and later templates (3.1, 3.2, 3.3 Instruct) open with a system turn holding
// this preamble, its date the template variable date_string.
const (
	llama3DatedMark = "Cutting Knowledge Date"
	llama3Preamble  = "Cutting Knowledge Date: December 2023\n"
	llama3PreSource = `"Cutting Knowledge Date: December 2023\n"` // as the template's source writes it
	llama3DateExpr  = `"Today Date: " + date_string`
)

// DefaultChatDate is the "Today Date" a Llama 3.1+ prompt holds unless ChatOptions.Date says
// otherwise: the templates' own fallback when date_string is not given. drmas never reads the
// clock (Llama 3.2's template would, through transformers' strftime_now), so prompts are the
// same bytes on every day.
const DefaultChatDate = "26 Jul 2024"

// maxChatDate bounds ChatOptions.Date.
const maxChatDate = 64

// setLlama3Template reads a Llama 3 template ("" = none: the form of Meta's Llama 3 Instruct
// template, with the tokenizer's <|begin_of_text|>).
func (t *BPE) setLlama3Template(tmpl string) {
	t.chat.format = llama3Chat
	switch {
	case strings.Contains(tmpl, llama3DatedMark):
		t.chat.dated = true
		if !strings.Contains(tmpl, llama3PreSource) || !strings.Contains(tmpl, llama3DateExpr) {
			t.chat.refused = "a \"" + llama3DatedMark + "\" preamble other than Llama 3.1/3.2's (" +
				"\"Cutting Knowledge Date: December 2023\", then \"Today Date: \" + date_string) is not implemented"
		}
		if strings.Contains(tmpl, "bos_token") {
			t.chat.bos = t.bosToken
		}
	case tmpl == "":
		if _, ok := t.TokenID(llama3BOS); ok {
			t.chat.bos = llama3BOS
		}
	case strings.Contains(tmpl, "bos_token"):
		t.chat.bos = t.bosToken
	}
	t.chat.genAlways = tmpl != "" && !strings.Contains(tmpl, "add_generation_prompt")
}

// checkChatDate accepts a date for the Llama 3.1+ preamble: one line of printable text.
func CheckChatDate(date string) error {
	if len(date) > maxChatDate {
		return fmt.Errorf("chat date %.20q…: longer than %d bytes", date, maxChatDate)
	}
	for _, r := range date {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("chat date %q: holds %U, not a printable character (write one line, e.g. %q)", date, r, DefaultChatDate)
		}
	}
	return nil
}

// llama3DatedPrompt renders msgs as Llama 3.1 and 3.2 Instruct templates do for a plain
// conversation (no tools, tools=none): bos_token, then a system turn
// "Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n{first message's content,
// trimmed, when it is a system one}", then the other messages as Llama 3's turns. Tool results
// (role tool, written as ipython turns), tool calls, tools and builtin_tools are not
// implemented: a tool message is refused.
func (t *BPE) llama3DatedPrompt(msgs []Message, o ChatOptions) (string, error) {
	if len(msgs) == 0 {
		return "", fmt.Errorf("no messages: Llama 3.1+ templates read the first message: %w", ErrChatTemplate)
	}
	for i, m := range msgs {
		if m.Role == "tool" {
			return "", fmt.Errorf("message %d: role tool: Llama 3.1+ templates write tool results as ipython turns beside tool calls, tools and builtin_tools, which are not implemented (plain system/user/assistant turns are): %w", i, ErrChatTemplate)
		}
	}
	date := o.Date
	if date == "" {
		date = DefaultChatDate
	}
	system := ""
	if msgs[0].Role == "system" {
		system, msgs = pyStrip(msgs[0].Content), msgs[1:]
	}
	var b strings.Builder
	b.WriteString(t.chat.bos + llama3Header + "system" + llama3HeaderEnd + "\n\n" +
		llama3Preamble + "Today Date: " + date + "\n\n" + system + llama3EOT)
	t.llama3Turns(&b, msgs, o.AddGenerationPrompt)
	return b.String(), nil
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
	if len(msgs) > 0 {
		b.WriteString(t.chat.bos)
	}
	t.llama3Turns(&b, msgs, addGenerationPrompt)
	return b.String()
}

// llama3Turns writes msgs as Llama 3's turns, then the generation prompt when asked (or
// always, for a template that does not test add_generation_prompt).
func (t *BPE) llama3Turns(b *strings.Builder, msgs []Message, addGenerationPrompt bool) {
	for _, m := range msgs {
		b.WriteString(llama3Header + m.Role + llama3HeaderEnd + "\n\n" + pyStrip(m.Content) + llama3EOT)
	}
	if addGenerationPrompt || t.chat.genAlways {
		b.WriteString(llama3Header + "assistant" + llama3HeaderEnd + "\n\n")
	}
}

// pyStrip is Python's str.strip(): the characters str.isspace accepts removed from both ends.
func pyStrip(s string) string { return strings.TrimFunc(s, pyIsSpace) }

func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }
