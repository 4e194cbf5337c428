//go:build !amd64 || purego

package model

func kernel6x16(kcur int, a []float32, rs, cs int, b []float32, ldb int, c []float32, ldc int, alpha float32, store bool) {
	kernel6x16Go(kcur, a, rs, cs, b, ldb, c, ldc, alpha, store)
}

const hasAVX512 = false

func kernel6x32(_ bool, kcur int, a []float32, rs, cs int, b []float32, bnext, ldb int, c []float32, ldc int, alpha float32, store bool) {
	kernel6x16Go(kcur, a, rs, cs, b, ldb, c, ldc, alpha, store)
	kernel6x16Go(kcur, a, rs, cs, b[bnext:], ldb, c[nr:], ldc, alpha, store)
}

func kernel6x64(kcur int, a []float32, rs, cs int, b []float32, bnext, ldb int, c []float32, ldc int, alpha float32, store bool) {
	for s := 0; s < 4; s++ {
		kernel6x16Go(kcur, a, rs, cs, b[s*bnext:], ldb, c[s*nr:], ldc, alpha, store)
	}
}

// GEMMKernel names the micro-kernel BlockedGEMM runs on this CPU.
func GEMMKernel() string { return "go 6x16" }

// FastGEMMAvailable reports whether BlockedGEMM runs its assembly kernel.
func FastGEMMAvailable() bool { return false }

func scatterRows(dst []float32, dstStride int, src []float32, count int) {
	scatterRowsGo(dst, dstStride, src, count)
}

func gatherStrips(dst []float32, dstStride int, src []float32, lds, rows, strips int) {
	gatherStripsGo(dst, dstStride, src, lds, rows, strips)
}

func transposeTile() (int, func(src *float32, lds int, dst *float32, ldd int)) { return 0, nil }

func kernel6x16Run(n, kcur int, a []float32, rs, cs, anext int, b []float32, bnext int, c []float32, ldc, cnext int, alpha float32, store bool) {
	kernel6x16Loop(n, kcur, a, rs, cs, anext, b, bnext, c, ldc, cnext, alpha, store)
}
