package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// gemvOperands returns x[n×in], W[out×in] and a bias with a share of
// zeros and negative zeros (so that signed-zero sums are exercised).
func gemvOperands(rng *rand.Rand, n, in, out int) (x, W, b []float32) {
	return randVec(rng, n*in), randVec(rng, out*in), randVec(rng, out)
}

// randVec is n normal values with one in 16 zero and one in 16 -0.
func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		switch rng.IntN(16) {
		case 0:
		case 1:
			v[i] = float32(math.Copysign(0, -1))
		default:
			v[i] = float32(rng.NormFloat64())
		}
	}
	return v
}

// checkGemvBits asserts that gemvLinear, and gemvStrips on the weights
// rounded to bfloat16 and packed in strips, give the bits of linearT over
// BlockedGEMM (the GEMM contract), with and without a bias.
func checkGemvBits(t *testing.T, rng *rand.Rand, n, in, out int) {
	t.Helper()
	x, W, b := gemvOperands(rng, n, in, out)
	for _, bias := range [][]float32{nil, b} {
		want := make([]float32, n*out)
		linearT(BlockedGEMM{}, x, n, in, weight{f: W}, bias, out, want)
		got := make([]float32, n*out)
		for i := range got {
			got[i] = float32(math.NaN()) // every element must be written
		}
		gemvLinear(x, n, in, W, bias, out, got)
		mustSameBits(t, fmt.Sprintf("f32 n=%d in=%d out=%d bias=%v", n, in, out, bias != nil), out, got, want)
	}
	// bfloat16 weights: the bits of the GEMM on the widened weights.
	W16, Wf := toBF16(W)
	for _, bias := range [][]float32{nil, b} {
		want := make([]float32, n*out)
		linearT(BlockedGEMM{}, x, n, in, weight{f: Wf}, bias, out, want)
		got := make([]float32, n*out)
		for i := range got {
			got[i] = float32(math.NaN())
		}
		gemvStrips(x, n, in, packedBF16(W16, in, out), bias, out, got)
		mustSameBits(t, fmt.Sprintf("bf16 strips n=%d in=%d out=%d bias=%v", n, in, out, bias != nil), out, got, want)
	}
}

// toBF16 rounds W to bfloat16 (truncating: every bit pattern is a valid
// weight) and returns the bits and their exact float32 values.
func toBF16(W []float32) ([]uint16, []float32) {
	h, f := make([]uint16, len(W)), make([]float32, len(W))
	for i, v := range W {
		h[i] = uint16(math.Float32bits(v) >> 16)
		f[i] = math.Float32frombits(uint32(h[i]) << 16)
	}
	return h, f
}

func mustSameBits(t *testing.T, what string, out int, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: y[%d][%d] = %v (%#x), GEMM %v (%#x)", what, i/out, i%out, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestGemvMatchesGEMM: the small-M path equals the blocked GEMM bit for bit
// at depths off the k block (256) and off the 4-wide step, every row count
// a pass takes and more, and output counts off the 8-wide group.
func TestGemvMatchesGEMM(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 6))
	for _, in := range []int{1, 3, 4, 7, 8, 255, 256, 257, 515, 769} {
		for n := 1; n <= 9; n++ {
			for _, out := range []int{1, 7, 8, 9, 23, 64} {
				checkGemvBits(t, rng, n, in, out)
			}
		}
	}
}

// TestGemvStripsOneAtATime: the strip kernels a strip at a time (on amd64 the AVX2 kernel,
// which CPUs without AVX-512 run for every strip) give the same bits as four at once.
func TestGemvStripsOneAtATime(t *testing.T) {
	defer func(s int) { stripsAtOnce = s }(stripsAtOnce)
	stripsAtOnce = 1
	rng := rand.New(rand.NewPCG(41, 7))
	for _, in := range []int{1, 7, 256, 515} {
		for n := 1; n <= 6; n++ {
			for _, out := range []int{9, 64, 70} {
				checkGemvBits(t, rng, n, in, out)
			}
		}
	}
}

// TestGemvRandomShapes: the same over random shapes.
func TestGemvRandomShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := 0; i < 200; i++ {
		checkGemvBits(t, rng, 1+rng.IntN(6), 1+rng.IntN(1200), 1+rng.IntN(300))
	}
}

// TestLinearSmallRowsIndependent: through LLM.linear, a row's output does
// not depend on how many rows share the call (1 row, the small-M path, or
// 40 rows, the GEMM).
func TestLinearSmallRowsIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	const n, in, out = 40, 600, 130
	x, W, b := gemvOperands(rng, n, in, out)
	m := &LLM{gemm: BlockedGEMM{}}
	all := make([]float32, n*out)
	m.linear(x, n, in, weight{f: W}, b, out, all)
	for _, rows := range []int{1, 2, 3, 4} {
		for r0 := 0; r0+rows <= n; r0 += 7 {
			part := make([]float32, rows*out)
			m.linear(x[r0*in:(r0+rows)*in], rows, in, weight{f: W}, b, out, part)
			for i, v := range part {
				if math.Float32bits(v) != math.Float32bits(all[r0*out+i]) {
					t.Fatalf("rows %d at %d: element %d = %v, in the batch %v", rows, r0, i, v, all[r0*out+i])
				}
			}
		}
	}
}

// BenchmarkSmallLinear compares the small-M path (float32 and bfloat16
// weights) with linearT over the blocked GEMM at the Qwen2.5-0.5B
// projection and head shapes; MB/s counts the weight bytes read.
func BenchmarkSmallLinear(b *testing.B) {
	shapes := []struct{ in, out int }{{896, 4864}, {4864, 896}, {896, 151936}}
	for _, s := range shapes {
		for _, n := range []int{1, 2, 4, 8, 16} {
			rng := rand.New(rand.NewPCG(1, 2))
			x, W, _ := gemvOperands(rng, n, s.in, s.out)
			y := make([]float32, n*s.out)
			name := fmt.Sprintf("%dx%d/n=%d", s.in, s.out, n)
			b.Run("gemv/"+name, func(b *testing.B) {
				benchCPU(b, int64(4*s.in*s.out), func() { gemvLinear(x, n, s.in, W, nil, s.out, y) })
			})
			b.Run("gemm/"+name, func(b *testing.B) {
				benchCPU(b, int64(4*s.in*s.out), func() { linearT(BlockedGEMM{}, x, n, s.in, weight{f: W}, nil, s.out, y) })
			})
			W16, _ := toBF16(W)
			hw := packedBF16(W16, s.in, s.out)
			b.Run("strips-bf16/"+name, func(b *testing.B) {
				benchCPU(b, int64(2*s.in*s.out), func() { gemvStrips(x, n, s.in, hw, nil, s.out, y) })
			})
			// The one-strip kernel alone (AVX2 where it exists), as a CPU without AVX-512 runs.
			b.Run("strips-bf16-one/"+name, func(b *testing.B) {
				defer func(old int) { stripsAtOnce = old }(stripsAtOnce)
				stripsAtOnce = 1
				benchCPU(b, int64(2*s.in*s.out), func() { gemvStrips(x, n, s.in, hw, nil, s.out, y) })
			})
		}
	}
}

// benchCPU runs fn b.N times, reporting the bytes of W per op and the
// process CPU time per op (fair on a loaded machine).
func benchCPU(b *testing.B, bytes int64, fn func()) {
	b.SetBytes(bytes)
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		fn()
	}
	b.ReportMetric((processCPU()-cpu0)/float64(b.N)*1e3, "cpu-ms/op")
}

// TestLinearPathsSameBits: linear's three paths (small-M, the transposed product, the direct
// GEMM) give every row the same bits whatever the batch it comes in: rows taken from a batch of
// 400 (the direct path at these widths) in runs that take each path, with and without a bias.
func TestLinearPathsSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 11))
	const n, in = 400, 600
	for _, out := range []int{130, 2500} {
		x, W, b := gemvOperands(rng, n, in, out)
		for _, bias := range [][]float32{nil, b} {
			m := &LLM{gemm: BlockedGEMM{}}
			all := make([]float32, n*out)
			m.linear(x, n, in, weight{f: W}, bias, out, all)
			for _, rows := range []int{3, 5, 64, transposedRows, transposedRows + 1, 200, 313} {
				r0 := (n - rows) / 2
				part := make([]float32, rows*out)
				m.linear(x[r0*in:(r0+rows)*in], rows, in, weight{f: W}, bias, out, part)
				for i, v := range part {
					if math.Float32bits(v) != math.Float32bits(all[r0*out+i]) {
						t.Fatalf("out %d, bias %v, %d rows at %d: element %d = %v, in the batch of %d %v", out, bias != nil, rows, r0, i, v, n, all[r0*out+i])
					}
				}
			}
		}
	}
}
