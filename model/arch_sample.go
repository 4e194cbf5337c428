package model

import (
	"context"
	"encoding/binary"
	"math"
	"sync/atomic"
)

// Sample continues every request with a batched forward over a KV cache
// (as Model.Sample): each step every active request advances one token.
// Results do not depend on batch composition or order; each request's draws
// come from its own Seed. Only the tokens in opts.Stop end a request early
// (the tokenizer's end tokens, e.g. Qwen's <|im_end|>, are the caller's).
// A request's cache grows with its length.
func (m *LLM) Sample(ctx context.Context, reqs []SampleRequest, opts SampleOptions) ([]SampleResult, error) {
	return sampleStreams(ctx, m, reqs, opts, nil)
}

// SampleNoCache is Sample recomputing the full training-path forward pass
// of every active request at every step: slow; it exists to check Sample.
func (m *LLM) SampleNoCache(ctx context.Context, reqs []SampleRequest, opts SampleOptions) ([]SampleResult, error) {
	return runSampleLoop(ctx, reqs, opts, m.d.context, m.d.vocab, nil, recomputeNext(func(seqs []Sequence) ([]float32, error) {
		p, err := m.Forward(seqs, 1)
		if err != nil {
			return nil, err
		}
		return p.rawLogits(), nil
	}))
}

// sharePrefixes turns the shared prefill of identical histories on (off only to measure it).
var sharePrefixes = true

// newKV is an empty cache for a request of m.
func (m *LLM) newKV() *kvCache { return newKVCache(m.d.layers, m.d.KV*m.d.hd) }

// histKey is a map key of a token history.
func histKey(h []int32) string {
	b := make([]byte, 4*len(h))
	for i, t := range h {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(t))
	}
	return string(b)
}

// cachedStep feeds chunks[i] to request i (positions continue from its
// cache), appends their keys (after norm and RoPE) and values to the caches
// and returns the final-norm output of each chunk's last position
// [len(chunks)×D].
func (m *LLM) cachedStep(cs []*kvCache, chunks [][]int32) []float32 {
	b := m.d
	D := b.D
	start := make([]int, len(chunks)+1)
	for i, ch := range chunks {
		start[i+1] = start[i] + len(ch)
	}
	R := start[len(chunks)]
	pos, toks := make([]int32, R), make([]int32, R)
	x := make([]float32, R*D)
	maxLen := 0
	for i, ch := range chunks {
		for t, tok := range ch {
			pos[start[i]+t], toks[start[i]+t] = int32(cs[i].n+t), tok
		}
		maxLen = max(maxLen, cs[i].n+len(ch))
		cs[i].reserve(len(ch))
	}
	b.embed(&m.w, toks, pos, x)
	cachedRows.Add(int64(R))
	st := &decodeStep{cs: cs, chunks: chunks, start: start, scratch: make([][]float32, workers()), maxLen: maxLen,
		h: make([]float32, R*D), qkv: make([]float32, R*b.ld()), att: make([]float32, R*b.H*b.hd), tmp: make([]float32, R*D),
		gu: make([]float32, R*b.up()), act: make([]float32, R*b.F)}
	st.units = attnUnits(cs, chunks)
	st.cos, st.sin = b.rotary(pos)
	for l := 0; l < b.layers; l++ {
		m.cachedBlock(l, x, st)
	}
	for i, ch := range chunks {
		cs[i].n += len(ch)
	}
	A := len(chunks)
	last := make([]float32, A*D)
	for i := range chunks {
		copy(last[i*D:(i+1)*D], x[(start[i+1]-1)*D:])
	}
	hf := make([]float32, A*D)
	b.normRows(last, A, m.w.norm, m.w.normB, hf, nil, nil)
	return hf
}

// attnPieceRows is the most rows of one request in one attention task (a prefill's rows are
// split among the cores).
const attnPieceRows = 16

// maxGroup and minGroupBlocks bound a group of requests that attend together: at most 8
// requests (a GRPO group's samples), sharing at least 4 blocks (64 positions).
const maxGroup, minGroupBlocks = 8, 4

// cachedRows counts the rows cachedStep has run, headRowsRun those the output head has run in
// decoding, groupedRows those that attended in a group (for tests of the sharing).
var cachedRows, headRowsRun, groupedRows atomic.Int64

// attnUnit is the rows of one attention task (times a KV head): rows [t0, t1) of request i
// alone (end = i+1, shared = 0), or the one row each of requests [i, end), whose caches share
// their first shared blocks (attendGroup).
type attnUnit struct{ i, end, t0, t1, shared int }

// attnUnits splits a step's rows into attention tasks: runs of requests that decode one row
// each at the same position over shared blocks attend as groups (groupAt); other requests'
// rows go by pieces of at most attnPieceRows.
func attnUnits(cs []*kvCache, chunks [][]int32) []attnUnit {
	var us []attnUnit
	for i := 0; i < len(chunks); {
		if end, shared := groupAt(cs, chunks, i); end > i+1 {
			us = append(us, attnUnit{i: i, end: end, t1: 1, shared: shared})
			groupedRows.Add(int64(end - i))
			i = end
			continue
		}
		for t0 := 0; t0 < len(chunks[i]); t0 += attnPieceRows {
			us = append(us, attnUnit{i: i, end: i + 1, t0: t0, t1: min(len(chunks[i]), t0+attnPieceRows)})
		}
		i++
	}
	return us
}

// groupAt is the group of requests starting at i, [i, end), and the leading blocks all their
// caches share: up to maxGroup consecutive requests of one row each at the same position whose
// caches share at least minGroupBlocks blocks wholly before that position (end = i+1: none).
func groupAt(cs []*kvCache, chunks [][]int32, i int) (end, shared int) {
	if len(chunks[i]) != 1 {
		return i + 1, 0
	}
	p := cs[i].n
	shared = p / kvBlockLen
	end = i + 1
	for ; end < len(chunks) && end-i < maxGroup && len(chunks[end]) == 1 && cs[end].n == p; end++ {
		k := 0
		for k < shared && cs[end].blocks[k] == cs[i].blocks[k] {
			k++
		}
		if k < minGroupBlocks {
			break
		}
		shared = k
	}
	if end == i+1 {
		return end, 0
	}
	return end, shared
}

// decodeStep is the state of one cachedStep shared by its blocks.
type decodeStep struct {
	cs                        []*kvCache
	chunks                    [][]int32
	start                     []int
	units                     []attnUnit // attention's rows by task
	cos, sin                  []float32
	scratch                   [][]float32
	maxLen                    int
	h, qkv, att, tmp, gu, act []float32
}

// cachedBlock runs block l on the step's rows x in place, appending their
// keys and values to the caches.
func (m *LLM) cachedBlock(l int, x []float32, st *decodeStep) {
	b := m.d
	D, H, hd, F, ld := b.D, b.H, b.hd, b.F, b.ld()
	kvd, od, rep := b.KV*hd, H*hd, H/b.KV
	R := st.start[len(st.chunks)]
	scale := float32(1 / math.Sqrt(float64(hd)))
	bw := &m.w.blocks[l]
	b.normRows(x, R, bw.in, bw.inB, st.h, nil, nil)
	m.linear(st.h, R, D, bw.qkvM(), bw.qkvB, ld, st.qkv)
	if bw.qn != nil {
		qkNorm(st.qkv, R, b.blockDims, bw.qn, bw.kn, nil, nil)
	}
	if st.cos != nil {
		rope(st.qkv, R, b.blockDims, st.cos, st.sin, false)
	}
	for i, ch := range st.chunks {
		for t := range ch {
			r := st.start[i] + t
			st.cs[i].put(l, st.cs[i].n+t, st.qkv[r*ld+od:][:kvd], st.qkv[r*ld+od+kvd:][:kvd])
		}
	}
	// One task per unit of rows and KV head: its rep query heads read the KV head's values
	// together, and a group's requests the blocks they share.
	parallelTasks(len(st.units)*b.KV, func(worker, task int) {
		u, g := st.units[task/b.KV], task%b.KV
		if need := (u.end - u.i) * rep * pagedScratch(st.maxLen-1); len(st.scratch[worker]) < need {
			st.scratch[worker] = make([]float32, need)
		}
		h0 := g * rep * hd
		if u.shared > 0 {
			var qs, os [maxGroup][]float32
			for j := u.i; j < u.end; j++ {
				r := st.start[j]
				qs[j-u.i], os[j-u.i] = st.qkv[r*ld+h0:][:rep*hd], st.att[r*od+h0:][:rep*hd]
			}
			G := u.end - u.i
			attendGroup(qs[:G], os[:G], rep, st.cs[u.i:u.end], l, g*hd, st.cs[u.i].n, u.shared, scale, st.scratch[worker])
			return
		}
		for t := u.t0; t < u.t1; t++ {
			r := st.start[u.i] + t
			attendPagedHeads(st.qkv[r*ld+h0:][:rep*hd], rep, st.cs[u.i], l, g*hd, st.cs[u.i].n+t, scale, st.scratch[worker], st.att[r*od+h0:][:rep*hd])
		}
	})
	m.linear(st.att, R, od, bw.oM(), bw.oB, D, st.tmp)
	addInto(x, st.tmp)
	b.normRows(x, R, bw.post, bw.postB, st.h, nil, nil)
	m.linear(st.h, R, D, bw.gateUpM(), bw.upB, b.up(), st.gu)
	b.act(st.gu, R, st.act)
	m.linear(st.act, R, F, bw.downM(), bw.downB, D, st.tmp)
	addInto(x, st.tmp)
}
