package learn

import (
	"fmt"

	gpuengine "github.com/drmas-dev/drmas/gpu/engine"
	"github.com/drmas-dev/drmas/model"
)

// GPULoRAEngine returns the Engine of a gpu/engine LoRATrainer: a LoRA adapter's forward and
// backward passes on the device over its frozen base; each backward copies the gradients of A
// and B back and AdamW runs on the host, which then marks the device's adapter stale.
func GPULoRAEngine(t *gpuengine.LoRATrainer) Engine { return &gpuLoRAEng{t: t} }

type gpuLoRAEng struct{ t *gpuengine.LoRATrainer }

func (g *gpuLoRAEng) Forward(m model.Trainable, seqs []model.Sequence, temperature float32) (Pass, error) {
	l, ok := m.(*model.LoRA)
	if !ok {
		return nil, fmt.Errorf("gpu engine: %T is not a LoRA adapter", m)
	}
	p, err := g.t.Forward(l, seqs, temperature)
	if err != nil {
		return nil, err
	}
	return gpuLoRAPass{p}, nil
}

func (g *gpuLoRAEng) Score(m model.Trainable, seqs []model.Sequence, temperature float32) ([][]float32, error) {
	p, err := g.Forward(m, seqs, temperature)
	if err != nil {
		return nil, err
	}
	return p.LogProbs(), nil
}

func (g *gpuLoRAEng) Stepped(model.Trainable) { g.t.MarkDirty() }

func (g *gpuLoRAEng) Sync() error { return nil } // the host holds the adapter and moments

// gpuLoRAPass is a LoRATrainer pass as a model.TrainPass.
type gpuLoRAPass struct{ *gpuengine.LoRAPass }

func (p gpuLoRAPass) Backward(dLogProb, dEntropy [][]float32, g model.GradBuf) error {
	lg, ok := g.(*model.LoRAGrads)
	if !ok {
		return fmt.Errorf("gpu engine: Backward: %T is not a gradient of a LoRA adapter", g)
	}
	return p.LoRAPass.Backward(dLogProb, dEntropy, lg)
}
