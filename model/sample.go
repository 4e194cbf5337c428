package model

import (
	"context"
	"math"
	"sort"
)

// SampleRequest is one prompt to continue. Seed alone determines the
// request's random draws.
type SampleRequest struct {
	Prompt []int32
	Seed   uint64
}

// SampleOptions control decoding.
type SampleOptions struct {
	Temperature float32 // 0 = greedy
	TopP        float32 // nucleus mass; ≤ 0 or ≥ 1 = off; NaN is an error
	TopK        int     // the k most likely tokens only, before top_p; 0 or ≥ the vocabulary = off
	MaxTokens   int     // ≤ 0 = until the context is full
	Stop        []int32 // extra stop tokens; EOS always stops
}

// SampleResult is one request's continuation.
type SampleResult struct {
	Tokens       []int32   // sampled tokens, including the stop token if one was sampled
	LogProbs     []float32 // log softmax(logits/T)[token] before top-k and top-p (T=1 when greedy)
	FinishReason string    // "stop" or "length"
}

// Finish reasons.
const (
	FinishStop   = "stop"
	FinishLength = "length"
)

// Sample continues every request with a batched forward over a KV cache:
// each step, every active request advances one token; finished requests drop
// out. Results do not depend on batch composition or order. ctx is checked
// before every step. The decoder is the block skeleton's (arch_sample.go):
// a request's KV cache grows by blocks of 16 positions (kvpages.go), and the
// requests of one prompt share its blocks.
func (m *Model) Sample(ctx context.Context, reqs []SampleRequest, opts SampleOptions) ([]SampleResult, error) {
	return sampleStreams(ctx, m.core, reqs, opts, []int32{EOS})
}

// SampleNoCache is Sample without a KV cache: every step recomputes the
// full forward pass (through the training-path Forward) of every active
// request. It is slow; it exists to check Sample.
func (m *Model) SampleNoCache(ctx context.Context, reqs []SampleRequest, opts SampleOptions) ([]SampleResult, error) {
	return m.sampleLoop(ctx, reqs, opts, recomputeNext(func(seqs []Sequence) ([]float32, error) {
		p, err := m.Forward(seqs, 1)
		if err != nil {
			return nil, err
		}
		return p.rawLogits(), nil
	}))
}

// nextFn advances every active request given its full history and returns
// the logits of their next tokens, to be read a chunk of rows at a time.
type nextFn func(active []int, hist [][]int32) (stepLogits, error)

// stepLogits writes into z the logits [(hi−lo)×Vocab] of the next token of
// active requests lo..hi−1.
type stepLogits func(lo, hi int, z []float32)

func (m *Model) sampleLoop(ctx context.Context, reqs []SampleRequest, opts SampleOptions, next nextFn) ([]SampleResult, error) {
	return runSampleLoop(ctx, reqs, opts, m.cfg.Context, m.cfg.Vocab, []int32{EOS}, next)
}

// runSampleLoop is the decoding loop of a model with context C and
// vocabulary V; a token in stop or opts.Stop ends a request.
func runSampleLoop(ctx context.Context, reqs []SampleRequest, opts SampleOptions, C, V int, stops []int32, next nextFn) ([]SampleResult, error) {
	if err := checkRequests(reqs, opts, C, V); err != nil {
		return nil, err
	}
	stop := map[int32]bool{}
	for _, t := range stops {
		stop[t] = true
	}
	for _, t := range opts.Stop {
		stop[t] = true
	}
	res := make([]SampleResult, len(reqs))
	hist := make([][]int32, len(reqs))
	rngs := make([]*rng, len(reqs))
	var active []int
	for i, r := range reqs {
		hist[i] = append(make([]int32, 0, C), r.Prompt...)
		rngs[i] = newRNG(r.Seed ^ 0xd1b54a32d192ed03)
		res[i].Tokens = []int32{}
		res[i].LogProbs = []float32{}
		if len(r.Prompt) >= C {
			res[i].FinishReason = FinishLength
			continue
		}
		active = append(active, i)
	}
	for len(active) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		logits, err := next(active, hist)
		if err != nil {
			return nil, err
		}
		toks, lps := pickTokens(logits, len(active), V, func(int) *SampleOptions { return &opts }, func(a int) *rng { return rngs[active[a]] })
		still := active[:0]
		for a, i := range active {
			tok, lp := toks[a], lps[a]
			hist[i] = append(hist[i], tok)
			res[i].Tokens = append(res[i].Tokens, tok)
			res[i].LogProbs = append(res[i].LogProbs, lp)
			res[i].FinishReason = finishReason(stop[tok], len(hist[i]), len(res[i].Tokens), C, opts.MaxTokens)
			if res[i].FinishReason == "" {
				still = append(still, i)
			}
		}
		active = still
	}
	return res, nil
}

// pickTokens draws the next token of n requests whose logits come a head chunk of rows at a
// time (no [n × V] array), the rows of a chunk in parallel; optsOf(a) and rngOf(a) are request
// a's options and random stream.
func pickTokens(logits stepLogits, n, V int, optsOf func(a int) *SampleOptions, rngOf func(a int) *rng) ([]int32, []float32) {
	toks, lps := make([]int32, n), make([]float32, n)
	rows := min(n, headRows(V))
	zb := getScratch(rows * V)
	defer putScratch(zb)
	for lo := 0; lo < n; lo += rows {
		hi := min(n, lo+rows)
		z := (*zb)[:(hi-lo)*V]
		logits(lo, hi, z)
		parallelRows(hi-lo, 1, func(a0, a1 int) {
			for a := lo + a0; a < lo+a1; a++ {
				toks[a], lps[a] = pickToken(z[(a-lo)*V:(a-lo+1)*V], *optsOf(a), rngOf(a))
			}
		})
	}
	return toks, lps
}

// pickToken draws the next token from one logits row and returns it with its
// log-prob under softmax(z/T) (T=1 when greedy), before top-p truncation.
func pickToken(z []float32, o SampleOptions, r *rng) (int32, float32) {
	u := r.float64() // one draw per step, used or not: keeps streams aligned
	if o.Temperature == 0 {
		best := 0
		for j, v := range z {
			if v > z[best] {
				best = j
			}
		}
		pb := getScratch(len(z))
		defer putScratch(pb)
		lse := softmaxProbs(z, 1, *pb)
		return int32(best), float32(float64(z[best]) - lse)
	}
	invT := 1 / float64(o.Temperature)
	pb := getScratch(len(z))
	defer putScratch(pb)
	p := *pb
	lse := softmaxProbs(z, invT, p)
	lp := func(j int) float32 { return float32(float64(z[j])*invT - lse) }
	topK := o.TopK > 0 && o.TopK < len(p)
	if topK || o.TopP > 0 && o.TopP < 1 {
		kb := getKeys(len(p))
		defer keyScratch.Put(kb)
		var keys []uint64
		var cum float64
		if topK {
			keys, cum = topKNucleus(p, o.TopK, float64(o.TopP), *kb)
		} else {
			keys, cum = topPNucleus(p, float64(o.TopP), *kb)
		}
		target := u * cum
		var acc float64
		for _, key := range keys {
			j := int(uint32(key))
			acc += float64(p[j])
			if target < acc {
				return int32(j), lp(j)
			}
		}
		j := int(uint32(keys[len(keys)-1]))
		return int32(j), lp(j)
	}
	var acc float64
	last := 0
	for j, pj := range p {
		if pj > 0 {
			last = j
		}
		acc += float64(pj)
		if u < acc {
			return int32(j), lp(j)
		}
	}
	return int32(last), lp(last)
}

// recomputeNext is the nextFn that runs logits, a training-path forward
// at temperature 1 returning the raw logits of each sequence's one response
// token, on the full history of every active request.
func recomputeNext(logits func([]Sequence) ([]float32, error)) nextFn {
	return func(active []int, hist [][]int32) (stepLogits, error) {
		seqs := make([]Sequence, len(active))
		for a, i := range active {
			seqs[a] = Sequence{Prompt: hist[i], Response: []int32{0}}
		}
		z, err := logits(seqs)
		if err != nil {
			return nil, err
		}
		V := len(z) / max(len(active), 1)
		return func(lo, hi int, out []float32) { copy(out, z[lo*V:hi*V]) }, nil
	}
}

// topPPrefix returns the nucleus of p for top_p: the indices of p in decreasing probability
// (ties by index) up to and including the first at which their sum, accumulated in that order
// in float64, reaches topP; and that sum. It equals topPPrefixRef's answer in O(len(p)) plus a
// sort of about the nucleus: one pass buckets the probabilities by the top bits of their
// float32 encoding (non-negative floats order as their bits) and sums each bucket's mass,
// which places the nucleus's boundary in one bucket; a second pass keeps the candidates
// p ≥ θ, θ the lower edge of the bucket below that one, and only those are sorted. The
// candidates are the most likely tokens (any other is less likely than each of them, and a
// token as likely as one of them is one of them), in the same order, so the prefix and its
// sum are the full sort's. Should the bucket sums' rounding have placed θ too high, θ drops
// and the candidates are gathered again.
func topPPrefix(p []float32, topP float64) ([]int, float64) {
	keys, cum := topPNucleus(p, topP, nil)
	idx := make([]int, len(keys))
	for i, key := range keys {
		idx[i] = int(uint32(key))
	}
	return idx, cum
}

// topPNucleus is topPPrefix's nucleus as sorted candidate keys (the index in the low 32
// bits, see topPCandidates), appended to keys[:0]; cap of the result is how many candidates
// were sorted.
func topPNucleus(p []float32, topP float64, keys []uint64) ([]uint64, float64) {
	if len(p) == 0 {
		return nil, 0
	}
	var mass [topPBuckets]float64
	for _, v := range p {
		mass[topPBucket(v)] += float64(v)
	}
	b := topPBuckets - 1
	for acc := 0.0; b > 0; b-- {
		if acc += mass[b]; acc >= topP {
			break
		}
	}
	for b = max(b-1, 0); ; b = max(b-8, 0) {
		keys = topPCandidates(p, uint32(b)<<topPShift, keys[:0])
		var cum float64
		for k, key := range keys {
			cum += float64(p[uint32(key)])
			if cum >= topP || (b == 0 && k == len(keys)-1) {
				return keys[: k+1 : len(keys)], cum
			}
		}
	}
}

// topKNucleus is what a draw may pick under top_k k (0 < k < len(p)) and then top_p: the k
// most likely tokens as sorted keys (ties by index), cut, when top_p is in (0, 1), to the
// shortest prefix whose float64 sum in that order reaches top_p times the k tokens' sum (top_p
// over the distribution renormalised to the k, as vLLM and Hugging Face apply them); and that
// prefix's sum. The tokens' counts per bucket (see topPNucleus) place the k-th exactly, so only
// the tokens of its bucket and above are sorted. topKPrefixRef is the plain reference.
func topKNucleus(p []float32, k int, topP float64, keys []uint64) ([]uint64, float64) {
	var count [topPBuckets]int
	for _, v := range p {
		count[topPBucket(v)]++
	}
	b, n := topPBuckets-1, 0
	for ; b > 0; b-- {
		if n += count[b]; n >= k {
			break
		}
	}
	keys = topPCandidates(p, uint32(b)<<topPShift, keys[:0])
	keys = keys[:k:len(keys)]
	var total float64
	for _, key := range keys {
		total += float64(p[uint32(key)])
	}
	if !(topP > 0 && topP < 1) {
		return keys, total
	}
	var cum float64
	for i, key := range keys {
		if cum += float64(p[uint32(key)]); cum >= topP*total {
			return keys[: i+1 : len(keys)], cum
		}
	}
	return keys, cum
}

// topPShift and topPBuckets bucket a non-negative float32 by its sign, exponent and top three
// mantissa bits: a bucket spans a factor of at most 2^(1/8).
const (
	topPShift   = 20
	topPBuckets = 1 << (32 - topPShift)
)

func topPBucket(v float32) uint32 { return math.Float32bits(v) >> topPShift }

// topPCandidates appends to keys, sorted, one key per index j with p[j]'s bits ≥ lo: the
// complemented bits above j, so that ascending keys are decreasing probabilities, ties by
// index.
func topPCandidates(p []float32, lo uint32, keys []uint64) []uint64 {
	for j, v := range p {
		if bits := math.Float32bits(v); bits >= lo {
			keys = append(keys, uint64(^bits)<<32|uint64(j))
		}
	}
	sortKeys(keys)
	return keys
}

// topKPrefixRef is topKNucleus's answer, as indices, by sorting every index: the plain
// reference the tests compare against.
func topKPrefixRef(p []float32, k int, topP float64) ([]int, float64) {
	idx, _ := topPPrefixRef(p, math.Inf(1))
	idx = idx[:k]
	var total, cum float64
	for _, j := range idx {
		total += float64(p[j])
	}
	if !(topP > 0 && topP < 1) {
		return idx, total
	}
	for n, j := range idx {
		if cum += float64(p[j]); cum >= topP*total {
			return idx[:n+1], cum
		}
	}
	return idx, cum
}

// topPPrefixRef is topPPrefix by sorting every index: the plain reference the tests compare
// against.
func topPPrefixRef(p []float32, topP float64) ([]int, float64) {
	idx := make([]int, len(p))
	for j := range idx {
		idx[j] = j
	}
	sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] > p[idx[b]] })
	var cum float64
	for k, j := range idx {
		cum += float64(p[j])
		if cum >= topP {
			return idx[:k+1], cum
		}
	}
	return idx, cum
}
