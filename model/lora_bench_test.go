package model

import (
	"testing"
	"time"
)

// BenchmarkLoRAStep times a training step (forward, backward, AdamW) of a rank-16 LoRA on
// every linear layer against the anchor, the same step training the full model, at a small
// Qwen-like shape, and reports both and their ratio.
func BenchmarkLoRAStep(b *testing.B) {
	c := ArchConfig{Arch: "qwen2", Hidden: 256, Layers: 2, Heads: 4, KVHeads: 2, Intermediate: 1024, Vocab: 8192, Context: 1024,
		RopeTheta: 1e6, Tie: true}.WithDefaults()
	m, err := InitLLM(c, 1)
	if err != nil {
		b.Fatal(err)
	}
	l, err := NewLoRA(m, LoRAConfig{R: 16, Alpha: 32}, 1)
	if err != nil {
		b.Fatal(err)
	}
	seq := make([]int32, 256)
	for i := range seq {
		seq[i] = int32(i * 97 % c.Vocab)
	}
	seqs := []Sequence{{Prompt: seq[:1], Response: seq[1:]}}
	dlp := [][]float32{make([]float32, 255)}
	for i := range dlp[0] {
		dlp[0][i] = 1e-3
	}
	cfg := AdamWConfig{LR: 0, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8} // lr 0: the weights stay put
	// step returns its wall and CPU seconds (CPU time is the steadier figure on a shared machine).
	step := func(tr Trainable, g GradBuf, o *AdamW) (float64, float64) {
		t0, c0 := time.Now(), processCPU()
		p, err := tr.TrainForward(seqs, 1)
		if err != nil {
			b.Fatal(err)
		}
		g.Zero()
		if err := p.Backward(dlp, nil, g); err != nil {
			b.Fatal(err)
		}
		if err := o.Apply(g); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0).Seconds(), processCPU() - c0
	}
	fg, lg := m.NewGradBuf(), l.NewGradBuf()
	fo, lo := m.NewOptimizer(cfg), l.NewOptimizer(cfg)
	var full, lora, fullCPU, loraCPU float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w, c := step(m, fg, fo)
		full, fullCPU = full+w, fullCPU+c
		w, c = step(l, lg, lo)
		lora, loraCPU = lora+w, loraCPU+c
	}
	n := float64(b.N)
	b.ReportMetric(full*1e3/n, "full-ms/step")
	b.ReportMetric(lora*1e3/n, "lora-ms/step")
	b.ReportMetric(fullCPU*1e3/n, "full-cpu-ms/step")
	b.ReportMetric(loraCPU*1e3/n, "lora-cpu-ms/step")
	b.ReportMetric(loraCPU/fullCPU, "lora/full-cpu")
}
