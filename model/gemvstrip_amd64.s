//go:build amd64 && !purego

#include "textflag.h"

// The small-M kernels for bfloat16 weights packed in strips (bf16strips.go):
// at each k a strip's 16 outputs are 16 consecutive bfloat16 values, loaded
// and widened (zero-extend, shift left 16: exact) into one vector whose
// lanes are the outputs. Each lane keeps the blocked GEMM's chain: per k
// block of 256 a sequential FMA chain from +0, then c = alpha·acc (first
// block, add = 0) or c += alpha·acc with one FMA.

// KDEPTH: SI = the depth of the next k block (at most 256 of the CX left).
#define KDEPTH \
	MOVQ $256, SI; \
	CMPQ CX, SI; \
	CMOVQLT CX, SI; \
	SUBQ SI, CX

// STRIDES: ldx (R12) and ldc (R14) from elements to bytes, R13 = 3·ldx.
#define STRIDES \
	SHLQ $2, R12; \
	LEAQ (R12)(R12*2), R13; \
	SHLQ $2, R14

// FORROWS: S0..S3, the steps for rows 0-3 of x, on the n (BX) rows x has;
// to LAB after the last.
#define FORROWS(S0, S1, S2, S3, LAB) \
	S0; \
	CMPQ BX, $2; \
	JLT LAB; \
	S1; \
	CMPQ BX, $3; \
	JLT LAB; \
	S2; \
	CMPQ BX, $4; \
	JLT LAB; \
	S3

// ZFMA4: the four widened strips Z0..Z3 times x[r][k] (at XADDR, broadcast
// into ZX), into the row's accumulators.
#define ZFMA4(XADDR, ZX, A0, A1, A2, A3) \
	VBROADCASTSS XADDR, ZX; \
	VFMADD231PS ZX, Z0, A0; \
	VFMADD231PS ZX, Z1, A1; \
	VFMADD231PS ZX, Z2, A2; \
	VFMADD231PS ZX, Z3, A3

// ZSTORE4/ZADD4: c = alpha·acc or c += alpha·acc (alpha in Z8) for the
// four strips of one row of c at (SI), then SI to the next row (ldc: R14).
#define ZSTORE1(A, OFF) \
	VMULPS A, Z8, Z0; \
	VMOVUPS Z0, OFF(SI)

#define ZADD1(A, OFF) \
	VMOVUPS OFF(SI), Z0; \
	VFMADD231PS A, Z8, Z0; \
	VMOVUPS Z0, OFF(SI)

#define ZSTORE4(A0, A1, A2, A3) \
	ZSTORE1(A0, 0); \
	ZSTORE1(A1, 64); \
	ZSTORE1(A2, 128); \
	ZSTORE1(A3, 192); \
	ADDQ R14, SI

#define ZADD4(A0, A1, A2, A3) \
	ZADD1(A0, 0); \
	ZADD1(A1, 64); \
	ZADD1(A2, 128); \
	ZADD1(A3, 192); \
	ADDQ R14, SI

// ZROWS: OP (ZSTORE4 or ZADD4) on the rows of c that x has.
#define ZROWS(OP, LAB) \
	FORROWS(OP(Z16, Z17, Z18, Z19), OP(Z20, Z21, Z22, Z23), OP(Z24, Z25, Z26, Z27), OP(Z28, Z29, Z30, Z31), LAB)

// func gemvStrips4AVX512(k int, w *uint16, lds int, x *float32, ldx, n int, c *float32, ldc int, alpha float32, add int)
// Four full strips (the first at w, the next lds elements apart) times the
// n ≤ 4 rows of x (stride ldx): c[r*ldc + 16·s + j] for strip s, lane j.
// Four strips give each row four independent chains.
TEXT ·gemvStrips4AVX512(SB), NOSPLIT, $0-80
	MOVQ k+0(FP), CX
	MOVQ w+8(FP), R8
	MOVQ lds+16(FP), R9
	SHLQ $1, R9
	LEAQ (R9)(R9*2), R10
	MOVQ x+24(FP), DI
	MOVQ ldx+32(FP), R12
	MOVQ n+40(FP), BX
	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R14
	STRIDES
	MOVQ add+72(FP), AX

zblock:
	KDEPTH
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31

zloop:
	VPMOVZXWD (R8), Z0
	VPMOVZXWD (R8)(R9*1), Z1
	VPMOVZXWD (R8)(R9*2), Z2
	VPMOVZXWD (R8)(R10*1), Z3
	VPSLLD $16, Z0, Z0
	VPSLLD $16, Z1, Z1
	VPSLLD $16, Z2, Z2
	VPSLLD $16, Z3, Z3
	FORROWS(ZFMA4((DI), Z4, Z16, Z17, Z18, Z19), ZFMA4((DI)(R12*1), Z5, Z20, Z21, Z22, Z23), ZFMA4((DI)(R12*2), Z6, Z24, Z25, Z26, Z27), ZFMA4((DI)(R13*1), Z7, Z28, Z29, Z30, Z31), znext)

znext:
	ADDQ $32, R8
	ADDQ $4, DI
	DECQ SI
	JNE  zloop

	VBROADCASTSS alpha+64(FP), Z8
	MOVQ DX, SI
	TESTQ AX, AX
	JNE  zaddc
	ZROWS(ZSTORE4, zstored)

zstored:
	MOVQ $1, AX
	JMP  zmore

zaddc:
	ZROWS(ZADD4, zmore)

zmore:
	TESTQ CX, CX
	JNE  zblock
	VZEROUPPER
	RET

// YZERO2: two accumulators to +0.
#define YZERO2(A0, A1) \
	VXORPS A0, A0, A0; \
	VXORPS A1, A1, A1

// YFMA2: the strip's two halves Y0, Y1 times x[r][k] (broadcast into Y2).
#define YFMA2(XADDR, A0, A1) \
	VBROADCASTSS XADDR, Y2; \
	VFMADD231PS Y2, Y0, A0; \
	VFMADD231PS Y2, Y1, A1

// YSTORE2/YADD2: ZSTORE4/ZADD4 for one strip as two halves (alpha in Y3).
#define YSTORE2(A0, A1) \
	VMULPS A0, Y3, Y0; \
	VMOVUPS Y0, (SI); \
	VMULPS A1, Y3, Y0; \
	VMOVUPS Y0, 32(SI); \
	ADDQ R14, SI

#define YADD2(A0, A1) \
	VMOVUPS (SI), Y0; \
	VFMADD231PS A0, Y3, Y0; \
	VMOVUPS Y0, (SI); \
	VMOVUPS 32(SI), Y0; \
	VFMADD231PS A1, Y3, Y0; \
	VMOVUPS Y0, 32(SI); \
	ADDQ R14, SI

#define YROWS(OP, LAB) \
	FORROWS(OP(Y8, Y9), OP(Y10, Y11), OP(Y12, Y13), OP(Y14, Y15), LAB)

// func gemvStripAVX2(k int, w *uint16, x *float32, ldx, n int, c *float32, ldc int, alpha float32, add int)
// One full strip at w (two halves of 8 lanes) times the n ≤ 4 rows of x:
// c[r*ldc + j] for lane j.
TEXT ·gemvStripAVX2(SB), NOSPLIT, $0-72
	MOVQ k+0(FP), CX
	MOVQ w+8(FP), R8
	MOVQ x+16(FP), DI
	MOVQ ldx+24(FP), R12
	MOVQ n+32(FP), BX
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R14
	STRIDES
	MOVQ add+64(FP), AX

yblock:
	KDEPTH
	YZERO2(Y8, Y9)
	YZERO2(Y10, Y11)
	YZERO2(Y12, Y13)
	YZERO2(Y14, Y15)

yloop:
	VPMOVZXWD (R8), Y0
	VPMOVZXWD 16(R8), Y1
	VPSLLD $16, Y0, Y0
	VPSLLD $16, Y1, Y1
	FORROWS(YFMA2((DI), Y8, Y9), YFMA2((DI)(R12*1), Y10, Y11), YFMA2((DI)(R12*2), Y12, Y13), YFMA2((DI)(R13*1), Y14, Y15), ynext)

ynext:
	ADDQ $32, R8
	ADDQ $4, DI
	DECQ SI
	JNE  yloop

	VBROADCASTSS alpha+56(FP), Y3
	MOVQ DX, SI
	TESTQ AX, AX
	JNE  yaddc
	YROWS(YSTORE2, ystored)

ystored:
	MOVQ $1, AX
	JMP  ymore

yaddc:
	YROWS(YADD2, ymore)

ymore:
	TESTQ CX, CX
	JNE  yblock
	VZEROUPPER
	RET
