package model

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestGEMMWideKernelBits: BlockedGEMM with the 6×64 and 6×32 AVX-512 tiles,
// and with the 6×32 ones alone, gives the bits of the 6×16 AVX2 kernel alone, for every layout, alpha and beta, on
// random shapes with ragged rows, columns (odd strip counts, a last strip
// under 16 wide) and depths (several k blocks, a short last one, several
// groups of k blocks: n 1100). Without AVX-512 both sides run the 6×16 kernel.
func TestGEMMWideKernelBits(t *testing.T) {
	t.Logf("kernel: %s", GEMMKernel())
	r := rand.New(rand.NewPCG(41, 512))
	shapes := [][3]int{{6, 32, 1}, {6, 32, 256}, {12, 64, 257}, {7, 48, 300}, {256, 200, 896}, {50, 1000, 64}, {3, 33, 40}, {49, 95, 600}, {13, 1100, 300}, {1152, 64, 896}, {600, 64, 4864}, {11, 80, 513}, {7, 60, 300}, {13, 250, 257}, {255, 255, 896}}
	for i := 0; i < 8; i++ {
		shapes = append(shapes, [3]int{1 + r.IntN(130), 1 + r.IntN(300), 1 + r.IntN(700)})
	}
	assertGEMMsSameBits(t, r, shapes, BlockedGEMM{avx2Only: true}, map[string]BlockedGEMM{"f32 6x64": {}, "f32 6x32": {pairsOnly: true}})
}

// assertGEMMsSameBits runs each of gots and want on the same operands, for every shape, both
// layouts of A and of B, and three alpha/beta pairs (C overwritten, added, scaled), and fails
// unless every element's bits are want's.
func assertGEMMsSameBits(t *testing.T, r *rand.Rand, shapes [][3]int, want BlockedGEMM, gots map[string]BlockedGEMM) {
	t.Helper()
	names := slices.Sorted(maps.Keys(gots))
	for _, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, ab := range [][2]float32{{1, 0}, {0.5, 1}, {-1.5, 0.25}} {
					a, lda := randMat(r, m, k, ta)
					b, ldb := randMat(r, k, n, tb)
					ldc := n + 3
					c0 := make([]float32, m*ldc)
					for i := range c0 {
						c0[i] = r.Float32()*2 - 1
					}
					wc := slices.Clone(c0)
					want.Sgemm(ta, tb, m, n, k, ab[0], a, lda, b, ldb, ab[1], wc, ldc)
					for _, name := range names {
						got := slices.Clone(c0)
						gots[name].Sgemm(ta, tb, m, n, k, ab[0], a, lda, b, ldb, ab[1], got, ldc)
						assertSameBits(t, name, s, got, wc)
					}
				}
			}
		}
	}
}

// randMat returns a rows×cols operand, stored transposed when trans, with a
// padded leading dimension.
func randMat(r *rand.Rand, rows, cols int, trans bool) ([]float32, int) {
	if trans {
		rows, cols = cols, rows
	}
	ld := cols + 1 + r.IntN(5)
	x := make([]float32, rows*ld)
	for i := range x {
		x[i] = r.Float32()*2 - 1
	}
	return x, ld
}

func assertSameBits(t *testing.T, what string, shape [3]int, got, want []float32) {
	t.Helper()
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s %v: C[%d] = %v, want %v", what, shape, i, got[i], want[i])
		}
	}
}

// BenchmarkGEMMKernels: BlockedGEMM with the AVX-512 tiles, and with the
// AVX2 kernel only in runs and one call a tile, at Qwen2.5-0.5B training
// shapes (256 tokens).
func BenchmarkGEMMKernels(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, s := range []struct {
		name    string
		m, n, k int
		ta, tb  bool
	}{
		{"gateup-fwd-NT", 256, 9728, 896, false, true},
		{"down-dX-NN", 256, 4864, 896, false, false},
		{"gateup-dX-NN", 256, 896, 9728, false, false},
		{"down-dW-TN", 896, 4864, 256, true, false},
		{"qkv-fwd-NT", 256, 1152, 896, false, true},
	} {
		a, lda := randMat(r, s.m, s.k, s.ta)
		bm, ldb := randMat(r, s.k, s.n, s.tb)
		c := make([]float32, s.m*s.n)
		for _, g := range []struct {
			name string
			g    BlockedGEMM
		}{{"avx512", BlockedGEMM{}}, {"avx512-pairs", BlockedGEMM{pairsOnly: true}}, {"avx2", BlockedGEMM{avx2Only: true}}, {"avx2-tile-calls", BlockedGEMM{avx2Only: true, tileCalls: true}}} {
			b.Run(s.name+"/"+g.name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					g.g.Sgemm(s.ta, s.tb, s.m, s.n, s.k, 1, a, lda, bm, ldb, 0, c, s.n)
				}
				b.ReportMetric(2*float64(s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// TestTileProbeComputesTile: the FMA peak's tile probe runs a real mr × w·16 product over the
// k steps it counts (so its GFLOP/s are the kernel's), checked against a float64 product.
func TestTileProbeComputesTile(t *testing.T) {
	if !FastGEMMAvailable() {
		t.Skip("no assembly GEMM kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(3, 4))
	w := tileWidth()
	for _, n := range []int{kc, 37} {
		a, b, c := make([]float32, mr*kc), make([]float32, w*nr*kc), make([]float32, mr*w*nr)
		for i := range a {
			a[i] = r.Float32() - 0.5
		}
		for i := range b {
			b[i] = r.Float32() - 0.5
		}
		tileSteps(w, n, a, b, c)
		for row := range mr {
			for col := range w * nr {
				s, j := col/nr, col%nr
				var want float64
				for p := range n {
					want += float64(a[p*mr+row]) * float64(b[s*nr*n+p*nr+j])
				}
				if got := float64(c[row*w*nr+col]); math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
					t.Fatalf("n=%d: c[%d][%d] = %v, want %v", n, row, col, got, want)
				}
			}
		}
	}
	if p := tileProbe(); p.flops != float64(2*mr*w*nr) {
		t.Fatalf("tile probe counts %v flops a step, want %d", p.flops, 2*mr*w*nr)
	}
}
