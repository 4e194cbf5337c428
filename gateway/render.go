package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/tokenizer"
)

// message is an OpenAI chat message as a client sends it.
type message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []toolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Name       string          `json:"name,omitempty"`
}

// toolCall is an OpenAI function call of an assistant message.
type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// text is a message's content: a string, the texts of an array of parts, or "" for null.
func (m message) text() (string, error) {
	c := bytes.TrimSpace(m.Content)
	if len(c) == 0 || string(c) == "null" {
		return "", nil
	}
	var s string
	if c[0] == '"' {
		if err := json.Unmarshal(c, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(c, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor an array of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part of type %s: only text parts are supported", excerpt.Quote(p.Type))
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

const (
	toolsHead = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
	toolsTail = "\n</tools>\n\nFor each function call, return a json object with function name and arguments within " +
		"<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"
)

// chatMessages turns a request's messages and tools into the messages of the model's chat
// template, as Qwen's templates render function calling: the tools' signatures (as Python's
// json.dumps writes them) in the system turn, an assistant's calls as <tool_call> blocks after
// its content, and tool results as tool turns. The developer role is the system role.
func chatMessages(msgs []message, tools []json.RawMessage) ([]tokenizer.Message, error) {
	out := make([]tokenizer.Message, 0, len(msgs)+1)
	for i, m := range msgs {
		content, err := m.text()
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		role := m.Role
		switch role {
		case "developer":
			role = "system"
		case "system", "user", "tool":
		case "assistant":
			content, err = withToolCalls(content, m.ToolCalls)
			if err != nil {
				return nil, fmt.Errorf("messages[%d]: %w", i, err)
			}
		default:
			return nil, fmt.Errorf("messages[%d]: role %s is not system, developer, user, assistant or tool", i, excerpt.Quote(m.Role))
		}
		out = append(out, tokenizer.Message{Role: role, Content: content})
	}
	if len(tools) == 0 {
		return out, nil
	}
	var b strings.Builder
	if len(out) > 0 && out[0].Role == "system" {
		b.WriteString(out[0].Content + "\n\n")
		out = out[1:]
	}
	b.WriteString(toolsHead)
	for i, t := range tools {
		js, err := pyJSON(t)
		if err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		b.WriteString("\n" + js)
	}
	b.WriteString(toolsTail)
	return append([]tokenizer.Message{{Role: "system", Content: b.String()}}, out...), nil
}

// withToolCalls appends an assistant message's calls to its content as Qwen's template does.
func withToolCalls(content string, calls []toolCall) (string, error) {
	var b strings.Builder
	b.WriteString(content)
	for i, c := range calls {
		if i > 0 || content != "" {
			b.WriteString("\n")
		}
		args := strings.TrimSpace(c.Function.Arguments)
		if args == "" {
			args = "{}"
		}
		if !json.Valid([]byte(args)) {
			return "", fmt.Errorf("tool_calls[%d].function.arguments is not JSON", i)
		}
		b.WriteString("<tool_call>\n{\"name\": \"" + c.Function.Name + "\", \"arguments\": " + args + "}\n</tool_call>")
	}
	return b.String(), nil
}

var toolCallRe = regexp.MustCompile(`(?s)<tool_call>\s*(.*?)\s*</tool_call>`)

// parseToolCalls reads the <tool_call> JSON blocks of a response as Qwen's models write them
// ({"name": …, "arguments": {…}}). content is the text before the first block, trimmed; ok is
// false when no block parses (the response is then plain content).
func parseToolCalls(text, idPrefix string) (content string, calls []toolCall, ok bool) {
	locs := toolCallRe.FindAllStringSubmatchIndex(text, -1)
	for _, l := range locs {
		var c struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal([]byte(text[l[2]:l[3]]), &c); err != nil || c.Name == "" {
			continue
		}
		args := string(c.Arguments)
		if len(c.Arguments) == 0 {
			args = "{}"
		} else if c.Arguments[0] == '"' { // arguments given as a JSON string
			_ = json.Unmarshal(c.Arguments, &args)
		}
		calls = append(calls, toolCall{ID: fmt.Sprintf("%s_%d", idPrefix, len(calls)), Type: "function",
			Function: functionCall{Name: c.Name, Arguments: args}})
	}
	if len(calls) == 0 {
		return text, nil, false
	}
	return strings.TrimSpace(text[:locs[0][0]]), calls, true
}

// pyJSON writes a JSON value as Python's json.dumps(ensure_ascii=False) does (the templates'
// tojson): ", " and ": " separators, keys in their given order, numbers as written.
func pyJSON(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	if err := pyValue(dec, &b); err != nil {
		return "", err
	}
	if dec.More() {
		return "", fmt.Errorf("more than one JSON value")
	}
	return b.String(), nil
}

func pyValue(dec *json.Decoder, b *strings.Builder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		end := byte(']')
		if v == '{' {
			end = '}'
		}
		b.WriteByte(byte(v))
		for n := 0; dec.More(); n++ {
			if n > 0 {
				b.WriteString(", ")
			}
			if v == '{' {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				pyString(b, k.(string))
				b.WriteString(": ")
			}
			if err := pyValue(dec, b); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		b.WriteByte(end)
	case string:
		pyString(b, v)
	case json.Number:
		b.WriteString(v.String())
	case bool:
		fmt.Fprint(b, v)
	case nil:
		b.WriteString("null")
	}
	return nil
}

// pyString writes s as a JSON string the way Python's json module does with ensure_ascii off.
func pyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
