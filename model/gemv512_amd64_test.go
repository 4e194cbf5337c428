//go:build amd64 && !purego

package model

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestGemv32x1Kernels: the AVX-512 one-row kernel gives the AVX2 kernel's
// bits (those of BlockedGEMM, TestGemvMatchesGEMM) with a row stride above
// k, depths off the k block and off the 4-wide step, storing and adding
// onto c.
func TestGemv32x1Kernels(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512: gemv32x1 runs the AVX2 kernel, checked by TestGemvMatchesGEMM")
	}
	defer func(s string) { gemv32x1Force = s }(gemv32x1Force)
	rng := rand.New(rand.NewPCG(32, 1))
	for _, k := range []int{1, 2, 3, 4, 5, 17, 255, 256, 257, 259, 515, 896, 1027} {
		for _, add := range []bool{false, true} {
			ldw := k + rng.IntN(9)
			w, x, c0 := randVec(rng, 31*ldw+k), randVec(rng, k), randVec(rng, 32)
			want := append([]float32(nil), c0...)
			gemv32x1Force = "avx2"
			gemv32x1(k, w, ldw, x, want, add)
			gemv32x1Force = ""
			got := append([]float32(nil), c0...)
			gemv32x1(k, w, ldw, x, got, add)
			mustSameBits(t, fmt.Sprintf("k=%d ldw=%d add=%v", k, ldw, add), 32, got, want)
		}
	}
}

// BenchmarkGemv32x1Kernels: the one-row kernels on the output head's shape
// (896 × 151,936 float32 weights, 544 MB: out of cache), one goroutine.
func BenchmarkGemv32x1Kernels(b *testing.B) {
	defer func(s string) { gemv32x1Force = s }(gemv32x1Force)
	const in, out = 896, 151936
	rng := rand.New(rand.NewPCG(1, 2))
	x, W := randVec(rng, in), randVec(rng, in*out)
	y := make([]float32, out)
	for _, kern := range []string{"", "avx2"} {
		name := kern
		if name == "" {
			name = "best"
		}
		b.Run(name, func(b *testing.B) {
			gemv32x1Force = kern
			benchCPU(b, int64(4*in*out), func() {
				for o := 0; o < out; o += 32 {
					gemv32x1(in, W[o*in:(o+32)*in], in, x, y[o:o+32], false)
				}
			})
		})
	}
}
