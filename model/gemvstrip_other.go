//go:build !amd64 || purego

package model

// stripsAtOnce is how many strips gemvStrip takes in one call.
var stripsAtOnce = 4

// gemvStrip is gemvStripGo where BlockedGEMM runs its portable kernel.
func gemvStrip(count, k int, w []uint16, x []float32, ldx, n int, c []float32, ldc int, add bool) {
	gemvStripGo(count, k, w, x, ldx, n, c, ldc, 1, add)
}
