//go:build amd64 && !purego

package model

//go:noescape
func kern6x16AVX2(kc int, a, b, c *float32, ldc int, alpha float32)

func cpuid(eax, ecx uint32) (a, b, c, d uint32)
func xgetbv() (eax, edx uint32)

// hasAVX2FMA reports AVX2 and FMA support with OS-enabled YMM state.
var hasAVX2FMA = func() bool {
	maxID, _, _, _ := cpuid(0, 0)
	if maxID < 7 {
		return false
	}
	_, _, c1, _ := cpuid(1, 0)
	fma := c1&(1<<12) != 0
	osxsave := c1&(1<<27) != 0
	avx := c1&(1<<28) != 0
	if !fma || !osxsave || !avx {
		return false
	}
	if lo, _ := xgetbv(); lo&6 != 6 {
		return false
	}
	_, b7, _, _ := cpuid(7, 0)
	return b7&(1<<5) != 0
}()

// kernel6x16 computes C[r*ldc+j] += alpha · Σ_p a[p*6+r]·b[p*16+j] for a
// 6×16 tile of C (c must hold (6-1)*ldc+16 elements).
func kernel6x16(kcur int, a, b, c []float32, ldc int, alpha float32) {
	if hasAVX2FMA && kcur > 0 {
		_ = a[kcur*mr-1]
		_ = b[kcur*nr-1]
		_ = c[(mr-1)*ldc+nr-1]
		kern6x16AVX2(kcur, &a[0], &b[0], &c[0], ldc, alpha)
		return
	}
	kernel6x16Go(kcur, a, b, c, ldc, alpha)
}

// FastGEMMAvailable reports whether BlockedGEMM runs its assembly kernel.
func FastGEMMAvailable() bool { return hasAVX2FMA }
