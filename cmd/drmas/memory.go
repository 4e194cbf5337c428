package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hf"
)

// addMemoryLimitFlag adds --memory-limit, which the stage commands check their estimates
// against (checkMemory).
func addMemoryLimitFlag(fs *pflag.FlagSet) {
	fs.String("memory-limit", "", `memory a stage may use, e.g. 8GiB or 512MiB; default: this machine's (or its container's)
memory, or GOMEMLIMIT when set. Before a stage starts, drmas estimates its memory from the
config's sizes (tasks, group size, tokens, models) and refuses a config that will not fit,
saying what to lower. With analyze --sandbox: DuckDB's memory limit (default 1GiB)`)
}

// stagesOf are the stages a command runs, whose memory checkMemory estimates.
func stagesOf(cmd *cobra.Command) []string {
	if cmd.Name() == "run" {
		return configs.MemoryStages
	}
	for _, s := range configs.MemoryStages {
		if cmd.Name() == s {
			return []string{s}
		}
	}
	return nil
}

// checkMemory refuses, before any work, a config under which a stage cmd runs would need more
// memory than it may use: --memory-limit, else GOMEMLIMIT, else the machine's memory.
func checkMemory(cmd *cobra.Command, cfg *configs.Config) error {
	stages := stagesOf(cmd)
	if len(stages) == 0 {
		return nil
	}
	limit, by, err := memoryLimit(cmd)
	if err != nil || limit <= 0 {
		return err
	}
	softLimit(limit)
	return cfg.CheckMemoryOf(stages, limit, by, localHFConfigs(cfg))
}

// localHFConfigs reads the config.json of each HF model in a local folder; a store folder (or
// one that cannot be read here) is left to the warm-up's check once fetched.
func localHFConfigs(cfg *configs.Config) configs.HFConfigs {
	out := configs.HFConfigs{}
	for id, m := range cfg.Models {
		if !m.IsHF() || strings.Contains(m.HF, "://") {
			continue
		}
		if hc, err := hf.ReadConfig(m.HF); err == nil {
			out[id] = hc
		}
	}
	return out
}

// softLimit makes limit the Go runtime's soft memory limit unless GOMEMLIMIT set one: the
// collector then runs harder as the heap nears it, instead of letting it grow to twice what is
// live (a Hugging Face model's learner holds gigabytes of weights, gradients and moments, and
// each checkpoint briefly adds a tensor's worth of garbage).
func softLimit(limit float64) {
	if debug.SetMemoryLimit(-1) == math.MaxInt64 && limit < math.MaxInt64 {
		debug.SetMemoryLimit(int64(limit))
	}
}

// memoryLimit is the memory the stages may use and what sets it; 0 when nothing says.
func memoryLimit(cmd *cobra.Command) (float64, string, error) {
	if f := cmd.Flags().Lookup("memory-limit"); f != nil && f.Value.String() != "" {
		n, err := parseBytes(f.Value.String())
		if err != nil {
			return 0, "", fmt.Errorf("--memory-limit %s: %w", f.Value.String(), err)
		}
		return n, "--memory-limit", nil
	}
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
		return float64(l), "GOMEMLIMIT", nil
	}
	return machineMemory(), "this machine's memory", nil
}

// machineMemory is the memory of this machine, or of its container when that is less (cgroup
// v2 memory.max, v1 memory.limit_in_bytes); 0 if unknown.
func machineMemory() float64 {
	var total float64
	if f, err := os.Open("/proc/meminfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if rest, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
				if kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64); err == nil {
					total = kb * 1024
				}
			}
		}
		_ = f.Close()
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if data, err := os.ReadFile(p); err == nil {
			if n, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64); err == nil && n > 0 && (total == 0 || n < total) {
				total = n
			}
		}
	}
	return total
}

// parseBytes reads a size such as 8GiB, 8G, 512MiB, 1.5TB or 1048576 (bytes). K, M, G and T
// are binary (1024), as GOMEMLIMIT reads them.
func parseBytes(s string) (float64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n <= 0 || math.IsInf(n, 0) {
		return 0, fmt.Errorf("want a size such as 8GiB or 512MiB")
	}
	mult := map[string]float64{"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
		"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}[strings.ToLower(unit)]
	if mult == 0 {
		return 0, fmt.Errorf("unit %s: want B, KiB, MiB, GiB or TiB", unit)
	}
	return n * mult, nil
}
