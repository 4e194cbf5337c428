package model

import (
	"bytes"
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

// TestAdamWStateRoundTrip: an LLM optimizer's state saved after a step, loaded into a fresh
// optimizer of a copy of the model, gives the same next step bit for bit; a state of another
// model is refused and changes nothing.
func TestAdamWStateRoundTrip(t *testing.T) {
	c := tinyArchs()["qwen3_untied_hd6_bias"]
	r := rand.New(rand.NewPCG(5, 6))
	seqs := archSeqs(c.Vocab, r, [2]int{4, 3})
	dlp, dent := randGrads(seqs, r)
	step := func(m *LLM, o *AdamW) {
		p, err := m.TrainForward(seqs, 1)
		if err != nil {
			t.Fatal(err)
		}
		g := m.NewGradBuf()
		if err := p.Backward(dlp, dent, g); err != nil {
			t.Fatal(err)
		}
		if err := o.Apply(g); err != nil {
			t.Fatal(err)
		}
	}
	weights := func(m *LLM) (out []float32) {
		for _, p := range m.Params() {
			out = append(out, p.Data...)
		}
		return out
	}
	cfg := DefaultAdamWConfig()
	cfg.LR = 0.01
	a, err := InitLLM(c, 2)
	if err != nil {
		t.Fatal(err)
	}
	oa := a.NewOptimizer(cfg)
	step(a, oa)
	var buf bytes.Buffer
	if err := oa.SaveState(&buf); err != nil {
		t.Fatal(err)
	}
	b, _ := InitLLM(c, 2)
	for i, p := range a.Params() {
		copy(b.Params()[i].Data, p.Data)
	}
	ob := b.NewOptimizer(DefaultAdamWConfig())
	if err := ob.LoadState(bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
		t.Fatal(err)
	}
	if ob.Steps != 1 || ob.LR != 0.01 {
		t.Fatalf("loaded steps %d lr %v, want 1 and 0.01", ob.Steps, ob.LR)
	}
	step(a, oa)
	step(b, ob)
	if !slices.Equal(weights(a), weights(b)) {
		t.Fatal("the step after a saved and loaded state differs from the uninterrupted one")
	}
	other, _ := InitLLM(tinyArchs()["llama_untied"], 1)
	oo := other.NewOptimizer(DefaultAdamWConfig())
	if err := oo.LoadState(bytes.NewReader(buf.Bytes()), int64(buf.Len())); err == nil || oo.Steps != 0 {
		t.Fatalf("the state of another model loaded: %v (steps %d)", err, oo.Steps)
	}
}

// TestF32ViewSameBytes: a tensor written from its values (F32View, encoded in chunks) gives
// the bytes of one encoded whole (F32Tensor), across chunk boundaries.
func TestF32ViewSameBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	v := make([]float32, 1<<16+77)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	var a, b bytes.Buffer
	if err := WriteSafetensors(&a, []Tensor{F32Tensor("x", []int{len(v)}, v), I64Tensor("n", []int{1}, []int64{3})}, nil); err != nil {
		t.Fatal(err)
	}
	if err := WriteSafetensors(&b, []Tensor{F32View("x", []int{len(v)}, v), I64Tensor("n", []int{1}, []int64{3})}, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("F32View writes other bytes than F32Tensor")
	}
	bad := F32View("x", []int{len(v) + 1}, v)
	if err := WriteSafetensors(&b, []Tensor{bad}, nil); err == nil {
		t.Fatal("a shape that does not match the values was written")
	}
}

// TestLoadStateNeedsFreshOptimizer: loading over an optimizer that has stepped is refused
// (its moments would mix with the file's).
func TestLoadStateNeedsFreshOptimizer(t *testing.T) {
	m, err := InitLLM(tinyArchs()["llama_untied"], 1)
	if err != nil {
		t.Fatal(err)
	}
	o := m.NewOptimizer(DefaultAdamWConfig())
	var buf bytes.Buffer
	if err := o.SaveState(&buf); err != nil {
		t.Fatal(err)
	}
	if err := o.Apply(m.NewGradBuf()); err != nil {
		t.Fatal(err)
	}
	if err := o.LoadState(bytes.NewReader(buf.Bytes()), int64(buf.Len())); err == nil {
		t.Fatal("state loaded over an optimizer that has stepped")
	}
}
