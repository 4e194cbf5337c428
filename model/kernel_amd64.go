//go:build amd64 && !purego

package model

import "golang.org/x/sys/cpu"

//go:noescape
func kern6x32AVX512(kc int, a *float32, rs, cs int, b *float32, bnext, ldb int, c *float32, ldc int, alpha float32, store int)

//go:noescape
func kern6x64AVX512(kc int, a *float32, rs, cs int, b *float32, bnext, ldb int, c *float32, ldc int, alpha float32, store int)

//go:noescape
func kern6x64u4AVX512(kc int, a *float32, rs int, b *float32, bnext int, c *float32, ldc int, alpha float32, store int)

//go:noescape
func kern6x64p4AVX512(kc int, a *float32, b *float32, bnext int, c *float32, ldc int, alpha float32, store int)

//go:noescape
func kern6x16AVX2(kc int, a *float32, rs, cs int, b *float32, ldb int, c *float32, ldc int, alpha float32, store int)

//go:noescape
func kern6x16u4AVX2(kc int, a *float32, rs int, b *float32, c *float32, ldc int, alpha float32, store int, n, anext, bnext, cnext int)

//go:noescape
func kern6x16p4AVX2(kc int, a *float32, b *float32, c *float32, ldc int, alpha float32, store int, n, anext, bnext, cnext int)

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

// hasAVX512 reports AVX-512F with OS-enabled ZMM state.
var hasAVX512 = hasAVX2FMA && cpu.X86.HasAVX512F

// kernel6x32 is kernel6x16 on two adjacent strips of op(B) (columns 16-31
// at b[bnext:]) and a 6×32 tile of C, with the same bits: the AVX-512
// kernel where wide is set (only when hasAVX512), two kernel6x16 otherwise.
func kernel6x32(wide bool, kcur int, a []float32, rs, cs int, b []float32, bnext, ldb int, c []float32, ldc int, alpha float32, store bool) {
	if !wide || kcur <= 0 {
		kernel6x16(kcur, a, rs, cs, b, ldb, c, ldc, alpha, store)
		kernel6x16(kcur, a, rs, cs, b[bnext:], ldb, c[nr:], ldc, alpha, store)
		return
	}
	st := 0
	if store {
		st = 1
	}
	_ = a[(mr-1)*rs+(kcur-1)*cs]
	_ = b[bnext+(kcur-1)*ldb+nr-1]
	_ = c[(mr-1)*ldc+2*nr-1]
	kern6x32AVX512(kcur, &a[0], rs, cs, &b[0], bnext, ldb, &c[0], ldc, alpha, st)
}

// kernel6x64 is kernel6x32 on four adjacent strips of op(B) (strip s at
// b[s*bnext:]) and a 6×64 tile of C, with the same bits: one AVX-512 kernel
// that broadcasts each element of A once (only when hasAVX512), unrolled
// for the two layouts BlockedGEMM passes (A in place along its rows, or
// packed in strips of mr rows; B packed).
func kernel6x64(kcur int, a []float32, rs, cs int, b []float32, bnext, ldb int, c []float32, ldc int, alpha float32, store bool) {
	if kcur <= 0 {
		kernel6x32(true, kcur, a, rs, cs, b, bnext, ldb, c, ldc, alpha, store)
		kernel6x32(true, kcur, a, rs, cs, b[2*bnext:], bnext, ldb, c[2*nr:], ldc, alpha, store)
		return
	}
	st := 0
	if store {
		st = 1
	}
	_ = a[(mr-1)*rs+(kcur-1)*cs]
	_ = b[3*bnext+(kcur-1)*ldb+nr-1]
	_ = c[(mr-1)*ldc+4*nr-1]
	switch {
	case cs == 1 && ldb == nr:
		kern6x64u4AVX512(kcur, &a[0], rs, &b[0], bnext, &c[0], ldc, alpha, st)
		return
	case rs == 1 && cs == mr && ldb == nr:
		kern6x64p4AVX512(kcur, &a[0], &b[0], bnext, &c[0], ldc, alpha, st)
		return
	}
	kern6x64AVX512(kcur, &a[0], rs, cs, &b[0], bnext, ldb, &c[0], ldc, alpha, st)
}

// kernel6x16 computes C[r*ldc+j] += alpha · Σ_p a[r*rs+p*cs]·b[p*ldb+j]
// for a 6×16 tile of C (c must hold (6-1)*ldc+16 elements); with store set
// it overwrites C with alpha · Σ instead (C is not read).
func kernel6x16(kcur int, a []float32, rs, cs int, b []float32, ldb int, c []float32, ldc int, alpha float32, store bool) {
	if hasAVX2FMA && kcur > 0 {
		if ldb == nr && unrolled16(rs, cs) {
			runUnrolled16(1, kcur, a, rs, cs, 0, b, 0, c, ldc, 0, alpha, store)
			return
		}
		st := 0
		if store {
			st = 1
		}
		_ = a[(mr-1)*rs+(kcur-1)*cs]
		_ = b[(kcur-1)*ldb+nr-1]
		_ = c[(mr-1)*ldc+nr-1]
		kern6x16AVX2(kcur, &a[0], rs, cs, &b[0], ldb, &c[0], ldc, alpha, st)
		return
	}
	kernel6x16Go(kcur, a, rs, cs, b, ldb, c, ldc, alpha, store)
}

// unrolled16 reports whether kernel6x16Run's assembly takes A in this layout:
// along its rows (cs = 1) or packed in strips (rs = 1, cs = mr).
func unrolled16(rs, cs int) bool { return cs == 1 || rs == 1 && cs == mr }

// kernel6x16Run computes n full 6×16 tiles with kernel6x16's bits: tile t
// from A at a[t*anext:], a packed B (ldb = nr) at b[t*bnext:] and C at
// c[t*cnext:]; one assembly call for the run where A's layout allows.
func kernel6x16Run(n, kcur int, a []float32, rs, cs, anext int, b []float32, bnext int, c []float32, ldc, cnext int, alpha float32, store bool) {
	if n <= 0 {
		return
	}
	if !hasAVX2FMA || kcur <= 0 || !unrolled16(rs, cs) {
		kernel6x16Loop(n, kcur, a, rs, cs, anext, b, bnext, c, ldc, cnext, alpha, store)
		return
	}
	runUnrolled16(n, kcur, a, rs, cs, anext, b, bnext, c, ldc, cnext, alpha, store)
}

// runUnrolled16 is kernel6x16Run's assembly call, for n ≥ 1, kcur ≥ 1 and a
// layout unrolled16 takes.
func runUnrolled16(n, kcur int, a []float32, rs, cs, anext int, b []float32, bnext int, c []float32, ldc, cnext int, alpha float32, store bool) {
	_ = a[(n-1)*anext+(mr-1)*rs+(kcur-1)*cs]
	_ = b[(n-1)*bnext+kcur*nr-1]
	_ = c[(n-1)*cnext+(mr-1)*ldc+nr-1]
	st := 0
	if store {
		st = 1
	}
	if cs == 1 {
		kern6x16u4AVX2(kcur, &a[0], rs, &b[0], &c[0], ldc, alpha, st, n, 4*anext, 4*bnext, 4*cnext)
		return
	}
	kern6x16p4AVX2(kcur, &a[0], &b[0], &c[0], ldc, alpha, st, n, 4*anext, 4*bnext, 4*cnext)
}

// FastGEMMAvailable reports whether BlockedGEMM runs its assembly kernel.
func FastGEMMAvailable() bool { return hasAVX2FMA }

// GEMMKernel names the micro-kernel BlockedGEMM runs on this CPU.
func GEMMKernel() string {
	switch {
	case hasAVX512:
		return "avx512 6x64"
	case hasAVX2FMA:
		return "avx2 6x16"
	}
	return "go 6x16"
}

//go:noescape
func scatter6(dst *float32, dstStride int, src *float32, count int)

//go:noescape
func gather16(dst *float32, src *float32, lds int, rows int)

//go:noescape
func gather64(dst *float32, dstStride int, src *float32, lds int, rows int)

// scatterRows copies count consecutive groups of mr floats from src into
// dst at a stride of dstStride: dst[s*dstStride+i] = src[s*mr+i].
func scatterRows(dst []float32, dstStride int, src []float32, count int) {
	if count <= 0 {
		return
	}
	_ = src[count*mr-1]
	_ = dst[(count-1)*dstStride+mr-1]
	scatter6(&dst[0], dstStride, &src[0], count)
}

// gatherStrips copies rows × strips groups of nr floats:
// dst[s*dstStride+r*nr+c] = src[r*lds+s*nr+c]. Four strips at a time with
// AVX-512 (each row's 256 bytes read at once).
func gatherStrips(dst []float32, dstStride int, src []float32, lds, rows, strips int) {
	if rows <= 0 || strips <= 0 {
		return
	}
	_ = src[(rows-1)*lds+strips*nr-1]
	_ = dst[(strips-1)*dstStride+rows*nr-1]
	if !hasAVX2FMA {
		gatherStripsGo(dst, dstStride, src, lds, rows, strips)
		return
	}
	s := 0
	if hasAVX512 {
		for ; s+4 <= strips; s += 4 {
			gather64(&dst[s*dstStride], dstStride, &src[s*nr], lds, rows)
		}
	}
	for ; s < strips; s++ {
		gather16(&dst[s*dstStride], &src[s*nr], lds, rows)
	}
}

//go:noescape
func transpose16AVX512(src *float32, lds int, dst *float32, ldd int)

//go:noescape
func transpose8AVX2(src *float32, lds int, dst *float32, ldd int)

// transposeTile is transpose's register tile on this CPU: its side and kernel (0 and nil
// without AVX2).
func transposeTile() (int, func(src *float32, lds int, dst *float32, ldd int)) {
	switch {
	case hasAVX512:
		return 16, transpose16AVX512
	case hasAVX2FMA:
		return 8, transpose8AVX2
	}
	return 0, nil
}
