package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/model"
)

// qwenTol is the float32 tolerance of the Qwen kernels against the CPU engine's ops:
// |got − want| ≤ qwenTol·(1 + |want|). The kernels reduce in a different order (a block's
// fixed tree instead of an index-ordered float64 sum) and use ex2.approx for exp, so they
// agree to a few ulps, not bit for bit; a wrong formula, index or head mapping is off by
// orders of magnitude more.
const qwenTol = 2e-5

// closeTo fails t at the first element of got outside qwenTol of want and logs the worst
// difference.
func closeTo(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst := 0.0
	for i := range got {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if !(d <= qwenTol*(1+math.Abs(float64(want[i])))) {
			t.Fatalf("%s[%d] = %v, CPU engine %v", what, i, got[i], want[i])
		}
		worst = max(worst, d)
	}
	t.Logf("%s: %d values, worst |diff| %.3g", what, len(got), worst)
}

func (d dev) launch(name string, grid, block [3]int, args ...ir.Arg) {
	d.t.Helper()
	if err := d.in.Launch(name, grid, block, args...); err != nil {
		d.t.Fatalf("%s: %v", name, err)
	}
}

func (d dev) ibuf(v []int32) ir.Ptr {
	p, err := d.in.Alloc(len(v))
	if err != nil {
		d.t.Fatal(err)
	}
	if err := d.in.WriteI32(p, v); err != nil {
		d.t.Fatal(err)
	}
	return p
}

func ewGrid(total int) [3]int { return [3]int{(total + RowThreads - 1) / RowThreads, 1, 1} }

var rowBlk = [3]int{RowThreads, 1, 1}

// dwSum runs rms_dw_part and colsum_final over heads [h0, h1) into a zeroed d-word gradient.
func (d dev) dwSum(dy, xhat ir.Ptr, n, dim, ldx, nh, h0, h1 int) []float32 {
	d.t.Helper()
	chunks := (n + ColChunk - 1) / ColChunk
	part, out := d.buf(make([]float32, chunks*dim)), d.buf(make([]float32, dim))
	d.launch("rms_dw_part", [3]int{(dim + RowThreads - 1) / RowThreads, chunks, 1}, rowBlk,
		ir.ArgP(dy), ir.ArgP(xhat), ir.ArgP(part), ir.ArgI(n), ir.ArgI(dim), ir.ArgI(ldx), ir.ArgI(nh), ir.ArgI(h0), ir.ArgI(h1))
	d.launch("colsum_final", ewGrid(dim), rowBlk, ir.ArgP(part), ir.ArgP(out), ir.ArgI(chunks), ir.ArgI(dim), ir.ArgI(dim))
	return d.read(out, dim)
}

// TestRMSNormMatchesCPU: rms_fwd, rms_bwd (accumulating into dx) and the weight gradient
// (rms_dw_part over two row chunks, colsum_final) against model's rmsNorm and
// rmsNormBackward, for rows longer than a block (d > RowThreads) with values far from 1.
func TestRMSNormMatchesCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	d := dev{t, ir.NewInterp(all(t))}
	const n, dim, eps = ColChunk + 5, 300, 1e-6
	ref := model.BlockRef{Eps: eps}
	x, w := randF(r, n*dim), randF(r, dim)
	for i := range x {
		x[i] *= float32(1 + i%7*10) // rows of different scales
	}
	y, xhat, rstd := ref.RMSNorm(x, n, w)
	px, pw := d.buf(x), d.buf(w)
	py, pxh, prs := d.buf(make([]float32, n*dim)), d.buf(make([]float32, n*dim)), d.buf(make([]float32, n))
	d.launch("rms_fwd", [3]int{n, 1, 1}, rowBlk, ir.ArgP(px), ir.ArgP(pw), ir.ArgP(pw), ir.ArgP(py), ir.ArgP(pxh), ir.ArgP(prs),
		ir.ArgI(dim), ir.ArgI(dim), ir.ArgI(1), ir.ArgF(eps))
	closeTo(t, "rms_fwd y", d.read(py, n*dim), y)
	closeTo(t, "rms_fwd xhat", d.read(pxh, n*dim), xhat)
	closeTo(t, "rms_fwd rstd", d.read(prs, n), rstd)

	dy, dx0 := randF(r, n*dim), randF(r, n*dim)
	dx, dw := ref.RMSNormBackward(dy, xhat, rstd, n, w, dx0)
	pdy, pdx := d.buf(dy), d.buf(dx0)
	d.launch("rms_bwd", [3]int{n, 1, 1}, rowBlk, ir.ArgP(pdy), ir.ArgP(pxh), ir.ArgP(prs), ir.ArgP(pw), ir.ArgP(pw), ir.ArgP(pdx),
		ir.ArgI(dim), ir.ArgI(dim), ir.ArgI(1), ir.ArgI(1))
	closeTo(t, "rms_bwd dx", d.read(pdx, n*dim), dx)
	closeTo(t, "rms dw", d.dwSum(pdy, pxh, n, dim, dim, 1, 0, 1), dw)
}

// qwenShape is a small GQA block: 4 query heads over 2 kv heads (each kv head serves two
// query heads), head dim 16.
var qwenShape = model.BlockRef{Heads: 4, KVHeads: 2, HeadDim: 16, Intermediate: 40, Eps: 1e-6}

// TestQKNormMatchesCPU: Qwen3's per-head q_norm/k_norm as rms_fwd over (row, head) segments
// of the q|k|v rows, in place, and its backward (rms_dw_part per weight, then rms_bwd in
// place), against model's qkNorm and qkNormBackward; the v heads must stay untouched.
func TestQKNormMatchesCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	d := dev{t, ir.NewInterp(all(t))}
	b := qwenShape
	const n = 7
	H, nh, hd, ld := b.Heads, b.Heads+b.KVHeads, b.HeadDim, b.QKVWidth()
	qkv, qn, kn := randF(r, n*ld), randF(r, hd), randF(r, hd)
	want := append([]float32(nil), qkv...)
	xhat, rstd, err := b.QKNorm(want, n, qn, kn)
	if err != nil {
		t.Fatal(err)
	}
	pq, pqn, pkn := d.buf(qkv), d.buf(qn), d.buf(kn)
	pxh, prs := d.buf(make([]float32, n*nh*hd)), d.buf(make([]float32, n*nh))
	d.launch("rms_fwd", [3]int{n, nh, 1}, rowBlk, ir.ArgP(pq), ir.ArgP(pqn), ir.ArgP(pkn), ir.ArgP(pq), ir.ArgP(pxh), ir.ArgP(prs),
		ir.ArgI(hd), ir.ArgI(ld), ir.ArgI(H), ir.ArgF(float32(b.Eps)))
	got := d.read(pq, n*ld)
	closeTo(t, "q/k norm qkv", got, want)
	for i := range got {
		if i%ld >= nh*hd && math.Float32bits(got[i]) != math.Float32bits(qkv[i]) {
			t.Fatalf("q/k norm changed v word %d", i)
		}
	}
	closeTo(t, "q/k norm xhat", d.read(pxh, n*nh*hd), xhat)
	closeTo(t, "q/k norm rstd", d.read(prs, n*nh), rstd)

	dq := randF(r, n*ld)
	wantD := append([]float32(nil), dq...)
	dqn, dkn, err := b.QKNormBackward(wantD, n, qn, kn, xhat, rstd)
	if err != nil {
		t.Fatal(err)
	}
	pd := d.buf(dq)
	closeTo(t, "q_norm dw", d.dwSum(pd, pxh, n, hd, ld, nh, 0, H), dqn)
	closeTo(t, "k_norm dw", d.dwSum(pd, pxh, n, hd, ld, nh, H, nh), dkn)
	d.launch("rms_bwd", [3]int{n, nh, 1}, rowBlk, ir.ArgP(pd), ir.ArgP(pxh), ir.ArgP(prs), ir.ArgP(pqn), ir.ArgP(pkn), ir.ArgP(pd),
		ir.ArgI(hd), ir.ArgI(ld), ir.ArgI(H), ir.ArgI(0))
	closeTo(t, "q/k norm dqkv", d.read(pd, n*ld), wantD)
}

// TestRopeMatchesCPU: rope (sgn 1) and its backward (sgn −1) on the q and k heads with the
// CPU engine's cos/sin tables, at positions past 128 and Qwen's theta, against model's rope;
// the v heads stay untouched.
func TestRopeMatchesCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	d := dev{t, ir.NewInterp(all(t))}
	b := qwenShape
	pos := []int32{0, 1, 2, 130, 131, 1000, 4095, 7}
	n, nh, hd, ld := len(pos), b.Heads+b.KVHeads, b.HeadDim, b.QKVWidth()
	cos, sin := b.RopeTable(pos, 1e6)
	qkv := randF(r, n*ld)
	pq, pc, ps := d.buf(qkv), d.buf(cos), d.buf(sin)
	total := n * nh * hd / 2
	for _, inverse := range []bool{false, true} {
		want := append([]float32(nil), d.read(pq, n*ld)...)
		before := append([]float32(nil), want...)
		if err := b.Rope(want, n, cos, sin, inverse); err != nil {
			t.Fatal(err)
		}
		sgn := float32(1)
		if inverse {
			sgn = -1
		}
		d.launch("rope", ewGrid(total), rowBlk, ir.ArgP(pq), ir.ArgP(pc), ir.ArgP(ps), ir.ArgI(ld), ir.ArgI(hd), ir.ArgI(nh), ir.ArgF(sgn), ir.ArgI(total))
		got := d.read(pq, n*ld)
		closeTo(t, map[bool]string{false: "rope", true: "rope inverse"}[inverse], got, want)
		moved := 0
		for i := range got {
			if i%ld >= nh*hd && got[i] != before[i] {
				t.Fatalf("rope changed v word %d", i)
			}
			if got[i] != before[i] {
				moved++
			}
		}
		if moved < n*nh*hd/2 {
			t.Fatalf("rope moved only %d of %d q/k words", moved, n*nh*hd)
		}
	}
	closeTo(t, "rope then inverse", d.read(pq, n*ld), qkv)
}

// TestSwiGLUMatchesCPU: swiglu_fwd and swiglu_bwd against model's swiglu and
// swigluBackward, gates from −12 to 12 (both tails of the sigmoid).
func TestSwiGLUMatchesCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	d := dev{t, ir.NewInterp(all(t))}
	b := qwenShape
	const n = 5
	F := b.Intermediate
	gu := randF(r, n*2*F)
	for i := range gu {
		gu[i] *= 4
	}
	gu[0], gu[1] = -12, 12
	act := b.SwiGLU(gu, n)
	dact := randF(r, n*F)
	dgu := b.SwiGLUBackward(gu, dact, n)
	pg, pa := d.buf(gu), d.buf(make([]float32, n*F))
	d.launch("swiglu_fwd", ewGrid(n*F), rowBlk, ir.ArgP(pg), ir.ArgP(pa), ir.ArgI(F), ir.ArgI(n*F))
	closeTo(t, "swiglu_fwd", d.read(pa, n*F), act)
	pda, pdg := d.buf(dact), d.buf(make([]float32, n*2*F))
	d.launch("swiglu_bwd", ewGrid(n*F), rowBlk, ir.ArgP(pg), ir.ArgP(pda), ir.ArgP(pdg), ir.ArgI(F), ir.ArgI(n*F))
	closeTo(t, "swiglu_bwd", d.read(pdg, n*2*F), dgu)
}

// TestGQAMatchesCPU: causal grouped-query attention from NewGQATables' launches (batched
// GEMMs, softmax_causal and its backward) against model's gqaForward and gqaBackward, for
// packed sequences of different lengths (one empty), with 2 and 4 query heads per kv head,
// over whole maps and in blocks of 3 query rows (tables block after block, ragged last blocks,
// dK and dV added over blocks). With whole maps dqkv starts as the interpreter's poison (NaN):
// every word must be written before it is read; with blocks it starts zeroed.
func TestGQAMatchesCPU(t *testing.T) {
	for _, shape := range []struct{ H, KV, block int }{{4, 2, 0}, {4, 1, 0}, {4, 2, 3}, {4, 1, 3}} {
		r := rand.New(rand.NewPCG(29, uint64(shape.H*10+shape.KV)))
		d := dev{t, ir.NewInterp(all(t))}
		b := model.BlockRef{Heads: shape.H, KVHeads: shape.KV, HeadDim: 8}
		lens := []int{5, 0, 9}
		H, hd, ld, od := b.Heads, b.HeadDim, b.QKVWidth(), b.Heads*b.HeadDim
		tbs, rows, maps := gqaBlockTables(t, lens, H, b.KVHeads, hd, shape.block)
		qkv, dO := randF(r, rows*ld), randF(r, rows*od)
		want, err := b.GQA(qkv, lens)
		if err != nil {
			t.Fatal(err)
		}
		wantD, err := b.GQABackward(qkv, dO, lens)
		if err != nil {
			t.Fatal(err)
		}
		scale := float32(1 / math.Sqrt(float64(hd)))
		batched := func(ta, tb bool, tab []int32, alpha, beta float32, a, bb, c ir.Ptr) {
			maxM, maxN := 0, 0
			for e := 0; e < len(tab); e += TabWords {
				maxM, maxN = max(maxM, int(tab[e])), max(maxN, int(tab[e+1]))
			}
			d.launch(GemmName(ta, tb, true), [3]int{(maxN + Tile - 1) / Tile, (maxM + Tile - 1) / Tile, len(tab) / TabWords}, [3]int{GemmThreads, GemmThreads, 1},
				ir.ArgP(a), ir.ArgP(bb), ir.ArgP(c), ir.ArgP(d.ibuf(tab)), ir.ArgF(alpha), ir.ArgF(beta))
		}
		softmax := func(name string, tb *GQATables, args ...ir.Arg) {
			d.launch(name, [3]int{tb.MaxLen, tb.Entries, 1}, rowBlk, append(args, ir.ArgP(d.ibuf(tb.Rows)))...)
		}
		pq, att, out := d.buf(qkv), d.buf(make([]float32, maps)), d.buf(make([]float32, rows*od))
		for _, tb := range tbs {
			batched(false, true, tb.S, scale, 0, pq, pq, att)
			softmax("softmax_causal", tb, ir.ArgP(att))
			batched(false, false, tb.O, 1, 0, att, pq, out)
		}
		closeTo(t, "gqa out", d.read(out, rows*od), want)

		pdo, dP := d.buf(dO), d.buf(make([]float32, maps))
		dq, err := d.in.Alloc(rows * ld) // poisoned
		if err != nil {
			t.Fatal(err)
		}
		beta := func(i int) float32 { return float32(min(i, 1)) }
		if shape.block > 0 {
			dq, beta = d.buf(make([]float32, rows*ld)), func(int) float32 { return 1 }
		}
		for _, tb := range tbs {
			if shape.block > 0 { // the block's probabilities again
				batched(false, true, tb.S, scale, 0, pq, pq, att)
				softmax("softmax_causal", tb, ir.ArgP(att))
			}
			batched(false, true, tb.DP, 1, 0, pdo, pq, dP)
			for i, tab := range tb.DV {
				batched(true, false, tab, 1, beta(i), att, pdo, dq)
			}
			softmax("softmax_causal_bwd", tb, ir.ArgP(att), ir.ArgP(dP))
			batched(false, false, tb.DQ, scale, 0, dP, pq, dq)
			for i, tab := range tb.DK {
				batched(true, false, tab, scale, beta(i), dP, pq, dq)
			}
		}
		closeTo(t, "gqa dqkv", d.read(dq, rows*ld), wantD)
	}
	if _, err := NewGQATables(nil, 3, 2, 8); err == nil {
		t.Error("NewGQATables accepted 3 heads over 2 kv heads")
	}
	if _, err := NewGQATables([]AttnSeq{{Len: 4, Q0: 2, Rows: 3}}, 2, 1, 8); err == nil {
		t.Error("NewGQATables accepted query rows past the sequence's end")
	}
}

// gqaBlockTables packs sequences of lens rows and builds their attention tables: whole maps
// for block 0, else one table per block of block query rows (maps back to back in each);
// maps is the most map words a table needs.
func gqaBlockTables(t *testing.T, lens []int, H, KV, hd, block int) (tbs []*GQATables, rows, maps int) {
	t.Helper()
	starts := make([]int, len(lens))
	for i, L := range lens {
		starts[i], rows = rows, rows+L
	}
	add := func(seqs []AttnSeq, words int) {
		tb, err := NewGQATables(seqs, H, KV, hd)
		if err != nil {
			t.Fatal(err)
		}
		tbs, maps = append(tbs, tb), max(maps, words)
	}
	if block == 0 {
		var seqs []AttnSeq
		words := 0
		for i, L := range lens {
			seqs = append(seqs, AttnSeq{Start: starts[i], Len: L, Att: words})
			words += H * L * L
		}
		add(seqs, words)
		return tbs, rows, maps
	}
	for q0 := 0; q0 < slices.Max(lens); q0 += block {
		var seqs []AttnSeq
		words := 0
		for i, L := range lens {
			if L > q0 {
				r := min(block, L-q0)
				seqs = append(seqs, AttnSeq{Start: starts[i], Len: L, Att: words, Q0: q0, Rows: r})
				words += H * r * (q0 + r)
			}
		}
		add(seqs, words)
	}
	return tbs, rows, maps
}

// TestQKVBiasMatchesCPU: Qwen2's biased q/k/v projection as the GPU engine runs a biased
// linear (bias_rows, then gemm_nt with beta = 1) against model's LLM.linear.
func TestQKVBiasMatchesCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	d := dev{t, ir.NewInterp(all(t))}
	b := qwenShape
	const n, in = 20, 24
	out := b.QKVWidth()
	x, W, bias := randF(r, n*in), randF(r, out*in), randF(r, out)
	want := b.Linear(x, n, in, W, bias, out)
	px, pw, pb, py := d.buf(x), d.buf(W), d.buf(bias), d.buf(make([]float32, n*out))
	d.launch("bias_rows", ewGrid(n*out), rowBlk, ir.ArgP(pb), ir.ArgP(py), ir.ArgI(out), ir.ArgI(n*out))
	d.launch(GemmName(false, true, false), [3]int{(out + Tile - 1) / Tile, (n + Tile - 1) / Tile, 1}, [3]int{GemmThreads, GemmThreads, 1},
		ir.ArgP(px), ir.ArgP(pw), ir.ArgP(py), ir.ArgI(n), ir.ArgI(out), ir.ArgI(in), ir.ArgI(in), ir.ArgI(in), ir.ArgI(out), ir.ArgF(1), ir.ArgF(1))
	closeTo(t, "qkv with bias", d.read(py, n*out), want)
}
