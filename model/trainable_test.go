package model

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTrainableLLMSameAsDirect: a step through the Trainable interface (TrainForward,
// Backward into a GradBuf, AdamW.Apply) gives the bits of the typed calls.
func TestTrainableLLMSameAsDirect(t *testing.T) {
	c := tinyArchs()["qwen2_tied_gqa"]
	r := rand.New(rand.NewPCG(3, 4))
	seqs := archSeqs(c.Vocab, r, [2]int{5, 3}, [2]int{2, 4})
	dlp, dent := randGrads(seqs, r)
	step := func(viaInterface bool) []float32 {
		m, err := InitLLM(c, 7)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultAdamWConfig()
		if viaInterface {
			var tr Trainable = m
			p, err := tr.TrainForward(seqs, 0.9)
			if err != nil {
				t.Fatal(err)
			}
			g := tr.NewGradBuf()
			if err := p.Backward(dlp, dent, g); err != nil {
				t.Fatal(err)
			}
			if err := tr.NewOptimizer(cfg).Apply(g); err != nil {
				t.Fatal(err)
			}
		} else {
			p, err := m.Forward(seqs, 0.9)
			if err != nil {
				t.Fatal(err)
			}
			g := m.NewGrads()
			if err := p.Backward(dlp, dent, g); err != nil {
				t.Fatal(err)
			}
			if err := NewLLMAdamW(m, cfg).StepLLM(g); err != nil {
				t.Fatal(err)
			}
		}
		var out []float32
		for _, p := range m.Params() {
			out = append(out, p.Data...)
		}
		return out
	}
	a, b := step(true), step(false)
	if !slices.Equal(a, b) {
		t.Fatal("a step through Trainable differs from the typed calls")
	}
}

// TestTrainableRefusesOtherGrads: gradients of another model are an error, not a silent
// mix-up.
func TestTrainableRefusesOtherGrads(t *testing.T) {
	c := tinyArchs()["llama_untied"]
	m, err := InitLLM(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	seqs := archSeqs(c.Vocab, r, [2]int{3, 2})
	p, err := m.TrainForward(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	dlp, _ := randGrads(seqs, r)
	builtin, err := New(DefaultConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Backward(dlp, nil, builtin.NewGradBuf()); err == nil {
		t.Fatal("Backward took the built-in model's gradients")
	}
	if err := m.NewOptimizer(DefaultAdamWConfig()).Apply(builtin.NewGradBuf()); err == nil {
		t.Fatal("Apply took gradients of another size")
	}
	if err := AddGrads(m.NewGradBuf(), builtin.NewGradBuf()); err == nil {
		t.Fatal("AddGrads mixed two models")
	}
}
