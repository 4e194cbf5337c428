// Command benchengine prints the built-in policy's engine figures in one run:
// training tokens/s and GFLOP/s of a training step (B=32, T=64, Dim 128,
// 2 layers), the raw GEMM GFLOP/s of the linked kernel at model shapes and
// at 1024³, the share of the raw GEMM speed the training step reaches, and
// decode tokens/s with and without the KV cache.
//
// It also measures this machine's FMA peak (model.MeasureFMAPeak) and the
// GEMM GFLOP/s at the Qwen2.5-0.5B training shapes (256 tokens: forward NT,
// backward dX NN, weight gradient TN) as a share of that peak.
//
//	go run ./model/cmd/benchengine [-steps 7] [-decode 16] [-qwen=true]
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/drmas-dev/drmas/internal/benchutil"
	"github.com/drmas-dev/drmas/model"
)

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
	return benchutil.Median(rates)
}

func main() {
	steps := flag.Int("steps", 7, "interleaved rounds (one training step + the GEMM anchor shapes each; medians reported)")
	decodeN := flag.Int("decode", 16, "decode batch size")
	qwen := flag.Bool("qwen", true, "also time the GEMMs at the Qwen2.5-0.5B shapes against the FMA peak")
	flag.Parse()
	if *steps < 1 || *decodeN < 1 {
		fmt.Fprintf(os.Stderr, "benchengine: -steps and -decode must be at least 1 (got %d and %d); -qwen=false skips the Qwen shapes\n", *steps, *decodeN)
		os.Exit(2)
	}
	if *qwen {
		qwenShapes()
	}
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
		raws = append(raws, benchutil.Median(round))
		shares = append(shares, flops/sec/1e9/benchutil.Median(round))
	}
	stepSec := benchutil.Median(secs)
	trainRate := flops / stepSec / 1e9
	fmt.Printf("train step B=32 T=64: %.3f s (median of %d), %.0f tokens/s, %.2f GFLOP/step, %.2f GFLOP/s\n",
		stepSec, *steps, 32*64/stepSec, flops/1e9, trainRate)
	for j, s := range shapes {
		fmt.Printf("raw GEMM %-28s %6.2f GFLOP/s\n", s.name, benchutil.Median(shapeRates[j]))
	}
	big := gemmRate(k, 1024, 1024, 1024, false, false, 3)
	fmt.Printf("raw GEMM %-28s %6.2f GFLOP/s\n", "1024^3 NN", big)
	raw := benchutil.Median(raws)
	fmt.Printf("share: training step %.2f GFLOP/s vs raw GEMM at model shapes %.2f GFLOP/s (medians); per-round share, median of %d interleaved rounds: %.0f%% (target >= 50%%); %.0f%% of the 1024^3 rate\n",
		trainRate, raw, *steps, 100*benchutil.Median(shares), 100*trainRate/big)

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

// qwenShapes prints the FMA peak and the GEMM rate at each Qwen2.5-0.5B
// training shape (256 tokens, hidden 896, q+k+v 1152, gate+up 9728,
// intermediate 4864, vocabulary 151,936) with its share of the peak, for
// the AVX-512 tiles and the AVX2 kernel alone, and the flop-weighted rate of
// a whole step's GEMMs (24 layers and the head). The forward rows are the
// products the model runs at 256 rows: yᵀ = W·xᵀ (linearT).
func qwenShapes() {
	peak := model.MeasureFMAPeak(time.Second)
	// The shares are of the cores' ceiling, threads × one core's best: the
	// all-cores probe needs both cores free in the same moment, which a
	// shared machine rarely gives.
	w := float64(runtime.GOMAXPROCS(0))
	ceil512, ceil2 := w*max(peak.AVX512Core, peak.AVX2Core), w*peak.AVX2Core
	fmt.Printf("FMA peak: one core AVX-512 %.1f GFLOP/s, AVX2 %.1f; all %d threads at once AVX-512 %.1f, AVX2 %.1f; shares below are of %d × one core (%.1f, %.1f); GEMM kernel %s\n",
		peak.AVX512Core, peak.AVX2Core, runtime.GOMAXPROCS(0), peak.AVX512All, peak.AVX2All, runtime.GOMAXPROCS(0), ceil512, ceil2, model.GEMMKernel())
	tile := w * peak.TileCore
	fmt.Printf("GEMM micro-kernel (%s) on operands in L1: one core %.1f GFLOP/s, all %d threads at once %.1f; %d × one core = %.1f (%.0f%% of the FMA peak): the most a GEMM gets from this kernel\n",
		model.GEMMKernel(), peak.TileCore, runtime.GOMAXPROCS(0), peak.TileAll, runtime.GOMAXPROCS(0), tile, 100*tile/ceil512)
	const T, D, QKV, GU, F, V, L = 256, 896, 1152, 9728, 4864, 151936, 24
	type shape struct {
		name    string
		m, n, k int
		ta, tb  bool
		times   int // per training step
	}
	var shapes []shape
	for _, w := range []struct {
		name     string
		out, in  int
		perLayer int
	}{{"qkv", QKV, D, L}, {"o", D, D, L}, {"gate/up", GU, D, L}, {"down", D, F, L}, {"head", V, D, 1}} {
		shapes = append(shapes,
			shape{w.name + " fwd W·xT NT", w.out, T, w.in, false, true, w.perLayer},
			shape{w.name + " dX NN", T, w.in, w.out, false, false, w.perLayer},
			shape{w.name + " dW TN", w.out, w.in, T, true, false, w.perLayer})
	}
	kernels := []struct {
		g    model.GEMM
		peak float64
	}{{model.BlockedGEMM{}, ceil512}, {model.BlockedGEMMAVX2(), ceil2}}
	flops, secs := make([]float64, len(kernels)), make([]float64, len(kernels))
	fmt.Printf("%-24s %16s %22s %22s\n", "GEMM (0.5B, T=256)", "m x n x k", "GFLOP/s (% peak)", "AVX2 only (% peak)")
	for _, s := range shapes {
		fmt.Printf("%-24s %16s", s.name, fmt.Sprintf("%dx%dx%d", s.m, s.n, s.k))
		for i, kn := range kernels {
			r := gemmRate(kn.g, s.m, s.n, s.k, s.ta, s.tb, 3)
			f := 2 * float64(s.m) * float64(s.n) * float64(s.k) * float64(s.times)
			flops[i] += f
			secs[i] += f / (r * 1e9)
			fmt.Printf(" %14.1f (%3.0f%%)", r, 100*r/kn.peak)
		}
		fmt.Println()
	}
	for i, name := range []string{model.GEMMKernel(), "avx2 6x16"} {
		rate := flops[i] / secs[i] / 1e9
		fmt.Printf("all GEMMs of a step, %s (flop-weighted, %.0f GFLOP): %.1f GFLOP/s = %.0f%% of the FMA peak, %.1f s a step\n",
			name, flops[i]/1e9, rate, 100*rate/kernels[i].peak, secs[i])
		if i == 0 && tile > 0 {
			fmt.Printf("  = %.0f%% of the micro-kernel's in-cache rate; at that rate a step's GEMMs would take %.1f s\n", 100*rate/tile, flops[i]/tile/1e9)
		}
	}
}
