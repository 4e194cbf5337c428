package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/drmas-dev/drmas/model"
)

// tinyLLM is a random tiny model of arch: 2 layers, 4 query heads over 2 kv heads, a head dim
// (12) other than hidden/heads, norms and biases away from their 1 and 0 initial values.
func tinyLLM(t *testing.T, arch string, tie bool) *model.LLM {
	t.Helper()
	c := model.ArchConfig{Arch: arch, Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 12, Intermediate: 24,
		Vocab: 40, Context: 32, RMSNormEps: 1e-6, RopeTheta: 10000, Tie: tie}.WithDefaults()
	m, err := model.InitLLM(c, 7)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(8, 9))
	for _, p := range m.Params() {
		if len(p.Shape) == 1 { // norms and biases
			for i := range p.Data {
				p.Data[i] += float32(0.3 * r.NormFloat64())
			}
		}
	}
	return m
}

// TestLLMMatchesCPU: the GPU engine's Qwen3 (q/k norms, untied head) and Qwen2 (q/k/v
// biases, tied head) passes on the interpreter against model.LLM: per-token log-probs and
// entropies, and the gradient of every tensor for a loss with both log-prob and entropy
// terms, on packed sequences of different lengths (one without a response). The qwen2 case
// adds the embedding gradient in launches of 7 vocabulary rows (as 151,936 rows take three
// launches of at most 65,535).
func TestLLMMatchesCPU(t *testing.T) {
	seqs := []model.Sequence{
		{Prompt: []int32{1, 2, 3}, Response: []int32{4, 5, 6, 7}},
		{Prompt: []int32{9}, Response: nil},
		{Prompt: []int32{10, 11, 12, 13, 14, 15}, Response: []int32{16, 39}},
		{Prompt: []int32{0}, Response: []int32{38}},
	}
	for _, tc := range []struct {
		arch  string
		tie   bool
		chunk int // vocabulary rows a csr_rows_add launch
	}{{"qwen3", false, 65535}, {"qwen2", true, 7}} {
		t.Run(tc.arch, func(t *testing.T) {
			m := tinyLLM(t, tc.arch, tc.tie)
			const temp = 0.8
			cp, err := m.Forward(seqs, temp)
			if err != nil {
				t.Fatal(err)
			}
			lt, err := NewLLM(interp(t), m)
			if err != nil {
				t.Fatal(err)
			}
			defer lt.Close()
			lt.vocabChunk = tc.chunk
			gpass, err := lt.Forward(m, seqs, temp)
			if err != nil {
				t.Fatal(err)
			}
			worst := func(what string, got, want [][]float32, tol float64) {
				t.Helper()
				w := 0.0
				for i := range want {
					if len(got[i]) != len(want[i]) {
						t.Fatalf("%s[%d]: %d values, CPU %d", what, i, len(got[i]), len(want[i]))
					}
					for j := range want[i] {
						d := math.Abs(float64(got[i][j] - want[i][j]))
						if !(d <= tol) {
							t.Fatalf("%s[%d][%d] = %v, CPU engine %v", what, i, j, got[i][j], want[i][j])
						}
						w = max(w, d)
					}
				}
				t.Logf("%s: worst |diff| %.3g", what, w)
			}
			worst("log-probs", gpass.LogProbs(), cp.LogProbs(), 1e-4)
			worst("entropies", gpass.Entropy(), cp.Entropy(), 1e-4)

			r := rand.New(rand.NewPCG(10, 11))
			dlp, dent := cp.LogProbs(), cp.Entropy()
			for i := range dlp {
				for j := range dlp[i] {
					dlp[i][j], dent[i][j] = float32(r.NormFloat64()), float32(r.NormFloat64())
				}
			}
			want, got := m.NewGrads(), m.NewGrads()
			if err := cp.Backward(dlp, dent, want); err != nil {
				t.Fatal(err)
			}
			if err := gpass.Backward(dlp, dent, got); err != nil {
				t.Fatal(err)
			}
			worstRel := 0.0
			for _, p := range m.Params() {
				g, w := got.ByName(p.Name), want.ByName(p.Name)
				scale := 0.0
				for _, v := range w {
					scale = max(scale, math.Abs(float64(v)))
				}
				if scale == 0 {
					t.Fatalf("%s: zero CPU gradient (the test needs every tensor to get one)", p.Name)
				}
				for j := range w {
					d := math.Abs(float64(g[j]-w[j])) / scale
					if !(d <= 1e-4) {
						t.Fatalf("grad %s[%d] = %v, CPU engine %v (largest |grad| %v)", p.Name, j, g[j], w[j], scale)
					}
					worstRel = max(worstRel, d)
				}
			}
			t.Logf("gradients: %d tensors, worst |diff|/max|grad| %.3g", len(m.Params()), worstRel)
		})
	}
}

// TestLLMRefuses: gradients of another model and a pass made stale by a later Forward are
// errors, not wrong gradients.
func TestLLMRefuses(t *testing.T) {
	m := tinyLLM(t, "qwen3", false)
	lt, err := NewLLM(interp(t), m)
	if err != nil {
		t.Fatal(err)
	}
	defer lt.Close()
	seqs := []model.Sequence{{Prompt: []int32{1, 2}, Response: []int32{3}}}
	p1, err := lt.Forward(m, seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	dlp := [][]float32{{1}}
	other := tinyLLM(t, "qwen2", false)
	if err := p1.Backward(dlp, nil, other.NewGrads()); err == nil {
		t.Error("Backward accepted the gradients of a qwen2 model for a qwen3 pass")
	}
	if err := p1.Backward([][]float32{{1, 2}}, nil, m.NewGrads()); err == nil {
		t.Error("Backward accepted dLogProb of the wrong shape")
	}
	if _, err := lt.Forward(m, seqs, 1); err != nil {
		t.Fatal(err)
	}
	if err := p1.Backward(dlp, nil, m.NewGrads()); err == nil {
		t.Error("Backward ran on a stale pass")
	}
	if _, err := lt.Forward(m, []model.Sequence{{Prompt: []int32{1}, Response: []int32{40}}}, 1); err == nil {
		t.Error("Forward accepted a token outside the vocabulary")
	}
}
