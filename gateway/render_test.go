package gateway

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/tokenizer"
)

// toolConversations are requests with tools, as OpenAI clients send them: a system message or
// none, an assistant turn with two calls (content null), their results, a final answer.
var toolConversations = []string{
	`{"tools": [{"type": "function", "function": {"name": "search", "description": "Find passages (café, \"quoted\")", "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "k": {"type": "integer", "minimum": 1}}, "required": ["query"]}}}],
	  "messages": [{"role": "system", "content": "You answer questions."}, {"role": "user", "content": "Where is Lisbon?"},
	    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"query\": \"Lisbon\"}"}},
	      {"id": "c2", "type": "function", "function": {"name": "search", "arguments": "{\"query\": \"Portugal\", \"k\": 2}"}}]},
	    {"role": "tool", "tool_call_id": "c1", "content": "Lisbon is in Portugal."}, {"role": "tool", "tool_call_id": "c2", "content": "Portugal is in Europe."},
	    {"role": "assistant", "content": "It is in Portugal."}, {"role": "user", "content": "And Paris?"}]}`,
	`{"tools": [{"type": "function", "function": {"name": "transfer_to_verifier", "description": "Handoff", "parameters": {"type": "object", "properties": {}, "required": [], "additionalProperties": false}, "strict": true}}],
	  "messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "Let me check.", "tool_calls": [{"id": "h", "type": "function", "function": {"name": "transfer_to_verifier", "arguments": "{}"}}]},
	    {"role": "tool", "tool_call_id": "h", "content": "{\"assistant\": \"verifier\"}"}]}`,
}

// TestToolsAsQwen3Template: requests with tools, tool calls and tool results render as HF's
// Jinja engine renders Qwen3's own chat template.
func TestToolsAsQwen3Template(t *testing.T) {
	dir := oracles.Qwen3TokenizerDir(t)
	nm := oracles.NodeModules(t)
	bpe, err := tokenizer.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var in []json.RawMessage
	var got []string
	for _, c := range toolConversations {
		var req request
		if err := json.Unmarshal([]byte(c), &req); err != nil {
			t.Fatal(err)
		}
		msgs, err := chatMessages(req.Messages, req.Tools)
		if err != nil {
			t.Fatal(err)
		}
		text, err := bpe.ChatPrompt(msgs, true)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, text)
		in = append(in, json.RawMessage(c))
	}
	tmp := t.TempDir()
	inPath, outPath := filepath.Join(tmp, "in.json"), filepath.Join(tmp, "out.json")
	data, _ := json.Marshal(in)
	if err := os.WriteFile(inPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs(filepath.Join("testdata", "template.mjs"))
	if msg, err := exec.Command("node", script, nm, dir, inPath, outPath).CombinedOutput(); err != nil {
		t.Fatalf("node oracle: %v\n%s", err, msg)
	}
	var want []string
	data, err = os.ReadFile(outPath)
	if err != nil || json.Unmarshal(data, &want) != nil {
		t.Fatalf("oracle output %s: %v", data, err)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("conversation %d:\n got  %q\n want %q", i, got[i], want[i])
		}
	}
}

// TestParseToolCalls: a reply's <tool_call> blocks become calls (arguments as JSON text), the
// text before them the content; a reply without a parsable block is content only.
func TestParseToolCalls(t *testing.T) {
	content, calls, ok := parseToolCalls("Searching.\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"Lisbon\"}}\n</tool_call>\n<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>", "call_x")
	want := []toolCall{{ID: "call_x_0", Type: "function", Function: functionCall{Name: "search", Arguments: `{"query": "Lisbon"}`}},
		{ID: "call_x_1", Type: "function", Function: functionCall{Name: "f", Arguments: `{"a": 1}`}}}
	if !ok || content != "Searching." || !slices.Equal(calls, want) {
		t.Errorf("got %q %+v %v", content, calls, ok)
	}
	for _, s := range []string{"no call", "<tool_call>{not json}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>"} {
		if c, calls, ok := parseToolCalls(s, "x"); ok || c != s || calls != nil {
			t.Errorf("%q: %q %v %v", s, c, calls, ok)
		}
	}
}

// TestRenderRefusalsExcerpt: a client's 100 KB role or content-part type is refused with a
// short excerpt of it, not echoed whole.
func TestRenderRefusalsExcerpt(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	part, err := json.Marshal([]map[string]string{{"type": long, "text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]message{
		"role": {Role: long, Content: json.RawMessage(`"hi"`)},
		"part": {Role: "user", Content: part},
	} {
		_, err := chatMessages([]message{m}, nil)
		if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "(100000 bytes)") {
			t.Errorf("%s: error of %d bytes, want a short one naming the value's size: %.200v", name, len(fmt.Sprint(err)), err)
		}
	}
}
