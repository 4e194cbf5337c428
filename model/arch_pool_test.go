package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// poisonScratch fills the pooled buffers and the idle arenas of n floats with NaN, so that a
// buffer taken from them and read before it is written shows in the results.
func poisonScratch(n int) {
	poison(n, 4, getScratch, putScratch)
	poison(n, 1, getArena, putArena)
}

// poison takes count buffers of n floats from get, fills them with NaN and gives them back.
func poison(n, count int, get func(int) *[]float32, put func(*[]float32)) {
	var held []*[]float32
	for range count {
		s := get(n)
		for i := range *s {
			(*s)[i] = float32(math.NaN())
		}
		held = append(held, s)
	}
	for _, s := range held {
		put(s)
	}
}

// TestPooledActivationsSameBits: Backward returns a pass's activations to the idle arenas;
// a later pass reuses them (filled with NaN between steps here), and a second Backward on the
// same pass runs the blocks again. The log-probs and every gradient keep their bits, with and
// without activation checkpointing, for the architectures and the built-in model (which keeps
// its attention maps).
func TestPooledActivationsSameBits(t *testing.T) {
	for name, c := range tinyArchs() {
		m, err := InitLLM(c, 2)
		if err != nil {
			t.Fatal(err)
		}
		randomizeLLM(m, 3, 0.3)
		checkPooledActs(t, name, m, c.Vocab, m.NewGrads)
	}
	b, err := New(tinyConfig(false), 3)
	if err != nil {
		t.Fatal(err)
	}
	randomizeParams(b, 4, 0.3)
	checkPooledActs(t, "builtin", b.core, VocabSize, func() *LLMGrads { return b.NewGrads().core })
}

func checkPooledActs(t *testing.T, name string, m *LLM, vocab int, newGrads func() *LLMGrads) {
	t.Helper()
	for _, ckpt := range []bool{false, true} {
		m.SetActivationCheckpointing(ckpt)
		r := rand.New(rand.NewPCG(9, 9))
		seqs := archSeqs(vocab, r, [2]int{5, 7}, [2]int{3, 8})
		dlp, dent := randGrads(seqs, r)
		p, err := m.Forward(seqs, 0.9)
		if err != nil {
			t.Fatal(err)
		}
		arena := len(*p.arena)
		first := newGrads()
		p.backward(dlp, dent, first)
		if p.arena != nil {
			t.Fatalf("%s ckpt=%v: Backward kept the activations", name, ckpt)
		}
		poisonScratch(arena)
		again := newGrads()
		p.backward(dlp, dent, again)
		poisonScratch(arena)
		q, err := m.Forward(seqs, 0.9)
		if err != nil {
			t.Fatal(err)
		}
		next := newGrads()
		q.backward(dlp, dent, next)
		sameBitsT(t, name+" log-probs", flatRows(q.LogProbs()), flatRows(p.LogProbs()))
		sameBitsT(t, name+" entropies", flatRows(q.Entropy()), flatRows(p.Entropy()))
		sameBitsT(t, name+" second Backward", again.buf, first.buf)
		sameBitsT(t, name+" next pass", next.buf, first.buf)
		nonzero := false
		for _, v := range first.buf {
			nonzero = nonzero || v != 0
		}
		if !nonzero {
			t.Fatalf("%s: zero gradient", name)
		}
	}
	m.SetActivationCheckpointing(false)
}

func flatRows(v [][]float32) []float32 {
	var o []float32
	for _, r := range v {
		o = append(o, r...)
	}
	return o
}

func sameBitsT(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	if i := firstBitDiff(got, want); i >= 0 {
		t.Fatalf("%s[%d] = %v, want %v (bits)", what, i, got[i], want[i])
	}
}

// TestArenaReuse: the idle arena serves a pass that needs at least half of it; a smaller idle
// one gives way to a larger, and one stays idle.
func TestArenaReuse(t *testing.T) {
	arenas.Lock()
	saved := arenas.idle
	arenas.idle = nil
	arenas.Unlock()
	defer func() { arenas.Lock(); arenas.idle = saved; arenas.Unlock() }()
	idle := func() *[]float32 { arenas.Lock(); defer arenas.Unlock(); return arenas.idle }

	a := getArena(1000)
	putArena(a)
	if b := getArena(600); b != a || len(*b) != 600 {
		t.Fatalf("a 600-float pass did not take the idle 1,000-float arena")
	}
	putArena(a)
	if b := getArena(400); b == a || cap(*b) != 400 {
		t.Fatalf("a 400-float pass took an arena more than twice its size")
	}
	big := getArena(5000)
	putArena(big) // a (1,000) is idle already: the larger takes its place
	if kept := idle(); kept != big {
		t.Fatalf("the idle arena has %d floats, want the 5,000-float one", cap(*kept))
	}
	putArena(getArena(10)) // smaller than the idle one: dropped
	if kept := idle(); kept != big {
		t.Fatalf("the idle arena has %d floats, want the 5,000-float one", cap(*kept))
	}
}
