package engine

import (
	"errors"
	"math"
	"testing"

	"github.com/drmas-dev/drmas/gpu/cuda"
	"github.com/drmas-dev/drmas/model"
)

// gpuDevice opens CUDA device 0, or skips with the reason when the machine has no usable
// CUDA driver (CI): the only skip these tests allow.
func gpuDevice(t *testing.T) *cuda.Device {
	t.Helper()
	d, err := cuda.Open(0)
	if errors.Is(err, cuda.ErrNoCUDA) {
		t.Skipf("no GPU: %v", err)
	}
	if err != nil {
		t.Fatalf("open CUDA device 0: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("GPU: %s (%s)", d.Name(), d.UUID())
	return d
}

// TestGPUMatchesCPU is the GPU learner's equivalence test: the GPU engine on the GPU against
// the CPU engine, same weights and batch.
func TestGPUMatchesCPU(t *testing.T) {
	d := gpuDevice(t)
	cases := append(interpCases[:len(interpCases):len(interpCases)], struct {
		name string
		cfg  model.Config
		lens [][2]int
		ent  bool
		head int
		attn int
	}{"d128-l3", model.Config{Vocab: model.VocabSize, Context: 256, Dim: 128, Layers: 3, Heads: 4, FFMult: 4, TiedHead: true},
		[][2]int{{100, 156}, {1, 255}, {30, 40}, {64, 64}, {5, 0}, {200, 17}}, true, 0, 100})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { compareEngines(t, d, tc.cfg, tc.lens, tc.ent, tc.head, tc.attn) })
	}
}

// TestGPUMatchesInterpreter checks that the GPU computes what the interpreter computes: the
// same IR, so log-probs agree to float32 rounding of the approximate exp/log.
func TestGPUMatchesInterpreter(t *testing.T) {
	d := gpuDevice(t)
	m, seqs := smallCase(t)
	run := func(dev Device) ([]float32, []float32) {
		lp, g := passGrads(t, dev, m, seqs, false)
		return lp, g.Tensor(0)
	}
	lg, gg := run(d)
	li, gi := run(interp(t))
	worst := 0.0
	for i := range lg {
		worst = max(worst, math.Abs(float64(lg[i]-li[i])))
	}
	gw := 0.0
	for i := range gg {
		gw = max(gw, math.Abs(float64(gg[i]-gi[i])))
	}
	t.Logf("GPU vs interpreter: log-probs max diff %.3g, token-embedding grad max diff %.3g", worst, gw)
	if worst > 1e-5 || gw > 1e-5 {
		t.Errorf("GPU and interpreter disagree: %.3g, %.3g", worst, gw)
	}
}

// TestGPUBigGemmSameBits: on the GPU too, the TileBig GEMMs give the Tile GEMMs' bits.
func TestGPUBigGemmSameBits(t *testing.T) {
	d := gpuDevice(t)
	checkBigGemmSameBits(t, d, d)
}

// TestGPUDeterministic runs the same batch twice: gradients must be bit-identical (no
// atomics, fixed reduction orders).
func TestGPUDeterministic(t *testing.T) {
	d := gpuDevice(t)
	c := model.Config{Vocab: model.VocabSize, Context: 128, Dim: 64, Layers: 2, Heads: 4, FFMult: 4, TiedHead: true}
	m, err := model.New(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	seqs := testBatch(c, 4, [][2]int{{20, 100}, {3, 60}, {64, 64}})
	tr, err := New(d, m)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var grads []*model.Grads
	for k := 0; k < 2; k++ {
		p, err := tr.Forward(m, seqs, 1)
		if err != nil {
			t.Fatal(err)
		}
		dlp := p.LogProbs()
		g := m.NewGrads()
		if err := p.Backward(dlp, p.Entropy(), g); err != nil {
			t.Fatal(err)
		}
		grads = append(grads, g)
	}
	for i := range m.Params() {
		a, b := grads[0].Tensor(i), grads[1].Tensor(i)
		for j := range a {
			if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
				t.Fatalf("param %d[%d]: %v then %v", i, j, a[j], b[j])
			}
		}
	}
}

// TestGPUDeviceOptimizer runs checkDeviceOptimizer on the GPU: gradient accumulation, norms,
// clipping and AdamW on the device, and the Sync of weights and moments back to the host.
func TestGPUDeviceOptimizer(t *testing.T) {
	checkDeviceOptimizer(t, gpuDevice(t))
}
