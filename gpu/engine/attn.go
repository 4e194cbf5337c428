package engine

import (
	"fmt"
	"math"

	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
)

// AttnBlockRows is how many query rows of each sequence one attention block of a pass covers
// (Trainer's and LLMTrainer's): the device holds the scores of such a block (over all its keys)
// for every (sequence, head) at once, in the forward and again, recomputed, in the backward,
// so a pass's attention scratch is two buffers of at most heads × 256 × tokens words, not
// heads × tokens² words a layer.
const AttnBlockRows = 256

// blockedAttn is a pass's causal grouped-query attention (multi-head when kv heads = heads)
// by blocks of query rows: each block's maps live in the scratch buffers "attBlk" and
// "dPBlk" only while the block runs, and the backward recomputes them with the forward's
// launches (so its bits).
type blockedAttn struct {
	t       *Trainer
	n       int // rows of the pass
	ld      int // words of a q|k|v row
	headDim int
	blocks  []*kernels.GQATables
	tabs    []map[string]ir.Ptr // per block, its tables on the device
	att     int                 // scratch words: the largest block's maps
}

// newBlockedAttn builds the tables of seqs by blocks of rows query rows (0: AttnBlockRows):
// block b covers query rows [b·rows, (b+1)·rows) of every sequence that long, its maps back
// to back.
func newBlockedAttn(t *Trainer, seqs []seqInfo, n, rows, H, KV, hd int) (*blockedAttn, error) {
	if rows <= 0 {
		rows = AttnBlockRows
	}
	a := &blockedAttn{t: t, n: n, ld: (H + 2*KV) * hd, headDim: hd}
	for q0 := 0; ; q0 += rows {
		var as []kernels.AttnSeq
		off := 0
		for _, si := range seqs {
			if si.n > q0 {
				r := min(rows, si.n-q0)
				as = append(as, kernels.AttnSeq{Start: si.start, Len: si.n, Att: off, Q0: q0, Rows: r})
				off += H * r * (q0 + r)
			}
		}
		if len(as) == 0 {
			return a, nil
		}
		g, err := kernels.NewGQATables(as, H, KV, hd)
		if err != nil {
			return nil, err
		}
		if g.Entries > 65535 {
			return nil, fmt.Errorf("gpu engine: %d sequence·head pairs above 65535 (grid limit): use smaller micro-batches", g.Entries)
		}
		a.blocks, a.att = append(a.blocks, g), max(a.att, off)
	}
}

// tables lists every block's tables for one upload: add appends v to the upload and returns
// where it will lie; bind, once uploaded, resolves those offsets to device addresses.
func (a *blockedAttn) tables(add func(v []int32) int) (bind func(base ir.Ptr)) {
	offs := make([]map[string]int, len(a.blocks))
	for b, g := range a.blocks {
		o := map[string]int{"rows": add(g.Rows), "s": add(g.S), "o": add(g.O), "dp": add(g.DP), "dq": add(g.DQ)}
		for i := range g.DV {
			o[fmt.Sprintf("dv%d", i)] = add(g.DV[i])
			o[fmt.Sprintf("dk%d", i)] = add(g.DK[i])
		}
		offs[b] = o
	}
	return func(base ir.Ptr) {
		a.tabs = make([]map[string]ir.Ptr, len(offs))
		for b, o := range offs {
			a.tabs[b] = map[string]ir.Ptr{}
			for name, off := range o {
				a.tabs[b][name] = base.Add(off)
			}
		}
	}
}

// batch is block b's table name as a batched-GEMM launch.
func (a *blockedAttn) batch(b int, name string, tab []int32) batch {
	bt := batch{tab: a.tabs[b][name], n: len(tab) / kernels.TabWords}
	for e := 0; e < len(tab); e += kernels.TabWords {
		bt.maxM, bt.maxN = max(bt.maxM, int(tab[e])), max(bt.maxN, int(tab[e+1]))
	}
	return bt
}

func (a *blockedAttn) scale() float32 { return float32(1 / math.Sqrt(float64(a.headDim))) }

// forward runs causal attention from qkv (after RoPE, if any) into out, block by block.
func (a *blockedAttn) forward(l *launcher, qkv, out ir.Ptr) {
	att := l.keep(a.t.buf("attBlk", a.att))
	for b, g := range a.blocks {
		a.scores(l, b, g, qkv, att)
		l.gemmBatched(false, false, a.batch(b, "o", g.O), 1, 0, att, qkv, out)
	}
}

// scores writes block b's attention probabilities into att.
func (a *blockedAttn) scores(l *launcher, b int, g *kernels.GQATables, qkv, att ir.Ptr) {
	l.gemmBatched(false, true, a.batch(b, "s", g.S), a.scale(), 0, qkv, qkv, att)
	l.launch("softmax_causal", [3]int{g.MaxLen, g.Entries, 1}, [3]int{kernels.RowThreads, 1, 1}, ir.ArgP(att), ir.ArgP(a.tabs[b]["rows"]))
}

// backward writes into dqkv the gradient of forward's input given dO, block by block: the
// block's probabilities recomputed, then dP, dV, the softmax's backward, dQ and dK. dqkv is
// zeroed first and the blocks' dK and dV add into it; a kv head's query heads add one launch
// per query head of a group, so no launch has two blocks writing one word.
func (a *blockedAttn) backward(l *launcher, qkv, dO, dqkv ir.Ptr) {
	t := a.t
	att, dP := l.keep(t.buf("attBlk", a.att)), l.keep(t.buf("dPBlk", a.att))
	if l.err == nil {
		l.err = t.dev.Zero(dqkv, a.n*a.ld)
	}
	for b, g := range a.blocks {
		a.scores(l, b, g, qkv, att)
		l.gemmBatched(false, true, a.batch(b, "dp", g.DP), 1, 0, dO, qkv, dP)
		for i := range g.DV {
			l.gemmBatched(true, false, a.batch(b, fmt.Sprintf("dv%d", i), g.DV[i]), 1, 1, att, dO, dqkv)
		}
		l.launch("softmax_causal_bwd", [3]int{g.MaxLen, g.Entries, 1}, [3]int{kernels.RowThreads, 1, 1}, ir.ArgP(att), ir.ArgP(dP), ir.ArgP(a.tabs[b]["rows"]))
		l.gemmBatched(false, false, a.batch(b, "dq", g.DQ), a.scale(), 0, dP, qkv, dqkv)
		for i := range g.DK {
			l.gemmBatched(true, false, a.batch(b, fmt.Sprintf("dk%d", i), g.DK[i]), a.scale(), 1, dP, qkv, dqkv)
		}
	}
}
