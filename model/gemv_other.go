//go:build !amd64 || purego

package model

// gemv8 is gemv8Go where BlockedGEMM runs its portable kernel.
func gemv8[T float32 | uint16](k int, w []T, ldw int, x []float32, ldx, n int, c []float32, ldc int, add bool) {
	gemv8GoAny(k, w, ldw, x, ldx, n, c, ldc, add)
}

// gemv32x1 is gemv8 with n = 1 on 32 rows of w (four groups of 8).
func gemv32x1[T float32 | uint16](k int, w []T, ldw int, x []float32, c []float32, add bool) {
	gemv32x1Go(k, w, ldw, x, c, add)
}
