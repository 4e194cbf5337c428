package engine

import (
	"fmt"
	"math"
	"time"

	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
	"github.com/drmas-dev/drmas/model"
)

// Grads is a gradient on the device, laid out like the model's parameters. The learner
// accumulates an agent's micro-batches into one with Pass.BackwardInto, takes its norm, adds
// the agents' into a total and hands that to Step, so an optimizer step moves no weights or
// gradients across the bus. A Grads belongs to its Trainer and is freed by Free or Close.
type Grads struct {
	t *Trainer
	p ir.Ptr
}

// NewGrads allocates a zeroed device gradient.
func (t *Trainer) NewGrads() (*Grads, error) {
	if t.closed {
		return nil, fmt.Errorf("gpu engine: trainer closed")
	}
	p, err := t.dev.Alloc(t.total)
	if err != nil {
		return nil, fmt.Errorf("gpu engine: gradients: %w", err)
	}
	g := &Grads{t: t, p: p}
	if err := g.Zero(); err != nil {
		_ = g.Free()
		return nil, err
	}
	t.grads[g] = struct{}{}
	return g, nil
}

func (g *Grads) check(t *Trainer) error {
	switch {
	case g == nil || g.p == 0:
		return fmt.Errorf("gpu engine: gradients freed or nil")
	case g.t != t:
		return fmt.Errorf("gpu engine: gradients of another trainer")
	case t.closed:
		return fmt.Errorf("gpu engine: trainer closed")
	}
	return nil
}

// Free releases g's device memory; g is unusable afterwards.
func (g *Grads) Free() error {
	if g == nil || g.p == 0 {
		return nil
	}
	delete(g.t.grads, g)
	p := g.p
	g.p = 0
	if g.t.closed {
		return nil
	}
	return g.t.dev.Free(p)
}

// Zero sets every gradient to 0.
func (g *Grads) Zero() error {
	if err := g.check(g.t); err != nil {
		return err
	}
	if err := g.t.dev.Zero(g.p, g.t.total); err != nil {
		return fmt.Errorf("gpu engine: zero gradients: %w", err)
	}
	return nil
}

// Add adds o into g element by element (model.Grads.Add's arithmetic).
func (g *Grads) Add(o *Grads) error {
	if err := g.check(g.t); err != nil {
		return err
	}
	if err := o.check(g.t); err != nil {
		return err
	}
	defer g.t.timeOptimizer(time.Now())
	l := g.t.launcher()
	l.elementwise("add_inplace", g.t.total, ir.ArgP(g.p), ir.ArgP(o.p))
	return l.err
}

// Scale multiplies every gradient by f (model.Grads.Scale's arithmetic).
func (g *Grads) Scale(f float32) error {
	if err := g.check(g.t); err != nil {
		return err
	}
	defer g.t.timeOptimizer(time.Now())
	l := g.t.launcher()
	l.elementwise("scale_inplace", g.t.total, ir.ArgP(g.p), ir.ArgF(f))
	return l.err
}

// Norm is the L2 norm over all gradients: float32 sums of squares over fixed chunks of
// kernels.NormChunk elements on the device, added in order in float64 on the host. Not
// model.Grads.Norm's bits (that sums every square in float64) but deterministic, and within
// a few float32 roundings of it. A gradient element above about 1.8e19 in magnitude (a run
// that has already diverged) squares to +Inf here where the host's sum stays finite, so the
// norm is +Inf and clipping, as on the host for a non-finite norm, is skipped.
func (g *Grads) Norm() (float64, error) {
	t := g.t
	if err := g.check(t); err != nil {
		return 0, err
	}
	defer t.timeOptimizer(time.Now())
	chunks := ceil(t.total, kernels.NormChunk)
	part, err := t.buf("sumsq", chunks)
	if err != nil {
		return 0, err
	}
	l := t.launcher()
	l.launch("sumsq_part", [3]int{chunks, 1, 1}, [3]int{kernels.RowThreads, 1, 1}, ir.ArgP(g.p), ir.ArgP(part), ir.ArgI(t.total))
	if l.err != nil {
		return 0, l.err
	}
	host := make([]float32, chunks)
	if err := t.dev.ReadF32(host, part); err != nil {
		return 0, fmt.Errorf("gpu engine: read norm: %w", err)
	}
	var s float64
	for _, v := range host {
		s += float64(v)
	}
	return math.Sqrt(s), nil
}

// Read copies g to the host into dst (overwriting it).
func (g *Grads) Read(dst *model.Grads) error {
	t := g.t
	if err := g.check(t); err != nil {
		return err
	}
	if !t.matches(dst) {
		return fmt.Errorf("gpu engine: Read: grads do not match the model config")
	}
	for i := range t.off {
		if err := t.dev.ReadF32(dst.Tensor(i), g.p.Add(t.off[i])); err != nil {
			return fmt.Errorf("gpu engine: read gradients: %w", err)
		}
	}
	return nil
}

// Step runs opt's AdamW step (model.AdamW.Step's arithmetic, bit for bit for the same
// gradient) on m's weights on the device with gradient g. opt must be m's optimizer.
//
// After Step the device holds m's and opt's newest weights and moments (opt.Steps is
// counted on the host as usual): the host copies are stale until Sync. A Forward of m uses
// the device's weights; a Forward of another model Syncs m first. The optimizer's moments are
// uploaded at its first Step on this Trainer, and again whenever the host stepped it since.
// When Step fails the device state is undefined: the caller should drop the update.
func (t *Trainer) Step(m *model.Model, opt *model.AdamW, g *Grads) error {
	if err := g.check(t); err != nil {
		return err
	}
	if opt == nil || opt.Model() != m {
		return fmt.Errorf("gpu engine: Step: the optimizer is not the model's")
	}
	if err := t.use(m); err != nil {
		return err
	}
	defer t.timeOptimizer(time.Now())
	if t.opt != opt || t.optSteps != opt.Steps {
		if t.ahead {
			return fmt.Errorf("gpu engine: Step: the device holds updates of another optimizer state (Sync first)")
		}
		if err := t.uploadMoments(opt); err != nil {
			return err
		}
	}
	s, err := opt.Advance()
	if err != nil {
		return fmt.Errorf("gpu engine: Step: %w", err)
	}
	t.optSteps = opt.Steps
	t.ahead = true
	l := t.launcher()
	for i, off := range t.off {
		l.elementwise("adamw", t.sizes[i], ir.ArgP(t.w.Add(off)), ir.ArgP(g.p.Add(off)), ir.ArgP(t.mom.Add(off)), ir.ArgP(t.vel.Add(off)),
			ir.ArgF(s.Decay[i]), ir.ArgF(s.B1), ir.ArgF(s.B2), ir.ArgF(s.StepSize), ir.ArgF(s.InvBc2), ir.ArgF(s.Eps))
	}
	if l.err == nil {
		l.err = t.dev.Sync()
	}
	if l.err != nil {
		return fmt.Errorf("gpu engine: adamw: %w", l.err)
	}
	return nil
}

func (t *Trainer) uploadMoments(opt *model.AdamW) error {
	mom, vel := opt.Moments()
	if len(mom) != t.total || len(vel) != t.total {
		return fmt.Errorf("gpu engine: optimizer state has %d words, the model %d", len(mom), t.total)
	}
	for _, b := range []*ir.Ptr{&t.mom, &t.vel} {
		if *b == 0 {
			p, err := t.dev.Alloc(t.total)
			if err != nil {
				return fmt.Errorf("gpu engine: optimizer state: %w", err)
			}
			*b = p
		}
	}
	if err := t.dev.WriteF32(t.mom, mom); err != nil {
		return fmt.Errorf("gpu engine: upload optimizer state: %w", err)
	}
	if err := t.dev.WriteF32(t.vel, vel); err != nil {
		return fmt.Errorf("gpu engine: upload optimizer state: %w", err)
	}
	t.opt, t.optSteps = opt, opt.Steps
	return nil
}

// Ahead reports whether the device holds Step's updates that the host model and optimizer do
// not have yet.
func (t *Trainer) Ahead() bool { return t.ahead }

// Sync copies the weights and optimizer moments that Step changed back to the host model and
// optimizer, so checkpoints, evaluation and the CPU engine see them. It is a no-op when the
// host is current. Call it before reading the model on the host.
func (t *Trainer) Sync() error {
	if !t.ahead {
		return nil
	}
	if t.closed {
		return fmt.Errorf("gpu engine: trainer closed with updates not synced")
	}
	start := time.Now()
	defer func() { t.times.Download += time.Since(start) }()
	for i, p := range t.src.Params() {
		if p.BF16 != nil {
			continue // frozen: a model stored in BF16 never trains
		}
		if err := t.dev.ReadF32(p.Data, t.w.Add(t.off[i])); err != nil {
			return fmt.Errorf("gpu engine: sync %s: %w", p.Name, err)
		}
	}
	mom, vel := t.opt.Moments()
	if err := t.dev.ReadF32(mom, t.mom); err != nil {
		return fmt.Errorf("gpu engine: sync optimizer state: %w", err)
	}
	if err := t.dev.ReadF32(vel, t.vel); err != nil {
		return fmt.Errorf("gpu engine: sync optimizer state: %w", err)
	}
	t.ahead = false
	return nil
}

// use makes m's weights the device's: nothing to do when m is the model last uploaded and
// the host did not change it (MarkDirty); otherwise Sync the model whose updates the device
// holds, then upload m.
func (t *Trainer) use(m *model.Model) error {
	if m == t.src && !t.dirty {
		return nil
	}
	if t.ahead {
		if m == t.src {
			return fmt.Errorf("gpu engine: the host changed the weights (MarkDirty) while the device holds newer ones from Step")
		}
		if err := t.Sync(); err != nil {
			return err
		}
	}
	return t.upload(m)
}

func (t *Trainer) timeOptimizer(start time.Time) { t.times.Optimizer += time.Since(start) }
