package model

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
)

// pinHashes trains a built-in model with cfg for two steps and returns the
// sha256 of its checkpoint, of Score's log-probs and entropies on another
// batch, and of Sample's tokens and log-probs (temperature 1, top-p 0.9).
func pinHashes(t *testing.T, cfg Config) (string, string, string) {
	m, err := New(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	opt := NewAdamW(m, DefaultAdamWConfig())
	g := m.NewGrads()
	for i := 0; i < 2; i++ {
		trainStep(t, m, opt, g, benchBatch(8, 64, 16, uint64(i)))
	}
	var buf bytes.Buffer
	if err := m.SaveSafetensors(&buf); err != nil {
		t.Fatal(err)
	}
	ck := fmt.Sprintf("%x", sha256.Sum256(buf.Bytes()))
	h := sha256.New()
	lp, en, err := m.Score(benchBatch(5, 40, 7, 9), 0.7)
	if err != nil {
		t.Fatal(err)
	}
	for i := range lp {
		for j := range lp[i] {
			binary.Write(h, binary.LittleEndian, math.Float32bits(lp[i][j]))
			binary.Write(h, binary.LittleEndian, math.Float32bits(en[i][j]))
		}
	}
	sc := fmt.Sprintf("%x", h.Sum(nil))
	reqs := []SampleRequest{{Prompt: Encode("hello"), Seed: 1}, {Prompt: Encode("a longer prompt here"), Seed: 2}, {Prompt: Encode("x"), Seed: 3}}
	res, err := m.Sample(context.Background(), reqs, SampleOptions{Temperature: 1, TopP: 0.9, MaxTokens: 24})
	if err != nil {
		t.Fatal(err)
	}
	h = sha256.New()
	for _, r := range res {
		for j, tok := range r.Tokens {
			binary.Write(h, binary.LittleEndian, tok)
			binary.Write(h, binary.LittleEndian, math.Float32bits(r.LogProbs[j]))
		}
	}
	return ck, sc, fmt.Sprintf("%x", h.Sum(nil))
}

// TestBuiltinSameBitsAsBeforeSeam: the built-in model on the block
// skeleton (arch_*.go over builtinDesc) trains, scores and samples to the
// bits of its former own forward, backward and decoder. The hashes were
// computed by that implementation (commit 4055a84, before the move) on
// amd64 with AVX2/FMA; the element kernels and the GEMM differ elsewhere.
func TestBuiltinSameBitsAsBeforeSeam(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("the pinned hashes are of the AVX2/FMA kernels")
	}
	for _, tc := range []struct {
		cfg                 Config
		ckpt, score, sample string
	}{
		{DefaultConfig(),
			"977cbe4f4bbdb0969b178e0fee51a3984f18a15c7b4c4d2e234b8c866287a194",
			"5dcfd50459695bdf900bed91d12c95bade326af6c0b6b17938ae72f617f91d63",
			"00acd3ab8580765763141eed039cd319dc8f84b543e7f9561ef66eaec0fb3e17"},
		// Untied head, a width off the vector LayerNorm (20 % 8 ≠ 0), MLP width 3·Dim.
		{Config{Vocab: VocabSize + 3, Context: 64, Dim: 20, Layers: 2, Heads: 2, FFMult: 3},
			"75b9b7008eb1276739a951f0e969d9d4bb02f28900abf24baca7d5c45b449a86",
			"443facd9ac69cddcd12838a299698151db76c09dca8ee75f4a9af5aea4d06b2f",
			"57382b2da3d07bfcb652bc2c44961223537680dd0d8d83fbc303cf650bc6d40b"},
	} {
		ck, sc, sa := pinHashes(t, tc.cfg)
		if ck != tc.ckpt || sc != tc.score || sa != tc.sample {
			t.Errorf("config %+v: checkpoint %s score %s sample %s, want %s %s %s", tc.cfg, ck, sc, sa, tc.ckpt, tc.score, tc.sample)
		}
	}
}
