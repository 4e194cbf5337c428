package engine

import (
	"math"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/model"
)

// TestDeviceOptimizer checks the device optimizer on the interpreter; TestGPUDeviceOptimizer
// runs the same checks on a GPU.
func TestDeviceOptimizer(t *testing.T) {
	in := interp(t)
	checkDeviceOptimizer(t, in)
	if n := in.Live(); n != 0 {
		t.Errorf("%d device buffers still allocated after Close", n)
	}
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func sameModels(t *testing.T, what string, a, b *model.Model) {
	t.Helper()
	pa, pb := a.Params(), b.Params()
	for i := range pa {
		sameBits(t, what+" "+pa[i].Name, pa[i].Data, pb[i].Data)
	}
}

func flat(v [][]float32) []float32 {
	var out []float32
	for _, r := range v {
		out = append(out, r...)
	}
	return out
}

// checkDeviceOptimizer: BackwardInto accumulates what Backward computes (bit for bit for the
// first pass, to float32 rounding for the second); Norm, Add and Scale are model.Grads'; Step
// is AdamW.Step bit for bit, leaves the host stale until Sync, and its weights are the ones a
// later Forward uses; switching models Syncs first; a host step in between is picked up;
// MarkDirty while the device is ahead is refused; Close frees everything.
func checkDeviceOptimizer(t *testing.T, dev Device) {
	m0, seqs := smallCase(t)
	mh, md := m0.Clone(), m0.Clone()
	tr, err := New(dev, md)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	p, err := tr.Forward(md, seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	dlp := p.LogProbs() // varied per-token gradients
	dg, err := tr.NewGrads()
	if err != nil {
		t.Fatal(err)
	}
	hg, got := md.NewGrads(), md.NewGrads()
	// accumulate adds the pass's gradient into dg on the device and into hg on the host, and
	// reads dg into got.
	accumulate := func() {
		t.Helper()
		if err := p.BackwardInto(dlp, nil, dg); err != nil {
			t.Fatal(err)
		}
		if err := p.Backward(dlp, nil, hg); err != nil {
			t.Fatal(err)
		}
		if err := dg.Read(got); err != nil {
			t.Fatal(err)
		}
	}
	accumulate()
	for i := range md.Params() {
		sameBits(t, "first BackwardInto", got.Tensor(i), hg.Tensor(i))
	}
	// A second micro-batch accumulates on the device (the GEMMs continue from the first's
	// values, so only float32 rounding differs from adding two host copies).
	accumulate()
	for i := range md.Params() {
		a, b := got.Tensor(i), hg.Tensor(i)
		scale := 0.0
		for _, v := range b {
			scale = max(scale, math.Abs(float64(v)))
		}
		for j := range a {
			if d := math.Abs(float64(a[j] - b[j])); d > 1e-5*scale+1e-12 {
				t.Fatalf("accumulated %s[%d] = %v, host sum %v", md.Params()[i].Name, j, a[j], b[j])
			}
		}
	}
	n, err := dg.Norm()
	if err != nil {
		t.Fatal(err)
	}
	if want := got.Norm(); math.Abs(n-want) > 1e-5*want || want == 0 {
		t.Fatalf("Norm %v, host norm of the same values %v", n, want)
	}
	// Add and Scale: the host's arithmetic bit for bit.
	other, err := tr.NewGrads()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.BackwardInto(dlp, nil, other); err != nil {
		t.Fatal(err)
	}
	og := md.NewGrads()
	if err := other.Read(og); err != nil {
		t.Fatal(err)
	}
	if err := dg.Add(other); err != nil {
		t.Fatal(err)
	}
	if err := dg.Scale(0.37); err != nil {
		t.Fatal(err)
	}
	got.Add(og)
	got.Scale(0.37)
	want := md.NewGrads()
	if err := dg.Read(want); err != nil {
		t.Fatal(err)
	}
	for i := range md.Params() {
		sameBits(t, "Add then Scale", want.Tensor(i), got.Tensor(i))
	}
	if err := other.Free(); err != nil {
		t.Fatal(err)
	}
	if err := other.Add(dg); err == nil {
		t.Fatal("a freed Grads was usable")
	}

	// Steps: the same gradient (got == dg) on the host and on the device.
	cfg := model.DefaultAdamWConfig()
	cfg.WeightDecay = 0.1
	oh, od := model.NewAdamW(mh, cfg), model.NewAdamW(md, cfg)
	if err := tr.Step(md, model.NewAdamW(mh, cfg), dg); err == nil {
		t.Fatal("Step with another model's optimizer accepted")
	}
	for s := 0; s < 3; s++ {
		if err := oh.Step(got); err != nil {
			t.Fatal(err)
		}
		if err := tr.Step(md, od, dg); err != nil {
			t.Fatal(err)
		}
	}
	if !tr.Ahead() || od.Steps != 3 {
		t.Fatalf("after 3 device steps: ahead %v, Steps %d", tr.Ahead(), od.Steps)
	}
	sameModels(t, "host weights before Sync (must be stale)", md, m0)
	// A Forward of md uses the device's weights: the log-probs of a fresh Trainer on mh.
	p2, err := tr.Forward(md, seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := New(dev, mh)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := ref.Forward(mh, seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, "log-probs after device steps", flat(p2.LogProbs()), flat(pr.LogProbs()))
	if err := ref.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Sync(); err != nil {
		t.Fatal(err)
	}
	sameModels(t, "weights after Sync", md, mh)
	mh1, mh2 := oh.Moments()
	md1, md2 := od.Moments()
	sameBits(t, "first moment", md1, mh1)
	sameBits(t, "second moment", md2, mh2)

	// A host step in between (the host path's MarkDirty): the next device step uploads the
	// host's weights and moments first.
	if err := oh.Step(got); err != nil {
		t.Fatal(err)
	}
	if err := od.Step(got); err != nil {
		t.Fatal(err)
	}
	tr.MarkDirty()
	if err := oh.Step(got); err != nil {
		t.Fatal(err)
	}
	if err := tr.Step(md, od, dg); err != nil {
		t.Fatal(err)
	}
	// Forward of another model Syncs md first.
	other2 := m0.Clone()
	if _, err := tr.Forward(other2, seqs, 1); err != nil {
		t.Fatal(err)
	}
	if tr.Ahead() {
		t.Fatal("still ahead after switching models")
	}
	sameModels(t, "weights after a host step and a device step", md, mh)
	md1, md2 = od.Moments()
	sameBits(t, "first moment after a host step and a device step", md1, mh1)
	sameBits(t, "second moment after a host step and a device step", md2, mh2)

	// MarkDirty while the device is ahead loses nothing silently: the next Forward fails.
	if err := tr.Step(md, od, dg); err != nil {
		t.Fatal(err)
	}
	tr.MarkDirty()
	if _, err := tr.Forward(md, seqs, 1); err == nil || !strings.Contains(err.Error(), "MarkDirty") {
		t.Fatalf("Forward after MarkDirty while ahead: %v", err)
	}
}
