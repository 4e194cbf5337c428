//go:build amd64 && !purego

package model

//go:noescape
func gemv8AVX2(k int, w *float32, ldw int, x *float32, ldx, n int, c *float32, ldc int, alpha float32, add int)

// gemv8 runs the assembly kernel on CPUs with AVX2+FMA (those on which
// BlockedGEMM runs kern6x16AVX2), gemv8Go elsewhere; n ≤ gemvMaxRows rows
// of x, k > 0.
func gemv8(k int, w []float32, ldw int, x []float32, ldx, n int, c []float32, ldc int, add bool) {
	if !hasAVX2FMA {
		gemv8Go(k, w, ldw, x, ldx, n, c, ldc, 1, add)
		return
	}
	_ = w[7*ldw+k-1]
	_ = x[(n-1)*ldx+k-1]
	_ = c[(n-1)*ldc+7]
	a := 0
	if add {
		a = 1
	}
	gemv8AVX2(k, &w[0], ldw, &x[0], ldx, n, &c[0], ldc, 1, a)
}

//go:noescape
func gemv32x1AVX2(k int, w *float32, ldw int, x *float32, c *float32, alpha float32, add int)

// gemv32x1 is gemv8 with n = 1 on 32 rows of w (four groups of 8) at once.
func gemv32x1(k int, w []float32, ldw int, x []float32, c []float32, add bool) {
	if !hasAVX2FMA {
		gemv32x1Go(k, w, ldw, x, c, add)
		return
	}
	_ = w[31*ldw+k-1]
	_ = x[k-1]
	_ = c[31]
	a := 0
	if add {
		a = 1
	}
	if hasAVX512 && gemv32x1Force != "avx2" {
		gemv32x1AVX512(k, &w[0], ldw, &x[0], &c[0], 1, a)
		return
	}
	gemv32x1AVX2(k, &w[0], ldw, &x[0], &c[0], 1, a)
}

//go:noescape
func gemv32x1AVX512(k int, w *float32, ldw int, x *float32, c *float32, alpha float32, add int)

// gemv32x1Force picks the AVX2 kernel ("avx2") where AVX-512 runs, for tests
// and benchmarks; "" is the best the CPU runs.
var gemv32x1Force string
