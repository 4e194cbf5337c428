//go:build amd64 && !purego

package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestUnrolledAVX2TileBits: the 6×16 kernels unrolled four deep (A along its
// rows, A packed in strips; B packed) give the general AVX2 kernel's bits, at
// depths around the unroll and with both store modes, and agree with the
// portable kernel.
func TestUnrolledAVX2TileBits(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2/FMA on this CPU: the unrolled kernels cannot run")
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, kcur := range []int{1, 2, 3, 4, 5, 7, 8, 9, 13, 256} {
		b := make([]float32, kcur*nr)
		for i := range b {
			b[i] = r.Float32()*2 - 1
		}
		for _, l := range []struct {
			name   string
			rs, cs int
		}{{"rows", kcur + 3, 1}, {"packed", 1, mr}} {
			a := make([]float32, mr*(kcur+3))
			for i := range a {
				a[i] = r.Float32()*2 - 1
			}
			for _, store := range []bool{false, true} {
				var got, gen, port [mr * (nr + 2)]float32
				for i := range got {
					got[i], gen[i], port[i] = float32(i), float32(i), float32(i)
				}
				st := 0
				if store {
					st = 1
				}
				kernel6x16(kcur, a, l.rs, l.cs, b, nr, got[:], nr+2, 0.5, store)
				kern6x16AVX2(kcur, &a[0], l.rs, l.cs, &b[0], nr, &gen[0], nr+2, 0.5, st)
				kernel6x16Go(kcur, a, l.rs, l.cs, b, nr, port[:], nr+2, 0.5, store)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(gen[i]) {
						t.Fatalf("%s kc=%d store=%v: element %d: unrolled %v, general %v", l.name, kcur, store, i, got[i], gen[i])
					}
					if math.Abs(float64(got[i]-port[i])) > 1e-4 {
						t.Fatalf("%s kc=%d store=%v: element %d: %v, portable %v", l.name, kcur, store, i, got[i], port[i])
					}
				}
			}
		}
	}
}

// TestTranspose8Tile: the AVX2 8×8 tile writes exactly the transposed tile,
// through padded strides, and nothing around it.
func TestTranspose8Tile(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2 on this CPU: the 8×8 tile cannot run")
	}
	const lds, ldd = 11, 13
	src := make([]float32, 8*lds)
	for i := range src {
		src[i] = float32(i)
	}
	dst := make([]float32, 8*ldd)
	for i := range dst {
		dst[i] = -1
	}
	transpose8AVX2(&src[0], lds, &dst[0], ldd)
	for c := 0; c < 8; c++ {
		for r := 0; r < ldd; r++ {
			want := float32(-1)
			if r < 8 {
				want = src[r*lds+c]
			}
			if dst[c*ldd+r] != want {
				t.Fatalf("dst[%d][%d] = %v, want %v", c, r, dst[c*ldd+r], want)
			}
		}
	}
}

// TestGEMMRunsBits: the 6×16 tiles computed in runs (one kernel call across a
// row strip's strips of B, or down a strip's row strips) give the bits of one
// call a tile, on shapes with ragged rows and columns, both layouts of each
// operand and the three ways C is updated.
func TestGEMMRunsBits(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 6))
	shapes := [][3]int{{6, 16, 1}, {6, 32, 5}, {12, 64, 257}, {7, 48, 300}, {256, 200, 896}, {50, 1000, 64}, {3, 33, 40}, {49, 95, 600}, {96, 1100, 300}, {1152, 64, 896}, {600, 64, 4864}, {255, 255, 896}}
	assertGEMMsSameBits(t, r, shapes, BlockedGEMM{avx2Only: true, tileCalls: true}, map[string]BlockedGEMM{"runs": {avx2Only: true}})
}
