package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/drmas-dev/drmas/model"
)

// randLLM is a random model of arch with c's sizes, norms and biases moved away from their 1
// and 0 initial values (so that their gradients and effects are not special).
func randLLM(t *testing.T, arch string, c model.ArchConfig) *model.LLM {
	t.Helper()
	c.Arch, c.RMSNormEps, c.RopeTheta = arch, 1e-6, 10000
	m, err := model.InitLLM(c.WithDefaults(), 7)
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

// tinyLLM is randLLM at 2 layers, 4 query heads over 2 kv heads, a head dim (12) other than
// hidden/heads.
func tinyLLM(t *testing.T, arch string, tie bool) *model.LLM {
	return randLLM(t, arch, model.ArchConfig{Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 12, Intermediate: 24,
		Vocab: 40, Context: 32, Tie: tie})
}

// tinySeqs are packed sequences of different lengths, one without a response.
var tinySeqs = []model.Sequence{
	{Prompt: []int32{1, 2, 3}, Response: []int32{4, 5, 6, 7}},
	{Prompt: []int32{9}, Response: nil},
	{Prompt: []int32{10, 11, 12, 13, 14, 15}, Response: []int32{16, 39}},
	{Prompt: []int32{0}, Response: []int32{38}},
}

// TestLLMMatchesCPU: the GPU engine's Qwen3 (q/k norms, untied head) and Qwen2 (q/k/v
// biases, tied head) passes on the interpreter against model.LLM (compareLLM). The qwen2 case
// adds the embedding gradient in launches of 7 vocabulary rows (as 151,936 rows take three
// launches of at most 65,535).
//
// The -head3 cases run the output head in chunks of 3 scored rows (7 scored rows: chunks
// that straddle sequences and a last chunk of 1), recomputing each chunk's logits in the
// backward, and attention in blocks of 2 query rows (sequences of 6, 7 and 1 rows: 4 blocks,
// ragged last ones, dK and dV added over blocks).
func TestLLMMatchesCPU(t *testing.T) {
	t.Run("qwen3", func(t *testing.T) { compareLLM(t, interp(t), tinyLLM(t, "qwen3", false), tinySeqs, 65535, 0, 0) })
	t.Run("qwen2", func(t *testing.T) { compareLLM(t, interp(t), tinyLLM(t, "qwen2", true), tinySeqs, 7, 0, 0) })
	t.Run("qwen3-head3", func(t *testing.T) { compareLLM(t, interp(t), tinyLLM(t, "qwen3", false), tinySeqs, 65535, 3, 2) })
	t.Run("qwen2-head3", func(t *testing.T) { compareLLM(t, interp(t), tinyLLM(t, "qwen2", true), tinySeqs, 7, 3, 2) })
}

// TestGPULLMMatchesCPU is compareLLM on the GPU (gpu/devicecheck.sh runs it): the tiny models,
// then GQA with 4 query heads a kv head at head dim 64 over sequences past 128 tokens (also
// with the head in chunks of 64 scored rows and attention in blocks of 64 query rows), and a vocabulary above 65,535 rows (two
// embedding-gradient launches).
func TestGPULLMMatchesCPU(t *testing.T) {
	d := gpuDevice(t)
	t.Run("qwen3-tiny", func(t *testing.T) { compareLLM(t, d, tinyLLM(t, "qwen3", false), tinySeqs, 65535, 0, 0) })
	t.Run("qwen2-tiny", func(t *testing.T) { compareLLM(t, d, tinyLLM(t, "qwen2", true), tinySeqs, 7, 0, 0) })
	mid := model.ArchConfig{Hidden: 128, Layers: 3, Heads: 8, KVHeads: 2, HeadDim: 64, Intermediate: 352, Vocab: 1000, Context: 512}
	t.Run("qwen3-mid", func(t *testing.T) {
		compareLLM(t, d, randLLM(t, "qwen3", mid), long(mid.Vocab, [2]int{100, 160}, [2]int{1, 200}, [2]int{5, 0}, [2]int{30, 40}), 65535, 0, 0)
	})
	t.Run("qwen3-mid-head64", func(t *testing.T) {
		compareLLM(t, d, randLLM(t, "qwen3", mid), long(mid.Vocab, [2]int{100, 160}, [2]int{1, 200}, [2]int{5, 0}, [2]int{30, 40}), 65535, 64, 64)
	})
	big := model.ArchConfig{Hidden: 64, Layers: 1, Heads: 4, KVHeads: 1, HeadDim: 16, Intermediate: 128, Vocab: 70000, Context: 64, Tie: true}
	t.Run("qwen2-vocab70000", func(t *testing.T) {
		compareLLM(t, d, randLLM(t, "qwen2", big), long(big.Vocab, [2]int{20, 30}, [2]int{3, 10}), 65535, 0, 0)
	})
}

// long is sequences of random tokens below v with the given prompt and response lengths.
func long(v int, lens ...[2]int) []model.Sequence {
	r := rand.New(rand.NewPCG(12, 13))
	var out []model.Sequence
	for _, l := range lens {
		s := model.Sequence{Prompt: make([]int32, l[0]), Response: make([]int32, l[1])}
		for i := range s.Prompt {
			s.Prompt[i] = int32(r.IntN(v))
		}
		for i := range s.Response {
			s.Response[i] = int32(r.IntN(v))
		}
		out = append(out, s)
	}
	return out
}

// compareLLM runs m's forward and backward on dev (embedding gradients in launches of chunk
// rows, the head in chunks of headRows scored rows, attention in blocks of attnRows query
// rows, 0 for the defaults) and on the CPU engine for seqs: per-token
// log-probs and entropies within 1e-4, and every tensor's gradient, for a loss with both
// log-prob and entropy terms, within 1e-4 of the tensor's largest |gradient|.
func compareLLM(t *testing.T, dev Device, m *model.LLM, seqs []model.Sequence, chunk, headRows, attnRows int) {
	t.Helper()
	const temp = 0.8
	cp, err := m.Forward(seqs, temp)
	if err != nil {
		t.Fatal(err)
	}
	lt, err := NewLLM(dev, m)
	if err != nil {
		t.Fatal(err)
	}
	defer lt.Close()
	lt.vocabChunk, lt.t.headRows, lt.attnRows = chunk, headRows, attnRows
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
