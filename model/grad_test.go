package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

func tinyConfig(tied bool) Config {
	return Config{Vocab: VocabSize, Context: 12, Dim: 8, Layers: 2, Heads: 2, FFMult: 4, TiedHead: tied}
}

// randomizeParams gives every parameter (biases and LayerNorm included) a
// non-trivial value so every path carries gradient.
func randomizeParams(m *Model, seed uint64, std float64) {
	r := rand.New(rand.NewPCG(seed, 7))
	for _, p := range m.Params() {
		for j := range p.Data {
			v := r.NormFloat64() * std
			if len(p.Shape) == 1 && (p.Name[len(p.Name)-6:] == "weight") {
				v += 1
			}
			p.Data[j] = float32(v)
		}
	}
}

func gradCheckSeqs() []Sequence {
	return []Sequence{
		{Prompt: []int32{BOS, 'a', 'b'}, Response: []int32{'c', 'd', EOS}},
		{Prompt: []int32{BOS, 'x'}, Response: []int32{'y', 'z', 'w', 'q', 'r', EOS, 3}},
		{Prompt: []int32{BOS, 1, 2, 3, 4, 5}, Response: []int32{9}},
	}
}

func TestGradientCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		tied bool
		temp float32
	}{{"tied_T1", true, 1}, {"untied_T0.7", false, 0.7}} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tinyConfig(tc.tied), 1)
			if err != nil {
				t.Fatal(err)
			}
			randomizeParams(m, 2, 0.3)
			seqs := gradCheckSeqs()
			r := rand.New(rand.NewPCG(3, 3))
			dlp := make([][]float32, len(seqs))
			dent := make([][]float32, len(seqs))
			for i, s := range seqs {
				dlp[i] = make([]float32, len(s.Response))
				dent[i] = make([]float32, len(s.Response))
				for j := range dlp[i] {
					dlp[i][j] = float32(r.NormFloat64())
					dent[i][j] = float32(r.NormFloat64())
				}
			}
			loss := func() float64 {
				p, err := m.Forward(seqs, tc.temp)
				if err != nil {
					t.Fatal(err)
				}
				var L float64
				lp, en := p.LogProbs(), p.Entropy()
				for i := range lp {
					for j := range lp[i] {
						L += float64(dlp[i][j])*float64(lp[i][j]) + float64(dent[i][j])*float64(en[i][j])
					}
				}
				return L
			}
			p, err := m.Forward(seqs, tc.temp)
			if err != nil {
				t.Fatal(err)
			}
			g := m.NewGrads()
			if err := p.Backward(dlp, dent, g); err != nil {
				t.Fatal(err)
			}
			used := map[int]bool{}
			for _, s := range seqs {
				for _, tk := range s.Prompt {
					used[int(tk)] = true
				}
				for _, tk := range s.Response {
					used[int(tk)] = true
				}
			}
			D := m.cfg.Dim
			worst := 0.0
			for pi, prm := range m.Params() {
				gr := g.Tensor(pi)
				// Candidate elements: for embeddings only rows that matter.
				var cand []int
				for j := range prm.Data {
					row := j / D
					switch prm.Name {
					case "tok_emb.weight", "head.weight":
						if !used[row] {
							continue
						}
					case "pos_emb.weight":
						if row >= 11 {
							continue
						}
					}
					cand = append(cand, j)
				}
				const samples = 12
				maxErr := 0.0
				for s := 0; s < samples && s < len(cand); s++ {
					j := cand[r.IntN(len(cand))]
					if len(cand) <= samples {
						j = cand[s]
					}
					// Fourth-order central difference (float64 arithmetic on
					// the float32 loss): truncation O(h^4) lets h be large
					// enough that float32 rounding noise stays small.
					orig := prm.Data[j]
					const h = 3e-2
					at := func(d float64) float64 {
						prm.Data[j] = float32(float64(orig) + d)
						return loss()
					}
					num := (8*(at(h)-at(-h)) - (at(2*h) - at(-2*h))) / (12 * h)
					prm.Data[j] = orig
					ana := float64(gr[j])
					den := math.Max(math.Max(math.Abs(num), math.Abs(ana)), 1e-2)
					e := math.Abs(num-ana) / den
					if e > maxErr {
						maxErr = e
					}
					if e > 1e-2 {
						t.Errorf("%s[%d]: numeric %.6g analytic %.6g rel err %.3g", prm.Name, j, num, ana, e)
					}
				}
				worst = math.Max(worst, maxErr)
				t.Logf("%-28s max rel err %.2e", prm.Name, maxErr)
			}
			t.Logf("worst relative error over all tensors: %.3e", worst)
		})
	}
}
