package model

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzTokenizer: Encode and EncodeSpecial never panic and round-trip through Decode (byte ids
// are the bytes themselves, special names their ids); DecodeText keeps only the byte ids; every
// id produced is in the vocabulary. Run with:
// go test ./model -run '^$' -fuzz '^FuzzTokenizer$' -fuzztime 30s
func FuzzTokenizer(f *testing.F) {
	for _, s := range []string{"", "hello", "<|eos|>", "<|bos|>a<|sep|>b<|unk:3|>", "<|", "<|<|eos|>", "é日本\xff\xfe", "<|system|><|user|><|agent|><|tool|><|pad|>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := Encode(s)
		if len(ids) != len(s) {
			t.Fatalf("Encode: %d ids for %d bytes", len(ids), len(s))
		}
		if Decode(ids) != s || DecodeText(ids) != s {
			t.Fatalf("Encode does not round-trip %q", s)
		}
		sp := EncodeSpecial(s)
		var text strings.Builder
		for _, id := range sp {
			if id < 0 || id >= VocabSize || id == PAD && !strings.Contains(s, "<|pad|>") {
				t.Fatalf("EncodeSpecial(%q) gave id %d", s, id)
			}
			if !IsSpecial(id) {
				text.WriteByte(byte(id))
			}
		}
		if Decode(sp) != s {
			t.Fatalf("EncodeSpecial(%q) decodes to %q", s, Decode(sp))
		}
		if DecodeText(sp) != text.String() {
			t.Fatalf("DecodeText(EncodeSpecial(%q)) = %q, want the byte tokens %q", s, DecodeText(sp), text.String())
		}
		if !strings.Contains(s, "<|") && !slices.Equal(sp, ids) {
			t.Fatalf("EncodeSpecial(%q) differs from Encode without a special name", s)
		}
		if utf8.ValidString(s) && !utf8.ValidString(Decode(sp)) {
			t.Fatal("valid UTF-8 decoded to invalid UTF-8")
		}
		// Any id sequence (the bytes of s read as int32s) decodes without panicking; byte and
		// special ids re-encode to themselves through EncodeSpecial unless bytes spell a name.
		raw := make([]int32, len(s)/4)
		_ = binary.Read(bytes.NewReader([]byte(s)), binary.LittleEndian, raw)
		d := Decode(raw)
		_ = DecodeText(raw)
		for _, id := range raw {
			if id < 0 || id >= VocabSize {
				if want := TokenString(id); !strings.Contains(d, want) {
					t.Fatalf("unknown id %d not rendered as %s in %q", id, want, d)
				}
			}
		}
	})
}
