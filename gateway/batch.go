package gateway

import (
	"context"
	"fmt"
	"sync"

	"github.com/drmas-dev/drmas/actors"
)

// batcher gathers the calls that wait for one model into batches: while the model generates a
// batch, new calls queue, and the next batch takes all of them (up to max). A backend's results
// do not depend on batching (each request is seeded alone), so neither do the calls'.
type batcher struct {
	be  actors.Backend
	max int

	mu      sync.Mutex
	queue   map[actors.Sampling][]*pending
	running bool
}

// pending is one queued call and where its result goes.
type pending struct {
	ctx  context.Context
	req  actors.Request
	resp actors.Response
	err  error
	done chan struct{}
}

// generate queues req and waits for its response; the first caller to find the model idle
// runs batches until the queue is empty.
func (b *batcher) generate(ctx context.Context, req actors.Request, s actors.Sampling) (actors.Response, error) {
	p := &pending{ctx: ctx, req: req, done: make(chan struct{})}
	b.mu.Lock()
	b.queue[s] = append(b.queue[s], p)
	lead := !b.running
	b.running = true
	b.mu.Unlock()
	if lead {
		b.drain()
	}
	select {
	case <-p.done:
		return p.resp, p.err
	case <-ctx.Done():
		return actors.Response{}, ctx.Err()
	}
}

// drain runs the queued calls, one sampling setting's batch at a time, until none is left.
func (b *batcher) drain() {
	for {
		b.mu.Lock()
		var s actors.Sampling
		var batch []*pending
		for k, q := range b.queue {
			s, batch = k, q
			break
		}
		if batch == nil {
			b.running = false
			b.mu.Unlock()
			return
		}
		if len(batch) > b.max {
			b.queue[s], batch = batch[b.max:], batch[:b.max]
		} else {
			delete(b.queue, s)
		}
		b.mu.Unlock()
		b.run(batch, s)
	}
}

// run generates one batch, leaving out calls whose client is gone.
func (b *batcher) run(batch []*pending, s actors.Sampling) {
	live := batch[:0:0]
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.err = err
			close(p.done)
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	reqs := make([]actors.Request, len(live))
	for i, p := range live {
		reqs[i] = p.req
	}
	resps, err := b.be.Generate(context.Background(), reqs, s)
	if err == nil && len(resps) != len(reqs) {
		err = fmt.Errorf("model %s returned %d responses for %d requests", b.be.Model(), len(resps), len(reqs))
	}
	for i, p := range live {
		if err != nil {
			p.err = err
		} else {
			p.resp = resps[i]
		}
		close(p.done)
	}
}
