// Command learnstep times one PPO learner step (forward, backward, grad-norm clipping, AdamW:
// stages/learn.UpdateOn) on the GPU engine and on the CPU engine, from the same weights and
// batch, and prints tokens/s of each and their ratio. The GPU engine runs with its device
// optimizer (the learner's default), then with the optimizer on the host for comparison.
// Defaults are the learner-step anchor's shape: d=512, 8 layers, B=64 sequences of T=256 tokens.
//
//	learnstep [-dim 512 -layers 8 -heads 8 -batch 64 -seq 256 -prompt 128 -micro-batch 0 -gpu-steps 5 -host-optimizer-steps 2 -cpu-steps 1]
//
// After the timed GPU steps it runs one step through engine.Profiler and prints each kernel's
// time and GFLOP/s (-profile=false skips it). Without a usable CUDA driver it prints the
// one-line reason and times the CPU engine only. -device interp runs the GPU engine on the
// CPU interpreter of gpu/ir instead of CUDA (slow: tiny shapes only; it tests this program).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"time"

	"github.com/drmas-dev/drmas/gpu/cuda"
	"github.com/drmas-dev/drmas/gpu/engine"
	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/stages/learn"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "learnstep:", err)
		os.Exit(1)
	}
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("learnstep", flag.ContinueOnError)
	fs.SetOutput(w)
	device := fs.String("device", "cuda", "cuda: CUDA device 0; interp: the gpu/ir interpreter on the CPU (tiny shapes only)")
	dim := fs.Int("dim", 512, "model width")
	layers := fs.Int("layers", 8, "transformer blocks")
	heads := fs.Int("heads", 8, "attention heads")
	B := fs.Int("batch", 64, "sequences per step")
	T := fs.Int("seq", 256, "tokens per sequence (prompt + response)")
	P := fs.Int("prompt", 128, "prompt tokens per sequence")
	micro := fs.Int("micro-batch", 0, "rows per forward/backward (0: the whole batch; the 2 agents' rows are passed separately either way)")
	gpuSteps := fs.Int("gpu-steps", 5, "timed GPU steps (after one warm-up)")
	hostOptSteps := fs.Int("host-optimizer-steps", 2, "timed GPU steps with the optimizer on the host (gradients copied back, AdamW on the CPU), for comparison; 0 skips them")
	cpuSteps := fs.Int("cpu-steps", 1, "timed CPU steps; 0 skips the CPU")
	cpuWarm := fs.Bool("cpu-warmup", false, "run an untimed CPU step first (the CPU engine has no JIT to warm up)")
	profile := fs.Bool("profile", true, "after the timed GPU steps, run one step through engine.Profiler and print the time and GFLOP/s of each kernel")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *P < 1 || *P >= *T {
		return fmt.Errorf("-prompt %d must be in [1, seq)", *P)
	}
	cfg := model.Config{Vocab: model.VocabSize, Context: *T, Dim: *dim, Layers: *layers, Heads: *heads, FFMult: 4, TiedHead: true}
	base, err := model.New(cfg, 1)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	exs := make([]learn.Example, *B)
	for i := range exs {
		s := model.Sequence{Prompt: make([]int32, *P), Response: make([]int32, *T-*P)}
		for j := range s.Prompt {
			s.Prompt[j] = int32(rng.IntN(256))
		}
		for j := range s.Response {
			s.Response[j] = int32(rng.IntN(256))
		}
		exs[i] = learn.Example{Agent: fmt.Sprintf("a%d", i%2), Seq: s, Advantage: float32(rng.NormFloat64())}
	}
	if *micro <= 0 {
		*micro = *B
	}
	h := learn.Hyper{ClipLow: 0.2, ClipHigh: 0.2, Temperature: 1, MicroBatch: *micro}
	tokens := *B * *T
	fmt.Fprintf(w, "learner step: d=%d layers=%d heads=%d B=%d T=%d micro-batch=%d (%d tokens, %d params), GOMAXPROCS=%d\n",
		*dim, *layers, *heads, *B, *T, *micro, tokens, cfg.NumParams(), runtime.GOMAXPROCS(0))

	seqs := make([]model.Sequence, len(exs))
	for i := range exs {
		seqs[i] = exs[i].Seq
	}
	// Old log-probs (not timed): from the GPU engine when there is one, else the CPU engine.
	score := func(eng learn.Engine, name string) error {
		t0 := time.Now()
		old, err := eng.Score(base, seqs, 1)
		if err != nil {
			return err
		}
		for i := range exs {
			exs[i].Old = old[i]
		}
		fmt.Fprintf(w, "%s score (forward only, old log-probs): %.2fs\n", name, time.Since(t0).Seconds())
		return nil
	}

	type result struct {
		name  string
		times []float64
		loss  float64
	}
	var tr *engine.Trainer // the GPU trainer, for the per-phase times
	bench := func(name string, eng learn.Engine, steps int, warm bool) (result, error) {
		m := base.Clone()
		opt := model.NewAdamW(m, model.DefaultAdamWConfig())
		r := result{name: name, loss: math.NaN()}
		first := 1
		if warm {
			first = 0
		}
		for s := first; s <= steps; s++ {
			if tr != nil {
				tr.ResetTimings()
			}
			t := time.Now()
			st, err := learn.UpdateOn(eng, m, opt, exs, h, 1)
			if err != nil {
				return r, fmt.Errorf("%s step %d: %w", name, s, err)
			}
			el := time.Since(t).Seconds()
			if math.IsNaN(r.loss) {
				r.loss = st.Loss
			}
			if s == 0 {
				fmt.Fprintf(w, "%s warm-up step: %.3fs, loss %.6f, grad norm %.6f\n", name, el, st.Loss, st.GradNorm)
				continue
			}
			r.times = append(r.times, el)
			fmt.Fprintf(w, "%s step %d: %.3fs (%.0f tokens/s), loss %.6f, grad norm %.6f\n", name, s, el, float64(tokens)/el, st.Loss, st.GradNorm)
			if tr != nil {
				tm := tr.Timings()
				rest := el - (tm.Forward + tm.Backward + tm.Upload + tm.Optimizer).Seconds()
				fmt.Fprintf(w, "  %s phases: forward %.3fs, backward %.3fs, device optimizer (norms, sums, clip, AdamW) %.3fs, weight upload %.3fs, rest on the host (loss gradients; with the host optimizer: gradient sums, clip, AdamW) %.3fs\n",
					name, tm.Forward.Seconds(), tm.Backward.Seconds(), tm.Optimizer.Seconds(), tm.Upload.Seconds(), rest)
			}
		}
		if err := eng.Sync(); err != nil {
			return r, fmt.Errorf("%s: sync: %w", name, err)
		}
		return r, nil
	}
	median := func(v []float64) float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		if len(s) == 0 {
			return math.NaN()
		}
		return s[len(s)/2]
	}
	report := func(r *result) {
		if r != nil && len(r.times) > 0 {
			md := median(r.times)
			fmt.Fprintf(w, "RESULT %s: median step %.3fs, %.0f tokens/s\n", r.name, md, float64(tokens)/md)
		}
	}
	var gpuRes, cpuRes *result
	var dev engine.Device // nil: no GPU
	var cdev *cuda.Device
	switch *device {
	case "interp":
		ks, err := kernels.All()
		if err != nil {
			return err
		}
		dev = ir.NewInterp(ks)
		fmt.Fprintln(w, "GPU: gpu/ir interpreter")
	case "cuda":
		cdev, err = cuda.Open(0)
		switch {
		case errors.Is(err, cuda.ErrNoCUDA):
			fmt.Fprintf(w, "GPU: none (%v): CPU engine only\n", err)
		case err != nil:
			return err
		default:
			defer cdev.Close()
			dev = cdev
			fmt.Fprintf(w, "GPU: %s (%s)\n", cdev.Name(), cdev.UUID())
		}
	default:
		return fmt.Errorf("-device %q: want cuda or interp", *device)
	}
	if dev != nil {
		tr, err = engine.New(dev, base)
		if err != nil {
			return err
		}
		if err := score(learn.GPUEngine(tr), "gpu"); err != nil {
			return err
		}
		r, err := bench("gpu", learn.GPUEngine(tr), *gpuSteps, true)
		if err != nil {
			return err
		}
		report(&r)
		if *hostOptSteps > 0 {
			hr, err := bench("gpu-host-optimizer", learn.GPUEngineHostOptimizer(tr), *hostOptSteps, false)
			if err != nil {
				return err
			}
			report(&hr)
			fmt.Fprintf(w, "RESULT device optimizer vs host optimizer: %.2fx\n", median(hr.times)/median(r.times))
		}
		_ = tr.Close()
		tr = nil
		if *profile {
			if err := profileStep(w, dev, base, exs, h); err != nil {
				return err
			}
		}
		if cdev != nil {
			if free, total, err := cdev.MemInfo(); err == nil {
				fmt.Fprintf(w, "gpu memory in use: %.2f GiB of %.2f GiB\n", float64(total-free)/(1<<30), float64(total)/(1<<30))
			}
		}
		gpuRes = &r
	}
	if gpuRes == nil {
		if err := score(learn.CPU, "cpu"); err != nil {
			return err
		}
	}
	if *cpuSteps > 0 {
		r, err := bench("cpu", learn.CPU, *cpuSteps, *cpuWarm)
		if err != nil {
			return err
		}
		cpuRes = &r
		report(cpuRes)
	}
	if gpuRes != nil && cpuRes != nil && len(gpuRes.times) > 0 && len(cpuRes.times) > 0 {
		fmt.Fprintf(w, "RESULT gpu/cpu speed-up: %.1fx; first-step loss gpu %.6f cpu %.6f (|diff| %.2e)\n",
			median(cpuRes.times)/median(gpuRes.times), gpuRes.loss, cpuRes.loss, math.Abs(gpuRes.loss-cpuRes.loss))
	}
	return nil
}

// profileStep runs one learner step on a second Trainer whose device is an engine.Profiler
// over dev (each launch waited for and timed) and prints the per-kernel table.
func profileStep(w io.Writer, dev engine.Device, base *model.Model, exs []learn.Example, h learn.Hyper) error {
	prof := engine.NewProfiler(dev)
	tr, err := engine.New(prof, base)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer tr.Close()
	m := base.Clone()
	opt := model.NewAdamW(m, model.DefaultAdamWConfig())
	t := time.Now()
	if _, err := learn.UpdateOn(learn.GPUEngine(tr), m, opt, exs, h, 1); err != nil {
		return fmt.Errorf("profile step: %w", err)
	}
	fmt.Fprintf(w, "profiled step (every launch waited for): %.3fs\n", time.Since(t).Seconds())
	stats, err := prof.Stats()
	if err != nil {
		fmt.Fprintln(w, "profile:", err)
	}
	return engine.WriteProfile(w, stats)
}
