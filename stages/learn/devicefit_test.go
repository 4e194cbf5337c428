package learn

import (
	"errors"
	"strings"
	"testing"

	gpuengine "github.com/drmas-dev/drmas/gpu/engine"
	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
	"github.com/drmas-dev/drmas/hfmodel"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// memDevice is the gpu/ir interpreter with a memory of budget bytes: it counts what is
// allocated and reports the rest as free, as a GPU's MemInfo does.
type memDevice struct {
	gpuengine.Device
	budget     int64
	sizes      map[ir.Ptr]int
	live, peak int // words
}

func newMemDevice(t *testing.T, budget int64) *memDevice {
	ks, err := kernels.All()
	if err != nil {
		t.Fatal(err)
	}
	return &memDevice{Device: ir.NewInterp(ks), budget: budget, sizes: map[ir.Ptr]int{}}
}

func (d *memDevice) Alloc(words int) (ir.Ptr, error) {
	p, err := d.Device.Alloc(words)
	if err == nil {
		d.sizes[p] = words
		d.live += words
		d.peak = max(d.peak, d.live)
	}
	return p, err
}

func (d *memDevice) Free(p ir.Ptr) error {
	d.live -= d.sizes[p]
	delete(d.sizes, p)
	return d.Device.Free(p)
}

func (d *memDevice) MemInfo() (free, total uint64, err error) {
	return uint64(max(0, d.budget-4*int64(d.live))), uint64(d.budget), nil
}

// TinyLLM is a two-layer Qwen3 of hidden 16 over a vocabulary of vocab tokens (seed 5), for
// this package's tests, internal and external.
func TinyLLM(t *testing.T, vocab int) *model.LLM {
	t.Helper()
	m, err := model.InitLLM(model.ArchConfig{Arch: "qwen3", Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 8, Intermediate: 24,
		Vocab: vocab, Context: 32, RMSNormEps: 1e-6, RopeTheta: 10000}.WithDefaults(), 5)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// measuredPeak is the most bytes the GPU engine holds at once on the interpreter over
// NewLLM, a forward and a backward of n sequences of the configured shape: the real
// allocations, counted outside the estimate.
func measuredPeak(t *testing.T, m *model.LLM, prompt, resp, n int) int64 {
	t.Helper()
	d := newMemDevice(t, 1<<40)
	lt, err := gpuengine.NewLLM(d, m)
	if err != nil {
		t.Fatal(err)
	}
	defer lt.Close()
	seqs := make([]model.Sequence, n)
	dlp := make([][]float32, n)
	for i := range seqs {
		seqs[i] = model.Sequence{Prompt: make([]int32, prompt), Response: make([]int32, resp)}
		dlp[i] = make([]float32, resp)
		for j := range dlp[i] {
			dlp[i][j] = 1
		}
	}
	p, err := lt.Forward(m, seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Backward(dlp, nil, m.NewGrads()); err != nil {
		t.Fatal(err)
	}
	return 4 * int64(d.peak)
}

// TestDevicePlanFitsAllocations: on a device whose memory holds the engine's measured peak
// for 3 sequences (and the reserve) but not for 4, the learner plans accumulation chunks of 3
// of a micro_batch of 8 and says so; with room for 8 it keeps 8; with room for less than one
// sequence the GPU engine refuses to start with a DeviceMemoryError naming the remedies.
func TestDevicePlanFitsAllocations(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	cfg.Rollout.MaxTokens = 8
	m := TinyLLM(t, 300)
	prompt, resp := hfmodel.StepShape(cfg, m.Config())
	if prompt+resp != m.Config().Context || resp != 8 {
		t.Fatalf("step shape %d + %d, want 24 + 8 (the context)", prompt, resp)
	}
	peak := map[int]int64{}
	for _, n := range []int{1, 3, 4, 8} {
		peak[n] = measuredPeak(t, m, prompt, resp, n)
	}
	if !(peak[1] < peak[3] && peak[3] < peak[4] && peak[4] < peak[8]) {
		t.Fatalf("measured peaks not increasing: %v", peak)
	}
	cases := []struct {
		budget int64
		want   int
	}{
		{deviceReserve + (peak[3]+peak[4])/2, 3},
		{deviceReserve + peak[3], 3},
		{deviceReserve + peak[8], 8},
	}
	for _, tc := range cases {
		d := newMemDevice(t, tc.budget)
		eng, release, err := gpuStarter(cfg, m)(d)
		if err != nil {
			t.Fatalf("budget %d: %v", tc.budget, err)
		}
		var said []string
		logf := func(f string, a ...any) { said = append(said, f) }
		got := planSteps(cfg, "q", m, eng, 8, logf)
		release()
		if got.micro != tc.want {
			t.Errorf("budget %d (measured peaks %v): micro-batch %d, want %d", tc.budget, peak, got.micro, tc.want)
		}
		if chunked := len(said) == 1 && strings.Contains(said[0], "accumulation chunks"); chunked != (tc.want < 8) {
			t.Errorf("budget %d: logged %q", tc.budget, said)
		}
	}
	d := newMemDevice(t, deviceReserve+peak[1]-4)
	_, _, err := gpuStarter(cfg, m)(d)
	var dm *DeviceMemoryError
	if !errors.As(err, &dm) || dm.Tokens != 32 || dm.Need != peak[1] || !strings.Contains(err.Error(), "rollout.max_tokens") {
		t.Fatalf("one sequence above the device's memory: %v", err)
	}
	if d.live != 0 {
		t.Errorf("the refused engine left %d words allocated", d.live)
	}
}

// TestDevicePlanWithoutMemInfo: a device that does not report its memory (the bare
// interpreter) keeps micro_batch.
func TestDevicePlanWithoutMemInfo(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	m := TinyLLM(t, 300)
	ks, err := kernels.All()
	if err != nil {
		t.Fatal(err)
	}
	eng, release, err := gpuStarter(cfg, m)(ir.NewInterp(ks))
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if got := planSteps(cfg, "q", m, eng, 8, nil); got.micro != 8 {
		t.Fatalf("micro-batch %d, want 8", got.micro)
	}
}
