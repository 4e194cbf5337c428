package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// llama32Scaling is Llama 3.2's rope_scaling with the original context cut to 64 positions,
// so that sequences of 150 tokens run well past it. At head dim 16 and θ 10⁴ the wavelengths
// 2π·10^(i/2) are 6.3 (kept: below 64/4 = 16), 19.9 and 62.8 (blended: between 16 and 64),
// and 199 to 19869 (divided by the factor): every band is exercised.
var llama32Scaling = RopeScaling{Type: RopeLlama3, Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 64}

// TestLlamaTorchParity is the PyTorch parity test (torchParity) for Llama 3 models: llama3
// RoPE scaling over positions past 128, tied and untied heads, float32 and BF16 weights, and
// Llama 3's 128,256-token vocabulary.
func TestLlamaTorchParity(t *testing.T) {
	base := ArchConfig{Arch: "llama", Hidden: 32, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 16, Intermediate: 48,
		Vocab: 300, Context: 1024, RopeTheta: 1e4, RopeScaling: llama32Scaling, RMSNormEps: 1e-5}
	with := func(f func(*ArchConfig)) ArchConfig { c := base; f(&c); return c }
	lp, g := torchParity(t, []torchCase{
		{"llama3_tied_f32", with(func(c *ArchConfig) { c.Tie = true }), false},
		{"llama3_untied_bf16", base, true},
		{"llama3_untied_vocab128256_f32", with(func(c *ArchConfig) { c.Vocab, c.Hidden, c.Heads = 128256, 48, 3 }), false},
		{"llama3_tied_vocab128256_bias_bf16", with(func(c *ArchConfig) { c.Vocab, c.Tie, c.QKVBias = 128256, true, true }), true},
	})
	t.Logf("Llama 3 parity: worst |Δ log-prob or entropy| %.3g, worst gradient difference %.3g of the tensor's largest element", lp, g)
}

// TestLlama3ScalingMatters: the parity test can only catch a scaling the Go side or the
// oracle gets wrong if the scaling moves the log-probs of its batch far past the tolerance
// (5e-5): here by more than 10⁻², against the same weights with plain RoPE.
func TestLlama3ScalingMatters(t *testing.T) {
	c := ArchConfig{Arch: "llama", Hidden: 32, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 16, Intermediate: 48,
		Vocab: 300, Context: 1024, RopeTheta: 1e4, RopeScaling: llama32Scaling}.WithDefaults()
	m, err := InitLLM(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	randomizeLLM(m, 2, 0.15)
	plain := *m
	plain.cfg.RopeScaling, plain.d.ropeScaling = RopeScaling{}, RopeScaling{}
	seqs := archSeqs(c.Vocab, rand.New(rand.NewPCG(3, 4)), [2]int{100, 50})
	a, err := m.Forward(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := plain.Forward(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	var d float64
	for j, v := range a.LogProbs()[0] {
		d = max(d, math.Abs(float64(v-b.LogProbs()[0][j])))
	}
	if d < 1e-2 {
		t.Errorf("llama3 scaling moves the log-probs by only %.3g", d)
	}
}
