package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/drmas-dev/drmas/internal/benchutil"
)

// results are the parsed runs; a nil field is a step that was skipped or failed.
type results struct {
	torch              *torchRun
	gemm               *gemmRun
	memFull, memLoRA   *memRun
	memTokens          int
	rollout            goBench
	picked, flatPicked float64 // ms a row: BenchmarkPickToken, BenchmarkTopPFlat/pick
	llama              []llamaRow
	failed             map[string]error
	notRun             []string // steps left out, and why
}

// row is one line of the table: what, the measured figure, the anchor, the ratio and the target
// with its status.
type row struct{ what, measured, anchor, ratio, target string }

// The targets (docs/performance.md, "At a glance").
const (
	trainTarget   = 2.5
	rolloutTarget = 4.0
	fullGiB       = 24.0
	loraGiB       = 4.0
	samplerShare  = 0.10
)

func status(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func (r *results) rows() []row {
	var rows []row
	add := func(name string, f func() []row) {
		if err := r.failed[name]; err != nil {
			rows = append(rows, row{what: name, measured: "failed: " + oneLine(err.Error())})
			return
		}
		rows = append(rows, f()...)
	}
	add("pytorch", r.trainRows)
	add("gemm", r.gemmRows)
	add("memory", r.memRows)
	add("rollout", r.rolloutRows)
	add("sampler", r.samplerRows)
	add("llamacpp", r.llamaRows)
	return rows
}

func (r *results) trainRows() []row {
	t := r.torch
	if t == nil {
		return nil
	}
	ratio := t.Drmas / t.Torch
	cell := fmt.Sprintf("%.2f× (%.2f× per CPU-s)", ratio, t.DrmasCPU/t.TorchCPU)
	if n := len(t.Rounds); n > 1 {
		// benchqwen's table holds the rounds' medians; its ratio column the median ratio.
		ratio = benchutil.Median(t.Rounds)
		cell = fmt.Sprintf("%.2f×, median of %d rounds (%.2f–%.2f×)", ratio, n, slices.Min(t.Rounds), slices.Max(t.Rounds))
	}
	return []row{{
		what:     fmt.Sprintf("forward+backward, %d tokens", t.Tokens),
		measured: fmt.Sprintf("%.2f tokens/s", t.Drmas),
		anchor:   fmt.Sprintf("PyTorch %.2f", t.Torch),
		ratio:    cell,
		target:   fmt.Sprintf("≥ %.1f×: %s", trainTarget, status(ratio >= trainTarget)),
	}}
}

func (r *results) gemmRows() []row {
	g := r.gemm
	if g == nil {
		return nil
	}
	peak := float64(g.Threads) * g.CorePeak
	anchor := fmt.Sprintf("FMA peak %d × %.1f", g.Threads, g.CorePeak)
	ratio := fmt.Sprintf("%.0f %% of the peak", 100*g.StepRate/peak)
	if g.TileCore > 0 {
		tile := float64(g.Threads) * g.TileCore
		anchor += fmt.Sprintf("; the micro-kernel in cache %.0f", tile)
		ratio += fmt.Sprintf(", %.0f %% of the kernel's rate", 100*g.StepRate/tile)
	}
	return []row{{"a step's GEMMs (759 GFLOP)", fmt.Sprintf("%.1f GFLOP/s, %.1f s", g.StepRate, g.StepSeconds), anchor, ratio, "reported"}}
}

func (r *results) memRows() []row {
	var rows []row
	for _, m := range []struct {
		what   string
		run    *memRun
		target float64
	}{{"full AdamW", r.memFull, fullGiB}, {"LoRA r16 over a BF16 base", r.memLoRA, loraGiB}} {
		if m.run == nil {
			continue
		}
		rows = append(rows, row{
			what:     fmt.Sprintf("peak RSS, %d tokens, %s, checkpointed", r.memTokens, m.what),
			measured: fmt.Sprintf("%.2f GiB", m.run.PeakGiB),
			anchor:   fmt.Sprintf("estimate %.2f GiB", m.run.EstimateGiB),
			ratio:    fmt.Sprintf("%.2f", m.run.PeakGiB/m.run.EstimateGiB),
			target:   fmt.Sprintf("≤ %.0f GiB: %s", m.target, status(m.run.PeakGiB <= m.target)),
		})
	}
	return rows
}

func (r *results) rolloutRows() []row {
	b := r.rollout
	if b == nil {
		return nil
	}
	return []row{{
		what:     "group rollout, 8 prompts × 8 samples, 512 + 64 tokens, top_p 1",
		measured: fmt.Sprintf("%.1f tokens/s shared", b["shared-tokens/s"]),
		anchor:   fmt.Sprintf("%.2f unshared", b["unshared-tokens/s"]),
		ratio:    fmt.Sprintf("%.2f× (%.2f× per CPU-s)", b["ratio"], b["cpu-ratio"]),
		target:   fmt.Sprintf("≥ %.0f×: %s", rolloutTarget, status(b["ratio"] >= rolloutTarget)),
	}}
}

// samplerRows compares 8 draws with a batch-8 decode step's CPU time (from benchqwen's decode
// per CPU-second), on a peaked and on a nearly flat distribution.
func (r *results) samplerRows() []row {
	t := r.torch
	if r.picked == 0 || t == nil || t.DecodeCPU == 0 {
		return nil
	}
	stepCPU := float64(t.DecodeBatch) / t.DecodeCPU * float64(t.Threads)
	peaked := float64(t.DecodeBatch) * r.picked / 1e3 / stepCPU
	flat := float64(t.DecodeBatch) * r.flatPicked / 1e3 / stepCPU
	return []row{{
		what:     fmt.Sprintf("sampler at top_p 0.95, batch %d", t.DecodeBatch),
		measured: fmt.Sprintf("%.2f ms a row peaked, %.2f flat", r.picked, r.flatPicked),
		anchor:   fmt.Sprintf("a decode step, %.2f CPU-s", stepCPU),
		ratio:    fmt.Sprintf("%.1f %% peaked, %.1f %% flat", 100*peaked, 100*flat),
		target:   fmt.Sprintf("< %.0f %%: %s", 100*samplerShare, status(max(peaked, flat) < samplerShare)),
	}}
}

func (r *results) llamaRows() []row {
	var rows []row
	for _, l := range r.llama {
		rows = append(rows, row{
			what:     fmt.Sprintf("decode, batch %d, %s", l.Batch, l.DType),
			measured: fmt.Sprintf("%.2f tokens per CPU-s", l.DrmasCPU),
			anchor:   fmt.Sprintf("llama.cpp %.2f", l.LlamaCPU),
			ratio:    fmt.Sprintf("%.2f (%.2f wall)", l.RatioC, l.Ratio),
			target:   fmt.Sprintf("≥ 1: %s", status(l.RatioC >= 1)),
		})
	}
	return rows
}

// write prints the table in Markdown, then the checks that are not ratios.
func (r *results) write(w io.Writer, note string) {
	fmt.Fprintf(w, "%s\n\n", note)
	fmt.Fprintln(w, "| what | measured | anchor | ratio | target |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, x := range r.rows() {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", x.what, x.measured, x.anchor, x.ratio, x.target)
	}
	if t := r.torch; t != nil {
		fmt.Fprintf(w, "\nSums of log-probs: drmas %.4f, PyTorch %.4f; greedy tokens equal to PyTorch's: %d of %d.\n",
			t.LogProbDrmas, t.LogProbTorch, t.GreedySame, t.GreedyAll)
		if t.Setup != "" {
			fmt.Fprintf(w, "%s.\n", t.Setup)
		}
	}
	for _, l := range r.llama {
		fmt.Fprintf(w, "llama.cpp %s batch %d: greedy tokens equal %d of %d.\n", l.DType, l.Batch, l.Same, l.All)
	}
	if len(r.notRun) > 0 {
		fmt.Fprintf(w, "Not run: %s.\n", strings.Join(r.notRun, "; "))
	}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.ReplaceAll(s, "|", "\\|")
}
