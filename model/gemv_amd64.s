//go:build amd64 && !purego

#include "textflag.h"

// PFD32: how far ahead both kernels prefetch each row, in bytes (a line per
// row every 4 steps: 8 or 32 interleaved rows leave the hardware prefetcher
// behind; 15-17 % less CPU on the head, BenchmarkSmallLinear).
#define PFD32 256

// The small-M kernels of gemv.go. Each output lane keeps its own
// k-ordered FMA chain, the chain of kern6x16AVX2; one body per kernel
// shape, parameterized by how weights are loaded.

// PF4: the line PFD32 bytes ahead in the 4 rows at P (stride R9).
#define PF4(P) \
	PREFETCHT0 PFD32(P); \
	PREFETCHT0 PFD32(P)(R9*1); \
	PREFETCHT0 PFD32(P)(R9*2); \
	PREFETCHT0 PFD32(P)(R10*1)

// TRANSPOSE4: Y0..Y3 hold 4 columns of rows 0-3 (low lanes) and 4-7 (high
// lanes); afterwards Yi lane j = row j, column i.
#define TRANSPOSE4 \
	VUNPCKLPS Y1, Y0, Y4; \
	VUNPCKHPS Y1, Y0, Y5; \
	VUNPCKLPS Y3, Y2, Y6; \
	VUNPCKHPS Y3, Y2, Y7; \
	VSHUFPS $0x44, Y6, Y4, Y0; \
	VSHUFPS $0xEE, Y6, Y4, Y1; \
	VSHUFPS $0x44, Y7, Y5, Y2; \
	VSHUFPS $0xEE, Y7, Y5, Y3

// LOADQ_*(P, Q): columns p..p+3 of rows 0-3 (at P, stride R9, R10 = 3·R9)
// and rows 4-7 (at Q) into Y0..Y3, before TRANSPOSE4.
#define LOADQ_F32(P, Q) \
	VMOVUPS (P), X0; \
	VINSERTF128 $1, (Q), Y0, Y0; \
	VMOVUPS (P)(R9*1), X1; \
	VINSERTF128 $1, (Q)(R9*1), Y1, Y1; \
	VMOVUPS (P)(R9*2), X2; \
	VINSERTF128 $1, (Q)(R9*2), Y2, Y2; \
	VMOVUPS (P)(R10*1), X3; \
	VINSERTF128 $1, (Q)(R10*1), Y3, Y3

// LOADS_*(P, Q): column p of the 8 rows into Y0 (lane j = row j).
#define LOADS_F32(P, Q) \
	VMOVSS (P), X0; \
	VINSERTPS $0x10, (P)(R9*1), X0, X0; \
	VINSERTPS $0x20, (P)(R9*2), X0, X0; \
	VINSERTPS $0x30, (P)(R10*1), X0, X0; \
	VMOVSS (Q), X1; \
	VINSERTPS $0x10, (Q)(R9*1), X1, X1; \
	VINSERTPS $0x20, (Q)(R9*2), X1, X1; \
	VINSERTPS $0x30, (Q)(R10*1), X1, X1; \
	VINSERTF128 $1, X1, Y0, Y0

// ROWFMA4: the 4 columns Y0..Y3 times 4 consecutive x values, in k order.
#define ROWFMA4(XADDR0, XADDR1, XADDR2, XADDR3, ACC) \
	VBROADCASTSS XADDR0, Y8; \
	VFMADD231PS Y8, Y0, ACC; \
	VBROADCASTSS XADDR1, Y8; \
	VFMADD231PS Y8, Y1, ACC; \
	VBROADCASTSS XADDR2, Y8; \
	VFMADD231PS Y8, Y2, ACC; \
	VBROADCASTSS XADDR3, Y8; \
	VFMADD231PS Y8, Y3, ACC

// STOREC/ADDC: c = alpha·ACC or c += alpha·ACC (one FMA) at ADDR, alpha
// in Y8, as kern6x16AVX2 ends a k block.
#define STOREC(ACC, ADDR) \
	VMULPS ACC, Y8, Y0; \
	VMOVUPS Y0, ADDR

#define ADDC(ACC, ADDR) \
	VMOVUPS ADDR, Y0; \
	VFMADD231PS ACC, Y8, Y0; \
	VMOVUPS Y0, ADDR

// NEXTROW: to row R-1 of c (SI), or to LAB when x has fewer than R rows.
#define NEXTROW(R, LAB) \
	CMPQ BX, $R; \
	JLT LAB; \
	ADDQ R14, SI

// KBLOCK: SI = the depth of the next k block (at most 256 of the CX left),
// and four accumulators cleared to +0.
#define KBLOCK(A0, A1, A2, A3) \
	MOVQ $256, SI; \
	CMPQ CX, SI; \
	CMOVQLT CX, SI; \
	SUBQ SI, CX; \
	VXORPS A0, A0, A0; \
	VXORPS A1, A1, A1; \
	VXORPS A2, A2, A2; \
	VXORPS A3, A3, A3

// EACHROW: OP (STOREC or ADDC) on rows Y9..Y12 of c while x has them.
#define EACHROW(OP, LAB) \
	OP(Y9, (SI)); \
	NEXTROW(2, LAB); \
	OP(Y10, (SI)); \
	NEXTROW(3, LAB); \
	OP(Y11, (SI)); \
	NEXTROW(4, LAB); \
	OP(Y12, (SI))

// GEMV8: the body of gemv8AVX2 for weights read by
// LOADQ/LOADS, SHIFT = log2 of a weight's bytes, QSTEP/SSTEP the bytes of 4
// and 1 weights.
#define GEMV8(LOADQ, LOADS, SHIFT, QSTEP, SSTEP) \
	MOVQ k+0(FP), CX; \
	MOVQ w+8(FP), R8; \
	MOVQ ldw+16(FP), R9; \
	SHLQ $SHIFT, R9; \
	LEAQ (R9)(R9*2), R10; \
	LEAQ (R8)(R9*4), R11; \
	MOVQ x+24(FP), DI; \
	MOVQ ldx+32(FP), R12; \
	SHLQ $2, R12; \
	LEAQ (R12)(R12*2), R13; \
	MOVQ n+40(FP), BX; \
	MOVQ c+48(FP), DX; \
	MOVQ ldc+56(FP), R14; \
	SHLQ $2, R14; \
	MOVQ add+72(FP), AX; \
	block:; \
	KBLOCK(Y9, Y10, Y11, Y12); \
	quad:; \
	CMPQ SI, $4; \
	JLT single; \
	TESTQ $15, SI; \
	JNE nopf; \
	PF4(R8); \
	PF4(R11); \
	nopf:; \
	LOADQ(R8, R11); \
	TRANSPOSE4; \
	ROWFMA4((DI), 4(DI), 8(DI), 12(DI), Y9); \
	CMPQ BX, $2; \
	JLT qnext; \
	ROWFMA4((DI)(R12*1), 4(DI)(R12*1), 8(DI)(R12*1), 12(DI)(R12*1), Y10); \
	CMPQ BX, $3; \
	JLT qnext; \
	ROWFMA4((DI)(R12*2), 4(DI)(R12*2), 8(DI)(R12*2), 12(DI)(R12*2), Y11); \
	CMPQ BX, $4; \
	JLT qnext; \
	ROWFMA4((DI)(R13*1), 4(DI)(R13*1), 8(DI)(R13*1), 12(DI)(R13*1), Y12); \
	qnext:; \
	ADDQ $QSTEP, R8; \
	ADDQ $QSTEP, R11; \
	ADDQ $16, DI; \
	SUBQ $4, SI; \
	JMP quad; \
	single:; \
	TESTQ SI, SI; \
	JE epi; \
	LOADS(R8, R11); \
	VBROADCASTSS (DI), Y8; \
	VFMADD231PS Y8, Y0, Y9; \
	CMPQ BX, $2; \
	JLT snext; \
	VBROADCASTSS (DI)(R12*1), Y8; \
	VFMADD231PS Y8, Y0, Y10; \
	CMPQ BX, $3; \
	JLT snext; \
	VBROADCASTSS (DI)(R12*2), Y8; \
	VFMADD231PS Y8, Y0, Y11; \
	CMPQ BX, $4; \
	JLT snext; \
	VBROADCASTSS (DI)(R13*1), Y8; \
	VFMADD231PS Y8, Y0, Y12; \
	snext:; \
	ADDQ $SSTEP, R8; \
	ADDQ $SSTEP, R11; \
	ADDQ $4, DI; \
	DECQ SI; \
	JMP single; \
	epi:; \
	VBROADCASTSS alpha+64(FP), Y8; \
	MOVQ DX, SI; \
	TESTQ AX, AX; \
	JNE addc; \
	EACHROW(STOREC, stored); \
	stored:; \
	MOVQ $1, AX; \
	JMP next; \
	addc:; \
	EACHROW(ADDC, next); \
	next:; \
	TESTQ CX, CX; \
	JNE block; \
	VZEROUPPER; \
	RET

// QGROUP/SGROUP: one group of 8 rows (rows 0-3 at P, rows 4-7 at AX) into
// ACC, for 4 columns (x values broadcast in Y8..Y11) or 1 column (Y8).
#define QGROUP(LOADQ, P, ACC) \
	LOADQ(P, AX); \
	TRANSPOSE4; \
	VFMADD231PS Y8, Y0, ACC; \
	VFMADD231PS Y9, Y1, ACC; \
	VFMADD231PS Y10, Y2, ACC; \
	VFMADD231PS Y11, Y3, ACC

#define SGROUP(LOADS, P, ACC) \
	LOADS(P, AX); \
	VFMADD231PS Y8, Y0, ACC

// NEXTGROUP: BX and AX to rows 0 and 4 of the next group of 8.
#define NEXTGROUP \
	LEAQ (AX)(R9*4), BX; \
	LEAQ (BX)(R9*4), AX

// FOURGROUPS: GROUP (QGROUP or SGROUP, reading with LOAD) on the four
// groups of 8 rows from R8, into Y12..Y15.
#define FOURGROUPS(GROUP, LOAD) \
	LEAQ (R8)(R9*4), AX; \
	GROUP(LOAD, R8, Y12); \
	NEXTGROUP; \
	GROUP(LOAD, BX, Y13); \
	NEXTGROUP; \
	GROUP(LOAD, BX, Y14); \
	NEXTGROUP; \
	GROUP(LOAD, BX, Y15)

// PREFETCH32: PF4 on the 32 rows from R8 (AX and BX as scratch).
#define PREFETCH32 \
	PF4(R8); \
	LEAQ (R8)(R9*4), AX; \
	PF4(AX); \
	LEAQ (AX)(R9*4), BX; \
	PF4(BX); \
	LEAQ (BX)(R9*4), AX; \
	PF4(AX); \
	LEAQ (AX)(R9*4), BX; \
	PF4(BX); \
	LEAQ (BX)(R9*4), AX; \
	PF4(AX); \
	LEAQ (AX)(R9*4), BX; \
	PF4(BX); \
	LEAQ (BX)(R9*4), AX; \
	PF4(AX)

// GEMV32: the body of gemv32x1AVX2 (arguments as
// GEMV8's).
#define GEMV32(LOADQ, LOADS, SHIFT, QSTEP, SSTEP) \
	MOVQ k+0(FP), CX; \
	MOVQ w+8(FP), R8; \
	MOVQ ldw+16(FP), R9; \
	SHLQ $SHIFT, R9; \
	LEAQ (R9)(R9*2), R10; \
	MOVQ x+24(FP), DI; \
	MOVQ c+32(FP), DX; \
	MOVQ add+48(FP), R12; \
	block:; \
	KBLOCK(Y12, Y13, Y14, Y15); \
	quad:; \
	CMPQ SI, $4; \
	JLT single; \
	TESTQ $15, SI; \
	JNE nopf; \
	PREFETCH32; \
	nopf:; \
	VBROADCASTSS (DI), Y8; \
	VBROADCASTSS 4(DI), Y9; \
	VBROADCASTSS 8(DI), Y10; \
	VBROADCASTSS 12(DI), Y11; \
	FOURGROUPS(QGROUP, LOADQ); \
	ADDQ $QSTEP, R8; \
	ADDQ $16, DI; \
	SUBQ $4, SI; \
	JMP quad; \
	single:; \
	TESTQ SI, SI; \
	JE epi; \
	VBROADCASTSS (DI), Y8; \
	FOURGROUPS(SGROUP, LOADS); \
	ADDQ $SSTEP, R8; \
	ADDQ $4, DI; \
	DECQ SI; \
	JMP single; \
	epi:; \
	VBROADCASTSS alpha+40(FP), Y8; \
	TESTQ R12, R12; \
	JNE addc; \
	STOREC(Y12, (DX)); \
	STOREC(Y13, 32(DX)); \
	STOREC(Y14, 64(DX)); \
	STOREC(Y15, 96(DX)); \
	MOVQ $1, R12; \
	JMP next; \
	addc:; \
	ADDC(Y12, (DX)); \
	ADDC(Y13, 32(DX)); \
	ADDC(Y14, 64(DX)); \
	ADDC(Y15, 96(DX)); \
	next:; \
	TESTQ CX, CX; \
	JNE block; \
	VZEROUPPER; \
	RET

// func gemv8AVX2(k int, w *float32, ldw int, x *float32, ldx, n int, c *float32, ldc int, alpha float32, add int)
// For the 8 rows j of w (stride ldw) and the n ≤ 4 rows r of x (stride
// ldx), with the k blocks of 256 of the blocked GEMM: per block,
// s = Σ_p w[j*ldw+p]·x[r*ldx+p] (a sequential FMA chain from +0), then
// c[r*ldc+j] = alpha·s (first block, add = 0) or c[r*ldc+j] += alpha·s
// (one FMA). Strides in elements.
TEXT ·gemv8AVX2(SB), NOSPLIT, $0-80
	GEMV8(LOADQ_F32, LOADS_F32, 2, 16, 4)

// func gemv32x1AVX2(k int, w *float32, ldw int, x *float32, c *float32, alpha float32, add int)
// gemv8AVX2 with n = 1 on the 32 rows of w (four groups of 8 at once, so
// that four independent FMA chains hide the FMA latency); c holds 32
// outputs.
TEXT ·gemv32x1AVX2(SB), NOSPLIT, $0-56
	GEMV32(LOADQ_F32, LOADS_F32, 2, 16, 4)
