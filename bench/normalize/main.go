// Command normalize benchmarks drmas's normalize stage (estimator drmas) against DuckDB doing the
// same computation: read the key and score columns of a committed rollout iteration and compute
// the agent-wise advantage per (uid, agent) with the singleton rule. The outputs are not the
// same: DuckDB writes one Parquet file of (row_id, advantage DOUBLE); drmas writes what the stage
// commits, the advantage sidecars (row_id, uid, agent, advantage FLOAT, baseline_mean,
// baseline_std, group_size), the per-agent diagnostics and their manifests.
//
//	go run ./bench/normalize [-rows 10000000] [-parts 8] [-dir DIR] [-threads 2] [-reps 3]
//
// The dataset (realistic rows with ~200 token ids each, written by the real writer and committed)
// is generated once and cached in DIR under a folder named by its parameters. Each engine runs
// as a subprocess of this binary so that its peak RSS (getrusage ru_maxrss) is its own; each is
// run -reps times and the best and median wall times are reported. The two outputs are then
// compared row by row.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
)

type options struct {
	rows, parts, threads, reps, tokens int
	dir, phase, store, cpuprofile      string
	memprofile                         string
	skipDuck                           bool
}

func main() {
	var o options
	flag.IntVar(&o.rows, "rows", 10_000_000, "approximate number of rollout rows")
	flag.IntVar(&o.parts, "parts", 8, "rollout parts")
	flag.IntVar(&o.threads, "threads", 2, "threads for each engine (GOMAXPROCS for drmas, SET threads for DuckDB)")
	flag.IntVar(&o.reps, "reps", 3, "timed runs of each engine")
	flag.IntVar(&o.tokens, "tokens", 200, "mean token ids per row (prompt_ids + response_ids)")
	flag.StringVar(&o.dir, "dir", filepath.Join(os.TempDir(), "drmas-bench-normalize"), "folder holding the cached datasets")
	flag.StringVar(&o.phase, "phase", "", "internal: run one engine (drmas or duckdb) over -store and print its timing")
	flag.StringVar(&o.store, "store", "", "internal: the dataset store root for -phase")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the drmas phase to this file")
	flag.StringVar(&o.memprofile, "memprofile", "", "write an allocation profile of the drmas phase to this file")
	flag.BoolVar(&o.skipDuck, "skip-duckdb", false, "time drmas only")
	flag.Parse()
	var err error
	if o.phase != "" {
		err = runPhase(o)
	} else {
		err = runBench(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-normalize:", err)
		os.Exit(1)
	}
}

const (
	runName = "bench"
	iter    = 1
)

// phaseResult is what a -phase child prints on its last stdout line.
type phaseResult struct {
	Engine string  `json:"engine"`
	Rows   int64   `json:"rows"`
	WallS  float64 `json:"wall_s"`
	HWM    int64   `json:"vm_hwm_bytes"` // peak RSS of the child's own address space
}

type measured struct {
	wall    time.Duration
	cpu     time.Duration // user + system time of the child process
	sys     time.Duration // system time of the child process
	faults  int64         // minor page faults of the child process
	maxRSS  int64         // bytes
	rows    int64
	elapsed time.Duration // including process start
}

// validate reports flag values the benchmark cannot run with.
func (o options) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"rows", o.rows}, {"parts", o.parts}, {"threads", o.threads}, {"reps", o.reps}, {"tokens", o.tokens}} {
		if f.v < 1 {
			return fmt.Errorf("-%s %d: must be at least 1", f.name, f.v)
		}
	}
	if o.parts > o.rows {
		return fmt.Errorf("-parts %d: must be at most -rows %d", o.parts, o.rows)
	}
	return nil
}

func runBench(o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	ctx := context.Background()
	root := filepath.Join(o.dir, fmt.Sprintf("rows=%d-parts=%d-tokens=%d-v2", o.rows, o.parts, o.tokens))
	rows, bytes, err := ensureDataset(ctx, root, o)
	if err != nil {
		return err
	}
	fmt.Printf("dataset: %s\n  %d rows in %d parts, %.2f GB on disk (%.0f bytes/row)\n",
		root, rows, o.parts, float64(bytes)/1e9, float64(bytes)/float64(rows))
	self, err := os.Executable()
	if err != nil {
		return err
	}
	duckOut := filepath.Join(root, "duckdb-out", "advantage.parquet")
	run := func(engine string) (measured, error) {
		if err := cleanOutputs(root, duckOut); err != nil {
			return measured{}, err
		}
		// Flush the previous run's dirty pages and removals before timing this one: otherwise
		// the first fsync of the next run (drmas syncs what it commits; DuckDB does not) pays
		// for the previous engine's writeback.
		syscall.Sync()
		args := []string{"-phase", engine, "-store", root, "-threads", fmt.Sprint(o.threads), "-parts", fmt.Sprint(o.parts)}
		if engine == "drmas" && o.cpuprofile != "" {
			args = append(args, "-cpuprofile", o.cpuprofile)
		}
		if engine == "drmas" && o.memprofile != "" {
			args = append(args, "-memprofile", o.memprofile)
		}
		cmd := exec.Command(self, args...)
		cmd.Stderr = os.Stderr
		start := time.Now()
		out, err := cmd.Output()
		elapsed := time.Since(start)
		if err != nil {
			return measured{}, fmt.Errorf("%s phase: %w", engine, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var r phaseResult
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
			return measured{}, fmt.Errorf("%s phase: bad output %q: %w", engine, out, err)
		}
		// ru_maxrss of a child also counts the parent's address space it was forked from (Linux
		// carries the old mm's high-water mark across exec), so the child reports its own VmHWM;
		// rusage is the fallback.
		rss := r.HWM
		if rss == 0 {
			rss = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024
		}
		cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		faults := cmd.ProcessState.SysUsage().(*syscall.Rusage).Minflt
		return measured{wall: time.Duration(r.WallS * float64(time.Second)), cpu: cpu, sys: cmd.ProcessState.SystemTime(),
			faults: faults, maxRSS: rss, rows: r.Rows, elapsed: elapsed}, nil
	}
	engines := []string{"drmas", "duckdb"}
	if o.skipDuck {
		engines = engines[:1]
	}
	results := map[string][]measured{}
	for rep := 0; rep < o.reps; rep++ {
		for _, e := range engines {
			m, err := run(e)
			if err != nil {
				return err
			}
			fmt.Printf("  run %d %-6s wall %7.3f s  (process %6.3f s, CPU %6.3f s, sys %5.3f s, %6.0fk page faults)  peak RSS %4.0f MB  %6.2f M rows/s\n",
				rep+1, e, m.wall.Seconds(), m.elapsed.Seconds(), m.cpu.Seconds(), m.sys.Seconds(), float64(m.faults)/1e3,
				float64(m.maxRSS)/1e6, float64(m.rows)/m.wall.Seconds()/1e6)
			results[e] = append(results[e], m)
		}
	}
	fmt.Printf("\nrows=%d parts=%d threads=%d reps=%d (GOMAXPROCS %d, %d CPUs)\n", rows, o.parts, o.threads, o.reps, o.threads, runtime.NumCPU())
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("load average: %s", la)
	}
	fmt.Printf("%-7s %10s %10s %12s %14s %14s\n", "engine", "best s", "median s", "M rows/s", "median CPU s", "peak RSS MB")
	sum := map[string]measured{}
	for _, e := range engines {
		ms := results[e]
		walls := make([]time.Duration, len(ms))
		cpus := make([]time.Duration, len(ms))
		var rss int64
		for i, m := range ms {
			walls[i], cpus[i] = m.wall, m.cpu
			rss = max(rss, m.maxRSS)
		}
		sort.Slice(walls, func(i, j int) bool { return walls[i] < walls[j] })
		sort.Slice(cpus, func(i, j int) bool { return cpus[i] < cpus[j] })
		med := walls[(len(walls)-1)/2]
		cpu := cpus[(len(cpus)-1)/2]
		sum[e] = measured{wall: med, cpu: cpu, maxRSS: rss}
		fmt.Printf("%-7s %10.3f %10.3f %12.2f %14.3f %14.0f\n", e, walls[0].Seconds(), med.Seconds(), float64(rows)/med.Seconds()/1e6, cpu.Seconds(), float64(rss)/1e6)
	}
	if o.skipDuck {
		return nil
	}
	fmt.Printf("ratio DuckDB/drmas: %.2fx median wall, %.2fx median CPU time\n",
		sum["duckdb"].wall.Seconds()/sum["drmas"].wall.Seconds(), sum["duckdb"].cpu.Seconds()/sum["drmas"].cpu.Seconds())
	return verify(ctx, root, duckOut, rows)
}

// cleanOutputs removes what a previous engine run wrote, so normalize recomputes.
func cleanOutputs(root, duckOut string) error {
	iterDir := filepath.Join(root, filepath.FromSlash(layout.IterDir(runName, iter)))
	for _, d := range []string{"advantage", "diagnostics"} {
		if err := os.RemoveAll(filepath.Join(iterDir, d)); err != nil {
			return err
		}
	}
	return os.RemoveAll(filepath.Dir(duckOut))
}

func partPaths(root string, parts int) []string {
	dir := filepath.Join(root, filepath.FromSlash(layout.RolloutDir(runName, iter)))
	out := make([]string, parts)
	for i := range out {
		out[i] = filepath.Join(dir, shards.PartName(i, parts))
	}
	return out
}

func runPhase(o options) error {
	runtime.GOMAXPROCS(o.threads)
	ctx := context.Background()
	var (
		r   phaseResult
		err error
	)
	switch o.phase {
	case "drmas":
		var stop func()
		if o.cpuprofile != "" {
			f, err := os.Create(o.cpuprofile)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			stop = pprof.StopCPUProfile
		}
		r, err = runDrmas(ctx, o.store)
		if stop != nil {
			stop()
		}
		if o.memprofile != "" {
			if err := writeHeapProfile(o.memprofile); err != nil {
				return err
			}
		}
	case "duckdb":
		r, err = runDuckDB(ctx, o.store, o.parts, o.threads)
	default:
		err = fmt.Errorf("unknown phase %q", o.phase)
	}
	if err != nil {
		return err
	}
	r.HWM = vmHWM()
	data, _ := json.Marshal(r)
	fmt.Println(string(data))
	return nil
}

// writeHeapProfile writes the allocation profile (alloc_space shows where the bytes the phase
// touched were allocated).
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// vmHWM returns this process's peak resident set size (VmHWM in /proc/self/status), or 0.
func vmHWM() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb * 1024
		}
	}
	return 0
}
