//go:build amd64 && !purego

#include "textflag.h"

// PFD: how far ahead in each row the kernel prefetches, in bytes (a line
// per row every 4 steps). Measured with BenchmarkGemv32x1Kernels: 192-320
// stream the head ~25 % faster than no prefetch, 512 and more no faster.
#define PFD 256

// The one-row small-M kernel of gemv.go on AVX-512: 16 outputs a zmm, 4
// columns of 16 rows transposed in registers (a 4×4 transpose inside each
// 128-bit lane, the rows 4L..4L+3 loaded into lane L), so that each lane
// keeps the k-ordered FMA chain of kern6x16AVX2 and gemv8AVX2.

// TRANSPOSE4Z: the 128-bit lane L of Zi holds 4 columns of row 4L+i;
// afterwards Zi element j = row j, column i.
#define TRANSPOSE4Z \
	VUNPCKLPS Z1, Z0, Z4; \
	VUNPCKHPS Z1, Z0, Z5; \
	VUNPCKLPS Z3, Z2, Z6; \
	VUNPCKHPS Z3, Z2, Z7; \
	VSHUFPS $0x44, Z6, Z4, Z0; \
	VSHUFPS $0xEE, Z6, Z4, Z1; \
	VSHUFPS $0x44, Z7, Z5, Z2; \
	VSHUFPS $0xEE, Z7, Z5, Z3

// LOADQZ: columns p..p+3 of the 16 rows at P0, P4, P8, P12 (rows 0, 4, 8,
// 12; row stride R9, R10 = 3·R9) into Z0..Z3, before TRANSPOSE4Z.
#define LOADQZ(P0, P4, P8, P12) \
	VMOVUPS (P0), X0; \
	VINSERTF32X4 $1, (P4), Z0, Z0; \
	VINSERTF32X4 $2, (P8), Z0, Z0; \
	VINSERTF32X4 $3, (P12), Z0, Z0; \
	VMOVUPS (P0)(R9*1), X1; \
	VINSERTF32X4 $1, (P4)(R9*1), Z1, Z1; \
	VINSERTF32X4 $2, (P8)(R9*1), Z1, Z1; \
	VINSERTF32X4 $3, (P12)(R9*1), Z1, Z1; \
	VMOVUPS (P0)(R9*2), X2; \
	VINSERTF32X4 $1, (P4)(R9*2), Z2, Z2; \
	VINSERTF32X4 $2, (P8)(R9*2), Z2, Z2; \
	VINSERTF32X4 $3, (P12)(R9*2), Z2, Z2; \
	VMOVUPS (P0)(R10*1), X3; \
	VINSERTF32X4 $1, (P4)(R10*1), Z3, Z3; \
	VINSERTF32X4 $2, (P8)(R10*1), Z3, Z3; \
	VINSERTF32X4 $3, (P12)(R10*1), Z3, Z3

// QGROUPZ: 16 rows times the 4 x values broadcast in Z8..Z11, into ACC.
#define QGROUPZ(P0, P4, P8, P12, ACC) \
	LOADQZ(P0, P4, P8, P12); \
	TRANSPOSE4Z; \
	VFMADD231PS Z8, Z0, ACC; \
	VFMADD231PS Z9, Z1, ACC; \
	VFMADD231PS Z10, Z2, ACC; \
	VFMADD231PS Z11, Z3, ACC

// LOADS4: column p of the rows at P, P+R9, P+2·R9, P+R10 into X.
#define LOADS4(P, X) \
	VMOVSS (P), X; \
	VINSERTPS $0x10, (P)(R9*1), X, X; \
	VINSERTPS $0x20, (P)(R9*2), X, X; \
	VINSERTPS $0x30, (P)(R10*1), X, X

// SGROUPZ: column p of the 16 rows times x[p] (Z8), into ACC.
#define SGROUPZ(P0, P4, P8, P12, ACC) \
	LOADS4(P0, X0); \
	LOADS4(P4, X1); \
	LOADS4(P8, X2); \
	LOADS4(P12, X3); \
	VINSERTF32X4 $1, X1, Z0, Z0; \
	VINSERTF32X4 $2, X2, Z0, Z0; \
	VINSERTF32X4 $3, X3, Z0, Z0; \
	VFMADD231PS Z8, Z0, ACC

// PREFETCH4: the line D bytes ahead in the 4 rows at P (stride R9).
#define PREFETCH4(D, P) \
	PREFETCHT0 D(P); \
	PREFETCHT0 D(P)(R9*1); \
	PREFETCHT0 D(P)(R9*2); \
	PREFETCHT0 D(P)(R10*1)

// PREFETCHROWS: the line D bytes ahead in each of the 16 rows at P0..P12.
#define PREFETCHROWS(D, P0, P4, P8, P12) \
	PREFETCH4(D, P0); \
	PREFETCH4(D, P4); \
	PREFETCH4(D, P8); \
	PREFETCH4(D, P12)

// STEPALL: the 8 row pointers on by N bytes.
#define STEPALL(N) \
	ADDQ $N, R8; \
	ADDQ $N, R11; \
	ADDQ $N, R12; \
	ADDQ $N, R13; \
	ADDQ $N, R14; \
	ADDQ $N, AX; \
	ADDQ $N, BX; \
	ADDQ $N, DX

// func gemv32x1AVX512(k int, w *float32, ldw int, x *float32, c *float32, alpha float32, add int)
// gemv32x1AVX2 on AVX-512: the 32 rows of w as two groups of 16 (two
// independent FMA chains), per k block of 256 a chain from +0, then
// c = alpha·s (first block, add = 0) or c += alpha·s (one FMA). Each row's
// next lines are prefetched PFD bytes ahead (32 interleaved streams are
// more than the hardware prefetcher keeps ahead of).
TEXT ·gemv32x1AVX512(SB), NOSPLIT, $0-56
	MOVQ k+0(FP), CX
	MOVQ w+8(FP), R8
	MOVQ ldw+16(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10
	MOVQ x+24(FP), DI
	LEAQ (R8)(R9*4), R11
	LEAQ (R8)(R9*8), R12
	LEAQ (R11)(R9*8), R13
	LEAQ (R12)(R9*8), R14
	LEAQ (R13)(R9*8), AX
	LEAQ (R14)(R9*8), BX
	LEAQ (AX)(R9*8), DX

block:
	MOVQ $256, SI
	CMPQ CX, SI
	CMOVQLT CX, SI
	SUBQ SI, CX
	VXORPS Z12, Z12, Z12
	VXORPS Z13, Z13, Z13

quad:
	CMPQ SI, $4
	JLT single
	TESTQ $15, SI // once a line: every 4 steps
	JNE nopf
	PREFETCHROWS(PFD, R8, R11, R12, R13)
	PREFETCHROWS(PFD, R14, AX, BX, DX)

nopf:
	VBROADCASTSS (DI), Z8
	VBROADCASTSS 4(DI), Z9
	VBROADCASTSS 8(DI), Z10
	VBROADCASTSS 12(DI), Z11
	QGROUPZ(R8, R11, R12, R13, Z12)
	QGROUPZ(R14, AX, BX, DX, Z13)
	STEPALL(16)
	ADDQ $16, DI
	SUBQ $4, SI
	JMP quad

single:
	TESTQ SI, SI
	JE epi
	VBROADCASTSS (DI), Z8
	SGROUPZ(R8, R11, R12, R13, Z12)
	SGROUPZ(R14, AX, BX, DX, Z13)
	STEPALL(4)
	ADDQ $4, DI
	DECQ SI
	JMP single

epi:
	// A later block of this call, or add set: c += alpha·s.
	VBROADCASTSS alpha+40(FP), Z8
	MOVQ k+0(FP), SI
	SUBQ CX, SI
	CMPQ SI, $256
	MOVQ c+32(FP), SI
	JGT addc
	CMPQ add+48(FP), $0
	JNE addc
	VMULPS Z12, Z8, Z0
	VMOVUPS Z0, (SI)
	VMULPS Z13, Z8, Z0
	VMOVUPS Z0, 64(SI)
	JMP next

addc:
	VMOVUPS (SI), Z0
	VFMADD231PS Z12, Z8, Z0
	VMOVUPS Z0, (SI)
	VMOVUPS 64(SI), Z0
	VFMADD231PS Z13, Z8, Z0
	VMOVUPS Z0, 64(SI)

next:
	TESTQ CX, CX
	JNE block
	VZEROUPPER
	RET
