package engine

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
)

// Profiler is a Device that times every kernel launch of the Device it wraps: after each
// Launch it waits for the device (Sync), so a launch's wall time is its kernel's plus the
// launch overhead (microseconds). It counts the floating-point operations of the GEMMs
// (2·m·n·k per product; for batched GEMMs from the size table, read back from the device).
// Every other call is forwarded unchanged, so results are those of the wrapped Device.
//
// It serialises the device and reads batched-GEMM tables back, so a step run through it is
// slower than a normal one: use it for one profiling step, not to time steps.
type Profiler struct {
	Device
	stats map[string]*KernelStat
	err   error // first error reading a GEMM table back (the launch itself succeeded)
}

var _ Device = (*Profiler)(nil)

// KernelStat is one kernel's share of the profiled launches.
type KernelStat struct {
	Name  string
	Calls int
	Time  time.Duration
	Flops float64 // GEMMs only; 0 for the other kernels
}

// NewProfiler wraps d.
func NewProfiler(d Device) *Profiler { return &Profiler{Device: d, stats: map[string]*KernelStat{}} }

// Launch runs the kernel, waits for it and records its time (and GEMM flops).
func (p *Profiler) Launch(name string, grid, block [3]int, args ...ir.Arg) error {
	start := time.Now()
	err := p.Device.Launch(name, grid, block, args...)
	if err == nil {
		err = p.Device.Sync()
	}
	el := time.Since(start)
	if err != nil {
		return err
	}
	s := p.stats[name]
	if s == nil {
		s = &KernelStat{Name: name}
		p.stats[name] = s
	}
	s.Calls++
	s.Time += el
	s.Flops += p.gemmFlops(name, grid, args)
	return nil
}

// gemmFlops is 2·m·n·k summed over the products of one GEMM launch (0 for other kernels).
// Plain GEMM arguments: a, b, c, m, n, k, ...; batched: a, b, c, tab, ... with grid z
// entries of kernels.TabWords int32 words (m, n, k first) in tab.
func (p *Profiler) gemmFlops(name string, grid [3]int, args []ir.Arg) float64 {
	if !strings.HasPrefix(name, "gemm_") || len(args) < 6 {
		return 0
	}
	if !strings.HasSuffix(name, "_batched") {
		return 2 * float64(args[3].I) * float64(args[4].I) * float64(args[5].I)
	}
	words := make([]float32, grid[2]*kernels.TabWords)
	if err := p.Device.ReadF32(words, args[3].P); err != nil {
		if p.err == nil {
			p.err = fmt.Errorf("profiler: read the table of %s: %w", name, err)
		}
		return 0
	}
	f := 0.0
	for i := 0; i < grid[2]; i++ {
		e := words[i*kernels.TabWords:]
		m, n, k := math.Float32bits(e[0]), math.Float32bits(e[1]), math.Float32bits(e[2])
		f += 2 * float64(int32(m)) * float64(int32(n)) * float64(int32(k))
	}
	return f
}

// Stats returns the recorded kernels, the most time first (then by name), and the first
// error met reading a GEMM table back (its flops are then missing).
func (p *Profiler) Stats() ([]KernelStat, error) {
	out := make([]KernelStat, 0, len(p.stats))
	for _, s := range p.stats {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Time != out[j].Time {
			return out[i].Time > out[j].Time
		}
		return out[i].Name < out[j].Name
	})
	return out, p.err
}

// Reset forgets everything recorded.
func (p *Profiler) Reset() { p.stats, p.err = map[string]*KernelStat{}, nil }

// WriteProfile prints stats as a table: kernel, calls, total ms, share of the profiled time
// and, for GEMMs, GFLOP/s; then the totals.
func WriteProfile(w io.Writer, stats []KernelStat) error {
	var total time.Duration
	var flops float64
	var gemmTime time.Duration
	for _, s := range stats {
		total += s.Time
		flops += s.Flops
		if s.Flops > 0 {
			gemmTime += s.Time
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "kernel\tcalls\tms\tshare\tGFLOP/s\t")
	for _, s := range stats {
		rate := "-"
		if s.Flops > 0 && s.Time > 0 {
			rate = fmt.Sprintf("%.1f", s.Flops/s.Time.Seconds()/1e9)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.1f%%\t%s\t\n", s.Name, s.Calls, ms(s.Time), pct(s.Time, total), rate)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	rate := 0.0
	if gemmTime > 0 {
		rate = flops / gemmTime.Seconds() / 1e9
	}
	_, err := fmt.Fprintf(w, "profiled kernels: %.2f ms; GEMMs %.1f%% of it, %.1f GFLOP at %.0f GFLOP/s\n",
		ms(total), pct(gemmTime, total), flops/1e9, rate)
	return err
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

func pct(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return 100 * a.Seconds() / b.Seconds()
}
