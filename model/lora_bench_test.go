package model

import (
	"testing"
	"time"
)

// loraBenchShape is the small Qwen-like shape of the LoRA benchmarks (a function: the
// architectures register at init).
func loraBenchShape() ArchConfig {
	return ArchConfig{Arch: "qwen2", Hidden: 256, Layers: 2, Heads: 4, KVHeads: 2, Intermediate: 1024, Vocab: 8192, Context: 1024,
		RopeTheta: 1e6, Tie: true}.WithDefaults()
}

// benchStepper times training steps (forward, backward, AdamW at lr 0, so the weights stay put)
// on one 256-token sequence: step returns a step's wall and CPU seconds (CPU time is the
// steadier figure on a shared machine).
func benchStepper(b *testing.B, vocab int) func(Trainable, GradBuf, *AdamW) (float64, float64) {
	seq := make([]int32, 256)
	for i := range seq {
		seq[i] = int32(i * 97 % vocab)
	}
	seqs := []Sequence{{Prompt: seq[:1], Response: seq[1:]}}
	dlp := [][]float32{make([]float32, 255)}
	for i := range dlp[0] {
		dlp[0][i] = 1e-3
	}
	return func(tr Trainable, g GradBuf, o *AdamW) (float64, float64) {
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
}

var benchAdamW = AdamWConfig{LR: 0, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}

// BenchmarkLoRAStep times a training step (forward, backward, AdamW) of a rank-16 LoRA on
// every linear layer against the anchor, the same step training the full model, at a small
// Qwen-like shape, and reports both and their ratio.
func BenchmarkLoRAStep(b *testing.B) {
	m, err := InitLLM(loraBenchShape(), 1)
	if err != nil {
		b.Fatal(err)
	}
	l, err := NewLoRA(m, LoRAConfig{R: 16, Alpha: 32}, 1)
	if err != nil {
		b.Fatal(err)
	}
	step := benchStepper(b, loraBenchShape().Vocab)
	fg, lg := m.NewGradBuf(), l.NewGradBuf()
	fo, lo := m.NewOptimizer(benchAdamW), l.NewOptimizer(benchAdamW)
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

// BenchmarkLoRAStepBF16Base times the rank-16 LoRA's step over a base stored in BF16 against
// the same adapter over the base's float32 twin (the same bits), alternating, and reports the
// CPU time of both and their ratio.
func BenchmarkLoRAStepBF16Base(b *testing.B) {
	m, err := InitLLM(loraBenchShape(), 1)
	if err != nil {
		b.Fatal(err)
	}
	roundMatricesBF16(m)
	h, err := m.FrozenBF16()
	if err != nil {
		b.Fatal(err)
	}
	var ls [2]*LoRA
	for i, base := range []*LLM{m, h} {
		if ls[i], err = NewLoRA(base, LoRAConfig{R: 16, Alpha: 32}, 1); err != nil {
			b.Fatal(err)
		}
	}
	step := benchStepper(b, loraBenchShape().Vocab)
	g, o := ls[0].NewGradBuf(), ls[0].NewOptimizer(benchAdamW)
	var cpu [2]float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, l := range ls {
			_, c := step(l, g, o)
			cpu[j] += c
		}
	}
	n := float64(b.N)
	b.ReportMetric(cpu[0]*1e3/n, "f32-base-cpu-ms/step")
	b.ReportMetric(cpu[1]*1e3/n, "bf16-base-cpu-ms/step")
	b.ReportMetric(cpu[1]/cpu[0], "bf16/f32-cpu")
}
