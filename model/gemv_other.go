//go:build !amd64 || purego

package model

// gemv8 is gemv8Go where BlockedGEMM runs its portable kernel.
func gemv8(k int, w []float32, ldw int, x []float32, ldx, n int, c []float32, ldc int, add bool) {
	gemv8Go(k, w, ldw, x, ldx, n, c, ldc, 1, add)
}
