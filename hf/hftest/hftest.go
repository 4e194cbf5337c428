// Package hftest writes the small Hugging Face model folders that tests of every package load.
package hftest

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/drmas-dev/drmas/hf"
)

// TinyTokenizer is the folder of the 267-id byte-level BPE tokenizer of hf's tests (no chat
// template): enough for checkpoints, not for prompts.
func TinyTokenizer() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "tinytok")
}

// TinyHF writes a random Qwen3 model folder at dir (as `drmas model init` does: hidden 32, two
// layers, 4 heads over 2 key/value heads, head_dim 16, BF16) with the tokenizer files of
// tokenizer, its vocab sized to them, and returns dir.
func TinyHF(t testing.TB, dir, tokenizer string, seed uint64) string {
	t.Helper()
	tok, err := hf.ReadTokenizerInfo(tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	s := hf.InitSpec{Arch: "qwen3", Hidden: 32, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Intermediate: 64,
		Vocab: hf.VocabFor(tok), MaxPositions: 1024}
	s.BOS, s.EOS = hf.SpecialIDs(tok)
	cfg, err := hf.NewConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := hf.WriteFolder(dir, cfg, hf.BF16, hf.RandomTensors(cfg, seed), tokenizer); err != nil {
		t.Fatal(err)
	}
	return dir
}
