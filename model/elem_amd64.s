//go:build amd64 && !purego

#include "textflag.h"

// Constants of the vector GELU (see gelu32 in elem.go, its scalar reference).
DATA geluK<>+0(SB)/4, $0.044715        // 0
DATA geluK<>+4(SB)/4, $-1.5957691216057308 // -2·sqrt(2/pi)
DATA geluK<>+8(SB)/4, $89.0            // exp input clamp, high (2^128 = +Inf)
DATA geluK<>+12(SB)/4, $-87.3          // exp input clamp, low
DATA geluK<>+16(SB)/4, $1.44269504088896341 // log2(e)
DATA geluK<>+20(SB)/4, $0.5
DATA geluK<>+24(SB)/4, $0.693359375    // ln2 high part
DATA geluK<>+28(SB)/4, $-2.12194440e-4 // ln2 low part
DATA geluK<>+32(SB)/4, $1.9875691500e-4 // Cephes expf polynomial
DATA geluK<>+36(SB)/4, $1.3981999507e-3
DATA geluK<>+40(SB)/4, $8.3334519073e-3
DATA geluK<>+44(SB)/4, $4.1665795894e-2
DATA geluK<>+48(SB)/4, $1.6666665459e-1
DATA geluK<>+52(SB)/4, $5.0000001201e-1
DATA geluK<>+56(SB)/4, $1.0
DATA geluK<>+60(SB)/4, $127            // exponent bias (integer)
DATA geluK<>+64(SB)/4, $0.134145       // 3·0.044715
DATA geluK<>+68(SB)/4, $1.5957691216057308 // 2·sqrt(2/pi)
GLOBL geluK<>(SB), RODATA|NOPTR, $72

// EXPT computes Y5 = exp(Y1) for Y1 already clamped to [-87.3, 89];
// clobbers Y1, Y3, Y4, Y6.
#define EXPT \
	VBROADCASTSS geluK<>+16(SB), Y3; \
	VBROADCASTSS geluK<>+20(SB), Y4; \
	VFMADD213PS Y4, Y1, Y3; \
	VROUNDPS $1, Y3, Y3; \
	VBROADCASTSS geluK<>+24(SB), Y4; \
	VFNMADD231PS Y4, Y3, Y1; \
	VBROADCASTSS geluK<>+28(SB), Y4; \
	VFNMADD231PS Y4, Y3, Y1; \
	VBROADCASTSS geluK<>+32(SB), Y5; \
	VBROADCASTSS geluK<>+36(SB), Y4; \
	VFMADD213PS Y4, Y1, Y5; \
	VBROADCASTSS geluK<>+40(SB), Y4; \
	VFMADD213PS Y4, Y1, Y5; \
	VBROADCASTSS geluK<>+44(SB), Y4; \
	VFMADD213PS Y4, Y1, Y5; \
	VBROADCASTSS geluK<>+48(SB), Y4; \
	VFMADD213PS Y4, Y1, Y5; \
	VBROADCASTSS geluK<>+52(SB), Y4; \
	VFMADD213PS Y4, Y1, Y5; \
	VMULPS Y1, Y1, Y6; \
	VFMADD213PS Y1, Y6, Y5; \
	VBROADCASTSS geluK<>+56(SB), Y4; \
	VADDPS Y4, Y5, Y5; \
	VCVTPS2DQ Y3, Y3; \
	VPBROADCASTD geluK<>+60(SB), Y4; \
	VPADDD Y4, Y3, Y3; \
	VPSLLD $23, Y3, Y3; \
	VMULPS Y3, Y5, Y5

// GELUT computes, from x in Y0, Y1 = clamp(-2·sqrt(2/pi)·(x + 0.044715x³))
// (clobbers Y1, Y2).
#define GELUT \
	VMULPS Y0, Y0, Y1; \
	VBROADCASTSS geluK<>+0(SB), Y2; \
	VMULPS Y2, Y1, Y1; \
	VFMADD213PS Y0, Y0, Y1; \
	VBROADCASTSS geluK<>+4(SB), Y2; \
	VMULPS Y2, Y1, Y1; \
	VBROADCASTSS geluK<>+8(SB), Y2; \
	VMINPS Y2, Y1, Y1; \
	VBROADCASTSS geluK<>+12(SB), Y2; \
	VMAXPS Y2, Y1, Y1

// func geluAVX2(x, y *float32, n int)
// y[i] = x[i] / (1 + exp(-2z)), z = sqrt(2/pi)·(x + 0.044715x³); n % 8 == 0.
TEXT ·geluAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   gdone

gloop:
	VMOVUPS (SI), Y0
	GELUT
	EXPT
	VBROADCASTSS geluK<>+56(SB), Y4
	VADDPS Y4, Y5, Y5
	VDIVPS Y5, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  gloop

gdone:
	VZEROUPPER
	RET

// func geluBwdAVX2(x, dy *float32, n int)
// dy[i] *= s + 2·sqrt(2/pi)·x·s·(1-s)·(1 + 3·0.044715x²), s = 1/(1+exp(-2z)); n % 8 == 0.
TEXT ·geluBwdAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ dy+8(FP), DI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   bdone

bloop:
	VMOVUPS (SI), Y0
	VMULPS Y0, Y0, Y1
	VBROADCASTSS geluK<>+56(SB), Y7
	VBROADCASTSS geluK<>+64(SB), Y2
	VFMADD231PS Y2, Y1, Y7
	GELUT
	EXPT
	VBROADCASTSS geluK<>+56(SB), Y4
	VADDPS Y4, Y5, Y5
	VDIVPS Y5, Y4, Y5
	VSUBPS Y5, Y4, Y6
	VMULPS Y5, Y0, Y0
	VMULPS Y6, Y0, Y0
	VMULPS Y7, Y0, Y0
	VBROADCASTSS geluK<>+68(SB), Y2
	VFMADD213PS Y5, Y2, Y0
	VMULPS (DI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  bloop

bdone:
	VZEROUPPER
	RET

// func expAVX2(x *float32, n int)
// x[i] = exp(clamp(x[i], -87.3, 89)) in place; n % 8 == 0.
TEXT ·expAVX2(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $3, CX
	JZ   edone

eloop:
	VMOVUPS (SI), Y1
	VBROADCASTSS geluK<>+8(SB), Y2
	VMINPS Y2, Y1, Y1
	VBROADCASTSS geluK<>+12(SB), Y2
	VMAXPS Y2, Y1, Y1
	EXPT
	VMOVUPS Y5, (SI)
	ADDQ $32, SI
	DECQ CX
	JNZ  eloop

edone:
	VZEROUPPER
	RET

DATA lnOne<>+0(SB)/4, $1.0
GLOBL lnOne<>(SB), RODATA|NOPTR, $4

// HSUM folds the 8 lanes of Y0 into X0 (fixed order); clobbers X1.
#define HSUM \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVHLPS X0, X0, X1; \
	VADDPS X1, X0, X0; \
	VMOVSHDUP X0, X1; \
	VADDSS X1, X0, X0

// func lnFwdAVX2(x, gam, b, y, xhat *float32, d int, wx int, eps float32) (rstd float32)
// One LayerNorm row, d % 8 == 0, d > 0: mean and variance as 8-lane float32
// sums, h = (x-mean)·rstd (stored to xhat when wx != 0), y = h·g + b.
TEXT ·lnFwdAVX2(SB), NOSPLIT, $0-68
	MOVQ x+0(FP), SI
	MOVQ gam+8(FP), R8
	MOVQ b+16(FP), R9
	MOVQ y+24(FP), DI
	MOVQ xhat+32(FP), R10
	MOVQ d+40(FP), CX
	MOVQ wx+48(FP), R11
	VCVTSI2SSQ CX, X2, X2
	SHRQ $3, CX

	VXORPS Y0, Y0, Y0
	XORQ AX, AX
	MOVQ CX, DX
lf1:
	VADDPS (SI)(AX*1), Y0, Y0
	ADDQ $32, AX
	DECQ DX
	JNZ  lf1
	HSUM
	VDIVSS X2, X0, X0
	VBROADCASTSS X0, Y3

	VXORPS Y0, Y0, Y0
	XORQ AX, AX
	MOVQ CX, DX
lf2:
	VMOVUPS (SI)(AX*1), Y4
	VSUBPS Y3, Y4, Y4
	VFMADD231PS Y4, Y4, Y0
	ADDQ $32, AX
	DECQ DX
	JNZ  lf2
	HSUM
	VDIVSS X2, X0, X0
	VADDSS eps+56(FP), X0, X0
	VSQRTSS X0, X0, X0
	VMOVSS lnOne<>(SB), X5
	VDIVSS X0, X5, X5
	VMOVSS X5, rstd+64(FP)
	VBROADCASTSS X5, Y5

	XORQ AX, AX
	MOVQ CX, DX
lf3:
	VMOVUPS (SI)(AX*1), Y4
	VSUBPS Y3, Y4, Y4
	VMULPS Y5, Y4, Y4
	TESTQ R11, R11
	JZ   lf3n
	VMOVUPS Y4, (R10)(AX*1)
lf3n:
	VMOVUPS (R9)(AX*1), Y7
	VFMADD231PS (R8)(AX*1), Y4, Y7
	VMOVUPS Y7, (DI)(AX*1)
	ADDQ $32, AX
	DECQ DX
	JNZ  lf3
	VZEROUPPER
	RET

// func lnBwdAVX2(dy, xhat, gam, dx *float32, d int, rstd float32)
// One LayerNorm row, d % 8 == 0, d > 0: dh = dy·g,
// dx += rstd·(dh - mean(dh) - xhat·mean(dh·xhat)).
TEXT ·lnBwdAVX2(SB), NOSPLIT, $0-44
	MOVQ dy+0(FP), SI
	MOVQ xhat+8(FP), R9
	MOVQ gam+16(FP), R8
	MOVQ dx+24(FP), DI
	MOVQ d+32(FP), CX
	VCVTSI2SSQ CX, X2, X2
	SHRQ $3, CX

	VXORPS Y0, Y0, Y0
	VXORPS Y6, Y6, Y6
	XORQ AX, AX
	MOVQ CX, DX
lb1:
	VMOVUPS (SI)(AX*1), Y4
	VMULPS (R8)(AX*1), Y4, Y4
	VADDPS Y4, Y0, Y0
	VFMADD231PS (R9)(AX*1), Y4, Y6
	ADDQ $32, AX
	DECQ DX
	JNZ  lb1
	HSUM
	VDIVSS X2, X0, X0
	VBROADCASTSS X0, Y3
	VMOVAPS Y6, Y0
	HSUM
	VDIVSS X2, X0, X0
	VBROADCASTSS X0, Y5
	VBROADCASTSS rstd+40(FP), Y7

	XORQ AX, AX
	MOVQ CX, DX
lb2:
	VMOVUPS (SI)(AX*1), Y4
	VMULPS (R8)(AX*1), Y4, Y4
	VSUBPS Y3, Y4, Y4
	VMOVUPS (R9)(AX*1), Y1
	VFNMADD231PS Y5, Y1, Y4
	VMOVUPS (DI)(AX*1), Y1
	VFMADD231PS Y7, Y4, Y1
	VMOVUPS Y1, (DI)(AX*1)
	ADDQ $32, AX
	DECQ DX
	JNZ  lb2
	VZEROUPPER
	RET

// func addAVX2(x, y *float32, n int)
// x[i] += y[i]; n % 32 == 0.
TEXT ·addAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), DI
	MOVQ y+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	JZ   adone

aloop:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VADDPS (SI), Y0, Y0
	VADDPS 32(SI), Y1, Y1
	VADDPS 64(SI), Y2, Y2
	VADDPS 96(SI), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $128, SI
	DECQ CX
	JNZ  aloop

adone:
	VZEROUPPER
	RET

DATA swSign<>+0(SB)/4, $0x80000000
GLOBL swSign<>(SB), RODATA|NOPTR, $4

// NEGEXPT computes Y5 = exp(clamp(−Y0)) as negation then expAVX2 would (the
// same instructions); clobbers Y1, Y2, Y3, Y4, Y6.
#define NEGEXPT \
	VBROADCASTSS swSign<>(SB), Y1; \
	VXORPS Y1, Y0, Y1; \
	VBROADCASTSS geluK<>+8(SB), Y2; \
	VMINPS Y2, Y1, Y1; \
	VBROADCASTSS geluK<>+12(SB), Y2; \
	VMAXPS Y2, Y1, Y1; \
	EXPT

// func swigluAVX2(gate, up, a *float32, n int)
// a[i] = g[i] / (1 + exp(-g[i])) * u[i]; n % 8 == 0.
TEXT ·swigluAVX2(SB), NOSPLIT, $0-32
	MOVQ gate+0(FP), SI
	MOVQ up+8(FP), DX
	MOVQ a+16(FP), DI
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   swdone

swloop:
	VMOVUPS (SI), Y0
	NEGEXPT
	VBROADCASTSS geluK<>+56(SB), Y4
	VADDPS Y4, Y5, Y5
	VDIVPS Y5, Y0, Y0
	VMULPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  swloop

swdone:
	VZEROUPPER
	RET

// func swigluBwdAVX2(gate, up, da, dg, du *float32, n int)
// sig = 1/(1+exp(-g)); du = da·(g·sig); dg = ((da·u)·sig)·(1 + g·(1-sig)); n % 8 == 0.
TEXT ·swigluBwdAVX2(SB), NOSPLIT, $0-48
	MOVQ gate+0(FP), SI
	MOVQ up+8(FP), DX
	MOVQ da+16(FP), BX
	MOVQ dg+24(FP), DI
	MOVQ du+32(FP), R8
	MOVQ n+40(FP), CX
	SHRQ $3, CX
	JZ   sbdone

sbloop:
	VMOVUPS (SI), Y0
	NEGEXPT
	VBROADCASTSS geluK<>+56(SB), Y4
	VADDPS Y4, Y5, Y5
	VDIVPS Y5, Y4, Y7
	VMULPS Y7, Y0, Y8
	VMOVUPS (BX), Y9
	VMULPS Y8, Y9, Y8
	VMOVUPS Y8, (R8)
	VMULPS (DX), Y9, Y9
	VMULPS Y7, Y9, Y9
	VSUBPS Y7, Y4, Y10
	VMULPS Y10, Y0, Y10
	VADDPS Y10, Y4, Y10
	VMULPS Y10, Y9, Y9
	VMOVUPS Y9, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, BX
	ADDQ $32, DI
	ADDQ $32, R8
	DECQ CX
	JNZ  sbloop

sbdone:
	VZEROUPPER
	RET

// func logitGradAVX2(z, p, dz *float32, n int, ndlp, de, invT, lse, h float64)
// dz[i] = float32((ndlp·p[i] − de·p[i]·((z[i]·invT − lse) + h))·invT) in float64, the
// entropy term only when de != 0 (then z is read); n % 8 == 0.
TEXT ·logitGradAVX2(SB), NOSPLIT, $0-72
	MOVQ z+0(FP), SI
	MOVQ p+8(FP), DX
	MOVQ dz+16(FP), DI
	MOVQ n+24(FP), CX
	VBROADCASTSD ndlp+32(FP), Y8
	VBROADCASTSD de+40(FP), Y9
	VBROADCASTSD invT+48(FP), Y10
	VBROADCASTSD lse+56(FP), Y11
	VBROADCASTSD h+64(FP), Y12
	SHRQ $3, CX
	JZ   lgdone
	MOVSD de+40(FP), X0
	XORPD X1, X1
	UCOMISD X1, X0
	JNE  lgent
	JP   lgent

lgloop:
	VCVTPS2PD (DX), Y0
	VCVTPS2PD 16(DX), Y1
	VMULPD Y0, Y8, Y0
	VMULPD Y1, Y8, Y1
	VMULPD Y10, Y0, Y0
	VMULPD Y10, Y1, Y1
	VCVTPD2PSY Y0, X0
	VCVTPD2PSY Y1, X1
	VMOVUPS X0, (DI)
	VMOVUPS X1, 16(DI)
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  lgloop
	JMP  lgdone

lgent:
	VCVTPS2PD (DX), Y0
	VCVTPS2PD 16(DX), Y1
	VCVTPS2PD (SI), Y2
	VCVTPS2PD 16(SI), Y3
	VMULPD Y10, Y2, Y2
	VMULPD Y10, Y3, Y3
	VSUBPD Y11, Y2, Y2
	VSUBPD Y11, Y3, Y3
	VADDPD Y12, Y2, Y2
	VADDPD Y12, Y3, Y3
	VMULPD Y0, Y9, Y4
	VMULPD Y1, Y9, Y5
	VMULPD Y2, Y4, Y4
	VMULPD Y3, Y5, Y5
	VMULPD Y0, Y8, Y0
	VMULPD Y1, Y8, Y1
	VSUBPD Y4, Y0, Y0
	VSUBPD Y5, Y1, Y1
	VMULPD Y10, Y0, Y0
	VMULPD Y10, Y1, Y1
	VCVTPD2PSY Y0, X0
	VCVTPD2PSY Y1, X1
	VMOVUPS X0, (DI)
	VMOVUPS X1, 16(DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  lgent

lgdone:
	VZEROUPPER
	RET

DATA negInf<>+0(SB)/8, $0xfff0000000000000
GLOBL negInf<>(SB), RODATA|NOPTR, $8

// func scaledMaxAVX2(z *float32, n int, invT float64, lanes *[8]float64)
// lanes[i] = the running max, u > m ? u : m from −Inf, of u = z[j]·invT (float64) over j ≡ i
// mod 8 (VMAXPD's rule with u first: NaN and equal values keep m); n % 8 == 0, n > 0.
TEXT ·scaledMaxAVX2(SB), NOSPLIT, $0-32
	MOVQ z+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSD invT+16(FP), Y8
	MOVQ lanes+24(FP), DI
	VBROADCASTSD negInf<>(SB), Y0
	VMOVAPD Y0, Y1
	SHRQ $3, CX

smloop:
	VCVTPS2PD (SI), Y2
	VCVTPS2PD 16(SI), Y3
	VMULPD Y8, Y2, Y2
	VMULPD Y8, Y3, Y3
	VMAXPD Y0, Y2, Y0
	VMAXPD Y1, Y3, Y1
	ADDQ $32, SI
	DECQ CX
	JNZ  smloop
	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	VZEROUPPER
	RET

// func shiftScaledAVX2(z, e *float32, n int, invT, mx float64)
// e[i] = float32(float64(z[i])·invT − mx); n % 8 == 0, n > 0.
TEXT ·shiftScaledAVX2(SB), NOSPLIT, $0-40
	MOVQ z+0(FP), SI
	MOVQ e+8(FP), DI
	MOVQ n+16(FP), CX
	VBROADCASTSD invT+24(FP), Y8
	VBROADCASTSD mx+32(FP), Y9
	SHRQ $3, CX

ssloop:
	VCVTPS2PD (SI), Y2
	VCVTPS2PD 16(SI), Y3
	VMULPD Y8, Y2, Y2
	VMULPD Y8, Y3, Y3
	VSUBPD Y9, Y2, Y2
	VSUBPD Y9, Y3, Y3
	VCVTPD2PSY Y2, X2
	VCVTPD2PSY Y3, X3
	VMOVUPS X2, (DI)
	VMOVUPS X3, 16(DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  ssloop
	VZEROUPPER
	RET

DATA clampL64<>+0(SB)/8, $-87.3
GLOBL clampL64<>(SB), RODATA|NOPTR, $8

// func probsFromExpAVX2(z, e *float32, n int, invT, mx, inv float64)
// e[i] = float32((z[i]·invT − mx < −87.3 ? 0 : float64(e[i]))·inv), the comparison in
// float64 (false for NaN, as Go's); n % 8 == 0, n > 0.
TEXT ·probsFromExpAVX2(SB), NOSPLIT, $0-48
	MOVQ z+0(FP), SI
	MOVQ e+8(FP), DI
	MOVQ n+16(FP), CX
	VBROADCASTSD invT+24(FP), Y8
	VBROADCASTSD mx+32(FP), Y9
	VBROADCASTSD inv+40(FP), Y10
	VBROADCASTSD clampL64<>(SB), Y11
	SHRQ $3, CX

pfloop:
	VCVTPS2PD (SI), Y2
	VCVTPS2PD 16(SI), Y3
	VMULPD Y8, Y2, Y2
	VMULPD Y8, Y3, Y3
	VSUBPD Y9, Y2, Y2
	VSUBPD Y9, Y3, Y3
	VCMPPD $0x11, Y11, Y2, Y2
	VCMPPD $0x11, Y11, Y3, Y3
	VCVTPS2PD (DI), Y4
	VCVTPS2PD 16(DI), Y5
	VANDNPD Y4, Y2, Y4
	VANDNPD Y5, Y3, Y5
	VMULPD Y10, Y4, Y4
	VMULPD Y10, Y5, Y5
	VCVTPD2PSY Y4, X4
	VCVTPD2PSY Y5, X5
	VMOVUPS X4, (DI)
	VMOVUPS X5, 16(DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  pfloop
	VZEROUPPER
	RET

// func maxAVX2(x *float32, n int) float32
// The largest element of x[0:n] that is not NaN, -Inf for none; n % 32 == 0. VMAXPS keeps
// its second operand when the first is NaN or not greater, as shiftExp's scalar loop does.
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	MOVL $0xff800000, AX
	MOVL AX, X0
	VBROADCASTSS X0, Y0
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	SHRQ $5, CX
	JZ   mxdone

mxloop:
	VMOVUPS (DI), Y4
	VMOVUPS 32(DI), Y5
	VMOVUPS 64(DI), Y6
	VMOVUPS 96(DI), Y7
	VMAXPS Y0, Y4, Y0
	VMAXPS Y1, Y5, Y1
	VMAXPS Y2, Y6, Y2
	VMAXPS Y3, Y7, Y3
	ADDQ $128, DI
	DECQ CX
	JNZ  mxloop

mxdone:
	VMAXPS Y1, Y0, Y0
	VMAXPS Y3, Y2, Y2
	VMAXPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	VZEROUPPER
	MOVSS X0, ret+16(FP)
	RET

// func subAVX2(x *float32, n int, v float32)
// x[i] -= v; n % 32 == 0.
TEXT ·subAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS v+16(FP), Y0
	SHRQ $5, CX
	JZ   sbdone

sbloop:
	VMOVUPS (DI), Y1
	VMOVUPS 32(DI), Y2
	VMOVUPS 64(DI), Y3
	VMOVUPS 96(DI), Y4
	VSUBPS Y0, Y1, Y1
	VSUBPS Y0, Y2, Y2
	VSUBPS Y0, Y3, Y3
	VSUBPS Y0, Y4, Y4
	VMOVUPS Y1, (DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y3, 64(DI)
	VMOVUPS Y4, 96(DI)
	ADDQ $128, DI
	DECQ CX
	JNZ  sbloop

sbdone:
	VZEROUPPER
	RET

// func scaleAVX2(x *float32, n int, f float32)
// x[i] *= f; n % 32 == 0.
TEXT ·scaleAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS f+16(FP), Y0
	SHRQ $5, CX
	JZ   scdone

scloop:
	VMULPS (DI), Y0, Y1
	VMULPS 32(DI), Y0, Y2
	VMULPS 64(DI), Y0, Y3
	VMULPS 96(DI), Y0, Y4
	VMOVUPS Y1, (DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y3, 64(DI)
	VMOVUPS Y4, 96(DI)
	ADDQ $128, DI
	DECQ CX
	JNZ  scloop

scdone:
	VZEROUPPER
	RET
