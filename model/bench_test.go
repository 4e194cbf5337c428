package model

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func benchBatch(B, T, promptLen int, seed uint64) []Sequence {
	r := rand.New(rand.NewPCG(seed, 1))
	seqs := make([]Sequence, B)
	for i := range seqs {
		toks := make([]int32, T)
		for j := range toks {
			toks[j] = int32(r.IntN(256))
		}
		seqs[i] = Sequence{Prompt: toks[:promptLen], Response: toks[promptLen:]}
	}
	return seqs
}

// trainStep runs one PPO-shaped step: forward, backward with log-prob and
// entropy upstream gradients, clipping and an AdamW update.
func trainStep(tb testing.TB, m *Model, opt *AdamW, g *Grads, seqs []Sequence) {
	p, err := m.Forward(seqs, 1)
	if err != nil {
		tb.Fatal(err)
	}
	d := make([][]float32, len(seqs))
	e := make([][]float32, len(seqs))
	for i, s := range seqs {
		d[i] = slices.Repeat([]float32{-1 / float32(p.Tokens())}, len(s.Response))
		e[i] = slices.Repeat([]float32{-0.01 / float32(p.Tokens())}, len(s.Response))
	}
	g.Zero()
	if err := p.Backward(d, e, g); err != nil {
		tb.Fatal(err)
	}
	ClipGradNorm(g, 1)
	if err := opt.Step(g); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkTrainStep: B=32, T=64 (16 prompt + 48 response), Dim 128, 2 layers.
func BenchmarkTrainStep(b *testing.B) {
	m, _ := New(DefaultConfig(), 1)
	opt := NewAdamW(m, DefaultAdamWConfig())
	g := m.NewGrads()
	seqs := benchBatch(32, 64, 16, 1)
	trainStep(b, m, opt, g, seqs)
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	for i := 0; i < b.N; i++ {
		trainStep(b, m, opt, g, seqs)
	}
	sec := time.Since(start).Seconds() / float64(b.N)
	// CPU time per step is steadier than wall time on a shared machine.
	b.ReportMetric((processCPU()-cpu0)/float64(b.N)*1e3, "cpu-ms/op")
	b.ReportMetric(32*64/sec, "tokens/s")
	b.ReportMetric(TrainFLOPs(m.Config(), seqs)/sec/1e9, "GFLOP/s")
}

func benchDecode(b *testing.B, cache bool) {
	m, _ := New(DefaultConfig(), 1)
	reqs := make([]SampleRequest, 16)
	for i := range reqs {
		reqs[i] = SampleRequest{Prompt: Encode("the prompt text"), Seed: uint64(i)}
	}
	opts := SampleOptions{Temperature: 1, MaxTokens: 48, Stop: []int32{}}
	tokens := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var res []SampleResult
		var err error
		if cache {
			res, err = m.Sample(context.Background(), reqs, opts)
		} else {
			res, err = m.SampleNoCache(context.Background(), reqs, opts)
		}
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			tokens += len(r.Tokens)
		}
	}
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
}

func BenchmarkDecode(b *testing.B) {
	b.Run("cache", func(b *testing.B) { benchDecode(b, true) })
	b.Run("nocache", func(b *testing.B) { benchDecode(b, false) })
}

func gemmBench(b *testing.B, g GEMM, m, n, k int, ta, tb bool) {
	r := rand.New(rand.NewPCG(1, 1))
	A := make([]float32, m*k)
	B := make([]float32, k*n)
	C := make([]float32, m*n)
	for i := range A {
		A[i] = r.Float32()
	}
	for i := range B {
		B[i] = r.Float32()
	}
	lda, ldb := k, n
	if ta {
		lda = m
	}
	if tb {
		ldb = k
	}
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		g.Sgemm(ta, tb, m, n, k, 1, A, lda, B, ldb, 0, C, n)
	}
	b.ReportMetric((processCPU()-cpu0)/float64(b.N)*1e3, "cpu-ms/op")
	b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkGEMM(b *testing.B) {
	for _, s := range []struct {
		name    string
		m, n, k int
		ta, tb  bool
	}{
		{"2048x384x128_NT", 2048, 384, 128, false, true},
		{"2048x128x512_NN", 2048, 128, 512, false, false},
		{"512x128x2048_TN", 512, 128, 2048, true, false},
		{"1024x1024x1024_NN", 1024, 1024, 1024, false, false},
	} {
		for kname, g := range map[string]GEMM{"blocked": BlockedGEMM{}, "gonum": GonumGEMM{}} {
			b.Run(kname+"/"+s.name, func(b *testing.B) { gemmBench(b, g, s.m, s.n, s.k, s.ta, s.tb) })
		}
	}
}

// BenchmarkGEMMInputGrads: the input gradients dX = dY·W of a 256-token step
// at the Qwen2.5-0.5B layer shapes, each call over the next of 24 distinct
// weights, so that W comes from memory as in a step (BenchmarkGEMMKernels
// reuses one W, which stays in cache).
func BenchmarkGEMMInputGrads(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const layers = 24
	for _, s := range []struct {
		name    string
		m, n, k int
	}{{"qkv", 256, 896, 1152}, {"o", 256, 896, 896}, {"gateup", 256, 896, 9728}, {"down", 256, 4864, 896}} {
		ws := make([][]float32, layers)
		for l := range ws {
			ws[l] = make([]float32, s.k*s.n)
			for i := range ws[l] {
				ws[l][i] = r.Float32()
			}
		}
		dy := make([]float32, s.m*s.k)
		for i := range dy {
			dy[i] = r.Float32()
		}
		dx := make([]float32, s.m*s.n)
		b.Run(s.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				BlockedGEMM{}.Sgemm(false, false, s.m, s.n, s.k, 1, dy, s.k, ws[i%layers], s.n, 0, dx, s.n)
			}
			b.ReportMetric(2*float64(s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
