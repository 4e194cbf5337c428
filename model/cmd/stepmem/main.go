// Command stepmem measures the peak memory of one training step (forward, backward, AdamW) of
// a Qwen-shaped model on one micro-batch, in full or of a LoRA adapter, beside hf.StepOf's
// estimate. Random weights; the collector runs at GOGC=10 unless GOGC is set, so that the peak
// resident memory is about the Go heap's high-water mark. With -bf16 a LoRA's base is built
// stored in BF16 (as a BF16 folder's base is loaded), never holding float32 matrices.
//
//	go run ./model/cmd/stepmem [-tokens 4096] [-lora 16 [-bf16]] [-checkpointing] [-threads 2]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/internal/benchutil"
	"github.com/drmas-dev/drmas/model"
)

func main() {
	spec := benchutil.QwenShapeFlags(flag.CommandLine)
	tokens := flag.Int("tokens", 4096, "tokens of the micro-batch (one sequence)")
	rank := flag.Int("lora", 0, "LoRA rank on every linear layer of the blocks (0: full fine-tuning)")
	threads := flag.Int("threads", 2, "threads")
	only := flag.Bool("estimate", false, "print the estimate only (no step)")
	ckpt := flag.Bool("checkpointing", false, "activation checkpointing: keep each block's input, recompute its activations in the backward")
	bf16 := flag.Bool("bf16", false, "with -lora: the frozen base's matrices stored in BF16")
	flag.Parse()
	if *bf16 && *rank == 0 {
		must(fmt.Errorf("-bf16 needs -lora: a model stored in BF16 is frozen"))
	}
	runtime.GOMAXPROCS(*threads)
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(10)
	}
	cfg, err := hf.NewConfig(*spec)
	must(err)
	if *bf16 {
		cfg.TorchDtype = "bfloat16"
	}
	est, estName := hf.StepOf(cfg, *rank, 1, *tokens), "hf.StepOf"
	if *ckpt {
		est, estName = hf.CheckpointedStepOf(cfg, *rank, 1, *tokens), "hf.CheckpointedStepOf"
	}
	if *only {
		terms(est)
		return
	}
	base := status("VmRSS:")
	llm, err := newBase(cfg.ArchConfig(), *bf16)
	must(err)
	var m model.Trainable = llm
	if *rank > 0 {
		m, err = model.NewLoRA(llm, model.LoRAConfig{R: *rank, Alpha: 2 * float64(*rank), Targets: model.LoRATargets}, 1)
		must(err)
	}
	m.(model.Checkpointing).SetActivationCheckpointing(*ckpt)
	seq := model.Sequence{Prompt: []int32{1}, Response: make([]int32, *tokens-1)}
	d := [][]float32{make([]float32, *tokens-1)}
	for j := range seq.Response {
		seq.Response[j], d[0][j] = int32((j*104729+7)%spec.Vocab), 1e-3
	}
	opt := m.NewOptimizer(model.DefaultAdamWConfig())
	g := m.NewGradBuf()
	phase := func(name string) {
		fmt.Printf("  %-22s resident %.2f GiB, peak %.2f GiB (above the start)\n", name, gib(status("VmRSS:")-base), gib(status("VmHWM:")-base))
	}
	phase("model, gradients, AdamW")
	t0 := time.Now()
	p, err := m.TrainForward([]model.Sequence{seq}, 1)
	must(err)
	phase("forward")
	must(p.Backward(d, nil, g))
	phase("backward")
	must(opt.Apply(g))
	phase("optimizer step")
	peak := status("VmHWM:") - base
	what := "full AdamW"
	if *rank > 0 {
		what = fmt.Sprintf("LoRA r=%d", *rank)
	}
	if *bf16 {
		what += " over a BF16 base"
	}
	if *ckpt {
		what += " with activation checkpointing"
	}
	fmt.Printf("%s, %d tokens, %d layers, vocab %d, %d threads: step %.0f s\n", what, *tokens, spec.Layers, spec.Vocab, *threads, time.Since(t0).Seconds())
	fmt.Printf("peak RSS above the process's start: %.2f GiB; estimate (%s) %.2f GiB: ratio %.2f\n", gib(peak), estName, gib(est.Total()), float64(peak)/float64(est.Total()))
	terms(est)
}

// newBase is model.InitLLM's model, or with bf16 a model of N(0, 0.02) matrices built stored
// in BF16 (norm weights 1, biases 0).
func newBase(c model.ArchConfig, bf16 bool) (*model.LLM, error) {
	if !bf16 {
		return model.InitLLM(c, 1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	return model.NewLLMBF16(c, func(name string, dst []float32) error {
		v := float32(0)
		if strings.HasSuffix(name, "norm.weight") {
			v = 1
		}
		for i := range dst {
			dst[i] = v
		}
		return nil
	}, func(_ string, dst []uint16) error {
		for i := range dst {
			dst[i] = hf.BF16FromFloat32(float32(0.02 * r.NormFloat64()))
		}
		return nil
	})
}

func terms(est hf.Step) {
	fmt.Printf("estimate %.2f GiB by term: weights %.2f, optimizer %.2f, activations %.2f, scratch %.2f, head %.2f, attention %.2f\n",
		gib(est.Total()), gib(est.Weights), gib(est.Optimizer), gib(est.Activations), gib(est.Scratch), gib(est.Head), gib(est.Attention))
}

func gib(n int64) float64 { return float64(n) / (1 << 30) }

// status reads a kB field of /proc/self/status, in bytes.
func status(field string) int64 {
	f, err := os.Open("/proc/self/status")
	must(err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			must(err)
			return kb << 10
		}
	}
	must(fmt.Errorf("no %s in /proc/self/status", field))
	return 0
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "stepmem:", err)
		os.Exit(1)
	}
}
