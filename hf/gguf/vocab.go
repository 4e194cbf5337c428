package gguf

import (
	"fmt"
	"strconv"
)

// Token types, as llama.cpp numbers them.
const (
	TokenNormal  int32 = 1
	TokenControl int32 = 3
)

// Vocab is the tokenizer a GGUF file carries: a byte-level BPE ("gpt2") vocabulary.
type Vocab struct {
	Pre    string   // tokenizer.ggml.pre: the pre-tokenizer's name, e.g. "qwen2"
	Tokens []string // one per embedding row, in byte-level BPE spelling
	Types  []int32  // one per token (TokenNormal, TokenControl, ...)
	Merges []string // "left right" pairs by rank
	BOS    int32
	EOS    int32
}

// Validate reports the first problem that would keep llama.cpp from loading v.
func (v Vocab) Validate() error {
	if len(v.Types) != len(v.Tokens) {
		return fmt.Errorf("gguf: vocabulary: %d token types for %d tokens", len(v.Types), len(v.Tokens))
	}
	for _, id := range []int32{v.BOS, v.EOS} {
		if id < 0 || int(id) >= len(v.Tokens) {
			return fmt.Errorf("gguf: vocabulary: special token id %d outside [0, %d)", id, len(v.Tokens))
		}
	}
	seen := make(map[string]int, len(v.Tokens))
	for i, t := range v.Tokens {
		if j, ok := seen[t]; ok {
			return fmt.Errorf("gguf: vocabulary: tokens %d and %d are both %q", j, i, t)
		}
		seen[t] = i
	}
	return nil
}

func (v Vocab) kvs() []kv {
	merges := v.Merges
	if merges == nil {
		merges = []string{}
	}
	return []kv{
		{"tokenizer.ggml.model", tString, "gpt2"},
		{"tokenizer.ggml.pre", tString, v.Pre},
		{"tokenizer.ggml.tokens", tArray, v.Tokens},
		{"tokenizer.ggml.token_type", tArray, v.Types},
		{"tokenizer.ggml.merges", tArray, merges},
		{"tokenizer.ggml.bos_token_id", tUint32, uint32(v.BOS)},
		{"tokenizer.ggml.eos_token_id", tUint32, uint32(v.EOS)},
		{"tokenizer.ggml.add_bos_token", tBool, false},
	}
}

// ByteVocab is a synthetic vocabulary of n tokens for models fed token ids (random-weight
// benchmarks): the 256 byte tokens of byte-level BPE, so any text still tokenizes, then
// "t256", "t257", ..., and last "<|endoftext|>" as BOS and EOS. It has no merges.
func ByteVocab(n int) (Vocab, error) {
	if n < 257 {
		return Vocab{}, fmt.Errorf("gguf: a byte vocabulary needs at least 257 tokens, not %d", n)
	}
	v := Vocab{Pre: "qwen2", Tokens: make([]string, n), Types: make([]int32, n), BOS: int32(n - 1), EOS: int32(n - 1)}
	for i, r := range byteRunes() {
		v.Tokens[i] = string(r)
	}
	for i := 256; i < n-1; i++ {
		v.Tokens[i] = "t" + strconv.Itoa(i)
	}
	v.Tokens[n-1] = "<|endoftext|>"
	for i := range v.Types {
		v.Types[i] = TokenNormal
	}
	v.Types[n-1] = TokenControl
	return v, nil
}

// byteRunes is byte-level BPE's printable stand-in for each byte: printable Latin-1 bytes
// stand for themselves, the others map in order to U+0100 onwards.
func byteRunes() [256]rune {
	var r [256]rune
	next := rune(256)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			r[b] = rune(b)
		} else {
			r[b] = next
			next++
		}
	}
	return r
}
