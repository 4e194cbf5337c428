// Command benchengine prints the built-in policy's engine figures in one run:
// training tokens/s and GFLOP/s of a training step (B=32, T=64, Dim 128,
// 2 layers), the raw GEMM GFLOP/s of the linked kernel at model shapes and
// at 1024³, the share of the raw GEMM speed the training step reaches, and
// decode tokens/s with and without the KV cache.
//
//	go run ./model/cmd/benchengine [-steps 7] [-decode 16]
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"time"

	"github.com/drmas-dev/drmas/model"
)

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	return s[len(s)/2]
}

func batch(B, T, P int) []model.Sequence {
	r := rand.New(rand.NewPCG(1, 1))
	out := make([]model.Sequence, B)
	for i := range out {
		t := make([]int32, T)
		for j := range t {
			t[j] = int32(r.IntN(256))
		}
		out[i] = model.Sequence{Prompt: t[:P], Response: t[P:]}
	}
	return out
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchengine:", err)
		os.Exit(1)
	}
}

// gemmRate times one GEMM shape (median of reps) in GFLOP/s.
func gemmRate(g model.GEMM, m, n, k int, ta, tb bool, reps int) float64 {
	r := rand.New(rand.NewPCG(2, 2))
	A, B, C := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
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
	g.Sgemm(ta, tb, m, n, k, 1, A, lda, B, ldb, 0, C, n)
	var rates []float64
	for i := 0; i < reps; i++ {
		t := time.Now()
		g.Sgemm(ta, tb, m, n, k, 1, A, lda, B, ldb, 0, C, n)
		rates = append(rates, 2*float64(m)*float64(n)*float64(k)/time.Since(t).Seconds()/1e9)
	}
	return median(rates)
}

func main() {
	steps := flag.Int("steps", 7, "interleaved rounds (one training step + the GEMM anchor shapes each; medians reported)")
	decodeN := flag.Int("decode", 16, "decode batch size")
	flag.Parse()
	cfg := model.DefaultConfig()
	m, err := model.New(cfg, 1)
	must(err)
	fmt.Printf("engine: GOMAXPROCS=%d, kernel %T, config %+v (%d params)\n", runtime.GOMAXPROCS(0), m.GEMM(), cfg, m.NumParams())

	// Training step: forward + backward (log-prob and entropy terms) + clip + AdamW.
	seqs := batch(32, 64, 16)
	opt := model.NewAdamW(m, model.DefaultAdamWConfig())
	g := m.NewGrads()
	step := func() {
		p, err := m.Forward(seqs, 1)
		must(err)
		d := make([][]float32, len(seqs))
		e := make([][]float32, len(seqs))
		for i, s := range seqs {
			d[i] = slices.Repeat([]float32{-1 / float32(p.Tokens())}, len(s.Response))
			e[i] = slices.Repeat([]float32{-0.01 / float32(p.Tokens())}, len(s.Response))
		}
		g.Zero()
		must(p.Backward(d, e, g))
		model.ClipGradNorm(g, 1)
		must(opt.Step(g))
	}
	k := m.GEMM()
	shapes := []struct {
		name    string
		m, n, k int
		ta, tb  bool
	}{
		{"qkv fwd 2048x384x128 NT", 2048, 384, 128, false, true},
		{"mlp fwd 2048x512x128 NT", 2048, 512, 128, false, true},
		{"mlp bwd dX 2048x128x512 NN", 2048, 128, 512, false, false},
		{"mlp bwd dW 512x128x2048 TN", 512, 128, 2048, true, false},
	}
	// Warm up both, then alternate: each round times one training step and
	// then every GEMM shape, so the step and its anchor see the same load
	// (the machine is shared); the share is the median of per-round ratios.
	step()
	for _, s := range shapes {
		gemmRate(k, s.m, s.n, s.k, s.ta, s.tb, 1)
	}
	flops := model.TrainFLOPs(cfg, seqs)
	var secs, raws, shares []float64
	shapeRates := make([][]float64, len(shapes))
	for i := 0; i < *steps; i++ {
		t := time.Now()
		step()
		sec := time.Since(t).Seconds()
		var round []float64
		for j, s := range shapes {
			r := gemmRate(k, s.m, s.n, s.k, s.ta, s.tb, 3)
			shapeRates[j] = append(shapeRates[j], r)
			round = append(round, r)
		}
		secs = append(secs, sec)
		raws = append(raws, median(round))
		shares = append(shares, flops/sec/1e9/median(round))
	}
	stepSec := median(secs)
	trainRate := flops / stepSec / 1e9
	fmt.Printf("train step B=32 T=64: %.3f s (median of %d), %.0f tokens/s, %.2f GFLOP/step, %.2f GFLOP/s\n",
		stepSec, *steps, 32*64/stepSec, flops/1e9, trainRate)
	for j, s := range shapes {
		fmt.Printf("raw GEMM %-28s %6.2f GFLOP/s\n", s.name, median(shapeRates[j]))
	}
	big := gemmRate(k, 1024, 1024, 1024, false, false, 3)
	fmt.Printf("raw GEMM %-28s %6.2f GFLOP/s\n", "1024^3 NN", big)
	raw := median(raws)
	fmt.Printf("share: training step %.2f GFLOP/s vs raw GEMM at model shapes %.2f GFLOP/s (medians); per-round share, median of %d interleaved rounds: %.0f%% (target >= 50%%); %.0f%% of the 1024^3 rate\n",
		trainRate, raw, *steps, 100*median(shares), 100*trainRate/big)

	// Decode.
	reqs := make([]model.SampleRequest, *decodeN)
	for i := range reqs {
		reqs[i] = model.SampleRequest{Prompt: model.Encode("the prompt text"), Seed: uint64(i)}
	}
	opts := model.SampleOptions{Temperature: 1, MaxTokens: 48, Stop: []int32{}}
	for _, mode := range []struct {
		name string
		f    func(context.Context, []model.SampleRequest, model.SampleOptions) ([]model.SampleResult, error)
	}{{"with KV cache", m.Sample}, {"without cache", m.SampleNoCache}} {
		t := time.Now()
		res, err := mode.f(context.Background(), reqs, opts)
		must(err)
		n := 0
		for _, r := range res {
			n += len(r.Tokens)
		}
		fmt.Printf("decode %s: batch %d, %d tokens in %.2f s = %.0f tokens/s\n", mode.name, len(reqs), n, time.Since(t).Seconds(), float64(n)/time.Since(t).Seconds())
	}
}
