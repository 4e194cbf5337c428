package model

import (
	"flag"
	"math/rand/v2"
	"testing"
)

// BenchmarkDecodeLinear: the products of a 64-row decoding step at the Qwen2.5-0.5B shape
// (QKV, O, gate|up, down, the tied head) through linear, with the 6×64 AVX-512 tiles and
// with the 6×32 ones only, in GFLOP/s (wall), GFLOP per
// CPU-second and GB/s of W read. Each product cycles over copies of W of -decode-linear-mb MB in all (256: W
// comes from memory, as in a step over all layers; 1: one copy, from cache where it fits).
func BenchmarkDecodeLinear(b *testing.B) {
	const n = 64
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range []struct {
		name    string
		in, out int
	}{{"qkv", 896, 1152}, {"o", 896, 896}, {"gateup", 896, 9728}, {"down", 4864, 896}, {"head", 896, 151936}} {
		copies := max(1, (*decodeLinearMB<<20)/(4*s.in*s.out))
		x, _, _ := gemvOperands(rng, n, s.in, 1)
		Ws := make([][]float32, copies)
		for i := range Ws {
			Ws[i] = make([]float32, s.in*s.out)
			for j := range Ws[i] {
				Ws[i][j] = float32(rng.NormFloat64())
			}
		}
		y := make([]float32, n*s.out)
		for _, g := range []struct {
			name string
			g    BlockedGEMM
		}{{"6x64", BlockedGEMM{}}, {"6x32", BlockedGEMM{pairsOnly: true}}} {
			b.Run(s.name+"/"+g.name, func(b *testing.B) {
				m := &LLM{gemm: g.g}
				c0 := cpuSeconds()
				for i := range b.N {
					m.linear(x, n, s.in, weight{f: Ws[i%copies]}, nil, s.out, y)
				}
				flop := 2 * float64(n*s.in*s.out) * float64(b.N)
				b.ReportMetric(flop/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				b.ReportMetric(flop/(cpuSeconds()-c0)/1e9, "GFLOP/cpu-s")
				b.ReportMetric(4*float64(s.in*s.out)*float64(b.N)/b.Elapsed().Seconds()/1e9, "W-GB/s")
			})
		}
	}
}

var decodeLinearMB = flag.Int("decode-linear-mb", 256, "BenchmarkDecodeLinear: MB of weight copies each product cycles over")
