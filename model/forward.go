package model

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
)

// Sequence is one scoring/training example: log-probs are of the Response
// tokens, each given the Prompt and the previous response tokens.
// len(Prompt) ≥ 1 when Response is non-empty, and
// len(Prompt)+len(Response) ≤ Config.Context.
type Sequence struct{ Prompt, Response []int32 }

type seqInfo struct {
	start, n   int // packed rows [start, start+n) fed to the model
	plen, rlen int
	resp       int // index of the first response token in the flat arrays
	att        int // offset of this sequence's attention maps (per layer)
}

// Pass is the result of Forward: per-token log-probs and entropies plus the
// activations Backward needs (the block skeleton's pass over the built-in
// description). A Pass is read-only after Forward; Backward may be called
// on it several times and on several passes concurrently only with
// different Grads.
type Pass struct {
	*LLMPass
	m *Model
}

func (m *Model) checkSeqs(seqs []Sequence) error {
	return checkSequences(seqs, m.cfg.Context, m.cfg.Vocab)
}

// checkSequences reports (up to ~8) sequences that a model with the given
// context and vocabulary cannot score.
func checkSequences(seqs []Sequence, context, vocab int) error {
	var errs []error
	for i, s := range seqs {
		if len(s.Response) > 0 && len(s.Prompt) == 0 {
			errs = append(errs, fmt.Errorf("sequence %d: empty prompt", i))
		}
		if len(s.Prompt)+len(s.Response) > context {
			errs = append(errs, fmt.Errorf("sequence %d: length %d exceeds context %d", i, len(s.Prompt)+len(s.Response), context))
		}
		for _, part := range [][]int32{s.Prompt, s.Response} {
			for _, t := range part {
				if t < 0 || int(t) >= vocab {
					errs = append(errs, fmt.Errorf("sequence %d: token %d out of range [0,%d)", i, t, vocab))
					break
				}
			}
		}
		if len(errs) > 8 {
			break
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("model: %w", errors.Join(errs...))
	}
	return nil
}

// Forward runs the batch, keeping the activations for Backward. Sequences
// are packed internally (no padding compute); any lengths ≤ Context work.
// temperature must be > 0.
func (m *Model) Forward(seqs []Sequence, temperature float32) (*Pass, error) {
	p, err := m.core.Forward(seqs, temperature)
	if err != nil {
		return nil, err
	}
	return &Pass{LLMPass: p, m: m}, nil
}

// packed is the row layout of a batch: its sequences packed end to end
// (no padding), the tokens fed, the rows whose outputs predict response
// tokens and those tokens.
type packed struct {
	seqs                      []seqInfo
	n, m                      int // rows fed, response tokens
	tokens, respRows, targets []int32
}

// packSeqs lays out seqs and returns each row's position in its sequence.
func packSeqs(seqs []Sequence) (packed, []int32) {
	p := packed{seqs: make([]seqInfo, len(seqs))}
	for i, s := range seqs {
		si := seqInfo{start: p.n, plen: len(s.Prompt), rlen: len(s.Response), resp: p.m}
		if si.rlen > 0 {
			si.n = si.plen + si.rlen - 1
		}
		p.n += si.n
		p.m += si.rlen
		p.seqs[i] = si
	}
	p.tokens = make([]int32, p.n)
	pos := make([]int32, p.n)
	p.respRows = make([]int32, p.m)
	p.targets = make([]int32, p.m)
	for i, s := range seqs {
		si := p.seqs[i]
		if si.n == 0 {
			continue
		}
		copy(p.tokens[si.start:], s.Prompt)
		copy(p.tokens[si.start+si.plen:si.start+si.n], s.Response)
		for t := 0; t < si.n; t++ {
			pos[si.start+t] = int32(t)
		}
		for t := 0; t < si.rlen; t++ {
			p.respRows[si.resp+t] = int32(si.start + si.plen - 1 + t)
			p.targets[si.resp+t] = s.Response[t]
		}
	}
	return p, pos
}

func addInto(x, y []float32) {
	n := addVec(x, y)
	x = x[n:len(y)]
	for i, v := range y[n:] {
		x[i] += v
	}
}

// addIntoPar is addInto split over the cores (element-wise: same result).
func addIntoPar(x, y []float32) {
	parallelRows(len(y), 1<<15, func(lo, hi int) { addInto(x[lo:hi], y[lo:hi]) })
}

// attnSplit chooses the attention task shape: whole sequences (hs = H heads
// per task) when there are at least two per core, else single heads.
func attnSplit(seqs, H int) (perSeq bool, hs int) {
	if seqs >= 2*workers() {
		return true, H
	}
	return false, 1
}

// touchSink keeps touch's loads from being optimised away.
var touchSink atomic.Uint32

// touch reads one float per cache line of x, in order: a sequential pass
// that the hardware prefetcher turns into a fast stream, so that later
// strided accesses to x hit the cache.
func touch(x []float32) {
	var s float32
	for i := 0; i < len(x); i += 16 {
		s += x[i]
	}
	if s == 1.2345e-38 { // practically never; the store only defeats dead-code elimination
		touchSink.Store(math.Float32bits(s))
	}
}

// causalSoftmax applies a row softmax over j ≤ i to the L×L scores S in
// place, zeroing j > i.
func causalSoftmax(S []float32, L int) { causalSoftmaxRows(S, 0, L, L) }

// causalSoftmaxRows is causalSoftmax on rows i0..i0+n−1 of width w of the
// scores (row i over keys 0..i, zeros after).
func causalSoftmaxRows(S []float32, i0, n, w int) {
	for r := 0; r < n; r++ {
		i := i0 + r
		row := S[r*w : (r+1)*w]
		mx := row[0]
		for _, v := range row[1 : i+1] {
			if v > mx {
				mx = v
			}
		}
		for j := 0; j <= i; j++ {
			row[j] -= mx
		}
		expSpan(row[:i+1])
		var s float32
		for _, e := range row[:i+1] {
			s += e
		}
		inv := 1 / s
		for j := 0; j <= i; j++ {
			row[j] *= inv
		}
		clear(row[i+1:])
	}
}

// Score returns the per-token log-probs and entropies of seqs without
// keeping activations for a backward pass: it runs Forward on chunks of at
// most ~8192 tokens and drops each chunk's activations.
func (m *Model) Score(seqs []Sequence, temperature float32) ([][]float32, [][]float32, error) {
	if err := m.checkSeqs(seqs); err != nil {
		return nil, nil, err
	}
	return scoreChunks(seqs, 8192, func(chunk []Sequence) ([][]float32, [][]float32, error) {
		p, err := m.Forward(chunk, temperature)
		if err != nil {
			return nil, nil, err
		}
		p.releaseActs() // no backward follows
		p.releaseLogits()
		return p.LogProbs(), p.Entropy(), nil
	})
}

// scoreChunks runs score on consecutive chunks of seqs of at most budget
// tokens (a longer sequence alone) and concatenates the log-probs and
// entropies.
func scoreChunks(seqs []Sequence, budget int, score func([]Sequence) ([][]float32, [][]float32, error)) ([][]float32, [][]float32, error) {
	lp := make([][]float32, 0, len(seqs))
	en := make([][]float32, 0, len(seqs))
	for lo := 0; lo < len(seqs); {
		hi, tok := lo, 0
		for hi < len(seqs) && (hi == lo || tok+len(seqs[hi].Prompt)+len(seqs[hi].Response) <= budget) {
			tok += len(seqs[hi].Prompt) + len(seqs[hi].Response)
			hi++
		}
		l, e, err := score(seqs[lo:hi])
		if err != nil {
			return nil, nil, err
		}
		lp = append(lp, l...)
		en = append(en, e...)
		lo = hi
	}
	return lp, en, nil
}
