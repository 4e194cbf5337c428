package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrChatTemplate marks a chat template ChatPrompt cannot render.
var ErrChatTemplate = errors.New("chat template")

// Message is one turn of a conversation.
type Message struct{ Role, Content string }

// chatTemplate is what ChatPrompt needs to know of tokenizer_config.json's chat_template.
type chatTemplate struct {
	present       bool       // a template is given
	format        chatFormat // the turns it writes
	refused       string     // why ChatPrompt refuses the template ("" = it does not)
	defaultSystem string     // Qwen2/2.5: the system message written when the first is not one
	thinking      bool       // Qwen3: reasoning blocks in assistant turns
	thinkOff      bool       // Qwen3: the template takes enable_thinking; it is rendered false
	bos           string     // Llama 3: bos_token, written before the first turn
	genAlways     bool       // Llama 3: the generation prompt is written whether asked or not
	dated         bool       // Llama 3.1+: the system turn opens with the knowledge and today's dates
}

// chatFormat is the shape of a chat template's turns.
type chatFormat int

const (
	chatML     chatFormat = iota // Qwen: <|im_start|>role\n…<|im_end|>\n
	llama3Chat                   // Llama 3: <|start_header_id|>role<|end_header_id|>\n\n…<|eot_id|>
)

type jsonConfig struct {
	BOSToken     json.RawMessage `json:"bos_token"`
	EOSToken     json.RawMessage `json:"eos_token"`
	ChatTemplate json.RawMessage `json:"chat_template"`
}

// defaultSystemRe finds Qwen2/2.5's default system turn, a string literal of the template.
var defaultSystemRe = regexp.MustCompile(`'<\|im_start\|>system\\n([^'\\]+)<\|im_end\|>\\n'`)

func (t *BPE) loadConfig(cfg []byte) error {
	t.eos = -1
	var c jsonConfig
	if len(cfg) > 0 {
		if err := json.Unmarshal(cfg, &c); err != nil {
			return fmt.Errorf("tokenizer_config.json: %w", err)
		}
	}
	if id, ok := t.TokenID("<|im_end|>"); ok {
		t.eos = id
	} else if id, ok := t.TokenID(llama3EOT); ok {
		t.eos = id
	} else if s := tokenText(c.EOSToken); s != "" {
		if id, ok := t.TokenID(s); ok {
			t.eos = id
		}
	}
	tmpl, err := templateText(c.ChatTemplate)
	if err != nil {
		return err
	}
	t.bosToken = tokenText(c.BOSToken)
	t.setTemplate(tmpl)
	return nil
}

// setTemplate reads what ChatPrompt needs from a chat template ("" = none): the format is the
// one whose turn markers it writes, or without a template the one whose tokens the vocabulary
// has (ChatML when neither).
func (t *BPE) setTemplate(tmpl string) {
	t.chat = chatTemplate{present: tmpl != ""}
	_, hasHeader := t.TokenID(llama3Header)
	switch {
	case strings.Contains(tmpl, "<|im_start|>"):
	case strings.Contains(tmpl, llama3Header) || (tmpl == "" && hasHeader):
		t.setLlama3Template(tmpl)
		return
	case tmpl != "":
		t.chat.refused = "it writes neither ChatML's <|im_start|> nor Llama 3's " + llama3Header
		return
	}
	if m := defaultSystemRe.FindStringSubmatch(tmpl); m != nil {
		t.chat.defaultSystem = m[1]
	}
	t.chat.thinking = strings.Contains(tmpl, "</think>")
	t.chat.thinkOff = strings.Contains(tmpl, "enable_thinking")
}

// tokenText reads a token given as a string or as {"content": ...}.
func tokenText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(raw, &o)
	return o.Content
}

// templateText reads chat_template given as a string or as a list of {name, template}, where
// the one named "default" is used.
func templateText(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var list []struct{ Name, Template string }
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", fmt.Errorf("tokenizer_config.json: chat_template is neither a string nor a list of {name, template}")
	}
	for _, e := range list {
		if e.Name == "default" {
			return e.Template, nil
		}
	}
	return "", fmt.Errorf("tokenizer_config.json: chat_template has no template named \"default\"")
}

// ChatOptions are what a chat template reads besides the messages.
type ChatOptions struct {
	// AddGenerationPrompt ends the prompt with the assistant's turn header.
	AddGenerationPrompt bool
	// Date is the "Today Date" of Llama 3.1+ templates' system preamble (their date_string);
	// "" = DefaultChatDate. Other templates do not write it; it is checked all the same.
	Date string
}

// ChatPrompt is ChatPromptWith with the generation prompt as asked and the default date.
func (t *BPE) ChatPrompt(msgs []Message, addGenerationPrompt bool) (string, error) {
	return t.ChatPromptWith(msgs, ChatOptions{AddGenerationPrompt: addGenerationPrompt})
}

// ChatPromptWith renders msgs as the model's chat template does, for Qwen (ChatML, below) and
// Llama 3 (see llama3Prompt; Llama 3.1 and 3.2, see llama3DatedPrompt). Qwen's ChatML: a turn is
// "<|im_start|>{role}\n{content}<|im_end|>\n"; with addGenerationPrompt the prompt ends with
// "<|im_start|>assistant\n". Roles are system, user, assistant and tool (consecutive tool
// turns share one user turn of <tool_response> blocks); any other role is an error.
//
// Qwen2/2.5 templates: a default system message (the template's own text) is written when the
// first message is not a system one. Qwen3 templates, with thinking off as enable_thinking=false
// renders it: the generation prompt is followed by the empty think block
// "<think>\n\n</think>\n\n"; an assistant turn after the last user query carries its reasoning
// in <think> tags (empty for the final turn), earlier ones lose it. Without a chat_template
// the plain ChatML turns are written. A template of another shape is refused.
func (t *BPE) ChatPromptWith(msgs []Message, o ChatOptions) (string, error) {
	addGenerationPrompt := o.AddGenerationPrompt
	if t.chat.refused != "" {
		return "", fmt.Errorf("tokenizer_config.json: chat_template: %s: %w", t.chat.refused, ErrChatTemplate)
	}
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return "", fmt.Errorf("message %d: role %q is not system, user, assistant or tool", i, m.Role)
		}
	}
	if err := CheckChatDate(o.Date); err != nil {
		return "", err
	}
	if t.chat.dated {
		return t.llama3DatedPrompt(msgs, o)
	}
	if t.chat.format == llama3Chat {
		return t.llama3Prompt(msgs, addGenerationPrompt), nil
	}
	var b strings.Builder
	if len(msgs) > 0 && msgs[0].Role == "system" {
		turn(&b, "system", msgs[0].Content)
	} else if t.chat.defaultSystem != "" {
		turn(&b, "system", t.chat.defaultSystem)
	}
	lastQuery := lastQueryIndex(msgs)
	for i, m := range msgs {
		switch {
		case m.Role == "user" || (m.Role == "system" && i > 0):
			turn(&b, m.Role, m.Content)
		case m.Role == "assistant":
			t.assistantTurn(&b, m.Content, i > lastQuery, i == len(msgs)-1)
		case m.Role == "tool":
			toolTurn(&b, msgs, i)
		}
	}
	if addGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
		if t.chat.thinkOff {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return b.String(), nil
}

func turn(b *strings.Builder, role, content string) {
	b.WriteString("<|im_start|>" + role + "\n" + content + "<|im_end|>\n")
}

// lastQueryIndex is the index of the last user message that is not a wrapped tool response,
// or the last index when there is none (Qwen3's ns.last_query_index).
func lastQueryIndex(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		c := msgs[i].Content
		if msgs[i].Role == "user" && !(strings.HasPrefix(c, "<tool_response>") && strings.HasSuffix(c, "</tool_response>")) {
			return i
		}
	}
	return len(msgs) - 1
}

func (t *BPE) assistantTurn(b *strings.Builder, content string, afterQuery, last bool) {
	b.WriteString("<|im_start|>assistant\n")
	if t.chat.thinking {
		reasoning := ""
		if strings.Contains(content, "</think>") {
			parts := strings.Split(content, "</think>")
			before := strings.TrimRight(parts[0], "\n")
			content = strings.TrimLeft(parts[len(parts)-1], "\n")
			if k := strings.LastIndex(before, "<think>"); k >= 0 {
				reasoning = strings.TrimLeft(before[k+len("<think>"):], "\n")
			} else {
				reasoning = strings.TrimLeft(before, "\n")
			}
		}
		if afterQuery && (last || reasoning != "") {
			b.WriteString("<think>\n" + strings.Trim(reasoning, "\n") + "\n</think>\n\n")
			content = strings.TrimLeft(content, "\n")
		}
	}
	b.WriteString(content + "<|im_end|>\n")
}

func toolTurn(b *strings.Builder, msgs []Message, i int) {
	if i == 0 || msgs[i-1].Role != "tool" {
		b.WriteString("<|im_start|>user")
	}
	b.WriteString("\n<tool_response>\n" + msgs[i].Content + "\n</tool_response>")
	if i == len(msgs)-1 || msgs[i+1].Role != "tool" {
		b.WriteString("<|im_end|>\n")
	}
}
