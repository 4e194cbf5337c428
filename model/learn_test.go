package model

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// copyTask: prompt BOS d1..dn SEP, response d1..dn EOS.
func copyTask(r *rand.Rand, n int) Sequence {
	digits := make([]int32, n)
	for i := range digits {
		digits[i] = '0' + int32(r.IntN(10))
	}
	prompt := append(append([]int32{BOS}, digits...), SEP)
	return Sequence{Prompt: prompt, Response: append(slices.Clone(digits), EOS)}
}

func sftStep(t testing.TB, m *Model, opt *AdamW, g *Grads, batch []Sequence) float64 {
	p, err := m.Forward(batch, 1)
	if err != nil {
		t.Fatal(err)
	}
	n := p.Tokens()
	d := make([][]float32, len(batch))
	var loss float64
	for i, lp := range p.LogProbs() {
		d[i] = slices.Repeat([]float32{-1 / float32(n)}, len(lp))
		for _, v := range lp {
			loss -= float64(v) / float64(n)
		}
	}
	g.Zero()
	if err := p.Backward(d, nil, g); err != nil {
		t.Fatal(err)
	}
	ClipGradNorm(g, 1)
	if err := opt.Step(g); err != nil {
		t.Fatal(err)
	}
	return loss
}

// TestLearnCopy trains a tiny model with supervised updates through the
// public API and requires ≥ 95% exact match under greedy sampling.
func TestLearnCopy(t *testing.T) {
	start := time.Now()
	cfg := Config{Vocab: VocabSize, Context: 16, Dim: 48, Layers: 2, Heads: 4, FFMult: 4, TiedHead: true}
	m, err := New(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	oc := DefaultAdamWConfig()
	oc.LR = 3e-3
	opt := NewAdamW(m, oc)
	g := m.NewGrads()
	r := rand.New(rand.NewPCG(1, 2))
	const L = 5
	steps := 300
	if raceEnabled {
		steps = 40 // the race detector makes this ~20× slower; only check that it runs and learns something
	}
	var loss float64
	for s := 0; s < steps; s++ {
		batch := make([]Sequence, 32)
		for i := range batch {
			batch[i] = copyTask(r, L)
		}
		opt.LR = oc.LR * min(1, float64(s+1)/50) // warm-up
		loss = sftStep(t, m, opt, g, batch)
		if s%100 == 0 {
			t.Logf("step %d loss %.4f", s, loss)
		}
	}
	test := rand.New(rand.NewPCG(99, 100))
	reqs := make([]SampleRequest, 200)
	want := make([][]int32, len(reqs))
	for i := range reqs {
		s := copyTask(test, L)
		reqs[i] = SampleRequest{Prompt: s.Prompt, Seed: uint64(i)}
		want[i] = s.Response
	}
	res, err := m.Sample(context.Background(), reqs, SampleOptions{Temperature: 0, MaxTokens: L + 2})
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for i := range res {
		if slices.Equal(res[i].Tokens, want[i]) {
			ok++
		}
	}
	acc := float64(ok) / float64(len(res))
	t.Logf("final loss %.4f, exact match %.1f%% after %d steps in %v", loss, 100*acc, steps, time.Since(start))
	if raceEnabled {
		if loss > 4.5 {
			t.Fatalf("loss %.3f did not fall under the race detector run", loss)
		}
		return
	}
	if acc < 0.95 {
		t.Fatalf("exact match %.1f%% < 95%%", 100*acc)
	}
}
