package kernels

import (
	"fmt"

	"github.com/drmas-dev/drmas/gpu/ir"
)

// The ops of a Qwen2/Qwen3 (Llama-family) block, the CPU engine's model/arch_ops.go as
// kernels: RMSNorm (whole rows, or per head for Qwen3's q_norm/k_norm), rotary embedding in
// the rotate-half layout, SwiGLU, each with its backward. Grouped-query attention needs no
// kernel of its own: the batched GEMMs and the causal softmax run it from the tables
// NewGQATables builds, in which query head h reads key/value head h/(H/KV). Qwen2's q/k/v
// biases are bias_rows followed by the GEMM with beta = 1 (the bias starts each sum, as on
// the CPU), their gradients colsum_part/colsum_final.
//
// Layouts are the CPU engine's: a q|k|v row holds H query heads, then KV key heads, then KV
// value heads, hd words each; a gate|up row holds F gate values, then F up values.

// qwenKernels are the block's kernels, in module order.
var qwenKernels = []func() (*ir.Kernel, error){rmsFwd, rmsBwd, rmsDWPart, ropeKernel, swigluFwd, swigluBwd}

// rmsSeg starts the row kernels over (row, head) segments of d words: the reduction's shared
// array and thread index, the segment's first word in x (rows ldx words apart, heads d words
// apart), its index seg among the rows·heads segments, and hb = seg·d (xhat holds segment seg
// at hb, rstd at seg).
func rmsSeg(b *ir.Builder, d, ldx ir.Reg) (sh int, tid, xb, seg, hb ir.Reg) {
	sh = b.Shared("red", RowThreads)
	tid = b.Special(ir.TidX)
	r, h := b.Special(ir.CtaidX), b.Special(ir.CtaidY)
	xb = b.Add(b.Mul(r, ldx), b.Mul(h, d))
	seg = b.Add(b.Mul(r, b.Special(ir.NctaidY)), h)
	return sh, tid, xb, seg, b.Mul(seg, d)
}

// headWeight loads w[j] for heads below nw and w2[j] for the others (q_norm for the query
// heads, k_norm for the key heads; w = w2 for a plain RMSNorm).
func headWeight(b *ir.Builder, w, w2, nw, j ir.Reg) ir.Reg {
	v := b.Var(b.F(0))
	b.IfElse(b.Setp(ir.LT, b.Special(ir.CtaidY), nw), func() { b.Set(v, b.Ld(ir.F32, w, j)) },
		func() { b.Set(v, b.Ld(ir.F32, w2, j)) })
	return v
}

// rms_fwd: per segment of d words, r = 1/sqrt(mean(x²) + eps) (float32 statistics), xhat =
// x·r, y = w·xhat; saves xhat and r. y may be x (in place: Qwen3's q/k norms in the q|k|v
// rows). Params x, w, w2, y, xhat, rstd, d, ldx, nw, eps. Block RowThreads; grid (rows, heads)
// with segment (row, head) at x[row·ldx + head·d]; a plain RMSNorm is heads = 1, ldx = d.
func rmsFwd() (*ir.Kernel, error) {
	b := ir.NewKernel("rms_fwd")
	x, w, w2, y, xhat, rstd := b.Ptr("x"), b.Ptr("w"), b.Ptr("w2"), b.Ptr("y"), b.Ptr("xhat"), b.Ptr("rstd")
	d, ldx, nw, eps := b.IParam("d"), b.IParam("ldx"), b.IParam("nw"), b.FParam("eps")
	sh, tid, xb, seg, hb := rmsSeg(b, d, ldx)
	q := b.Var(b.F(0))
	rowLoop(b, tid, d, func(j ir.Reg) {
		v := b.Ld(ir.F32, x, b.Add(xb, j))
		b.Set(q, b.Fma(v, v, q))
	})
	ms := b.Div(blockReduce(b, sh, tid, q, b.Add), b.CvtF(d))
	rs := b.Div(b.F(1), b.Sqrt(b.Add(ms, eps)))
	rowLoop(b, tid, d, func(j ir.Reg) {
		i := b.Add(xb, j)
		h := b.Mul(b.Ld(ir.F32, x, i), rs)
		b.St(xhat, b.Add(hb, j), h)
		b.St(y, i, b.Mul(headWeight(b, w, w2, nw, j), h))
	})
	b.If(b.Setp(ir.EQ, tid, b.I(0)), func() { b.St(rstd, seg, rs) })
	return b.Build()
}

// rms_bwd: per segment, with g = dy·w: v = r·(g − xhat·mean(g·xhat)); dx = v, or dx += v when
// acc ≠ 0. dx may be dy (acc = 0: the q/k norms' gradients replace their output gradients in
// place). Params dy, xhat, rstd, w, w2, dx, d, ldx, nw, acc. Block RowThreads; grid (rows,
// heads) as rms_fwd.
func rmsBwd() (*ir.Kernel, error) {
	b := ir.NewKernel("rms_bwd")
	dy, xhat, rstd, w, w2, dx := b.Ptr("dy"), b.Ptr("xhat"), b.Ptr("rstd"), b.Ptr("w"), b.Ptr("w2"), b.Ptr("dx")
	d, ldx, nw, acc := b.IParam("d"), b.IParam("ldx"), b.IParam("nw"), b.IParam("acc")
	sh, tid, xb, seg, hb := rmsSeg(b, d, ldx)
	s := b.Var(b.F(0))
	rowLoop(b, tid, d, func(j ir.Reg) {
		g := b.Mul(b.Ld(ir.F32, dy, b.Add(xb, j)), headWeight(b, w, w2, nw, j))
		b.Set(s, b.Fma(g, b.Ld(ir.F32, xhat, b.Add(hb, j)), s))
	})
	m := b.Div(blockReduce(b, sh, tid, s, b.Add), b.CvtF(d))
	rs := b.Ld(ir.F32, rstd, seg)
	accum := b.Setp(ir.NE, acc, b.I(0))
	rowLoop(b, tid, d, func(j ir.Reg) {
		i := b.Add(xb, j)
		g := b.Mul(b.Ld(ir.F32, dy, i), headWeight(b, w, w2, nw, j))
		v := b.Var(b.Mul(rs, b.Sub(g, b.Mul(b.Ld(ir.F32, xhat, b.Add(hb, j)), m))))
		b.If(accum, func() { b.Set(v, b.Add(b.Ld(ir.F32, dx, i), v)) })
		b.St(dx, i, v)
	})
	return b.Build()
}

// rms_dw_part: the RMSNorm weight gradient's partial sums: part[c·d+j] = Σ over rows r of
// chunk c (ColChunk rows, in order), and within a row over heads h0 ≤ h < h1 (in order), of
// dy[r·ldx + h·d + j]·xhat[(r·nh + h)·d + j]; colsum_final then adds the parts into the
// gradient. Params dy, xhat, part, n, d, ldx, nh, h0, h1. Block RowThreads; grid
// (ceil(d/RowThreads), ceil(n/ColChunk)).
func rmsDWPart() (*ir.Kernel, error) {
	b := ir.NewKernel("rms_dw_part")
	dy, xhat, part := b.Ptr("dy"), b.Ptr("xhat"), b.Ptr("part")
	n, d, ldx, nh, h0, h1 := b.IParam("n"), b.IParam("d"), b.IParam("ldx"), b.IParam("nh"), b.IParam("h0"), b.IParam("h1")
	j := b.Add(b.Mul(b.Special(ir.CtaidX), b.I(RowThreads)), b.Special(ir.TidX))
	c := b.Special(ir.CtaidY)
	b.If(b.Setp(ir.LT, j, d), func() {
		lo := b.Mul(c, b.I(ColChunk))
		hi := b.Min(n, b.Add(lo, b.I(ColChunk)))
		s := b.Var(b.F(0))
		b.For(lo, hi, b.I(1), func(r ir.Reg) {
			b.For(h0, h1, b.I(1), func(h ir.Reg) {
				v := b.Ld(ir.F32, dy, b.Add(b.Add(b.Mul(r, ldx), b.Mul(h, d)), j))
				xh := b.Ld(ir.F32, xhat, b.Add(b.Mul(b.Add(b.Mul(r, nh), h), d), j))
				b.Set(s, b.Add(s, b.Mul(v, xh)))
			})
		})
		b.St(part, b.Add(b.Mul(c, d), j), s)
	})
	return b.Build()
}

// rope: rotates, in place, the first nh heads of each row of qkv (rows ld words apart, heads
// hd words apart) by the row's angles, rotate-half layout (element k pairs with k + hd/2):
// x1' = x1·cos − x2·sin', x2' = x2·cos + x1·sin' with sin' = sgn·sin; sgn = 1 is the
// forward, sgn = −1 the backward (the transposed rotation). cos and sin are the host's tables
// [rows×hd/2]. Params qkv, cos, sin, ld, hd, nh, sgn, total (= rows·nh·hd/2).
func ropeKernel() (*ir.Kernel, error) {
	return elementwise("rope", func(b *ir.Builder) func(ir.Reg) {
		qkv, cos, sin := b.Ptr("qkv"), b.Ptr("cos"), b.Ptr("sin")
		ld, hd, nh, sgn := b.IParam("ld"), b.IParam("hd"), b.IParam("nh"), b.FParam("sgn")
		return func(i ir.Reg) {
			half := b.Shr(hd, b.I(1))
			per := b.Mul(nh, half)
			r, rem := b.Div(i, per), b.Rem(i, per)
			h, k := b.Div(rem, half), b.Rem(rem, half)
			o := b.Add(b.Add(b.Mul(r, ld), b.Mul(h, hd)), k)
			o2 := b.Add(o, half)
			t := b.Add(b.Mul(r, half), k)
			c, s := b.Ld(ir.F32, cos, t), b.Mul(sgn, b.Ld(ir.F32, sin, t))
			x1, x2 := b.Ld(ir.F32, qkv, o), b.Ld(ir.F32, qkv, o2)
			b.St(qkv, o, b.Sub(b.Mul(x1, c), b.Mul(x2, s)))
			b.St(qkv, o2, b.Add(b.Mul(x2, c), b.Mul(x1, s)))
		}
	})
}

// gateUp loads the gate and up values of element i of an n×f activation from gu[n×2f].
func gateUp(b *ir.Builder, gu, f, i ir.Reg) (g, u ir.Reg) {
	r, j := b.Div(i, f), b.Rem(i, f)
	o := b.Add(b.Mul(r, b.Add(f, f)), j)
	return b.Ld(ir.F32, gu, o), b.Ld(ir.F32, gu, b.Add(o, f))
}

// sigmoid is 1/(1 + e^−g).
func sigmoid(b *ir.Builder, g ir.Reg) ir.Reg {
	return b.Div(b.F(1), b.Add(b.F(1), b.Exp(b.Neg(g))))
}

// swiglu_fwd: act[r·f+j] = silu(gate)·up = gate/(1 + e^−gate)·up. Params gu, act, f, total
// (= rows·f).
func swigluFwd() (*ir.Kernel, error) {
	return elementwise("swiglu_fwd", func(b *ir.Builder) func(ir.Reg) {
		gu, act := b.Ptr("gu"), b.Ptr("act")
		f := b.IParam("f")
		return func(i ir.Reg) {
			g, u := gateUp(b, gu, f, i)
			b.St(act, i, b.Mul(b.Div(g, b.Add(b.F(1), b.Exp(b.Neg(g)))), u))
		}
	})
}

// swiglu_bwd: with σ = sigmoid(gate): dup = dact·gate·σ, dgate = dact·up·σ·(1 + gate·(1−σ)),
// written into dgu[rows×2f] (gate | up per row). Params gu, dact, dgu, f, total (= rows·f).
func swigluBwd() (*ir.Kernel, error) {
	return elementwise("swiglu_bwd", func(b *ir.Builder) func(ir.Reg) {
		gu, dact, dgu := b.Ptr("gu"), b.Ptr("dact"), b.Ptr("dgu")
		f := b.IParam("f")
		return func(i ir.Reg) {
			g, u := gateUp(b, gu, f, i)
			sig := sigmoid(b, g)
			da := b.Ld(ir.F32, dact, i)
			r, j := b.Div(i, f), b.Rem(i, f)
			o := b.Add(b.Mul(r, b.Add(f, f)), j)
			b.St(dgu, b.Add(o, f), b.Mul(da, b.Mul(g, sig)))
			dg := b.Mul(b.Mul(b.Mul(da, u), sig), b.Add(b.F(1), b.Mul(g, b.Sub(b.F(1), sig))))
			b.St(dgu, o, dg)
		}
	})
}

// AttnSeq is one sequence of a packed attention launch: rows [Start, Start+Len) of the
// q|k|v and output buffers. The launch covers its query rows [Q0, Q0+Rows) (Rows 0: all Len,
// Q0 0) over their keys [0, Q0+Rows): query head h's map, Rows × (Q0+Rows) words, at word
// Att + h·Rows·(Q0+Rows) of the map buffer.
type AttnSeq struct{ Start, Len, Att, Q0, Rows int }

// GQATables are the tables of causal grouped-query attention over packed sequences: H query
// heads, KV key/value heads, query head h reading key/value head h/(H/KV). The q|k|v rows
// (and their gradients) are (H+2·KV)·hd words, the output rows (and dO) H·hd.
//
// Forward: gemm_nt_batched(S; alpha = 1/sqrt(hd), beta = 0) from q|k|v to the maps,
// softmax_causal(maps, Rows) on grid (max Len, sequences·H), gemm_nn_batched(O) from the maps
// and q|k|v to the output. Backward, with dqkv zeroed or not (every word is written before it
// is read): gemm_nt_batched(DP) from dO and q|k|v to dP; for i = 0..H/KV−1
// gemm_tn_batched(DV[i]; beta = 0 for i = 0, else 1) from the maps and dO into dqkv;
// softmax_causal_bwd(maps, dP, Rows); gemm_nn_batched(DQ; alpha = 1/sqrt(hd)) from dP and
// q|k|v into dqkv; for each i gemm_tn_batched(DK[i]; alpha = 1/sqrt(hd), beta as DV) from dP
// and q|k|v into dqkv. The query heads sharing a key/value head add into its gradient one
// launch after another, in head order, as on the CPU: no two blocks of a launch write one word.
// Tables of query-row blocks (AttnSeq.Rows) run block after block; as a block's dK and dV
// cover only its keys, dqkv is zeroed first and every DV and DK launch adds (beta = 1).
type GQATables struct {
	Rows         []int32   // RowTabWords per (sequence, query head): the softmax kernels' tab
	S, O, DP, DQ []int32   // TabWords per (sequence, query head)
	DV, DK       [][]int32 // per i < H/KV: TabWords per (sequence, kv head kh), query head kh·H/KV + i
	Entries      int       // sequences·H: the grid's y of the softmax kernels
	MaxLen       int       // the most query rows of a sequence: the grid's x of the softmax kernels
}

// NewGQATables builds the tables for seqs (sequences of length 0 are skipped).
func NewGQATables(seqs []AttnSeq, H, KV, hd int) (*GQATables, error) {
	if H <= 0 || KV <= 0 || H%KV != 0 || hd <= 0 {
		return nil, fmt.Errorf("kernels: attention with %d heads, %d kv heads, head dim %d: heads must be a positive multiple of kv heads", H, KV, hd)
	}
	rep, ld, od := H/KV, (H+2*KV)*hd, H*hd
	t := &GQATables{DV: make([][]int32, rep), DK: make([][]int32, rep)}
	put := func(dst *[]int32, vals ...int) {
		for _, v := range vals {
			*dst = append(*dst, int32(v))
		}
	}
	for _, s := range seqs {
		if s.Len < 0 || s.Start < 0 || s.Att < 0 || s.Q0 < 0 || s.Rows < 0 || s.Q0+s.Rows > s.Len || (s.Rows == 0 && s.Q0 != 0) {
			return nil, fmt.Errorf("kernels: attention sequence %+v: fields negative or query rows outside the sequence", s)
		}
		r, q0 := s.Rows, s.Q0
		if r == 0 {
			r = s.Len
		}
		w := q0 + r // keys [0, w)
		if r == 0 {
			continue
		}
		t.MaxLen = max(t.MaxLen, r)
		q := func(h int) int { return (s.Start+q0)*ld + h*hd } // the block's first query row
		k := func(kh int) int { return s.Start*ld + (H+kh)*hd }
		v := func(kh int) int { return s.Start*ld + (H+KV+kh)*hd }
		a := func(h int) int { return s.Att + h*r*w }
		for h := 0; h < H; h++ {
			kh, o := h/rep, (s.Start+q0)*od+h*hd
			t.Entries++
			put(&t.Rows, r, w, a(h), q0)
			// m, n, k, aOff, bOff, cOff, lda, ldb, ldc
			put(&t.S, r, w, hd, q(h), k(kh), a(h), ld, ld, w)         // S = Q·Kᵀ
			put(&t.O, r, hd, w, a(h), v(kh), o, w, ld, od)            // O = P·V
			put(&t.DP, r, w, hd, o, v(kh), a(h), od, ld, w)           // dP = dO·Vᵀ
			put(&t.DQ, r, hd, w, a(h), k(kh), q(h), w, ld, ld)        // dQ = dS·K
			put(&t.DV[h%rep], w, hd, r, a(h), o, v(kh), w, od, ld)    // dV += Pᵀ·dO
			put(&t.DK[h%rep], w, hd, r, a(h), q(h), k(kh), w, ld, ld) // dK += dSᵀ·Q
		}
	}
	return t, nil
}
