package engine

import (
	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/model"
)

// DeviceMemory is what an LLMTrainer holds on its device for one training pass, in float32
// words (4 bytes each).
type DeviceMemory struct {
	Params int // weights and their gradient buffer: 2 × the model's parameters
	Start  int // the words live once NewLLM returns (a started trainer holds them already)
	Peak   int // the most words live at once over NewLLM, Forward and Backward, Params included
}

// EstimateLLM is the device memory an LLMTrainer for m needs to run Forward and Backward on
// seqs: it runs them on a device that allocates nothing and runs no kernel, so it counts the
// very buffers the engine asks a real device for (head chunks, attention blocks, split-K
// workspaces), at the cost of the host's packing and table building only.
func EstimateLLM(m *model.LLM, seqs []model.Sequence) (DeviceMemory, error) {
	return estimateLLM(m, seqs, nil)
}

// estimateLLM is EstimateLLM with tune, when not nil, altering the trainer before the pass.
func estimateLLM(m *model.LLM, seqs []model.Sequence, tune func(*LLMTrainer)) (DeviceMemory, error) {
	d := &countDevice{sizes: map[ir.Ptr]int{}}
	lt, err := NewLLM(d, m)
	if err != nil {
		return DeviceMemory{}, err
	}
	defer lt.Close()
	start := d.live
	if tune != nil {
		tune(lt)
	}
	p, err := lt.Forward(m, seqs, 1)
	if err != nil {
		return DeviceMemory{}, err
	}
	dlp := make([][]float32, len(seqs))
	for i, s := range seqs {
		dlp[i] = make([]float32, len(s.Response))
	}
	if _, err := p.launchBackward(dlp, nil); err != nil {
		return DeviceMemory{}, err
	}
	return DeviceMemory{Params: 2 * lt.t.total, Start: start, Peak: d.peak}, nil
}

// countDevice is a Device that only counts: allocations get distinct addresses and no memory,
// copies and launches do nothing.
type countDevice struct {
	sizes      map[ir.Ptr]int
	next       ir.Ptr
	live, peak int
}

func (d *countDevice) Alloc(words int) (ir.Ptr, error) {
	d.next += 1 << 40 // far apart, as no buffer reaches 2^38 words
	d.sizes[d.next] = words
	d.live += words
	d.peak = max(d.peak, d.live)
	return d.next, nil
}

func (d *countDevice) Free(p ir.Ptr) error {
	d.live -= d.sizes[p]
	delete(d.sizes, p)
	return nil
}

func (d *countDevice) WriteF32(ir.Ptr, []float32) error               { return nil }
func (d *countDevice) WriteI32(ir.Ptr, []int32) error                 { return nil }
func (d *countDevice) ReadF32([]float32, ir.Ptr) error                { return nil }
func (d *countDevice) Zero(ir.Ptr, int) error                         { return nil }
func (d *countDevice) Launch(string, [3]int, [3]int, ...ir.Arg) error { return nil }
func (d *countDevice) Sync() error                                    { return nil }
