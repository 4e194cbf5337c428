package engine

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
)

// countingDevice counts the launches that reach the device.
type countingDevice struct {
	Device
	launches map[string]int
}

func (c *countingDevice) Launch(name string, grid, block [3]int, args ...ir.Arg) error {
	c.launches[name]++
	return c.Device.Launch(name, grid, block, args...)
}

// TestProfilerGemmFlops checks the flops the profiler counts for a plain and a batched GEMM
// against 2·m·n·k worked from the sizes, and that the wrapped launch computes what an
// unwrapped one does.
func TestProfilerGemmFlops(t *testing.T) {
	run := func(dev Device) []float32 {
		a, _ := dev.Alloc(64 * 64)
		b, _ := dev.Alloc(64 * 64)
		c, _ := dev.Alloc(64 * 64)
		tab, _ := dev.Alloc(2 * kernels.TabWords)
		src := make([]float32, 64*64)
		for i := range src {
			src[i] = float32(i%17) - 8
		}
		if err := dev.WriteF32(a, src); err != nil {
			t.Fatal(err)
		}
		if err := dev.WriteF32(b, src); err != nil {
			t.Fatal(err)
		}
		l := &launcher{dev: dev}
		l.gemm(false, false, 37, 50, 23, 1, a, 64, b, 64, 0, c, 64)
		// Two products: 5×7 (k 3) and 11×2 (k 13), at different offsets.
		if err := dev.WriteI32(tab, []int32{5, 7, 3, 0, 0, 0, 64, 64, 64, 11, 2, 13, 100, 200, 2000, 64, 64, 64}); err != nil {
			t.Fatal(err)
		}
		l.gemmBatched(false, false, batch{tab: tab, n: 2, maxM: 11, maxN: 7}, 1, 0, a, b, c)
		if l.err != nil {
			t.Fatal(l.err)
		}
		out := make([]float32, 64*64)
		if err := dev.ReadF32(out, c); err != nil {
			t.Fatal(err)
		}
		return out
	}
	p := NewProfiler(interp(t))
	got, want := run(p), run(interp(t))
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("C[%d] = %v through the profiler, %v without", i, got[i], want[i])
		}
	}
	stats, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	flops := map[string]float64{}
	for _, s := range stats {
		flops[s.Name] = s.Flops
		if s.Calls != 1 || s.Time <= 0 {
			t.Errorf("%s: %d calls in %v, want 1 call with a time", s.Name, s.Calls, s.Time)
		}
	}
	if want := 2.0 * 37 * 50 * 23; flops["gemm_nn"] != want {
		t.Errorf("gemm_nn flops %v, want %v", flops["gemm_nn"], want)
	}
	if want := 2.0 * (5*7*3 + 11*2*13); flops["gemm_nn_batched"] != want {
		t.Errorf("gemm_nn_batched flops %v, want %v", flops["gemm_nn_batched"], want)
	}
	p.Reset()
	if s, _ := p.Stats(); len(s) != 0 {
		t.Errorf("Reset left %d kernels", len(s))
	}
}

// TestProfilerEngine runs a forward and backward pass through the profiler: results are the
// same bits as without it, every launch is recorded once, and the table names every kernel.
func TestProfilerEngine(t *testing.T) {
	m, seqs := smallCase(t)
	counter := &countingDevice{Device: interp(t), launches: map[string]int{}}
	prof := NewProfiler(counter)
	lpP, gP := passGrads(t, prof, m, seqs, true)
	lp, g := passGrads(t, interp(t), m, seqs, true)
	for i := range lp {
		if math.Float32bits(lp[i]) != math.Float32bits(lpP[i]) {
			t.Fatalf("log-prob %d differs through the profiler", i)
		}
	}
	for i := range m.Params() {
		a, b := g.Tensor(i), gP.Tensor(i)
		for j := range a {
			if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
				t.Fatalf("gradient %d[%d] differs through the profiler", i, j)
			}
		}
	}
	stats, err := prof.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != len(counter.launches) {
		t.Errorf("profiled %d kernels, %d were launched", len(stats), len(counter.launches))
	}
	var gemmFlops float64
	for i, s := range stats {
		if s.Calls != counter.launches[s.Name] {
			t.Errorf("%s: profiled %d calls, launched %d", s.Name, s.Calls, counter.launches[s.Name])
		}
		if i > 0 && s.Time > stats[i-1].Time {
			t.Errorf("stats not sorted by time at %s", s.Name)
		}
		if strings.HasPrefix(s.Name, "gemm_") != (s.Flops > 0) {
			t.Errorf("%s: flops %v", s.Name, s.Flops)
		}
		gemmFlops += s.Flops
	}
	var buf bytes.Buffer
	if err := WriteProfile(&buf, stats); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for name := range counter.launches {
		if !strings.Contains(out, name) {
			t.Errorf("table lacks %s:\n%s", name, out)
		}
	}
	if !strings.Contains(out, "profiled kernels:") {
		t.Errorf("no totals line:\n%s", out)
	}
	t.Logf("%d kernels, %.1f MFLOP of GEMMs\n%s", len(stats), gemmFlops/1e6, out)
}
