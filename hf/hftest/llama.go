package hftest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Llama3Pattern is the Split regex of Llama 3's tokenizer.json.
const Llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// Llama3ChatTemplate is Meta's Llama 3 Instruct chat template (the revision that tests
// add_generation_prompt).
const Llama3ChatTemplate = "{% set loop_messages = messages %}{% for message in loop_messages %}" +
	"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}" +
	"{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}" +
	"{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"

// Llama3Specials are the first ten of Llama 3's added tokens, in its order: TinyLlama3Tokenizer
// gives them the ids Llama3SpecialBase + index (Llama 3 gives them 128000 + index).
var Llama3Specials = []string{"<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
	"<|reserved_special_token_1|>", "<|reserved_special_token_2|>", "<|reserved_special_token_3|>",
	"<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_4|>", "<|eot_id|>"}

// Llama3SpecialBase is the id of <|begin_of_text|> in TinyLlama3Tokenizer.
const Llama3SpecialBase = 300

// TinyLlama3Tokenizer writes at dir a small Llama 3-shaped tokenizer (tokenizer.json with
// Llama 3's pre-tokenizer, no normalizer, byte-level BPE over the 256 bytes and a few merges,
// Llama 3's special tokens; tokenizer_config.json with Llama 3 Instruct's chat template,
// bos_token <|begin_of_text|> and eos_token <|eot_id|>) and returns dir.
func TinyLlama3Tokenizer(t testing.TB, dir string) string {
	t.Helper()
	vocab := map[string]int{}
	for b := range 256 {
		vocab[byteSymbol(byte(b))] = b
	}
	merges := [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "s"}, {"Ġ", "is"}, {"e", "r"}, {"Ġ", "a"}, {"=", "="}}
	for i, m := range merges {
		vocab[m[0]+m[1]] = 256 + i
	}
	var added []any
	for i, s := range Llama3Specials {
		added = append(added, map[string]any{"id": Llama3SpecialBase + i, "content": s, "single_word": false,
			"lstrip": false, "rstrip": false, "normalized": false, "special": true})
	}
	tok := map[string]any{
		"version": "1.0", "added_tokens": added, "normalizer": nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": Llama3Pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model":   map[string]any{"type": "BPE", "ignore_merges": true, "vocab": vocab, "merges": merges},
	}
	cfg := map[string]any{"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "chat_template": Llama3ChatTemplate,
		"clean_up_tokenization_spaces": true, "tokenizer_class": "PreTrainedTokenizerFast"}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{"tokenizer.json": tok, "tokenizer_config.json": cfg} {
		b, err := json.Marshal(v)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// byteSymbol is GPT-2's byte-level symbol of b: printable Latin-1 bytes stand for themselves,
// the others are U+0100 onwards in byte order.
func byteSymbol(b byte) string {
	if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE {
		return string(rune(b))
	}
	n := 0
	for c := 0; c < int(b); c++ {
		if !((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE) {
			n++
		}
	}
	return string(rune(0x100 + n))
}
