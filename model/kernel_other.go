//go:build !amd64 || purego

package model

func kernel6x16(kcur int, a, b, c []float32, ldc int, alpha float32) {
	kernel6x16Go(kcur, a, b, c, ldc, alpha)
}

// FastGEMMAvailable reports whether BlockedGEMM runs its assembly kernel.
func FastGEMMAvailable() bool { return false }
