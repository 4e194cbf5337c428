package model

import "math"

// Grads holds one gradient tensor per parameter, laid out like the model.
type Grads struct {
	cfg   Config
	buf   []float32
	parts [][]float32
	specs []paramSpec
	core  *LLMGrads // the skeleton's views of buf
}

// NewGrads returns zeroed gradients shaped like m.
func (m *Model) NewGrads() *Grads {
	g := &Grads{cfg: m.cfg, buf: make([]float32, len(m.buf)), specs: m.specs}
	var w llmW
	w, g.parts = builtinViews(m.cfg, g.buf)
	g.core = &LLMGrads{buf: g.buf, parts: g.parts, w: w}
	return g
}

// Zero sets every gradient to 0.
func (g *Grads) Zero() { clear(g.buf) }

// Add adds o into g (configs must match).
func (g *Grads) Add(o *Grads) {
	if o.cfg != g.cfg {
		panic("model: Grads.Add: config mismatch")
	}
	for i, v := range o.buf {
		g.buf[i] += v
	}
}

// Scale multiplies every gradient by f.
func (g *Grads) Scale(f float32) {
	for i := range g.buf {
		g.buf[i] *= f
	}
}

// Norm is the L2 norm over all gradients, summed in parameter order in float64.
func (g *Grads) Norm() float64 {
	var s float64
	for _, v := range g.buf {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// Tensor returns the gradient of the i-th parameter (in Params order).
func (g *Grads) Tensor(i int) []float32 { return g.parts[i] }

// Config is the config of the model the gradients are of: gradients of two models with one
// config are laid out alike.
func (g *Grads) Config() Config { return g.cfg }

// ByName returns the gradient tensor of the named parameter, or nil.
func (g *Grads) ByName(name string) []float32 {
	for i, s := range g.specs {
		if s.name == name {
			return g.parts[i]
		}
	}
	return nil
}

// ClipGradNorm scales g so its L2 norm is at most maxNorm (when maxNorm > 0
// and the norm is finite) and returns the norm before clipping.
func ClipGradNorm(g *Grads, maxNorm float64) float64 {
	n := g.Norm()
	if f, ok := ClipScale(n, maxNorm); ok {
		g.Scale(f)
	}
	return n
}

// ClipScale is ClipGradNorm's factor for a gradient of norm n: maxNorm/(n+1e-6) and true
// when maxNorm > 0, n > maxNorm and n is finite; otherwise 1 and false (no scaling).
func ClipScale(n, maxNorm float64) (float32, bool) {
	if maxNorm > 0 && n > maxNorm && !math.IsInf(n, 0) && !math.IsNaN(n) {
		return float32(maxNorm / (n + 1e-6)), true
	}
	return 1, false
}
