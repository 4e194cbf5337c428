package model

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSharedPrefillSameDraws: eight requests over three prompts (a group's samples share one)
// draw the same tokens and log-probs, bit for bit, as each request decoded alone, while the
// model runs each distinct prompt once: the rows fed are the distinct prompts' tokens plus one
// row per later token, and the output head runs one row per sampled token.
func TestSharedPrefillSameDraws(t *testing.T) {
	c := tinyArchs()["qwen3_untied_hd6_bias"]
	m, err := InitLLM(c, 2)
	if err != nil {
		t.Fatal(err)
	}
	randomizeLLM(m, 3, 0.4)
	r := rand.New(rand.NewPCG(4, 5))
	prompts := archSeqs(c.Vocab, r, [2]int{9, 0}, [2]int{4, 0}, [2]int{13, 0})
	var reqs []SampleRequest
	for i := range 8 {
		reqs = append(reqs, SampleRequest{Prompt: prompts[i%3].Prompt, Seed: uint64(100 + i)})
	}
	opts := SampleOptions{Temperature: 1, TopP: 0.9, MaxTokens: 7}
	before, headBefore := cachedRows.Load(), headRowsRun.Load()
	got, err := m.Sample(context.Background(), reqs, opts)
	if err != nil {
		t.Fatal(err)
	}
	rows, head := cachedRows.Load()-before, headRowsRun.Load()-headBefore
	want := int64(9 + 4 + 13)
	for i, req := range reqs {
		alone, err := m.Sample(context.Background(), []SampleRequest{req}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[i].Tokens, alone[0].Tokens) || !slices.Equal(got[i].LogProbs, alone[0].LogProbs) {
			t.Fatalf("request %d: shared %v %v, alone %v %v", i, got[i].Tokens, got[i].LogProbs, alone[0].Tokens, alone[0].LogProbs)
		}
		want += int64(len(got[i].Tokens) - 1)
	}
	if rows != want {
		t.Errorf("the batch ran %d rows, want %d (each distinct prompt once)", rows, want)
	}
	sampled := int64(0)
	for _, g := range got {
		sampled += int64(len(g.Tokens))
	}
	if head != sampled {
		t.Errorf("the head ran %d rows, want %d (one per sampled token, none for the other prompt rows)", head, sampled)
	}
}

// BenchmarkGroupRollout: 8 prompts × 8 samples, 512-token prompts, 64 new tokens at top_p
// 0.95, with the group's prefill shared and without.
func BenchmarkGroupRollout(b *testing.B) {
	c := ArchConfig{Arch: "qwen3", Hidden: 256, Layers: 4, Heads: 4, KVHeads: 2, Intermediate: 768, Vocab: 32000, Context: 1024, RopeTheta: 1e6}.WithDefaults()
	m, err := InitLLM(c, 1)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(6, 7))
	prompts := archSeqs(c.Vocab, r, [2]int{512, 0}, [2]int{512, 0}, [2]int{512, 0}, [2]int{512, 0}, [2]int{512, 0}, [2]int{512, 0}, [2]int{512, 0}, [2]int{512, 0})
	var reqs []SampleRequest
	for p := range 8 {
		for s := range 8 {
			reqs = append(reqs, SampleRequest{Prompt: prompts[p].Prompt, Seed: uint64(8*p + s)})
		}
	}
	for _, share := range []bool{true, false} {
		name := map[bool]string{true: "shared", false: "unshared"}[share]
		b.Run(name, func(b *testing.B) {
			defer func(old bool) { sharePrefixes = old }(sharePrefixes)
			sharePrefixes = share
			n := 0
			for i := 0; i < b.N; i++ {
				res, err := m.Sample(context.Background(), reqs, SampleOptions{Temperature: 1, TopP: 0.95, MaxTokens: 64})
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					n += len(r.Tokens)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// TestSampleHeadInChunks: a decoding step reading its rows' logits three rows at a time (the
// head's chunks) draws what it draws with all rows at once.
func TestSampleHeadInChunks(t *testing.T) {
	c := tinyArchs()["qwen2_tied_gqa"]
	m, err := InitLLM(c, 5)
	if err != nil {
		t.Fatal(err)
	}
	randomizeLLM(m, 6, 0.4)
	prompts := archSeqs(c.Vocab, rand.New(rand.NewPCG(8, 9)), [2]int{3, 0}, [2]int{5, 0}, [2]int{2, 0}, [2]int{7, 0}, [2]int{4, 0}, [2]int{6, 0}, [2]int{1, 0})
	var reqs []SampleRequest
	for i, p := range prompts {
		reqs = append(reqs, SampleRequest{Prompt: p.Prompt, Seed: uint64(i)})
	}
	opts := SampleOptions{Temperature: 0.8, TopP: 0.95, MaxTokens: 9}
	whole, err := m.Sample(context.Background(), reqs, opts)
	if err != nil {
		t.Fatal(err)
	}
	old := headRows
	headRows = func(int) int { return 3 }
	defer func() { headRows = old }()
	chunked, err := m.Sample(context.Background(), reqs, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range whole {
		if !slices.Equal(whole[i].Tokens, chunked[i].Tokens) || !slices.Equal(whole[i].LogProbs, chunked[i].LogProbs) {
			t.Fatalf("request %d: chunked %v, whole %v", i, chunked[i].Tokens, whole[i].Tokens)
		}
	}
}
