package model

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTransposeMatchesReference: the tiled transpose writes exactly the
// reference's elements, and nothing else, on shapes with ragged edges on both
// sides and padded leading dimensions.
func TestTransposeMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range [][2]int{{1, 1}, {16, 16}, {64, 64}, {15, 17}, {17, 64}, {64, 1152}, {33, 47}, {100, 3}, {256, 100}} {
		rows, cols := s[0], s[1]
		lds, ldd := cols+r.IntN(4), rows+r.IntN(4)
		src := make([]float32, rows*lds)
		for i := range src {
			src[i] = r.Float32()
		}
		want := make([]float32, cols*ldd)
		for i := range want {
			want[i] = -1
		}
		got := slices.Clone(want)
		transposeRef(want, ldd, src, lds, rows, cols)
		transpose(got, ldd, src, lds, rows, cols)
		if !slices.Equal(got, want) {
			t.Fatalf("%v: transpose differs from the reference", s)
		}
		for c := 0; c < cols; c++ {
			for rr := 0; rr < rows; rr++ {
				if want[c*ldd+rr] != src[rr*lds+c] {
					t.Fatalf("%v: the reference is wrong at (%d, %d)", s, rr, c)
				}
			}
		}
	}
}

// BenchmarkTranspose: linearT's transpose of a product's yᵀ (outputs × rows) into y, by blocks
// of 64 outputs, with the reference and the tiled kernel: a decoding step's head (151,936
// outputs × 64 rows, larger than the caches) and a training step's gate|up (9,728 × 256).
func BenchmarkTranspose(b *testing.B) {
	for _, s := range []struct {
		name      string
		out, rows int
	}{{"head-64", 151936, 64}, {"gateup-256", 9728, 256}} {
		t, y := make([]float32, s.out*s.rows), make([]float32, s.out*s.rows)
		for _, f := range []struct {
			name string
			fn   func(dst []float32, ldd int, src []float32, lds, rows, cols int)
		}{{"reference", transposeRef}, {"tiled", transpose}} {
			b.Run(s.name+"/"+f.name, func(b *testing.B) {
				for range b.N {
					for o0 := 0; o0 < s.out; o0 += 64 {
						f.fn(y[o0:], s.out, t[o0*s.rows:], s.rows, min(s.out, o0+64)-o0, s.rows)
					}
				}
				b.ReportMetric(float64(s.out*s.rows)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gfloat/s")
			})
		}
	}
}
