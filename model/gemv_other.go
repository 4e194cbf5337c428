//go:build !amd64 || purego

package model

// gemv8 is gemv8Go where BlockedGEMM runs its portable kernel.
func gemv8(k int, w []float32, ldw int, x []float32, ldx, n int, c []float32, ldc int, add bool) {
	gemv8Go(k, w, ldw, x, ldx, n, c, ldc, 1, add)
}

// gemv32x1 is gemv8 with n = 1 on 32 rows of w (four groups of 8).
func gemv32x1(k int, w []float32, ldw int, x []float32, c []float32, add bool) {
	gemv32x1Go(k, w, ldw, x, c, add)
}
