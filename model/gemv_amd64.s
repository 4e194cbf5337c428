//go:build amd64 && !purego

#include "textflag.h"

// Rows r of the accumulators Y9..Y12 take x row r; each does its own
// k-ordered FMA chain per lane (output), the chain of kern6x16AVX2.
#define ROWFMA4(XADDR0, XADDR1, XADDR2, XADDR3, ACC) \
	VBROADCASTSS XADDR0, Y8; \
	VFMADD231PS  Y8, Y0, ACC; \
	VBROADCASTSS XADDR1, Y8; \
	VFMADD231PS  Y8, Y1, ACC; \
	VBROADCASTSS XADDR2, Y8; \
	VFMADD231PS  Y8, Y2, ACC; \
	VBROADCASTSS XADDR3, Y8; \
	VFMADD231PS  Y8, Y3, ACC

// func gemv8AVX2(k int, w *float32, ldw int, x *float32, ldx int, n int, c *float32, ldc int, alpha float32, add int)
// For the 8 rows j of w (stride ldw) and the n ≤ 4 rows r of x (stride
// ldx), with the k blocks of 256 of the blocked GEMM: per block,
// s = Σ_p w[j*ldw+p]·x[r*ldx+p] (a sequential FMA chain from +0), then
// c[r*ldc+j] = alpha·s (first block, add = 0) or c[r*ldc+j] += alpha·s
// (one FMA). Strides in elements.
TEXT ·gemv8AVX2(SB), NOSPLIT, $0-80
	MOVQ k+0(FP), CX
	MOVQ w+8(FP), R8
	MOVQ ldw+16(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10
	LEAQ (R8)(R9*4), R11
	MOVQ x+24(FP), DI
	MOVQ ldx+32(FP), R12
	SHLQ $2, R12
	LEAQ (R12)(R12*2), R13
	MOVQ n+40(FP), BX
	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R14
	SHLQ $2, R14
	MOVQ add+72(FP), AX

block:
	MOVQ $256, SI
	CMPQ CX, SI
	CMOVQLT CX, SI
	SUBQ SI, CX
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12

quad:
	CMPQ SI, $4
	JLT  single
	// Columns p..p+3 of the 8 rows, transposed: Yi lane j = w[j][p+i].
	VMOVUPS     (R8), X0
	VINSERTF128 $1, (R11), Y0, Y0
	VMOVUPS     (R8)(R9*1), X1
	VINSERTF128 $1, (R11)(R9*1), Y1, Y1
	VMOVUPS     (R8)(R9*2), X2
	VINSERTF128 $1, (R11)(R9*2), Y2, Y2
	VMOVUPS     (R8)(R10*1), X3
	VINSERTF128 $1, (R11)(R10*1), Y3, Y3
	VUNPCKLPS   Y1, Y0, Y4
	VUNPCKHPS   Y1, Y0, Y5
	VUNPCKLPS   Y3, Y2, Y6
	VUNPCKHPS   Y3, Y2, Y7
	VSHUFPS     $0x44, Y6, Y4, Y0
	VSHUFPS     $0xEE, Y6, Y4, Y1
	VSHUFPS     $0x44, Y7, Y5, Y2
	VSHUFPS     $0xEE, Y7, Y5, Y3
	ROWFMA4((DI), 4(DI), 8(DI), 12(DI), Y9)
	CMPQ BX, $2
	JLT  qnext
	ROWFMA4((DI)(R12*1), 4(DI)(R12*1), 8(DI)(R12*1), 12(DI)(R12*1), Y10)
	CMPQ BX, $3
	JLT  qnext
	ROWFMA4((DI)(R12*2), 4(DI)(R12*2), 8(DI)(R12*2), 12(DI)(R12*2), Y11)
	CMPQ BX, $4
	JLT  qnext
	ROWFMA4((DI)(R13*1), 4(DI)(R13*1), 8(DI)(R13*1), 12(DI)(R13*1), Y12)

qnext:
	ADDQ $16, R8
	ADDQ $16, R11
	ADDQ $16, DI
	SUBQ $4, SI
	JMP  quad

single:
	TESTQ SI, SI
	JE    epi
	VMOVSS      (R8), X0
	VINSERTPS   $0x10, (R8)(R9*1), X0, X0
	VINSERTPS   $0x20, (R8)(R9*2), X0, X0
	VINSERTPS   $0x30, (R8)(R10*1), X0, X0
	VMOVSS      (R11), X1
	VINSERTPS   $0x10, (R11)(R9*1), X1, X1
	VINSERTPS   $0x20, (R11)(R9*2), X1, X1
	VINSERTPS   $0x30, (R11)(R10*1), X1, X1
	VINSERTF128 $1, X1, Y0, Y0
	VBROADCASTSS (DI), Y8
	VFMADD231PS  Y8, Y0, Y9
	CMPQ BX, $2
	JLT  snext
	VBROADCASTSS (DI)(R12*1), Y8
	VFMADD231PS  Y8, Y0, Y10
	CMPQ BX, $3
	JLT  snext
	VBROADCASTSS (DI)(R12*2), Y8
	VFMADD231PS  Y8, Y0, Y11
	CMPQ BX, $4
	JLT  snext
	VBROADCASTSS (DI)(R13*1), Y8
	VFMADD231PS  Y8, Y0, Y12

snext:
	ADDQ $4, R8
	ADDQ $4, R11
	ADDQ $4, DI
	DECQ SI
	JMP  single

epi:
	VBROADCASTSS alpha+64(FP), Y8
	MOVQ  DX, SI
	TESTQ AX, AX
	JNE   addc
	VMULPS  Y9, Y8, Y0
	VMOVUPS Y0, (SI)
	CMPQ    BX, $2
	JLT     stored
	ADDQ    R14, SI
	VMULPS  Y10, Y8, Y0
	VMOVUPS Y0, (SI)
	CMPQ    BX, $3
	JLT     stored
	ADDQ    R14, SI
	VMULPS  Y11, Y8, Y0
	VMOVUPS Y0, (SI)
	CMPQ    BX, $4
	JLT     stored
	ADDQ    R14, SI
	VMULPS  Y12, Y8, Y0
	VMOVUPS Y0, (SI)

stored:
	MOVQ $1, AX
	JMP  next

addc:
	VMOVUPS     (SI), Y0
	VFMADD231PS Y9, Y8, Y0
	VMOVUPS     Y0, (SI)
	CMPQ        BX, $2
	JLT         next
	ADDQ        R14, SI
	VMOVUPS     (SI), Y0
	VFMADD231PS Y10, Y8, Y0
	VMOVUPS     Y0, (SI)
	CMPQ        BX, $3
	JLT         next
	ADDQ        R14, SI
	VMOVUPS     (SI), Y0
	VFMADD231PS Y11, Y8, Y0
	VMOVUPS     Y0, (SI)
	CMPQ        BX, $4
	JLT         next
	ADDQ        R14, SI
	VMOVUPS     (SI), Y0
	VFMADD231PS Y12, Y8, Y0
	VMOVUPS     Y0, (SI)

next:
	TESTQ CX, CX
	JNE   block
	VZEROUPPER
	RET

// func gemv8BF16AVX2(k int, w *uint16, ldw int, x *float32, ldx int, n int, c *float32, ldc int, alpha float32, add int)
// gemv8AVX2 with w in bfloat16, each element widened exactly (a shift by
// 16 bits) as it is loaded: the bits of gemv8AVX2 on the widened rows.
TEXT ·gemv8BF16AVX2(SB), NOSPLIT, $0-80
	MOVQ k+0(FP), CX
	MOVQ w+8(FP), R8
	MOVQ ldw+16(FP), R9
	SHLQ $1, R9
	LEAQ (R9)(R9*2), R10
	LEAQ (R8)(R9*4), R11
	MOVQ x+24(FP), DI
	MOVQ ldx+32(FP), R12
	SHLQ $2, R12
	LEAQ (R12)(R12*2), R13
	MOVQ n+40(FP), BX
	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R14
	SHLQ $2, R14
	MOVQ add+72(FP), AX

block:
	MOVQ $256, SI
	CMPQ CX, SI
	CMOVQLT CX, SI
	SUBQ SI, CX
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12

quad:
	CMPQ SI, $4
	JLT  single
	// Columns p..p+3 of the 8 rows, widened and transposed: Yi lane j =
	// w[j][p+i].
	VPMOVZXWD   (R8), X0
	VPMOVZXWD   (R11), X4
	VINSERTI128 $1, X4, Y0, Y0
	VPSLLD      $16, Y0, Y0
	VPMOVZXWD   (R8)(R9*1), X1
	VPMOVZXWD   (R11)(R9*1), X5
	VINSERTI128 $1, X5, Y1, Y1
	VPSLLD      $16, Y1, Y1
	VPMOVZXWD   (R8)(R9*2), X2
	VPMOVZXWD   (R11)(R9*2), X6
	VINSERTI128 $1, X6, Y2, Y2
	VPSLLD      $16, Y2, Y2
	VPMOVZXWD   (R8)(R10*1), X3
	VPMOVZXWD   (R11)(R10*1), X7
	VINSERTI128 $1, X7, Y3, Y3
	VPSLLD      $16, Y3, Y3
	VUNPCKLPS   Y1, Y0, Y4
	VUNPCKHPS   Y1, Y0, Y5
	VUNPCKLPS   Y3, Y2, Y6
	VUNPCKHPS   Y3, Y2, Y7
	VSHUFPS     $0x44, Y6, Y4, Y0
	VSHUFPS     $0xEE, Y6, Y4, Y1
	VSHUFPS     $0x44, Y7, Y5, Y2
	VSHUFPS     $0xEE, Y7, Y5, Y3
	ROWFMA4((DI), 4(DI), 8(DI), 12(DI), Y9)
	CMPQ BX, $2
	JLT  qnext
	ROWFMA4((DI)(R12*1), 4(DI)(R12*1), 8(DI)(R12*1), 12(DI)(R12*1), Y10)
	CMPQ BX, $3
	JLT  qnext
	ROWFMA4((DI)(R12*2), 4(DI)(R12*2), 8(DI)(R12*2), 12(DI)(R12*2), Y11)
	CMPQ BX, $4
	JLT  qnext
	ROWFMA4((DI)(R13*1), 4(DI)(R13*1), 8(DI)(R13*1), 12(DI)(R13*1), Y12)

qnext:
	ADDQ $8, R8
	ADDQ $8, R11
	ADDQ $16, DI
	SUBQ $4, SI
	JMP  quad

single:
	TESTQ SI, SI
	JE    epi
	VPXOR     X0, X0, X0
	VPINSRW   $0, (R8), X0, X0
	VPINSRW   $1, (R8)(R9*1), X0, X0
	VPINSRW   $2, (R8)(R9*2), X0, X0
	VPINSRW   $3, (R8)(R10*1), X0, X0
	VPINSRW   $4, (R11), X0, X0
	VPINSRW   $5, (R11)(R9*1), X0, X0
	VPINSRW   $6, (R11)(R9*2), X0, X0
	VPINSRW   $7, (R11)(R10*1), X0, X0
	VPMOVZXWD X0, Y0
	VPSLLD    $16, Y0, Y0
	VBROADCASTSS (DI), Y8
	VFMADD231PS  Y8, Y0, Y9
	CMPQ BX, $2
	JLT  snext
	VBROADCASTSS (DI)(R12*1), Y8
	VFMADD231PS  Y8, Y0, Y10
	CMPQ BX, $3
	JLT  snext
	VBROADCASTSS (DI)(R12*2), Y8
	VFMADD231PS  Y8, Y0, Y11
	CMPQ BX, $4
	JLT  snext
	VBROADCASTSS (DI)(R13*1), Y8
	VFMADD231PS  Y8, Y0, Y12

snext:
	ADDQ $2, R8
	ADDQ $2, R11
	ADDQ $4, DI
	DECQ SI
	JMP  single

epi:
	VBROADCASTSS alpha+64(FP), Y8
	MOVQ  DX, SI
	TESTQ AX, AX
	JNE   addc
	VMULPS  Y9, Y8, Y0
	VMOVUPS Y0, (SI)
	CMPQ    BX, $2
	JLT     stored
	ADDQ    R14, SI
	VMULPS  Y10, Y8, Y0
	VMOVUPS Y0, (SI)
	CMPQ    BX, $3
	JLT     stored
	ADDQ    R14, SI
	VMULPS  Y11, Y8, Y0
	VMOVUPS Y0, (SI)
	CMPQ    BX, $4
	JLT     stored
	ADDQ    R14, SI
	VMULPS  Y12, Y8, Y0
	VMOVUPS Y0, (SI)

stored:
	MOVQ $1, AX
	JMP  next

addc:
	VMOVUPS     (SI), Y0
	VFMADD231PS Y9, Y8, Y0
	VMOVUPS     Y0, (SI)
	CMPQ        BX, $2
	JLT         next
	ADDQ        R14, SI
	VMOVUPS     (SI), Y0
	VFMADD231PS Y10, Y8, Y0
	VMOVUPS     Y0, (SI)
	CMPQ        BX, $3
	JLT         next
	ADDQ        R14, SI
	VMOVUPS     (SI), Y0
	VFMADD231PS Y11, Y8, Y0
	VMOVUPS     Y0, (SI)
	CMPQ        BX, $4
	JLT         next
	ADDQ        R14, SI
	VMOVUPS     (SI), Y0
	VFMADD231PS Y12, Y8, Y0
	VMOVUPS     Y0, (SI)

next:
	TESTQ CX, CX
	JNE   block
	VZEROUPPER
	RET
