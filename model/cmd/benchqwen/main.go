// Command benchqwen measures the CPU engine on a Qwen-shaped model beside
// PyTorch on the same machine and the same random weights, in one run:
// forward+backward tokens/s of one 256-token sequence (log-prob and entropy
// of every token), KV-cache greedy decode tokens/s at batch 8, and the peak
// RSS of a full AdamW training step. It prints both sides and the ratios.
//
// Defaults are the Qwen2.5-0.5B shape (hidden 896, 24 layers, 14 heads, 2 KV
// heads, intermediate 4864, vocab 151,936) on 2 threads; the two sides run one
// after the other so their memory peaks do not add (docs/performance.md has
// them). The PyTorch side
// (torch_bench.py, Debian's /usr/bin/python3 with torch) reads the weights
// from a temporary safetensors file. The forward+backward runs in -rounds
// rounds, drmas then PyTorch each, because on a shared machine either side's
// speed moves by tens of percent between minutes: each round's ratio is
// printed, and the table gives the medians.
//
//	go run ./model/cmd/benchqwen [-threads 2] [-tokens 256] [-batch 8] [-new 32] [-rounds 3]
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/drmas-dev/drmas/internal/benchutil"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/drmas-dev/drmas/model"
)

type result struct {
	TrainTokS float64 `json:"train_tok_s"`
	// TrainCPUTokS and DecodeCPUTokS are tokens per CPU-second times the
	// thread count: the speed on an otherwise idle machine, less sensitive
	// to other load than wall time.
	TrainCPUTokS  float64   `json:"train_cpu_tok_s"`
	DecodeCPUTokS float64   `json:"decode_cpu_tok_s"`
	DecodeTokS    float64   `json:"decode_tok_s"`
	PeakRSSGB     float64   `json:"peak_rss_gb"`
	StepRSSGB     float64   `json:"adamw_step_rss_gb,omitempty"`
	LogProbSum    float64   `json:"logprob_sum"`
	Tokens        [][]int32 `json:"tokens"` // the greedy continuations, per request
}

func main() {
	shape := benchutil.QwenShapeFlags(flag.CommandLine)
	threads := flag.Int("threads", 2, "threads for both engines")
	tokens := flag.Int("tokens", 256, "sequence length of the forward+backward")
	reps := flag.Int("reps", 2, "forward+backward repetitions (best is kept)")
	rounds := flag.Int("rounds", 3, "rounds of the forward+backward, drmas then PyTorch each; the table gives the medians, the ratio the median of the rounds' ratios (the first round also decodes and measures memory)")
	batch := flag.Int("batch", 8, "decode batch")
	newTok := flag.Int("new", 32, "tokens decoded per request (after a 16-token prompt)")
	python := flag.String("python", "/usr/bin/python3", "python with torch (empty: skip PyTorch)")
	script := flag.String("torch-script", filepath.Join("model", "cmd", "benchqwen", "torch_bench.py"), "PyTorch side")
	torchMalloc := flag.String("torch-malloc", "jemalloc", "PyTorch's allocator: jemalloc (preloaded, its pages retained, so PyTorch reuses a step's memory as drmas does; glibc when not installed) or system (glibc, which faults large buffers in again every step)")
	blasCore := flag.String("openblas-core", "auto", "OPENBLAS_CORETYPE for PyTorch: auto (SkylakeX, OpenBLAS's AVX-512 kernels, on a CPU with AVX-512, over the environment's; OpenBLAS 0.3.21 runs AVX2 kernels on AMD Zen 5), none (the environment's or OpenBLAS's choice), or a core name")
	prof := flag.String("cpuprofile", "", "write a CPU profile of drmas's forward+backward repetitions after the first (warm steps) to this file")
	flag.Parse()
	c, err := benchutil.Arch(shape)
	must(err)
	tenv, tdesc, err := torchEnv(*torchMalloc, *blasCore)
	must(err)
	runtime.GOMAXPROCS(*threads)

	m, err := model.InitLLM(c, 1)
	must(err)
	dir, err := os.MkdirTemp("", "benchqwen")
	must(err)
	defer os.RemoveAll(dir)
	wpath := filepath.Join(dir, "w.safetensors")
	must(writeWeights(wpath, m))
	seq, prompts := inputs(c.Vocab, *tokens, *batch)

	fmt.Printf("model %s: hidden %d, %d layers, %d heads, %d kv heads, intermediate %d, vocab %d (%.0fM parameters), %d threads\n",
		c.Arch, c.Hidden, c.Layers, c.Heads, c.KVHeads, c.Intermediate, c.Vocab, float64(m.NumParams())/1e6, *threads)
	g := runDrmas(m, seq, prompts, *reps, *newTok, *prof)
	runtime.GC()
	debug.FreeOSMemory()

	torch := func(trainOnly bool) result {
		var t result
		if *python == "" {
			return t
		}
		cfgJSON, _ := json.Marshal(map[string]any{"config": c, "tokens": seq, "prompts": prompts, "new": *newTok, "threads": *threads, "reps": *reps, "train_only": trainOnly})
		in := filepath.Join(dir, "in.json")
		must(os.WriteFile(in, cfgJSON, 0o644))
		cmd := exec.Command(*python, *script, in, wpath)
		cmd.Stderr = os.Stderr
		cmd.Env = tenv
		out, err := cmd.Output()
		must(err)
		must(json.Unmarshal(out, &t))
		return t
	}
	if *python == "" || *rounds < 1 {
		*rounds = 1 // nothing to pair drmas's rounds with
	}
	if *python != "" {
		fmt.Println(tdesc)
	}
	t := torch(false)
	train := []trainRound{{g.TrainTokS, t.TrainTokS, g.TrainCPUTokS, t.TrainCPUTokS}}
	for r := 1; r <= *rounds; r++ {
		if r > 1 {
			var d result
			trainDrmas(m, seq, *reps, "", &d)
			runtime.GC()
			pt := torch(true)
			train = append(train, trainRound{d.TrainTokS, pt.TrainTokS, d.TrainCPUTokS, pt.TrainCPUTokS})
		}
		if *python != "" {
			x := train[r-1]
			fmt.Printf("round %d of %d: forward+backward drmas %.2f t/s, PyTorch %.2f t/s: %.2f× (per CPU-second %.2f×)\n", r, *rounds, x.drmas, x.torch, x.drmas/x.torch, x.drmasCPU/x.torchCPU)
		}
	}
	med := medianRound(train)

	fmt.Printf("\n%-34s %12s %12s %8s\n", "", "drmas", "PyTorch", "ratio")
	rowR := func(name string, a, b, ratio float64, unit string) {
		r := "-"
		if b > 0 {
			r = fmt.Sprintf("%.2f", ratio)
		}
		fmt.Printf("%-34s %9.2f %-2s %9.2f %-2s %8s\n", name, a, unit, b, unit, r)
	}
	row := func(name string, a, b float64, unit string) { rowR(name, a, b, a/b, unit) }
	rowR(fmt.Sprintf("forward+backward, %d tokens", *tokens), med.drmas, med.torch, med.ratio, "t/s")
	rowR("  same, per CPU-second × threads", med.drmasCPU, med.torchCPU, med.ratioCPU, "t/s")
	row(fmt.Sprintf("KV-cache decode, batch %d", *batch), g.DecodeTokS, t.DecodeTokS, "t/s")
	row("  same, per CPU-second × threads", g.DecodeCPUTokS, t.DecodeCPUTokS, "t/s")
	row("peak RSS (fwd+bwd; PyTorch)", g.PeakRSSGB, t.PeakRSSGB, "GB")
	fmt.Printf("%-34s %9.2f GB\n", "peak RSS, full AdamW step (drmas)", g.StepRSSGB)
	if t.TrainTokS > 0 {
		fmt.Printf("sum of log-probs (same weights): drmas %.4f, PyTorch %.4f\n", g.LogProbSum, t.LogProbSum)
		same, all := 0, 0
		for i := range g.Tokens {
			for j := range g.Tokens[i] {
				all++
				if i < len(t.Tokens) && j < len(t.Tokens[i]) && t.Tokens[i][j] == g.Tokens[i][j] {
					same++
				}
			}
		}
		fmt.Printf("greedy tokens equal to PyTorch's: %d of %d\n", same, all)
	}
	fmt.Println("targets: forward+backward ≥ 2.5× PyTorch, decode ≥ 1×")
}

// trainRound is one round's forward+backward tokens/s on each side, wall and per CPU-second.
type trainRound struct{ drmas, torch, drmasCPU, torchCPU float64 }

// medians are the rounds' medians, and the median of their ratios (a round's two sides ran
// minutes apart, at the same moment's load).
type medians struct{ drmas, torch, ratio, drmasCPU, torchCPU, ratioCPU float64 }

func medianRound(rs []trainRound) medians {
	pick := func(f func(trainRound) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return benchutil.Median(v)
	}
	return medians{
		drmas: pick(func(r trainRound) float64 { return r.drmas }), torch: pick(func(r trainRound) float64 { return r.torch }),
		ratio:    pick(func(r trainRound) float64 { return r.drmas / r.torch }),
		drmasCPU: pick(func(r trainRound) float64 { return r.drmasCPU }), torchCPU: pick(func(r trainRound) float64 { return r.torchCPU }),
		ratioCPU: pick(func(r trainRound) float64 { return r.drmasCPU / r.torchCPU }),
	}
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchqwen:", err)
		os.Exit(1)
	}
}

func inputs(V, T, B int) ([]int32, [][]int32) {
	r := rand.New(rand.NewPCG(7, 7))
	seq := make([]int32, T)
	for i := range seq {
		seq[i] = int32(r.IntN(V))
	}
	prompts := make([][]int32, B)
	for i := range prompts {
		prompts[i] = make([]int32, 16)
		for j := range prompts[i] {
			prompts[i][j] = int32(r.IntN(V))
		}
	}
	return seq, prompts
}

func peakRSSGB() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Maxrss) * 1024 / 1e9
}

// trainDrmas times drmas's forward+backward, best of reps, into res (tokens/s, wall and per
// CPU-second, and the log-probs' sum) and returns the gradients; prof, if set, receives a CPU
// profile of the repetitions after the first (the first faults in fresh gradient pages).
func trainDrmas(m *model.LLM, seq []int32, reps int, prof string, res *result) *model.LLMGrads {
	seqs := []model.Sequence{{Prompt: seq[:1], Response: seq[1:]}}
	dlp := [][]float32{make([]float32, len(seq)-1)}
	dent := [][]float32{make([]float32, len(seq)-1)}
	for i := range dlp[0] {
		dlp[0][i], dent[0][i] = 1, 0.01
	}
	g := m.NewGrads()
	best, bestCPU := math.Inf(1), math.Inf(1)
	for i := 0; i < reps; i++ {
		if i == min(1, reps-1) && prof != "" {
			f, err := os.Create(prof)
			must(err)
			defer f.Close()
			must(pprof.StartCPUProfile(f))
		}
		t0, c0 := time.Now(), benchutil.CPUSeconds()
		p, err := m.Forward(seqs, 1)
		must(err)
		must(p.Backward(dlp, dent, g))
		best = min(best, time.Since(t0).Seconds())
		bestCPU = min(bestCPU, benchutil.CPUSeconds()-c0)
		res.LogProbSum = 0
		for _, v := range p.LogProbs()[0] {
			res.LogProbSum += float64(v)
		}
	}
	pprof.StopCPUProfile()
	res.TrainTokS = float64(len(seq)) / best
	res.TrainCPUTokS = float64(len(seq)) * float64(runtime.GOMAXPROCS(0)) / bestCPU
	return g
}

// runDrmas times drmas's side: the forward+backward, the decode, and the peak RSS of a full
// AdamW step.
func runDrmas(m *model.LLM, seq []int32, prompts [][]int32, reps, newTok int, prof string) result {
	var res result
	g := trainDrmas(m, seq, reps, prof, &res)
	res.PeakRSSGB = peakRSSGB()
	// Decode before the AdamW step changes the weights (PyTorch decodes with
	// the original ones).
	reqs := make([]model.SampleRequest, len(prompts))
	for i, p := range prompts {
		reqs[i] = model.SampleRequest{Prompt: p, Seed: uint64(i)}
	}
	t0, c0 := time.Now(), benchutil.CPUSeconds()
	out, err := m.Sample(context.Background(), reqs, model.SampleOptions{MaxTokens: newTok})
	must(err)
	n := 0
	for _, r := range out {
		n += len(r.Tokens)
		res.Tokens = append(res.Tokens, r.Tokens)
	}
	res.DecodeTokS = float64(n) / time.Since(t0).Seconds()
	res.DecodeCPUTokS = float64(n) * float64(runtime.GOMAXPROCS(0)) / (benchutil.CPUSeconds() - c0)
	o := model.NewLLMAdamW(m, model.DefaultAdamWConfig())
	must(o.StepLLM(g))
	res.StepRSSGB = peakRSSGB()
	return res
}

// writeWeights streams m's tensors into a safetensors file (F32) without
// an in-memory copy of the model.
func writeWeights(path string, m *model.LLM) error {
	header := map[string]any{}
	off := 0
	for _, p := range m.Params() {
		n := 4 * len(p.Data)
		header[p.Name] = map[string]any{"dtype": "F32", "shape": p.Shape, "data_offsets": []int{off, off + n}}
		off += n
	}
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(len(h)))
	w.Write(b[:])
	w.Write(h)
	for _, p := range m.Params() {
		for _, v := range p.Data {
			binary.LittleEndian.PutUint32(b[:4], math.Float32bits(v))
			w.Write(b[:4])
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
