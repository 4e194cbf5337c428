package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The figures each benchmark program prints, read back from its output. Each parser returns
// an error naming the line it could not find, so that a program whose output changed fails
// the summary instead of filling its table with zeros.

// torchRun is model/cmd/benchqwen's output: drmas beside PyTorch.
type torchRun struct {
	Tokens, Threads            int
	Drmas, Torch               float64 // forward+backward tokens/s, wall
	DrmasCPU, TorchCPU         float64 // the same per CPU-second × threads
	DecodeBatch                int
	Decode, TorchDecode        float64 // KV-cache decode tokens/s, wall
	DecodeCPU                  float64 // drmas's decode tokens per CPU-second × threads
	LogProbDrmas, LogProbTorch float64
	GreedySame, GreedyAll      int
	Setup                      string // how the PyTorch side's allocator and BLAS kernels were set; empty in older outputs
	PeakRSSGB, TorchPeakRSSGB  float64
	AdamWStepRSSGB             float64
	Rounds                     []float64 // each round's forward+backward ratio (none from a one-round run)
}

var (
	reRound   = regexp.MustCompile(`(?m)^round \d+ of \d+: forward\+backward drmas [\d.]+ t/s, PyTorch [\d.]+ t/s: ([\d.]+)×`)
	reThreads = regexp.MustCompile(`(?m)^model \S+: .*, (\d+) threads$`)
	reFwdBwd  = regexp.MustCompile(`(?m)^forward\+backward, (\d+) tokens\s+([\d.]+) t/s\s+([\d.]+) t/s`)
	rePerCPU  = regexp.MustCompile(`(?m)^  same, per CPU-second × threads\s+([\d.]+) t/s\s+([\d.]+) t/s`)
	reDecode  = regexp.MustCompile(`(?m)^KV-cache decode, batch (\d+)\s+([\d.]+) t/s\s+([\d.]+) t/s`)
	reRSS     = regexp.MustCompile(`(?m)^peak RSS \(fwd\+bwd; PyTorch\)\s+([\d.]+) GB\s+([\d.]+) GB`)
	reStepRSS = regexp.MustCompile(`(?m)^peak RSS, full AdamW step \(drmas\)\s+([\d.]+) GB`)
	reLogProb = regexp.MustCompile(`(?m)^sum of log-probs \(same weights\): drmas (\S+), PyTorch (\S+)`)
	reSetup   = regexp.MustCompile(`(?m)^(PyTorch runs with .*)$`)
	reGreedy  = regexp.MustCompile(`(?m)^greedy tokens equal to PyTorch's: (\d+) of (\d+)`)
)

func parseTorch(out string) (torchRun, error) {
	var r torchRun
	m, err := find(out, reFwdBwd, "forward+backward")
	if err != nil {
		return r, err
	}
	r.Tokens, r.Drmas, r.Torch = atoi(m[1]), atof(m[2]), atof(m[3])
	if m, err = find(out, reThreads, "model …, N threads"); err != nil {
		return r, err
	}
	r.Threads = atoi(m[1])
	all := rePerCPU.FindAllStringSubmatch(out, -1)
	if len(all) < 2 {
		return r, fmt.Errorf("benchqwen printed %d per-CPU-second lines, want 2", len(all))
	}
	r.DrmasCPU, r.TorchCPU, r.DecodeCPU = atof(all[0][1]), atof(all[0][2]), atof(all[1][1])
	if m, err = find(out, reDecode, "KV-cache decode"); err != nil {
		return r, err
	}
	r.DecodeBatch, r.Decode, r.TorchDecode = atoi(m[1]), atof(m[2]), atof(m[3])
	if m, err = find(out, reRSS, "peak RSS (fwd+bwd"); err != nil {
		return r, err
	}
	r.PeakRSSGB, r.TorchPeakRSSGB = atof(m[1]), atof(m[2])
	if m, err = find(out, reStepRSS, "peak RSS, full AdamW step"); err != nil {
		return r, err
	}
	r.AdamWStepRSSGB = atof(m[1])
	if m, err = find(out, reLogProb, "sum of log-probs"); err != nil {
		return r, err
	}
	r.LogProbDrmas, r.LogProbTorch = atof(m[1]), atof(m[2])
	if m, err = find(out, reGreedy, "greedy tokens equal"); err != nil {
		return r, err
	}
	r.GreedySame, r.GreedyAll = atoi(m[1]), atoi(m[2])
	if m := reSetup.FindStringSubmatch(out); m != nil {
		r.Setup = m[1]
	}
	for _, m := range reRound.FindAllStringSubmatch(out, -1) {
		r.Rounds = append(r.Rounds, atof(m[1]))
	}
	return r, nil
}

// memRun is model/cmd/stepmem's verdict line.
type memRun struct{ PeakGiB, EstimateGiB float64 }

var reStepMem = regexp.MustCompile(`(?m)^peak RSS above the process's start: ([\d.]+) GiB; estimate \([^)]*\) ([\d.]+) GiB`)

func parseStepMem(out string) (memRun, error) {
	m, err := find(out, reStepMem, "peak RSS above the process's start")
	if err != nil {
		return memRun{}, err
	}
	return memRun{atof(m[1]), atof(m[2])}, nil
}

// gemmRun is model/cmd/benchengine's FMA peak, micro-kernel and whole-step GEMM lines.
type gemmRun struct {
	CorePeak, StepRate, StepShare, StepSeconds float64
	Threads                                    int
	TileCore                                   float64 // 0: the program did not print it
}

var (
	reFMAPeak  = regexp.MustCompile(`(?m)^FMA peak: one core AVX-512 ([\d.]+) GFLOP/s, AVX2 ([\d.]+); all (\d+) threads`)
	reTile     = regexp.MustCompile(`(?m)^GEMM micro-kernel \([^)]*\) on operands in L1: one core ([\d.]+) GFLOP/s`)
	reStepGEMM = regexp.MustCompile(`(?m)^all GEMMs of a step, (?:avx512|go|avx2 6x16)[^:]*: ([\d.]+) GFLOP/s = (\d+)% of the FMA peak, ([\d.]+) s a step`)
)

func parseGEMM(out string) (gemmRun, error) {
	var r gemmRun
	m, err := find(out, reFMAPeak, "FMA peak")
	if err != nil {
		return r, err
	}
	r.CorePeak, r.Threads = max(atof(m[1]), atof(m[2])), atoi(m[3])
	if m, err = find(out, reStepGEMM, "all GEMMs of a step"); err != nil {
		return r, err
	}
	r.StepRate, r.StepShare, r.StepSeconds = atof(m[1]), atof(m[2]), atof(m[3])
	if m := reTile.FindStringSubmatch(out); m != nil {
		r.TileCore = atof(m[1])
	}
	return r, nil
}

// goBench is the metrics of one `go test -bench` result line: ns/op and every custom unit.
type goBench map[string]float64

// parseGoBench returns the metrics of the benchmark named name (without its -N suffix).
func parseGoBench(out, name string) (goBench, error) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || trimProcs(f[0]) != name {
			continue
		}
		b := goBench{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: metric %q: %w", name, f[i], err)
			}
			b[f[i+1]] = v
		}
		return b, nil
	}
	return nil, fmt.Errorf("no result line for %s in the benchmark's output", name)
}

// trimProcs drops the -GOMAXPROCS suffix go test appends to a benchmark's name.
func trimProcs(s string) string {
	if i := strings.LastIndexByte(s, '-'); i > 0 {
		if _, err := strconv.Atoi(s[i+1:]); err == nil {
			return s[:i]
		}
	}
	return s
}

// llamaRow is one row of bench/llamacpp's table (medians).
type llamaRow struct {
	DType                      string
	Batch                      int
	Drmas, Llama, Ratio        float64 // wall tokens/s
	DrmasCPU, LlamaCPU, RatioC float64 // per CPU-second × threads
	Same, All                  int
}

var reLlamaRow = regexp.MustCompile(`^(F32|BF16)\s+(\d+)\s+[\d.]+ / ([\d.]+) / [\d.]+\s+[\d.]+ / ([\d.]+) / [\d.]+\s+([\d.]+)\s+[\d.]+ / ([\d.]+) / [\d.]+\s+[\d.]+ / ([\d.]+) / [\d.]+\s+([\d.]+)\s+(\d+) of (\d+)`)

func parseLlama(out string) ([]llamaRow, error) {
	var rows []llamaRow
	for _, line := range strings.Split(out, "\n") {
		m := reLlamaRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rows = append(rows, llamaRow{m[1], atoi(m[2]), atof(m[3]), atof(m[4]), atof(m[5]), atof(m[6]), atof(m[7]), atof(m[8]), atoi(m[9]), atoi(m[10])})
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no table rows in bench/llamacpp's output")
	}
	return rows, nil
}

func find(out string, re *regexp.Regexp, what string) ([]string, error) {
	m := re.FindStringSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("no %q line in the output", what)
	}
	return m, nil
}

// atoi and atof read what a regexp already matched as digits.
func atoi(s string) int {
	v, _ := strconv.Atoi(s)
	return v
}

func atof(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}
