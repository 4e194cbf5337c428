package model

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// headTestModel is a Qwen3 with a vocabulary large beside its width, so that the head's
// [tokens × Vocab] arrays would dominate a step's memory.
func headTestModel(t *testing.T, vocab int) *LLM {
	c := ArchConfig{Arch: "qwen3", Hidden: 8, Layers: 1, Heads: 2, KVHeads: 1, Intermediate: 16, Vocab: vocab, Context: 1024,
		RopeTheta: 1e4}.WithDefaults()
	m, err := InitLLM(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	randomizeLLM(m, 4, 0.5)
	return m
}

// headStep runs Forward and Backward (log-prob and entropy weights) with the head in chunks of
// rows rows, returning log-probs, entropies and the gradients.
func headStep(t *testing.T, m *LLM, seqs []Sequence, rows int) ([][]float32, [][]float32, []float32) {
	old := headRows
	headRows = func(int) int { return rows }
	defer func() { headRows = old }()
	p, err := m.Forward(seqs, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	lp, ent := p.LogProbs(), p.Entropy()
	dlp, de := make([][]float32, len(lp)), make([][]float32, len(lp))
	for i := range lp {
		dlp[i], de[i] = make([]float32, len(lp[i])), make([]float32, len(lp[i]))
		for j := range dlp[i] {
			dlp[i][j], de[i][j] = float32(1+(i+j)%3)/7, float32((i*j)%5)/11-0.2
		}
	}
	g := m.NewGrads()
	if err := p.Backward(dlp, de, g); err != nil {
		t.Fatal(err)
	}
	return lp, ent, g.Flat()
}

// TestHeadChunksBitIdentical: the head in chunks of 256 rows (three, the last ragged) gives
// the log-probs, entropies and every gradient, the head's included, bit for bit as in one
// chunk over all 700 rows.
func TestHeadChunksBitIdentical(t *testing.T) {
	m := headTestModel(t, 300)
	r := rand.New(rand.NewPCG(7, 8))
	seqs := archSeqs(300, r, [2]int{5, 300}, [2]int{17, 250}, [2]int{40, 150})
	lpC, entC, gC := headStep(t, m, seqs, 256)
	lp1, ent1, g1 := headStep(t, m, seqs, 1<<20)
	for i := range lp1 {
		if !slices.Equal(lpC[i], lp1[i]) || !slices.Equal(entC[i], ent1[i]) {
			t.Fatalf("sequence %d: chunked log-probs or entropies differ from one chunk's", i)
		}
	}
	for j := range g1 {
		if math.Float32bits(gC[j]) != math.Float32bits(g1[j]) {
			t.Fatalf("gradient element %d: chunked %v, one chunk %v", j, gC[j], g1[j])
		}
	}
}

// TestHeadNeverHoldsTokensTimesVocab: a step of 4,096 response rows over a 16,384-token
// vocabulary allocates less than one [tokens × Vocab] float32 array (256 MiB) in all, and its
// pass keeps no logits (one such array, then its probabilities and their gradient, is what
// the head without chunks allocated).
func TestHeadNeverHoldsTokensTimesVocab(t *testing.T) {
	const V = 16384
	m := headTestModel(t, V)
	r := rand.New(rand.NewPCG(9, 10))
	var lens [][2]int
	for range 16 {
		lens = append(lens, [2]int{4, 256})
	}
	seqs := archSeqs(V, r, lens...)
	var p *LLMPass
	got := allocated(func() {
		var err error
		if p, err = m.Forward(seqs, 1); err != nil {
			t.Fatal(err)
		}
		if p.logits != nil || p.probs != nil {
			t.Fatalf("a pass of %d rows keeps [rows × Vocab] logits", p.M)
		}
		if err := p.Backward(p.LogProbs(), nil, m.NewGrads()); err != nil {
			t.Fatal(err)
		}
	})
	if full := uint64(p.M) * V * 4; got >= full {
		t.Errorf("forward+backward of %d rows allocated %d MiB, not less than one [rows × Vocab] array (%d MiB)", p.M, got>>20, full>>20)
	}
}

// TestAttentionBlocksMatchWholeMaps: attention forward and backward holding 256 query rows at
// a time (sequences of 600 and 300 rows: three and two blocks, the last ragged) give the
// log-probs, entropies and every gradient of the whole-map computation, value for value.
func TestAttentionBlocksMatchWholeMaps(t *testing.T) {
	m := headTestModel(t, 50)
	r := rand.New(rand.NewPCG(11, 12))
	seqs := archSeqs(50, r, [2]int{100, 500}, [2]int{7, 293}, [2]int{3, 9})
	old := attnBlock
	defer func() { attnBlock = old }()
	attnBlock = 1 << 20
	lp1, ent1, g1 := headStep(t, m, seqs, 256)
	attnBlock = 256
	lpB, entB, gB := headStep(t, m, seqs, 256)
	for i := range lp1 {
		if !slices.Equal(lpB[i], lp1[i]) || !slices.Equal(entB[i], ent1[i]) {
			t.Fatalf("sequence %d: blocked attention's log-probs or entropies differ", i)
		}
	}
	for j := range g1 {
		if gB[j] != g1[j] {
			t.Fatalf("gradient element %d: blocked %v, whole maps %v", j, gB[j], g1[j])
		}
	}
}

// TestAttentionMemoryLinear: forward and backward of one 8,192-token sequence allocate less
// than one 8,192 × 8,192 float32 map (256 MiB) in all.
func TestAttentionMemoryLinear(t *testing.T) {
	c := ArchConfig{Arch: "qwen3", Hidden: 8, Layers: 1, Heads: 2, KVHeads: 1, Intermediate: 16, Vocab: 50, Context: 8192,
		RopeTheta: 1e4}.WithDefaults()
	m, err := InitLLM(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	const L = 8192
	seqs := archSeqs(50, rand.New(rand.NewPCG(13, 14)), [2]int{1, L - 1})
	got := allocated(func() {
		p, err := m.Forward(seqs, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Backward(p.LogProbs(), nil, m.NewGrads()); err != nil {
			t.Fatal(err)
		}
	})
	if got >= L*L*4 {
		t.Errorf("forward+backward of %d tokens allocated %d MiB, not less than one %d² map (%d MiB)", L, got>>20, L, L*L*4>>20)
	}
}

// allocated is the bytes fn allocates in all.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
