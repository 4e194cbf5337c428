package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/model"
)

// The four linears of a block a LoRA module can add to, by the (fused) base weight: q|k|v,
// o, gate|up and down.
const (
	siteQKV = iota
	siteO
	siteGateUp
	siteDown
	numSites
)

// loraMod is one adapted module on the device: A [r×in] at aOff and B [out×r] at bOff of the
// adapter's weight and gradient buffers (model.LoRA's Params layout); its output is columns
// col..col+out of its linear's ld-wide output. u names the buffer that keeps x·Aᵀ [N×r] from
// the forward for the backward.
type loraMod struct {
	in, out, col, ld int
	aOff, bOff       int
	u                string
}

// loraDev is a LoRA adapter on the device, as an LLMTrainer's linears see it: per layer and
// site the modules that add scale·(x·Aᵀ)·Bᵀ to the linear's output.
type loraDev struct {
	t     *Trainer
	r     int
	scale float32
	total int
	w, g  ir.Ptr // A and B, their gradients, in Params order
	sites [][numSites][]loraMod
}

// loraSite is where a target module sits: its linear, input and output widths, first column
// in the linear's output, and that output's width.
func loraSite(target string, d llmDims) (site, in, out, col, ld int) {
	qd, kvd := d.H*d.hd, d.KV*d.hd
	switch target {
	case "q_proj":
		return siteQKV, d.D, qd, 0, d.ld
	case "k_proj":
		return siteQKV, d.D, kvd, qd, d.ld
	case "v_proj":
		return siteQKV, d.D, kvd, qd + kvd, d.ld
	case "o_proj":
		return siteO, qd, d.D, 0, d.D
	case "gate_proj":
		return siteGateUp, d.D, d.F, 0, 2 * d.F
	case "up_proj":
		return siteGateUp, d.D, d.F, d.F, 2 * d.F
	case "down_proj":
		return siteDown, d.F, d.D, 0, d.D
	}
	return -1, 0, 0, 0, 0
}

// newLoRADev lays out l's modules over lt's model (checking them against l's Params, which
// come per layer and target, A then B) and allocates their weights and gradients on the device.
func newLoRADev(lt *LLMTrainer, l *model.LoRA) (*loraDev, error) {
	c, d, ps := l.Config(), lt.dims(), l.Params()
	a := &loraDev{t: lt.t, r: c.R, scale: float32(c.Scale()), sites: make([][numSites][]loraMod, lt.cfg.Layers)}
	k := 0
	for layer := range a.sites {
		for _, target := range c.Targets {
			site, in, out, col, ld := loraSite(target, d)
			if site < 0 || 2*k+1 >= len(ps) || !slices.Equal(ps[2*k].Shape, []int{c.R, in}) || !slices.Equal(ps[2*k+1].Shape, []int{out, c.R}) {
				return nil, fmt.Errorf("gpu engine: LoRA module %d (%s of layer %d) is not laid out as the engine expects", k, target, layer)
			}
			md := loraMod{in: in, out: out, col: col, ld: ld, aOff: a.total, bOff: a.total + c.R*in, u: fmt.Sprintf("lora.u%d", k)}
			a.total = md.bOff + out*c.R
			a.sites[layer][site] = append(a.sites[layer][site], md)
			k++
		}
	}
	if 2*k != len(ps) || a.total != l.NumParams() {
		return nil, fmt.Errorf("gpu engine: the LoRA has %d tensors (%d parameters), the engine laid out %d (%d)", len(ps), l.NumParams(), 2*k, a.total)
	}
	if a.total > maxWords {
		return nil, fmt.Errorf("gpu engine: %d LoRA parameters above the kernels' int32 indexing (%d words)", a.total, maxWords)
	}
	var err error
	if a.w, err = lt.t.buf("lora.w", a.total); err != nil {
		return nil, err
	}
	if a.g, err = lt.t.buf("lora.g", a.total); err != nil {
		return nil, err
	}
	return a, nil
}

// forward adds the site's modules to y[n×ld] = x[n×in]·Wᵀ (+ b), keeping each u = x·Aᵀ. A nil
// adapter (a plain LLM) launches nothing.
func (a *loraDev) forward(l *launcher, layer, site int, x ir.Ptr, n int, y ir.Ptr) {
	if a == nil {
		return
	}
	for _, md := range a.sites[layer][site] {
		u := l.keep(a.t.buf(md.u, n*a.r))
		l.gemm(false, true, n, a.r, md.in, 1, x, md.in, a.w.Add(md.aOff), md.in, 0, u, a.r)
		l.gemm(false, true, n, md.out, a.r, a.scale, u, a.r, a.w.Add(md.bOff), a.r, 1, y.Add(md.col), md.ld)
	}
}

// backward, for the site's input x[n×in] and output gradient dY[n×ld], adds
// dB = scale·dYᵀ·u and dA = scale·(dY·B)ᵀ·x into the adapter's gradients and the adapter's
// part scale·(dY·B)·A into the input gradient dx[n×in] (model.LoRA's backward).
func (a *loraDev) backward(l *launcher, layer, site int, x, dY ir.Ptr, n int, dx ir.Ptr) {
	if a == nil {
		return
	}
	R, s := a.r, a.scale
	for _, md := range a.sites[layer][site] {
		v := l.keep(a.t.buf("lora.v", n*R))
		dYm := dY.Add(md.col)
		l.gemm(false, false, n, R, md.out, 1, dYm, md.ld, a.w.Add(md.bOff), R, 0, v, R)
		l.gemmW(true, false, md.out, R, n, s, dYm, md.ld, l.keep(a.t.buf(md.u, n*R)), R, 1, a.g.Add(md.bOff), R)
		l.gemmW(true, false, R, md.in, n, s, v, R, x, md.in, 1, a.g.Add(md.aOff), md.in)
		l.gemm(false, false, n, md.in, R, s, v, R, a.w.Add(md.aOff), md.in, 1, dx, md.in)
	}
}

func (a *loraDev) zeroGrads() error {
	if err := a.t.dev.Zero(a.g, a.total); err != nil {
		return fmt.Errorf("gpu engine: zero LoRA grads: %w", err)
	}
	return nil
}

// LoRATrainer runs a model.LoRA on a device: the LLMTrainer passes of its frozen base, each
// target linear adding the adapter's scale·(x·Aᵀ)·Bᵀ, and a backward that forms the gradients
// of A and B alone (no launch for a base weight, bias, norm or embedding gradient, and no
// device buffer for them). Results match model.LoRA's within float32 tolerance. The base and
// the adapter live on the device; Backward copies the adapter's gradient back and adds it
// into a *model.LoRAGrads, for AdamW on the host. LoRA dropout is not implemented here (the
// CPU engine runs it): NewLoRA refuses an adapter with Dropout > 0. Not safe for concurrent use.
type LoRATrainer struct {
	lt    *LLMTrainer
	ad    *loraDev
	src   *model.LoRA // the adapter whose A and B the device holds
	dirty bool
}

// NewLoRA allocates a LoRATrainer for adapters shaped like l on dev and uploads l's base and
// adapter weights.
func NewLoRA(dev Device, l *model.LoRA) (*LoRATrainer, error) {
	if p := l.Config().Dropout; p > 0 {
		return nil, fmt.Errorf("gpu engine: LoRA dropout %v: the GPU engine trains LoRA adapters without dropout only (set the adapter's dropout to 0, or train on the CPU engine)", p)
	}
	lt, err := NewLLM(dev, l.Base())
	if err != nil {
		return nil, err
	}
	// The base is frozen: its gradient buffer would only double the device memory.
	err = dev.Free(lt.t.g)
	lt.t.g = 0
	if err == nil {
		lt.ad, err = newLoRADev(lt, l)
	}
	if err != nil {
		_ = lt.Close()
		return nil, err
	}
	tr := &LoRATrainer{lt: lt, ad: lt.ad}
	if err := tr.upload(l); err != nil {
		_ = lt.Close()
		return nil, err
	}
	return tr, nil
}

// Close frees every device buffer of the trainer.
func (tr *LoRATrainer) Close() error { return tr.lt.Close() }

// MarkDirty says the adapter's A and B changed on the host (an optimizer step): the next
// Forward uploads them (the base is frozen and stays).
func (tr *LoRATrainer) MarkDirty() { tr.dirty = true }

func (tr *LoRATrainer) upload(l *model.LoRA) error {
	t := tr.lt.t
	start := time.Now()
	defer func() { t.times.Upload += time.Since(start) }()
	off := 0
	for _, p := range l.Params() {
		if err := t.dev.WriteF32(tr.ad.w.Add(off), p.Data); err != nil {
			return fmt.Errorf("gpu engine: upload %s: %w", p.Name, err)
		}
		off += len(p.Data)
	}
	tr.src, tr.dirty = l, false
	return nil
}

// LoRAPass is the result of LoRATrainer.Forward: log-probs and entropies on the host, the
// activations on the device until the next Forward.
type LoRAPass struct {
	*LLMPass
	tr *LoRATrainer
}

// Forward runs the batch through l (its base and adapter) on the device, uploading the base
// when it is not the one last uploaded and the adapter after MarkDirty or when l is another
// adapter (of the same layout).
func (tr *LoRATrainer) Forward(l *model.LoRA, seqs []model.Sequence, temperature float32) (*LoRAPass, error) {
	if tr.lt.t.closed {
		return nil, fmt.Errorf("gpu engine: trainer closed")
	}
	if l != tr.src {
		if err := tr.sameLayout(l); err != nil {
			return nil, err
		}
	}
	if tr.dirty || l != tr.src {
		if err := tr.upload(l); err != nil {
			return nil, err
		}
	}
	p, err := tr.lt.Forward(l.Base(), seqs, temperature)
	if err != nil {
		return nil, err
	}
	return &LoRAPass{LLMPass: p, tr: tr}, nil
}

// sameLayout checks that l is laid out as the adapter the trainer was made for.
func (tr *LoRATrainer) sameLayout(l *model.LoRA) error {
	a, b := l.Config(), tr.src.Config()
	if l.Base().Config() != tr.lt.cfg || a.R != b.R || !slices.Equal(a.Targets, b.Targets) {
		return fmt.Errorf("gpu engine: LoRA adapter (r %d, targets %v) differs from the trainer's (r %d, targets %v)", a.R, a.Targets, b.R, b.Targets)
	}
	if a.Dropout > 0 {
		return fmt.Errorf("gpu engine: LoRA dropout %v: the GPU engine trains LoRA adapters without dropout only", a.Dropout)
	}
	return nil
}

// Backward accumulates into g (a gradient of this adapter, model.LoRA's NewGradBuf) the
// gradient of Σ dLogProb·logprob + Σ dEntropy·entropy with respect to A and B, as
// model.LoRA's pass does (dEntropy may be nil).
func (p *LoRAPass) Backward(dLogProb, dEntropy [][]float32, g *model.LoRAGrads) error {
	tr := p.tr
	t := tr.lt.t
	if g == nil || len(g.Flat()) != tr.ad.total {
		return fmt.Errorf("gpu engine: Backward: grads do not match the LoRA adapter")
	}
	start := time.Now()
	defer func() { t.times.Backward += time.Since(start) }()
	if ran, err := p.launchBackward(dLogProb, dEntropy); err != nil || !ran {
		return err
	}
	host := make([]float32, tr.ad.total)
	if err := t.dev.ReadF32(host, tr.ad.g); err != nil {
		return fmt.Errorf("gpu engine: read LoRA gradients: %w", err)
	}
	flat := g.Flat()
	for i, v := range host {
		flat[i] += v
	}
	return nil
}
