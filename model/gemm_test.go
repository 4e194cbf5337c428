package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

func naiveGEMM(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			out[i*n+j] = float64(alpha)*s + float64(beta)*float64(c[i*ldc+j])
		}
	}
	return out
}

func TestGEMMKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	kernels := map[string]GEMM{"gonum": GonumGEMM{}, "blocked": BlockedGEMM{}, "blocked-avx2": BlockedGEMM{avx2Only: true}}
	t.Logf("AVX2 kernel available: %v", FastGEMMAvailable())
	shapes := [][3]int{{1, 1, 1}, {7, 17, 5}, {6, 16, 256}, {13, 33, 257}, {73, 40, 300}, {150, 270, 90}, {64, 64, 32}, {5, 300, 600}, {13, 1100, 300}}
	for name, g := range kernels {
		for _, s := range shapes {
			m, n, k := s[0], s[1], s[2]
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					for _, ab := range [][2]float32{{1, 0}, {0.5, 1}, {-1.5, 0.25}} {
						lda, ldb, ldc := k+3, n+2, n+5
						if ta {
							lda = m + 1
						}
						if tb {
							ldb = k + 4
						}
						rows := m
						if ta {
							rows = k
						}
						a := make([]float32, rows*lda)
						brows := k
						if tb {
							brows = n
						}
						b := make([]float32, brows*ldb)
						c := make([]float32, m*ldc)
						for i := range a {
							a[i] = r.Float32()*2 - 1
						}
						for i := range b {
							b[i] = r.Float32()*2 - 1
						}
						for i := range c {
							c[i] = r.Float32()*2 - 1
						}
						want := naiveGEMM(ta, tb, m, n, k, ab[0], a, lda, b, ldb, ab[1], c, ldc)
						g.Sgemm(ta, tb, m, n, k, ab[0], a, lda, b, ldb, ab[1], c, ldc)
						for i := 0; i < m; i++ {
							for j := 0; j < n; j++ {
								if d := math.Abs(float64(c[i*ldc+j]) - want[i*n+j]); d > 1e-4*math.Sqrt(float64(k))+1e-5 {
									t.Fatalf("%s %v ta=%v tb=%v ab=%v: C[%d,%d]=%v want %v", name, s, ta, tb, ab, i, j, c[i*ldc+j], want[i*n+j])
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestGEMMRowIndependence: a row of C depends only on its row of op(A), bit
// for bit, whatever m (batch-composition independence relies on it).
func TestGEMMRowIndependence(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for name, g := range map[string]GEMM{"gonum": GonumGEMM{}, "blocked": BlockedGEMM{}} {
		m, n, k := 300, 200, 300
		a := make([]float32, m*k)
		b := make([]float32, n*k)
		for i := range a {
			a[i] = r.Float32()
		}
		for i := range b {
			b[i] = r.Float32()
		}
		full := make([]float32, m*n)
		g.Sgemm(false, true, m, n, k, 1, a, k, b, k, 0, full, n)
		for _, sub := range [][2]int{{0, 1}, {5, 7}, {71, 80}, {299, 300}} {
			rows := sub[1] - sub[0]
			part := make([]float32, rows*n)
			g.Sgemm(false, true, rows, n, k, 1, a[sub[0]*k:], k, b, k, 0, part, n)
			for i := 0; i < rows*n; i++ {
				if math.Float32bits(part[i]) != math.Float32bits(full[sub[0]*n+i]) {
					t.Fatalf("%s: rows %v differ from the full product", name, sub)
				}
			}
		}
	}
}

// TestGEMMRowIndependenceLayouts: the same for every kernel, every transpose
// combination and shapes that split C by columns too (few row blocks), or
// that gonum computes serially for few rows but in parallel (k split in
// blocks) for many ({300, 32, 128}); {600, 130, 2100} packs all of op(B)
// for the full product (shared) but streams it for the row subsets (panels),
// and {600, 2500, 300} streams panels wider than a core's cache, in groups.
func TestGEMMRowIndependenceLayouts(t *testing.T) {
	for name, g := range map[string]GEMM{"gonum": GonumGEMM{}, "blocked": BlockedGEMM{}} {
		t.Run(name, func(t *testing.T) { testRowIndependenceLayouts(t, g) })
	}
}

func testRowIndependenceLayouts(t *testing.T, g GEMM) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, s := range [][3]int{{300, 200, 300}, {128, 512, 700}, {40, 130, 2048}, {300, 32, 128}, {600, 130, 2100}, {600, 2500, 300}} {
		m, n, k := s[0], s[1], s[2]
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				a := make([]float32, m*k)
				b := make([]float32, n*k)
				for i := range a {
					a[i] = r.Float32()*2 - 1
				}
				for i := range b {
					b[i] = r.Float32()*2 - 1
				}
				lda, ldb := k, n
				if ta {
					lda = m
				}
				if tb {
					ldb = k
				}
				full := make([]float32, m*n)
				g.Sgemm(ta, tb, m, n, k, 1, a, lda, b, ldb, 0, full, n)
				for _, sub := range [][2]int{{0, 1}, {5, 7}, {13, 40}, {m - 1, m}} {
					rows := sub[1] - sub[0]
					off := sub[0] * lda
					if ta {
						off = sub[0]
					}
					part := make([]float32, rows*n)
					g.Sgemm(ta, tb, rows, n, k, 1, a[off:], lda, b, ldb, 0, part, n)
					for i := 0; i < rows*n; i++ {
						if math.Float32bits(part[i]) != math.Float32bits(full[sub[0]*n+i]) {
							t.Fatalf("%v ta=%v tb=%v: rows %v differ from the full product", s, ta, tb, sub)
						}
					}
				}
			}
		}
	}
}

func TestPortableKernelMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, kcur := range []int{1, 7, 256} {
		for _, store := range []bool{false, true} {
			// A through strides (rows 3·kcur+1 apart), B with a row stride.
			a := make([]float32, mr*(3*kcur+1))
			b := make([]float32, kcur*(nr+5))
			for i := range a {
				a[i] = r.Float32()*2 - 1
			}
			for i := range b {
				b[i] = r.Float32()*2 - 1
			}
			var t1, t2 [mr * (nr + 2)]float32
			for i := range t1 {
				t1[i] = float32(i)
				t2[i] = float32(i)
			}
			kernel6x16(kcur, a, 3*kcur+1, 3, b, nr+5, t1[:], nr+2, 0.5, store)
			kernel6x16Go(kcur, a, 3*kcur+1, 3, b, nr+5, t2[:], nr+2, 0.5, store)
			for i := range t1 {
				if math.Abs(float64(t1[i]-t2[i])) > 1e-4 {
					t.Fatalf("kc=%d store=%v: element %d: %v vs %v", kcur, store, i, t1[i], t2[i])
				}
			}
		}
	}
}

// TestPackBLayout: packB's strips hold op(B)'s depth [pc, pc+kcur) × columns
// [jc, jc+ncur) at dst[s*nr*kcur+p*nr+c], zero-padded, for plain and
// transposed B, depths that are and are not multiples of packRows, and
// strip counts that are and are not multiples of four.
func TestPackBLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range []struct{ pc, kcur, jc, ncur int }{
		{0, 1, 0, 1}, {0, 16, 0, 16}, {3, 17, 2, 64}, {1, 40, 5, 100}, {0, 256, 0, 160}, {7, 255, 1, 47}, {0, 33, 16, 129},
	} {
		for _, trans := range []bool{false, true} {
			rows, cols := s.pc+s.kcur+2, s.jc+s.ncur+3 // op(B) is rows × cols
			ldb := cols + 1
			if trans {
				ldb = rows + 2
			}
			b := make([]float32, max(rows, cols)*ldb)
			for i := range b {
				b[i] = r.Float32()
			}
			at := func(p, j int) float32 {
				if trans {
					return b[j*ldb+p]
				}
				return b[p*ldb+j]
			}
			nstrips := (s.ncur + nr - 1) / nr
			dst := make([]float32, nstrips*nr*s.kcur)
			for i := range dst {
				dst[i] = float32(math.NaN())
			}
			packB(dst, trans, b, ldb, s.pc, s.kcur, s.jc, s.ncur)
			for p := 0; p < s.kcur; p++ {
				for j := 0; j < nstrips*nr; j++ {
					want := float32(0)
					if j < s.ncur {
						want = at(s.pc+p, s.jc+j)
					}
					if got := dst[j/nr*nr*s.kcur+p*nr+j%nr]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("%+v trans %v: packed (%d, %d) = %v, want %v", s, trans, p, j, got, want)
					}
				}
			}
		}
	}
}

// BenchmarkPackB packs a k block of a core's panel of a plain B (an input
// gradient's weight, read from memory: the weights rotate through 1 GiB) the
// way packB does, packRows rows at a time, and row by row (packBRowsRef).
func BenchmarkPackB(b *testing.B) {
	for _, sh := range []struct {
		name       string
		k, n, cols int
	}{{"gateup-dX", 9728, 896, 448}, {"down-dX", 896, 4864, 2432}, {"head-dX", 151936, 896, 448}} {
		copies := max(1, (1<<30)/(sh.k*sh.n*4))
		w := make([]float32, copies*sh.k*sh.n)
		for i := range w {
			w[i] = float32(i & 1023)
		}
		dst := make([]float32, sh.cols*kc)
		for _, v := range []string{"rows", "packB"} {
			b.Run(sh.name+"/"+v, func(b *testing.B) {
				bytes, blocks := 0, sh.k/kc
				for i := 0; i < b.N; i++ {
					c := i / blocks % copies
					pc := i % blocks * kc
					src := w[c*sh.k*sh.n:][:sh.k*sh.n]
					if v == "rows" {
						packBRowsRef(dst, src, sh.n, pc, kc, 0, sh.cols)
					} else {
						packB(dst, false, src, sh.n, pc, kc, 0, sh.cols)
					}
					bytes += kc * sh.cols * 4
				}
				b.ReportMetric(float64(bytes)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// BenchmarkPackBTransposed packs op(B) = xᵀ for a projection's yᵀ = W·xᵀ
// (linearT), x of n rows in cache, every k block of it.
func BenchmarkPackBTransposed(b *testing.B) {
	for _, sh := range []struct {
		name string
		n, k int
	}{{"decode-64x896", 64, 896}, {"decode-64x4864", 64, 4864}, {"train-256x896", 256, 896}} {
		x := make([]float32, sh.n*sh.k)
		for i := range x {
			x[i] = float32(i)
		}
		dst := make([]float32, sh.n*kc)
		b.Run(sh.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				for pc := 0; pc < sh.k; pc += kc {
					kcur := min(kc, sh.k-pc)
					packB(dst[:sh.n*kcur], true, x, sh.k, pc, kcur, 0, sh.n)
				}
			}
			b.ReportMetric(float64(sh.n*sh.k*4)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// packBRowsRef is packB of a plain B with whole strips (ncur a multiple of
// nr), one row of B at a time.
func packBRowsRef(dst, b []float32, ldb, pc, kcur, jc, ncur int) {
	for p := 0; p < kcur; p++ {
		row := b[(pc+p)*ldb+jc:][:ncur]
		for s := 0; s < ncur/nr; s++ {
			copy(dst[s*nr*kcur+p*nr:][:nr], row[s*nr:])
		}
	}
}
