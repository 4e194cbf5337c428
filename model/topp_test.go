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
		scale := []float64{0.01, 1, 5, 30}[trial%4]
		p := randomDist(r, V, scale, trial%5 == 0)
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
func BenchmarkTopP(b *testing.B) { benchNucleus(b, peakedQwenDist()) }

// benchNucleus times p's top_p 0.95 nucleus by candidates and by the full sort, and logs their
// ratio.
func benchNucleus(b *testing.B, p []float32) {
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

// TestTopPSortsNearTheNucleus: on a peaked distribution over Qwen's 151,936 tokens the nucleus
// search sorts about the nucleus (the bucket pass places its boundary), not the vocabulary nor
// every token above a coarse threshold.
func TestTopPSortsNearTheNucleus(t *testing.T) {
	p := peakedQwenDist()
	for _, topP := range []float64{0.5, 0.9, 0.95} {
		keys, _ := topPNucleus(p, topP, nil)
		if n, sorted := len(keys), cap(keys); sorted > 2*n+512 {
			t.Errorf("top_p %v: sorted %d candidates for a nucleus of %d", topP, sorted, n)
		}
	}
}

// TestPickTokenMatchesFullSortDraw: the seeded draw walks the nucleus in the full sort's
// order, so the token drawn for every u is the one a draw over topPPrefixRef's prefix gives.
func TestPickTokenMatchesFullSortDraw(t *testing.T) {
	z := make([]float32, 3000)
	r := rand.New(rand.NewPCG(5, 6))
	for j := range z {
		z[j] = float32(math.Round(r.NormFloat64() * 6)) // ties
	}
	o := SampleOptions{Temperature: 0.7, TopP: 0.9}
	p := make([]float32, len(z))
	softmaxStats(z, 1/float64(o.Temperature), p)
	idx, cum := topPPrefixRef(p, float64(o.TopP))
	for s := uint64(0); s < 500; s++ {
		got, _ := pickToken(z, o, newRNG(s))
		if want := refDraw(idx, p, cum, newRNG(s).float64()); int(got) != want {
			t.Fatalf("seed %d: drew %d, the full sort's draw is %d", s, got, want)
		}
	}
}

func peakedQwenDist() []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	z := make([]float32, 151936)
	for j := range z {
		z[j] = float32(r.NormFloat64() * 4)
	}
	p := make([]float32, len(z))
	softmaxStats(z, 1, p)
	return p
}

// BenchmarkPickToken: one sampling step's work per row at Qwen's vocabulary (softmax at
// temperature 0.6, the top_p 0.95 nucleus, the draw), to set beside a decode step.
func BenchmarkPickToken(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	z := make([]float32, 151936)
	for j := range z {
		z[j] = float32(r.NormFloat64() * 2.4)
	}
	o := SampleOptions{Temperature: 0.6, TopP: 0.95}
	g := newRNG(1)
	for i := 0; i < b.N; i++ {
		pickToken(z, o, g)
	}
}

// TestSortKeysMatchesSort: the radix sort orders candidate keys as slices.Sort does, for
// flat, peaked and tied distributions and key counts on both sides of radixMin.
func TestSortKeysMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for trial := 0; trial < 60; trial++ {
		V := []int{radixMin - 1, radixMin, 5000, 151936}[trial%4]
		scale := []float64{0, 0.01, 1, 4, 30}[trial%5]
		p := randomDist(r, V, scale, trial%3 == 0)
		keys := make([]uint64, 0, V)
		for j, v := range p {
			if r.IntN(8) > 0 {
				keys = append(keys, uint64(^math.Float32bits(v))<<32|uint64(j))
			}
		}
		r.Shuffle(len(keys), func(a, b int) { keys[a], keys[b] = keys[b], keys[a] })
		want := slices.Clone(keys)
		slices.Sort(want)
		sortKeys(keys)
		if !slices.Equal(keys, want) {
			t.Fatalf("trial %d (V %d, scale %v): radix order differs from slices.Sort", trial, V, scale)
		}
	}
}

// BenchmarkTopPFlat: the nucleus of a nearly flat distribution over Qwen's 151,936 tokens
// (random weights' logits), where top_p 0.95 keeps ~95 % of the vocabulary, by candidates
// (radix-sorted) beside the full sort.
func BenchmarkTopPFlat(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	z := make([]float32, 151936)
	for j := range z {
		z[j] = float32(r.NormFloat64() * 0.1)
	}
	p := make([]float32, len(z))
	softmaxStats(z, 1, p)
	benchNucleus(b, p)
	b.Run("pick", func(b *testing.B) { // a row's softmax, nucleus and draw
		o, g := SampleOptions{Temperature: 1, TopP: 0.95}, newRNG(1)
		for i := 0; i < b.N; i++ {
			pickToken(z, o, g)
		}
	})
}

// TestTopKMatchesReference: the k most likely tokens, then top_p over them renormalised, are
// the full sort's, index for index with the same float64 sum, on peaked, flat and tied
// distributions, for k from 1 to one below the vocabulary and top_p off or on.
func TestTopKMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for trial := 0; trial < 200; trial++ {
		V := 2 + r.IntN(6000)
		scale := []float64{0, 0.01, 1, 5, 30}[trial%5]
		p := randomDist(r, V, scale, trial%3 == 0)
		for _, k := range []int{1, 2, 1 + r.IntN(V-1), V - 1} {
			for _, topP := range []float64{1, 0.1, 0.5, 0.95, 0.9999999} {
				keys, gc := topKNucleus(p, k, topP, nil)
				got := make([]int, len(keys))
				for i, key := range keys {
					got[i] = int(uint32(key))
				}
				want, wc := topKPrefixRef(p, k, topP)
				if !slices.Equal(got, want) || gc != wc {
					t.Fatalf("trial %d V=%d scale %v top_k %d top_p %v: got %d tokens (sum %v), want %d (sum %v)", trial, V, scale, k, topP, len(got), gc, len(want), wc)
				}
			}
		}
	}
}

// TestPickTokenTopK: with top_k (and top_p) the seeded draw walks the reference's tokens in
// order, never draws outside the k most likely, and top_k 0 or ≥ the vocabulary draws what no
// top_k draws.
func TestPickTokenTopK(t *testing.T) {
	z := make([]float32, 4000)
	r := rand.New(rand.NewPCG(7, 8))
	for j := range z {
		z[j] = float32(math.Round(r.NormFloat64() * 3))
	}
	for _, o := range []SampleOptions{{Temperature: 1, TopK: 5}, {Temperature: 0.8, TopK: 50, TopP: 0.7}, {Temperature: 1.3, TopK: 3999}} {
		p := make([]float32, len(z))
		softmaxStats(z, 1/float64(o.Temperature), p)
		idx, cum := topKPrefixRef(p, o.TopK, float64(o.TopP))
		for s := uint64(0); s < 300; s++ {
			got, lp := pickToken(z, o, newRNG(s))
			if want := refDraw(idx, p, cum, newRNG(s).float64()); int(got) != want {
				t.Fatalf("%+v seed %d: drew %d, the reference draws %d", o, s, got, want)
			}
			if wl := float32(math.Log(float64(p[got]))); math.Abs(float64(lp-wl)) > 1e-4 {
				t.Fatalf("%+v: log-prob %v, want the untruncated %v", o, lp, wl)
			}
		}
	}
	for _, k := range []int{0, len(z), len(z) + 7} {
		for s := uint64(0); s < 50; s++ {
			a, _ := pickToken(z, SampleOptions{Temperature: 1, TopP: 0.9, TopK: k}, newRNG(s))
			b, _ := pickToken(z, SampleOptions{Temperature: 1, TopP: 0.9}, newRNG(s))
			if a != b {
				t.Fatalf("top_k %d (off) drew %d, without top_k %d", k, a, b)
			}
		}
	}
}

// refDraw is the seeded draw over a reference's tokens idx (in order, summing to cum): the
// first whose running sum passes u·cum, else the last.
func refDraw(idx []int, p []float32, cum, u float64) int {
	var acc float64
	for _, j := range idx {
		if acc += float64(p[j]); u*cum < acc {
			return j
		}
	}
	return idx[len(idx)-1]
}

// randomDist is softmax(z) over V logits drawn N(0, scale²), rounded to integers (many ties)
// when ties is set.
func randomDist(r *rand.Rand, V int, scale float64, ties bool) []float32 {
	z := make([]float32, V)
	for j := range z {
		z[j] = float32(r.NormFloat64() * scale)
		if ties {
			z[j] = float32(math.Round(float64(z[j])))
		}
	}
	p := make([]float32, V)
	softmaxStats(z, 1, p)
	return p
}
