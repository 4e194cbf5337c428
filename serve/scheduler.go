package serve

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/drmas-dev/drmas/model"
)

// The scheduler decodes every admitted prompt together, one token a step (continuous
// batching, as vLLM's scheduler): a request that arrives joins the batch at the next step,
// one that finishes leaves it at once, and one whose client left or whose deadline passed is
// dropped before the next step. Its goroutine alone owns the streams; handlers see a
// request's tokens only through its result (and, streaming, its progress).

// item is one HTTP request's prompts: queued, then decoded.
type item struct {
	// ctx is the request's: done when its client leaves or its deadline passes; cancel ends
	// it from the server's side (a streaming client that reads too slowly).
	ctx    context.Context
	cancel context.CancelCauseFunc
	pol    *policy
	reqs   []model.SampleRequest
	opts   model.SampleOptions
	done   chan result
	// prog is set for a streaming request: the tokens sampled since its handler last took them.
	prog *progress

	// The scheduler's own: each prompt's stream once admitted, how many tokens of each were
	// published to prog, which are done and counted out of the batch, how many prompts are not
	// done, and the step it arrived at.
	streams   []*model.Stream
	published []int
	ended     []bool
	left      int
	arrived   int64
}

type result struct {
	res []model.SampleResult
	pol *policy // what sampled
	err error
	// steps is how many decode steps ran from the request's arrival to its last token.
	steps int64
	// cached is how many prompt tokens, all prompts together, came from the prefix cache.
	cached int
}

// errSlowReader ends a streaming request whose client does not read its tokens.
var errSlowReader = errors.New("the client did not read the streamed tokens")

// sched is the scheduler's state.
type sched struct {
	waiting []*item // arrived, some prompts not yet admitted, in arrival order
	live    []*item // every prompt admitted
	streams int     // streams admitted and not done
	steps   int64
}

// scheduler runs the decode loop until ctx is cancelled.
func (s *Server) scheduler(ctx context.Context) {
	var sc sched
	defer sc.fail()
	for {
		if !s.collect(ctx, &sc) {
			return
		}
		s.drop(&sc)
		s.admit(&sc)
		s.waiting.Store(int64(len(sc.waiting)))
		if sc.streams == 0 {
			continue
		}
		s.step(ctx, &sc)
		s.finish(&sc)
		// Let the streaming handlers this step woke write their chunks before the next step
		// takes every core: otherwise a short completion may finish before its first chunk.
		runtime.Gosched()
	}
}

// collect takes the queued requests: when nothing is decoding it waits for one, then up to
// Window for others to share its first step (MaxBatch prompts at most); otherwise it takes
// what is there and returns at once. It reports false when ctx is done.
func (s *Server) collect(ctx context.Context, sc *sched) bool {
	if sc.streams > 0 || len(sc.waiting) > 0 {
		for {
			select {
			case it := <-s.queue:
				s.arrive(sc, it)
			case <-ctx.Done():
				return false
			default:
				return true
			}
		}
	}
	select {
	case it := <-s.queue:
		s.arrive(sc, it)
	case <-ctx.Done():
		return false
	}
	n := len(sc.waiting[0].reqs)
	t := time.NewTimer(s.o.Window)
	defer t.Stop()
	for n < s.o.MaxBatch {
		select {
		case it := <-s.queue:
			s.arrive(sc, it)
			n += len(it.reqs)
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func (s *Server) arrive(sc *sched, it *item) {
	it.streams = make([]*model.Stream, len(it.reqs))
	it.published = make([]int, len(it.reqs))
	it.ended = make([]bool, len(it.reqs))
	it.left = len(it.reqs)
	it.arrived = sc.steps
	sc.waiting = append(sc.waiting, it)
}

// drop removes the requests whose context is done: their streams leave the batch before the
// next step.
func (s *Server) drop(sc *sched) {
	gone := func(it *item) bool {
		if it.ctx.Err() == nil {
			return false
		}
		started := false
		for i, st := range it.streams {
			if st != nil && !it.ended[i] {
				sc.streams--
				started = true
			}
		}
		if started {
			s.stoppedCalls.Add(1)
		}
		if errors.Is(context.Cause(it.ctx), errSlowReader) {
			s.slowReaders.Add(1)
		}
		return true
	}
	sc.waiting = slices.DeleteFunc(sc.waiting, gone)
	sc.live = slices.DeleteFunc(sc.live, gone)
}

// admit gives the waiting requests' prompts streams, in arrival order, while fewer than
// MaxBatch are decoding.
func (s *Server) admit(sc *sched) {
	for len(sc.waiting) > 0 && sc.streams < s.o.MaxBatch {
		it := sc.waiting[0]
		i := slices.Index(it.streams, nil)
		st, err := newStream(it.pol, it.reqs[i], it.opts)
		if err != nil {
			sc.waiting = sc.waiting[1:]
			sc.abandon(it)
			it.done <- result{pol: it.pol, err: err}
			continue
		}
		it.streams[i] = st
		sc.streams++
		s.prompts.Add(1)
		if i == len(it.streams)-1 {
			sc.waiting = sc.waiting[1:]
			sc.live = append(sc.live, it)
		}
	}
}

// abandon takes a request's admitted streams out of the count.
func (sc *sched) abandon(it *item) {
	for i, st := range it.streams {
		if st != nil && !it.ended[i] {
			sc.streams--
		}
	}
}

// newStream is a prompt's decoding state with p, over p's prefix cache.
func newStream(p *policy, req model.SampleRequest, opts model.SampleOptions) (*model.Stream, error) {
	st, err := streamer(p).NewStream(req, opts)
	if err != nil {
		return nil, err
	}
	if err := st.UsePrefixCache(p.pc); err != nil {
		return nil, err
	}
	return st, nil
}

// streamer is a policy's model as a step decoder (every model.Policy the server loads is one).
func streamer(p *policy) model.Streamer {
	if st, ok := p.m.(model.Streamer); ok {
		return st
	}
	return noStreamer{}
}

type noStreamer struct{}

func (noStreamer) NewStream(model.SampleRequest, model.SampleOptions) (*model.Stream, error) {
	return nil, errors.New("this model cannot be decoded step by step")
}

// step advances every admitted stream by one token: one model.Step per policy (streams of
// different weights cannot share a step), in the order the policies' requests arrived.
func (s *Server) step(ctx context.Context, sc *sched) {
	pols, byPol, users := sc.groups()
	failed := map[*item]bool{}
	for _, p := range pols {
		streams := byPol[p]
		err := model.Step(ctx, streams, model.StepOptions{MaxPrefill: s.o.MaxPrefill})
		s.batches.Add(1)
		for {
			cur := s.maxBatch.Load()
			if int64(len(streams)) <= cur || s.maxBatch.CompareAndSwap(cur, int64(len(streams))) {
				break
			}
		}
		if err != nil {
			for _, it := range users[p] {
				failed[it] = true
				sc.abandon(it)
				it.done <- result{pol: p, err: err}
			}
		}
	}
	if len(failed) > 0 {
		sc.live = slices.DeleteFunc(sc.live, func(it *item) bool { return failed[it] })
		sc.waiting = slices.DeleteFunc(sc.waiting, func(it *item) bool { return failed[it] })
	}
	sc.steps++
}

// groups are the streams not done by policy, the policies in order of their first request,
// and each policy's requests.
func (sc *sched) groups() ([]*policy, map[*policy][]*model.Stream, map[*policy][]*item) {
	var pols []*policy
	byPol := map[*policy][]*model.Stream{}
	users := map[*policy][]*item{}
	for _, it := range slices.Concat(sc.live, sc.waiting) {
		n := len(byPol[it.pol])
		for _, st := range it.streams {
			if st != nil && !st.Done() {
				byPol[it.pol] = append(byPol[it.pol], st)
			}
		}
		if len(byPol[it.pol]) == n {
			continue
		}
		if _, ok := users[it.pol]; !ok {
			pols = append(pols, it.pol)
		}
		users[it.pol] = append(users[it.pol], it)
	}
	return pols, byPol, users
}

// finish settles every request after a step; the live ones all of whose prompts are done
// are answered and leave.
func (s *Server) finish(sc *sched) {
	for _, it := range sc.waiting {
		s.settle(sc, it)
	}
	sc.live = slices.DeleteFunc(sc.live, func(it *item) bool { return s.settle(sc, it) })
}

// settle counts it's newly finished streams out of the batch, publishes a streaming
// request's new tokens (dropping its client past StreamBacklog tokens unread), and answers it
// once all its prompts are done; it reports whether it was answered.
func (s *Server) settle(sc *sched, it *item) bool {
	if it.ctx.Err() != nil {
		return false // drop takes it out
	}
	for i, st := range it.streams {
		if st != nil && st.Done() && !it.ended[i] {
			it.ended[i] = true
			it.left--
			sc.streams--
		}
	}
	if it.prog != nil && it.prog.publish(it, s.o.StreamBacklog) {
		it.cancel(errSlowReader)
		return false
	}
	if it.left > 0 {
		return false
	}
	res := make([]model.SampleResult, len(it.streams))
	cached := 0
	for i, st := range it.streams {
		res[i] = st.Result()
		cached += st.CachedTokens()
	}
	s.cachedTokens.Add(int64(cached))
	it.done <- result{res: res, pol: it.pol, steps: sc.steps - it.arrived, cached: cached}
	return true
}

// fail answers every request still held when the scheduler stops.
func (sc *sched) fail() {
	for _, it := range slices.Concat(sc.live, sc.waiting) {
		select {
		case it.done <- result{pol: it.pol, err: errors.New("the server stopped")}:
		default:
		}
	}
}

// progress is what the scheduler has sampled for a streaming request and its handler has not
// yet taken: the scheduler never waits for the handler, and drops the request once more than
// StreamBacklog tokens wait.
type progress struct {
	mu     sync.Mutex
	toks   [][]int32
	lps    [][]float32
	finish []string
	// waiting counts the tokens in toks; notify has a value when something is new.
	waiting int
	notify  chan struct{}
}

func newProgress(n int) *progress {
	return &progress{toks: make([][]int32, n), lps: make([][]float32, n), finish: make([]string, n), notify: make(chan struct{}, 1)}
}

// publish adds the tokens it's streams sampled since the last call, and reports whether more
// than backlog now wait.
func (p *progress) publish(it *item, backlog int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, st := range it.streams {
		if st == nil {
			continue
		}
		toks, lps := st.Tokens(it.published[i])
		it.published[i] += len(toks)
		p.toks[i] = append(p.toks[i], toks...)
		p.lps[i] = append(p.lps[i], lps...)
		p.waiting += len(toks)
		p.finish[i] = st.Result().FinishReason
	}
	select {
	case p.notify <- struct{}{}:
	default:
	}
	return p.waiting > backlog
}

// take returns and forgets what waits: the new tokens and log-probs of each prompt, and each
// prompt's finish reason ("" while it runs).
func (p *progress) take() ([][]int32, [][]float32, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	toks, lps := p.toks, p.lps
	p.toks, p.lps = make([][]int32, len(toks)), make([][]float32, len(lps))
	p.waiting = 0
	return toks, lps, slices.Clone(p.finish)
}
