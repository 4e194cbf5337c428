package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTopPPrefixMatchesReference: the nucleus found by sorting candidates above a threshold
// is the full sort's, index for index with the same float64 sum, on peaked, flat and tied
// distributions and top_p from tiny to above what the probabilities sum to.
func TestTopPPrefixMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for trial := 0; trial < 300; trial++ {
		V := 1 + r.IntN(5000)
		z := make([]float32, V)
		scale := []float64{0.01, 1, 5, 30}[trial%4]
		for j := range z {
			z[j] = float32(r.NormFloat64() * scale)
			if trial%5 == 0 {
				z[j] = float32(math.Round(float64(z[j]))) // many ties
			}
		}
		p := make([]float32, V)
		softmaxStats(z, 1, p)
		for _, topP := range []float64{1e-9, 0.1, 0.5, 0.9, 0.95, 0.999, 0.9999999, 1.5} {
			gi, gc := topPPrefix(p, topP)
			wi, wc := topPPrefixRef(p, topP)
			if !slices.Equal(gi, wi) || gc != wc {
				t.Fatalf("trial %d V=%d scale %v top_p %v: got %d tokens (sum %v), want %d (sum %v)", trial, V, scale, topP, len(gi), gc, len(wi), wc)
			}
		}
	}
}

// BenchmarkTopP: the nucleus of a peaked distribution over Qwen's 151,936 tokens, by
// candidates (topPPrefix) beside the full sort (topPPrefixRef).
func BenchmarkTopP(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	z := make([]float32, 151936)
	for j := range z {
		z[j] = float32(r.NormFloat64() * 4)
	}
	p := make([]float32, len(z))
	softmaxStats(z, 1, p)
	var fast, ref float64
	for _, c := range []struct {
		name string
		f    func([]float32, float64) ([]int, float64)
		ns   *float64
	}{{"candidates", topPPrefix, &fast}, {"fullsort", topPPrefixRef, &ref}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c.f(p, 0.95)
			}
			*c.ns = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
	}
	if fast > 0 {
		b.Logf("full sort / candidates: %.1fx", ref/fast)
	}
}
