package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Stream is one request's decoding state for continuous batching: NewStream prefills nothing
// yet; each Step feeds every live stream what its KV cache has not seen (its prompt, or part
// of it, on its first steps; then its last token) and samples its next token. Streams join a
// batch at any step and leave it when done, and a stream draws the same tokens and log-probs,
// bit for bit, as Sample draws for its request and options: every row of a step and each
// stream's attention are computed independently of the other rows, and its draws come from
// its own seed.
type Stream struct {
	m    *LLM
	opts SampleOptions
	stop map[int32]bool
	hist []int32
	rng  *rng
	kv   *kvCache
	res  SampleResult
	pc   *PrefixCache // nil: none
	reg  int          // blocks registered in pc
	// cached is how many prompt positions the stream took from pc.
	cached int
}

// Streamer is a model that decodes Streams one step at a time.
type Streamer interface {
	NewStream(req SampleRequest, opts SampleOptions) (*Stream, error)
}

var (
	_ Streamer = (*Model)(nil)
	_ Streamer = (*LLM)(nil)
)

// NewStream is req's decoding state under opts; only opts.Stop ends it early.
func (m *LLM) NewStream(req SampleRequest, opts SampleOptions) (*Stream, error) {
	return checkedStream(m, req, opts, nil)
}

// NewStream is req's decoding state under opts; EOS and opts.Stop end it early.
func (m *Model) NewStream(req SampleRequest, opts SampleOptions) (*Stream, error) {
	return checkedStream(m.core, req, opts, []int32{EOS})
}

func checkedStream(m *LLM, req SampleRequest, opts SampleOptions, stops []int32) (*Stream, error) {
	if err := checkOptions(opts); err != nil {
		return nil, err
	}
	if err := checkPrompt(req.Prompt, m.d.context, m.d.vocab); err != nil {
		return nil, fmt.Errorf("model: NewStream: %w", err)
	}
	return newStream(m, req, opts, stops), nil
}

// newStream is req's stream; its prompt and options are valid.
func newStream(m *LLM, req SampleRequest, opts SampleOptions, stops []int32) *Stream {
	C := m.d.context
	s := &Stream{m: m, opts: opts, stop: map[int32]bool{}, rng: newRNG(req.Seed ^ 0xd1b54a32d192ed03),
		res: SampleResult{Tokens: []int32{}, LogProbs: []float32{}}}
	for _, t := range slices.Concat(stops, opts.Stop) {
		s.stop[t] = true
	}
	room := 256
	if opts.MaxTokens > 0 {
		room = opts.MaxTokens
	}
	s.hist = append(make([]int32, 0, min(len(req.Prompt)+room, C)), req.Prompt...)
	if len(req.Prompt) >= C {
		s.res.FinishReason = FinishLength
	}
	return s
}

// Done reports whether the stream has finished (a stop token, MaxTokens or the context).
func (s *Stream) Done() bool { return s.res.FinishReason != "" }

// Len is how many tokens the stream has sampled.
func (s *Stream) Len() int { return len(s.res.Tokens) }

// Result is the stream's continuation so far (final once Done). Its slices are the stream's:
// later steps append to them, so a caller reading them while another goroutine steps must
// copy them first.
func (s *Stream) Result() SampleResult { return s.res }

// CachedTokens is how many of the prompt's positions the stream took from its prefix cache
// instead of prefilling them (0 before its first Step).
func (s *Stream) CachedTokens() int { return s.cached }

// Tokens is a copy of the tokens and log-probs sampled from index from on.
func (s *Stream) Tokens(from int) ([]int32, []float32) {
	return slices.Clone(s.res.Tokens[from:]), slices.Clone(s.res.LogProbs[from:])
}

// StepOptions bound one Step.
type StepOptions struct {
	// MaxPrefill caps the prompt tokens one step feeds, all streams together (≤ 0: no cap): a
	// long prompt is fed over several steps, so the streams decoding beside it are not held
	// for its whole prefill. A stream whose prompt is not all fed samples nothing that step.
	MaxPrefill int
}

// Step advances every stream that is not done by one token (see Stream); streams earlier in
// the slice get the prefill budget first, and a new stream over a prefix cache may wait a step
// for another's prefill of the blocks they share (see feed). All streams must come from one
// model. A stream sampled in this step is one whose Len grew.
func Step(ctx context.Context, streams []*Stream, o StepOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var live []*Stream
	for _, s := range streams {
		if s.Done() {
			continue
		}
		if s.m != streams[0].m {
			return errors.New("model: Step: the streams come from more than one model")
		}
		live = append(live, s)
	}
	if len(live) == 0 {
		return nil
	}
	m := live[0].m
	fed, hf := feed(m, live, o.MaxPrefill)
	D := m.d.D
	rows := make([]float32, 0, len(fed)*D)
	var ready []*Stream
	for r, s := range fed {
		if s.kv.n == len(s.hist) {
			ready = append(ready, s)
			rows = append(rows, hf[r*D:(r+1)*D]...)
		}
	}
	headRowsRun.Add(int64(len(ready)))
	logits := func(lo, hi int, z []float32) { m.headLogits(rows, lo, hi, z) }
	toks, lps := pickTokens(logits, len(ready), m.d.vocab, func(a int) *SampleOptions { return &ready[a].opts }, func(a int) *rng { return ready[a].rng })
	for a, s := range ready {
		s.advance(toks[a], lps[a], m.d.context)
	}
	return nil
}

// advance appends a sampled token and ends the stream at a stop token, MaxTokens or the
// context (C positions).
func (s *Stream) advance(tok int32, lp float32, C int) {
	s.hist = append(s.hist, tok)
	s.res.Tokens = append(s.res.Tokens, tok)
	s.res.LogProbs = append(s.res.LogProbs, lp)
	s.res.FinishReason = finishReason(s.stop[tok], len(s.hist), len(s.res.Tokens), C, s.opts.MaxTokens)
}

// finishReason is why a request ends after a token (stop: it is a stop token; n positions,
// k sampled tokens), or "" while it goes on.
func finishReason(stop bool, n, k, C, maxTokens int) string {
	switch {
	case stop:
		return FinishStop
	case n >= C || (maxTokens > 0 && k >= maxTokens):
		return FinishLength
	}
	return ""
}

// feed runs one cachedStep over the live streams: each gets what its cache has not seen, a
// new stream's prompt capped by the prefill budget (≤ 0: none). It returns the streams fed,
// in order, and their last rows' final-norm outputs. New streams with the same prompt, all of
// it fed in this step (a group's samples of one prompt), share one prefill: the first runs
// it, the others fork its cache and take its row, the same bits as their own prefill. A new
// stream with a prefix cache starts from the cached blocks of its prompt, and waits a step
// when another new stream prefills its first uncached block in this one (it then finds the
// block cached).
func feed(m *LLM, live []*Stream, budget int) ([]*Stream, []float32) {
	var run, fed []*Stream
	var chunks [][]int32
	forks := map[*Stream]*Stream{}
	leaders := map[string]*Stream{}
	pending := map[string]bool{}
	left := budget
	for _, s := range live {
		fresh := s.kv == nil
		key := ""
		if fresh {
			key = histKey(s.hist)
			if l, ok := leaders[key]; ok && sharePrefixes {
				forks[s] = l
				fed = append(fed, s)
				continue
			}
			if !s.start(pending) {
				continue
			}
		}
		chunk := s.hist[s.kv.n:]
		if len(chunk) > 1 && budget > 0 {
			if left <= 0 {
				continue // no prefill left this step
			}
			chunk = chunk[:min(len(chunk), left)]
			left -= len(chunk)
		}
		if fresh && s.kv.n+len(chunk) == len(s.hist) {
			leaders[key] = s
		}
		run = append(run, s)
		fed = append(fed, s)
		chunks = append(chunks, chunk)
	}
	cs := make([]*kvCache, len(run))
	at := make(map[*Stream]int, len(run))
	for r, s := range run {
		cs[r], at[s] = s.kv, r
	}
	out := m.cachedStep(cs, chunks)
	for _, s := range run {
		// The sampled tokens' blocks too: a later turn's prompt repeats them.
		if n := s.kv.n / kvBlockLen; s.pc != nil && n > s.reg {
			s.pc.register(s.hist, s.kv)
			s.reg = n
		}
	}
	if len(forks) == 0 {
		return fed, out
	}
	D := m.d.D
	hf := make([]float32, len(fed)*D)
	for i, s := range fed {
		src := s
		if l, ok := forks[s]; ok {
			s.kv, src = l.kv.fork(), l
		}
		r := at[src]
		copy(hf[i*D:(i+1)*D], out[r*D:(r+1)*D])
	}
	return fed, hf
}

// start gives a new stream its cache: empty, or its prompt's cached blocks. It reports false,
// leaving the stream new, when the first block it would prefill is in pending (another new
// stream prefills it in this step); otherwise it adds that block's prefix to pending.
func (s *Stream) start(pending map[string]bool) bool {
	kv := s.m.newKV()
	if s.pc != nil && sharePrefixes {
		kv.blocks = s.pc.lookup(s.hist)
		kv.n = len(kv.blocks) * kvBlockLen
		if end := kv.n + kvBlockLen; end < len(s.hist) {
			k := histKey(s.hist[:end])
			if pending[k] {
				return false
			}
			pending[k] = true
		}
		s.pc.hit(kv.n)
		s.cached = kv.n
	}
	s.kv = kv
	return true
}

// checkOptions refuses sampling options no request can be decoded with.
func checkOptions(opts SampleOptions) error {
	if opts.Temperature < 0 || math.IsNaN(float64(opts.Temperature)) || math.IsInf(float64(opts.Temperature), 0) {
		return fmt.Errorf("model: temperature %v must be ≥ 0", opts.Temperature)
	}
	if math.IsNaN(float64(opts.TopP)) {
		return errors.New("model: top_p is NaN")
	}
	if opts.TopK < 0 {
		return fmt.Errorf("model: top_k %d must be ≥ 0 (0: off)", opts.TopK)
	}
	return nil
}

// checkRequests checks Sample's requests and options for a model of context C and vocabulary V.
func checkRequests(reqs []SampleRequest, opts SampleOptions, C, V int) error {
	if err := checkOptions(opts); err != nil {
		return err
	}
	var errs []error
	for i, r := range reqs {
		if err := checkPrompt(r.Prompt, C, V); err != nil {
			errs = append(errs, fmt.Errorf("request %d: %w", i, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("model: Sample: %w", errors.Join(errs...))
	}
	return nil
}

// checkPrompt checks a prompt against a model of context C and vocabulary V.
func checkPrompt(p []int32, C, V int) error {
	if len(p) == 0 || len(p) > C {
		return fmt.Errorf("prompt length %d not in [1,%d]", len(p), C)
	}
	for _, t := range p {
		if t < 0 || int(t) >= V {
			return fmt.Errorf("token %d out of range", t)
		}
	}
	return nil
}

// sampleStreams is Sample over streams: every request a stream, stepped together until all
// are done.
func sampleStreams(ctx context.Context, m *LLM, reqs []SampleRequest, opts SampleOptions, stops []int32) ([]SampleResult, error) {
	return sampleStreamsCached(ctx, m, reqs, opts, stops, nil)
}

// sampleStreamsCached is sampleStreams with the streams over the prefix cache pc (nil: none).
func sampleStreamsCached(ctx context.Context, m *LLM, reqs []SampleRequest, opts SampleOptions, stops []int32, pc *PrefixCache) ([]SampleResult, error) {
	if err := checkRequests(reqs, opts, m.d.context, m.d.vocab); err != nil {
		return nil, err
	}
	streams := make([]*Stream, len(reqs))
	for i, r := range reqs {
		streams[i] = newStream(m, r, opts, stops)
		if pc != nil {
			if err := streams[i].UsePrefixCache(pc); err != nil {
				return nil, err
			}
		}
	}
	for {
		done := true
		for _, s := range streams {
			done = done && s.Done()
		}
		if done {
			break
		}
		if err := Step(ctx, streams, StepOptions{}); err != nil {
			return nil, err
		}
	}
	out := make([]SampleResult, len(streams))
	for i, s := range streams {
		out[i] = s.res
	}
	return out, nil
}
