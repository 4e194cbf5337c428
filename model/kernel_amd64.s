//go:build amd64 && !purego

#include "textflag.h"

// func kern6x16AVX2(kc int, a *float32, rs, cs int, b *float32, ldb int, c *float32, ldc int, alpha float32, store int)
// C[r*ldc + j] += alpha * Σ_p a[r*rs + p*cs] * b[p*ldb + j]
// (store != 0: C[r*ldc + j] = alpha * Σ_p …, C is not read)
// (a: 6 rows of op(A) through strides, b: 16 columns of op(B) with row
// stride ldb, C row-major with stride ldc; strides in elements)
TEXT ·kern6x16AVX2(SB), NOSPLIT, $0-80
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ rs+16(FP), R9
	SHLQ $2, R9
	MOVQ cs+24(FP), R10
	SHLQ $2, R10
	MOVQ b+32(FP), DI
	MOVQ ldb+40(FP), R12
	SHLQ $2, R12
	MOVQ c+48(FP), DX
	LEAQ (SI)(R9*2), R11
	ADDQ R9, R11
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
	TESTQ CX, CX
	JE done

loop:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VBROADCASTSS (SI), Y2
	VBROADCASTSS (SI)(R9*1), Y3
	VFMADD231PS Y0, Y2, Y4
	VFMADD231PS Y1, Y2, Y5
	VFMADD231PS Y0, Y3, Y6
	VFMADD231PS Y1, Y3, Y7
	VBROADCASTSS (SI)(R9*2), Y2
	VBROADCASTSS (R11), Y3
	VFMADD231PS Y0, Y2, Y8
	VFMADD231PS Y1, Y2, Y9
	VFMADD231PS Y0, Y3, Y10
	VFMADD231PS Y1, Y3, Y11
	VBROADCASTSS (R11)(R9*1), Y2
	VBROADCASTSS (R11)(R9*2), Y3
	VFMADD231PS Y0, Y2, Y12
	VFMADD231PS Y1, Y2, Y13
	VFMADD231PS Y0, Y3, Y14
	VFMADD231PS Y1, Y3, Y15
	ADDQ R10, SI
	ADDQ R10, R11
	ADDQ R12, DI
	DECQ CX
	JNE loop

done:
	MOVQ ldc+56(FP), R8
	SHLQ $2, R8
	VBROADCASTSS alpha+64(FP), Y2
	MOVQ store+72(FP), AX
	TESTQ AX, AX
	JNE  storeonly
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VFMADD231PS Y4, Y2, Y0
	VFMADD231PS Y5, Y2, Y1
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ R8, DX
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VFMADD231PS Y6, Y2, Y0
	VFMADD231PS Y7, Y2, Y1
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ R8, DX
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VFMADD231PS Y8, Y2, Y0
	VFMADD231PS Y9, Y2, Y1
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ R8, DX
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VFMADD231PS Y10, Y2, Y0
	VFMADD231PS Y11, Y2, Y1
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ R8, DX
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VFMADD231PS Y12, Y2, Y0
	VFMADD231PS Y13, Y2, Y1
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ R8, DX
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VFMADD231PS Y14, Y2, Y0
	VFMADD231PS Y15, Y2, Y1
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VZEROUPPER
	RET

storeonly:
	VMULPS Y4, Y2, Y0
	VMULPS Y5, Y2, Y1
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ R8, DX
	VMULPS Y6, Y2, Y0
	VMULPS Y7, Y2, Y1
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ R8, DX
	VMULPS Y8, Y2, Y0
	VMULPS Y9, Y2, Y1
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ R8, DX
	VMULPS Y10, Y2, Y0
	VMULPS Y11, Y2, Y1
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ R8, DX
	VMULPS Y12, Y2, Y0
	VMULPS Y13, Y2, Y1
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ R8, DX
	VMULPS Y14, Y2, Y0
	VMULPS Y15, Y2, Y1
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VZEROUPPER
	RET

// func cpuid(eax, ecx uint32) (a, b, c, d uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eax+0(FP), AX
	MOVL ecx+4(FP), CX
	CPUID
	MOVL AX, a+8(FP)
	MOVL BX, b+12(FP)
	MOVL CX, c+16(FP)
	MOVL DX, d+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET

// func scatter6(dst *float32, dstStride int, src *float32, count int)
// for s < count: dst[s*dstStride : s*dstStride+6] = src[6*s : 6*s+6]
TEXT ·scatter6(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ dstStride+8(FP), R8
	SHLQ $2, R8
	MOVQ src+16(FP), SI
	MOVQ count+24(FP), CX
	TESTQ CX, CX
	JE s6done

s6loop:
	MOVUPS (SI), X0
	MOVQ 16(SI), X1
	MOVUPS X0, (DI)
	MOVQ X1, 16(DI)
	ADDQ $24, SI
	ADDQ R8, DI
	DECQ CX
	JNE s6loop

s6done:
	RET

// func gather16(dst *float32, src *float32, lds int, rows int)
// for r < rows: dst[16r : 16r+16] = src[r*lds : r*lds+16]
TEXT ·gather16(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lds+16(FP), R8
	SHLQ $2, R8
	MOVQ rows+24(FP), CX
	TESTQ CX, CX
	JE g16done

g16loop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ $64, DI
	ADDQ R8, SI
	DECQ CX
	JNE g16loop

g16done:
	VZEROUPPER
	RET

// func gather64(dst *float32, dstStride int, src *float32, lds int, rows int)
// for r < rows, q < 4: dst[q*dstStride+16r : +16] = src[r*lds+16q : +16]
TEXT ·gather64(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ dstStride+8(FP), R9
	SHLQ $2, R9
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R8
	SHLQ $2, R8
	MOVQ rows+32(FP), CX
	LEAQ (DI)(R9*2), R10
	TESTQ CX, CX
	JE g64done

g64loop:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VMOVUPS 128(SI), Z2
	VMOVUPS 192(SI), Z3
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, (DI)(R9*1)
	VMOVUPS Z2, (R10)
	VMOVUPS Z3, (R10)(R9*1)
	ADDQ $64, DI
	ADDQ $64, R10
	ADDQ R8, SI
	DECQ CX
	JNE g64loop

g64done:
	VZEROUPPER
	RET
