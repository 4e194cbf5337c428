package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzEncode: on the real Qwen3 tokenizer, decode(encode(s)) = s with its stretches between
// added tokens in NFC for valid UTF-8 s, and
// any bytes encode without panicking to ids inside the vocabulary.
func FuzzEncode(f *testing.F) {
	tok, _ := qwen3(f)
	fuzzRoundTrip(f, tok, testCorpus(3, 20))
}

// FuzzEncodeLlama3: on the real Llama 3 tokenizer (no normalizer), decode(encode(s)) = s for
// valid UTF-8 s, and any bytes encode without panicking to ids inside the vocabulary.
func FuzzEncodeLlama3(f *testing.F) {
	tok, _ := llama3(f)
	fuzzRoundTrip(f, tok, corpusOf(4, 20, llamaFragments))
}

func fuzzRoundTrip(f *testing.F, tok *BPE, seeds []string) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		for _, id := range ids {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("id %d outside the vocabulary", id)
			}
		}
		if !utf8.ValidString(s) {
			return
		}
		if got, want := tok.Decode(ids), wantRoundTrip(tok, s); got != want {
			t.Fatalf("decode(encode(%q)) = %q, want %q", s, got, want)
		}
	})
}

// FuzzLoad: any tokenizer.json / tokenizer_config.json bytes load or fail with an error, never
// a panic, and a loaded tokenizer encodes, decodes and renders a chat prompt.
func FuzzLoad(f *testing.F) {
	f.Add(tinyJSON(nil), []byte(`{"eos_token": "<|im_end|>", "chat_template": "<|im_start|>"}`))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}, "pre_tokenizer": null}`), []byte(nil))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"added_tokens":[{"id":9,"content":"a","lstrip":true,"rstrip":true,"single_word":true}]}`), []byte(`{}`))
	llama := tinyJSON(func(m map[string]any) {
		m["normalizer"], m["pre_tokenizer"] = nil, splitWith(llama3Pattern)
		m["added_tokens"] = []any{map[string]any{"id": 300, "content": "<|begin_of_text|>", "special": true},
			map[string]any{"id": 301, "content": "<|start_header_id|>", "special": true}, map[string]any{"id": 302, "content": "<|eot_id|>", "special": true}}
	})
	f.Add(llama, []byte(`{"bos_token": "<|begin_of_text|>", "chat_template": "{{ bos_token }}<|start_header_id|>"}`))
	f.Fuzz(func(t *testing.T, tokJSON, cfg []byte) {
		tok, err := Load(tokJSON, cfg)
		if err != nil {
			return
		}
		s := "ab <|im_end|> a\u0301 \t\n 12"
		ids := tok.Encode(s)
		_ = tok.Decode(append(ids, -1, 1<<30))
		_, _ = tok.ChatPrompt([]Message{{"user", s}}, true)
	})
}

// wantRoundTrip is what Decode(Encode(s)) must give: s with the added tokens found in the raw
// text kept and every stretch between them in NFC when the tokenizer normalizes.
func wantRoundTrip(tok *BPE, s string) string {
	var b strings.Builder
	for _, sg := range tok.rawMatch.split(nil, s) {
		if sg.id >= 0 || !tok.nfc {
			b.WriteString(s[sg.start:sg.end])
		} else {
			b.WriteString(nfc(s[sg.start:sg.end]))
		}
	}
	return b.String()
}
