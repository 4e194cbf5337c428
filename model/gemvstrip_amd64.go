//go:build amd64 && !purego

package model

//go:noescape
func gemvStrips4AVX512(k int, w *uint16, lds int, x *float32, ldx, n int, c *float32, ldc int, alpha float32, add int)

//go:noescape
func gemvStripAVX2(k int, w *uint16, x *float32, ldx, n int, c *float32, ldc int, alpha float32, add int)

// stripsAtOnce is how many strips gemvStrip takes in one call where it can:
// four with AVX-512 (four independent chains a row of x).
var stripsAtOnce = func() int {
	if hasAVX512 {
		return 4
	}
	return 1
}()

// gemvStrip runs count (1 or stripsAtOnce) full strips of w by the n ≤
// gemvMaxRows rows of x: the AVX-512 kernel on four strips, the AVX2 one a
// strip at a time, gemvStripGo without AVX2+FMA (where BlockedGEMM runs
// its portable kernel). k > 0.
func gemvStrip(count, k int, w []uint16, x []float32, ldx, n int, c []float32, ldc int, add bool) {
	if !hasAVX2FMA {
		gemvStripGo(count, k, w, x, ldx, n, c, ldc, 1, add)
		return
	}
	lds := stripW * k
	_ = w[(count-1)*lds+lds-1]
	_ = x[(n-1)*ldx+k-1]
	_ = c[(n-1)*ldc+count*stripW-1]
	a := 0
	if add {
		a = 1
	}
	if count == 4 && hasAVX512 {
		gemvStrips4AVX512(k, &w[0], lds, &x[0], ldx, n, &c[0], ldc, 1, a)
		return
	}
	for s := 0; s < count; s++ {
		gemvStripAVX2(k, &w[s*lds], &x[0], ldx, n, &c[s*stripW], ldc, 1, a)
	}
}
