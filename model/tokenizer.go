package model

import (
	"fmt"
	"strings"
)

// Token ids. Ids 0..255 are raw bytes; the rest are special tokens.
const (
	PAD       int32 = 256 // padding (never predicted in practice)
	BOS       int32 = 257 // beginning of sequence
	EOS       int32 = 258 // end of sequence; always stops sampling
	SEP       int32 = 259 // separator between segments
	RoleSys   int32 = 260 // role marker: system / instructions
	RoleUser  int32 = 261 // role marker: user / environment input
	RoleAgent int32 = 262 // role marker: an agent's own output
	RoleTool  int32 = 263 // role marker: tool / retriever output

	// VocabSize is the number of token ids the tokenizer can produce.
	VocabSize = 264
)

var specialNames = [...]string{
	PAD - 256:       "<|pad|>",
	BOS - 256:       "<|bos|>",
	EOS - 256:       "<|eos|>",
	SEP - 256:       "<|sep|>",
	RoleSys - 256:   "<|system|>",
	RoleUser - 256:  "<|user|>",
	RoleAgent - 256: "<|agent|>",
	RoleTool - 256:  "<|tool|>",
}

// IsSpecial reports whether id is one of the special (non-byte) tokens.
func IsSpecial(id int32) bool { return id >= 256 && id < VocabSize }

// TokenString renders one token: the byte itself for 0..255, the special
// token's name (e.g. "<|eos|>") otherwise, "<|unk:N|>" for out-of-range ids.
func TokenString(id int32) string {
	switch {
	case id >= 0 && id < 256:
		return string([]byte{byte(id)})
	case IsSpecial(id):
		return specialNames[id-256]
	default:
		return fmt.Sprintf("<|unk:%d|>", id)
	}
}

// Encode returns the byte-level token ids of s (one id per byte). Special
// token names in s are NOT recognised; see EncodeSpecial.
func Encode(s string) []int32 {
	out := make([]int32, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int32(s[i])
	}
	return out
}

// EncodeSpecial is Encode but recognises the special token names
// ("<|eos|>", "<|sep|>", ...) and emits their ids.
func EncodeSpecial(s string) []int32 {
	out := make([]int32, 0, len(s))
	for i := 0; i < len(s); {
		if s[i] == '<' && strings.HasPrefix(s[i:], "<|") {
			matched := false
			for j, name := range specialNames {
				if strings.HasPrefix(s[i:], name) {
					out = append(out, int32(256+j))
					i += len(name)
					matched = true
					break
				}
			}
			if matched {
				continue
			}
		}
		out = append(out, int32(s[i]))
		i++
	}
	return out
}

// Decode renders ids as text: bytes as themselves, special tokens by name
// (e.g. "<|eos|>"), unknown ids as "<|unk:N|>".
func Decode(ids []int32) string { return decode(ids, true) }

// DecodeText renders only the byte tokens, dropping special and unknown ids.
func DecodeText(ids []int32) string { return decode(ids, false) }

func decode(ids []int32, special bool) string {
	var b strings.Builder
	b.Grow(len(ids))
	for _, id := range ids {
		if id >= 0 && id < 256 {
			b.WriteByte(byte(id))
		} else if special {
			b.WriteString(TokenString(id))
		}
	}
	return b.String()
}
