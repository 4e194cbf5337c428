package gateway

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/actors"
)

// FuzzRender: any request body either is refused with an error body or renders to a prompt
// of ids; no input panics.
func FuzzRender(f *testing.F) {
	for _, c := range toolConversations {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"model": "a", "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]}`))
	be := actors.NewLocal("m", 0, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		var req request
		if json.Unmarshal(body, &req) != nil {
			return
		}
		req.Model = "a"
		text, ids, aerr := render(be, req, true)
		if aerr == nil && (len(ids) == 0 || (len(req.Messages) > 0 && !strings.Contains(text, ": "))) {
			t.Fatalf("rendered %q to %d ids", text, len(ids))
		}
	})
}

// FuzzPyJSON: the Python form of a JSON value is JSON with the same value.
func FuzzPyJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.50, "é\n\u0001"], "b": {"c": null, "d": true}}`, `"x"`, `[]`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want any
		if json.Unmarshal(raw, &want) != nil {
			return
		}
		s, err := pyJSON(raw)
		if err != nil {
			return // a number JSON allows but Go's decoder refuses as a token, or trailing data
		}
		var got any
		if err := json.Unmarshal([]byte(s), &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s → %s (%v)", raw, s, err)
		}
	})
}

// FuzzParseToolCalls: calls parsed from any reply have names; a reply without any is content.
func FuzzParseToolCalls(f *testing.F) {
	f.Add("a<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}</tool_call>")
	f.Add("<tool_call>\n{\"name\": \"f\", \"arguments\": \"{}\"}\n</tool_call><tool_call>")
	f.Fuzz(func(t *testing.T, text string) {
		content, calls, ok := parseToolCalls(text, "c")
		if ok != (len(calls) > 0) || (!ok && content != text) {
			t.Fatalf("%q: %q %v %v", text, content, calls, ok)
		}
		for _, c := range calls {
			if c.Function.Name == "" {
				t.Fatalf("%q: call %+v", text, c)
			}
		}
	})
}
