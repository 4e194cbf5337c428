package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// ckptArchs is tinyArchs and a wider Qwen3 whose sequences cross an attention block and
// whose projections split over workers.
func ckptArchs() map[string]ArchConfig {
	archs := tinyArchs()
	c := archs["qwen3_untied_hd6_bias"]
	c.Hidden, c.Intermediate, c.Context = 64, 96, 512
	archs["qwen3_wide"] = c
	return archs
}

// ckptSeqs are three sequences of a config, the longest past one attention block when the
// context allows.
func ckptSeqs(c ArchConfig, r *rand.Rand) []Sequence {
	long := min(c.Context, 300)
	return archSeqs(c.Vocab, r, [2]int{5, 9}, [2]int{long / 2, long - long/2}, [2]int{1, 20})
}

// sameBits reports whether a and b hold the same float32 bits.
func sameBits(a, b []float32) bool { return len(a) == len(b) && firstBitDiff(a, b) < 0 }

// firstBitDiff is the first index below min(len(a), len(b)) where a and b differ in their
// bits, or −1.
func firstBitDiff(a, b []float32) int {
	for i := range min(len(a), len(b)) {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// ckptRun is one training step's outputs: log-probs, entropies (flat) and the gradient after
// two Backward calls on the pass (the second must find the kept inputs intact).
type ckptRun struct{ lp, ent, grad []float32 }

func (a ckptRun) same(b ckptRun) bool {
	return sameBits(a.lp, b.lp) && sameBits(a.ent, b.ent) && sameBits(a.grad, b.grad)
}

func flat(v [][]float32) (out []float32) {
	for _, r := range v {
		out = append(out, r...)
	}
	return out
}

func ckptStep(t *testing.T, p TrainPass, dlp, dent [][]float32, g GradBuf) ckptRun {
	t.Helper()
	for range 2 {
		if err := p.Backward(dlp, dent, g); err != nil {
			t.Fatal(err)
		}
	}
	return ckptRun{flat(p.LogProbs()), flat(p.Entropy()), append([]float32(nil), g.Flat()...)}
}

// checkpointed reports whether p kept block inputs (one block's activations) rather than
// every block's activations.
func checkpointed(p TrainPass) bool {
	var lp *LLMPass
	switch q := p.(type) {
	case loraPass:
		lp = q.LLMPass
	case typedTrainPass[*LLMPass, *LLMGrads]:
		lp = q.p
	}
	return lp != nil && len(lp.ins) == lp.m.d.layers && len(lp.acts) == 1
}

// TestCheckpointingBitIdentical: with activation checkpointing, a training step of Qwen2,
// Qwen3 and Llama configs, in full and of a LoRA adapter with dropout, gives the same bits of
// log-probs, entropies and every gradient as without, over two Backward calls on the pass;
// the checkpointed pass keeps the blocks' inputs and one block's activations.
func TestCheckpointingBitIdentical(t *testing.T) {
	for name, c := range ckptArchs() {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 7))
			seqs := ckptSeqs(c, r)
			dlp, dent := randGrads(seqs, r)
			m, err := InitLLM(c, 3)
			if err != nil {
				t.Fatal(err)
			}
			randomizeLLM(m, 3, 0.3)
			full := func(on bool) ckptRun {
				m.SetActivationCheckpointing(on)
				p, err := m.TrainForward(seqs, 0.9)
				if err != nil {
					t.Fatal(err)
				}
				if checkpointed(p) != on {
					t.Fatalf("checkpointing %v: pass checkpointed %v", on, checkpointed(p))
				}
				return ckptStep(t, p, dlp, dent, m.NewGradBuf())
			}
			if off, on := full(false), full(true); !off.same(on) {
				t.Error("full: checkpointing changed log-probs, entropies or gradients")
			}
			m.SetActivationCheckpointing(false)
			l := randomLoRA(t, c, LoRAConfig{R: 3, Alpha: 6, Dropout: 0.1}, 5)
			lora := func(on bool) ckptRun {
				l.SetActivationCheckpointing(on)
				p, err := l.trainForward(seqs, 0.9, 42)
				if err != nil {
					t.Fatal(err)
				}
				if checkpointed(p) != on {
					t.Fatalf("LoRA checkpointing %v: pass checkpointed %v", on, checkpointed(p))
				}
				return ckptStep(t, p, dlp, dent, l.NewGradBuf())
			}
			if off, on := lora(false), lora(true); !off.same(on) {
				t.Error("LoRA: checkpointing changed log-probs, entropies or gradients")
			}
		})
	}
}
