package model

import (
	"context"
	"flag"
	"fmt"
	"testing"
)

// benchVocab and benchLayers reshape qwenSlice: -bench.vocab=151936 gives the
// real Qwen2.5 head (the head's GEMMs dominate a 2-layer step then).
var (
	benchVocab  = flag.Int("bench.vocab", 32000, "vocabulary of the benchmark model (qwenSlice)")
	benchLayers = flag.Int("bench.layers", 2, "layers of the benchmark model (qwenSlice)")
)

// qwenSlice is the Qwen2.5-0.5B block shape with 2 layers and a 32k
// vocabulary (-bench.layers, -bench.vocab): small enough for a benchmark
// run, the same GEMM shapes.
func qwenSlice(b *testing.B) *LLM {
	c := ArchConfig{Arch: "qwen2", Hidden: 896, Layers: *benchLayers, Heads: 14, KVHeads: 2, Intermediate: 4864, Vocab: *benchVocab, Context: 4096,
		RopeTheta: 1e6, Tie: true}.WithDefaults()
	m, err := InitLLM(c, 1)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkLLMTrainStep: forward+backward of one 256-token sequence (make bench-qwen compares
// the full model with PyTorch), and of one of 1,024 tokens (four head chunks and four attention
// blocks, recomputed in the backward); each without and with activation checkpointing.
func BenchmarkLLMTrainStep(b *testing.B) {
	m := qwenSlice(b)
	for _, c := range []struct {
		n    int
		ckpt bool
	}{{256, false}, {256, true}, {1024, false}, {1024, true}} {
		n := c.n
		b.Run(fmt.Sprintf("tokens=%d/checkpointing=%v", n, c.ckpt), func(b *testing.B) {
			m.SetActivationCheckpointing(c.ckpt)
			defer m.SetActivationCheckpointing(false)
			seq := make([]int32, n)
			for i := range seq {
				seq[i] = int32(i * 97 % m.cfg.Vocab)
			}
			seqs := []Sequence{{Prompt: seq[:1], Response: seq[1:]}}
			dlp := [][]float32{make([]float32, n-1)}
			for i := range dlp[0] {
				dlp[0][i] = 1
			}
			g := m.NewGrads()
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				p, err := m.Forward(seqs, 1)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Backward(dlp, nil, g); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tokens/s")
			// Tokens per CPU-second (user+system, the whole process): steadier than the wall
			// figure on a shared machine.
			b.ReportMetric(float64(n*b.N)/(processCPU()-cpu0), "tokens/cpu-s")
		})
	}
}

// BenchmarkLLMDecode: greedy KV-cache decoding, batch 8, 16 new tokens.
func BenchmarkLLMDecode(b *testing.B) {
	m := qwenSlice(b)
	reqs := make([]SampleRequest, 8)
	for i := range reqs {
		reqs[i] = SampleRequest{Prompt: []int32{int32(i + 1), 2, 3, 4, 5, 6, 7, 8}, Seed: uint64(i)}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Sample(context.Background(), reqs, SampleOptions{MaxTokens: 16}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(8*16*b.N)/b.Elapsed().Seconds(), "tokens/s")
}
