// Package layout is the key scheme of a run's objects in the store: which folder each stage
// commits (package commit writes and reads them) and how run names and the iter=/step= folder
// elements are spelt.
package layout

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/drmas-dev/drmas/internal/excerpt"
)

// The object layout of a run, relative to the store root. Hive-style key=value folders let
// DuckDB read everything with hive_partitioning=true.
//
//	runs/<run>/iter=000007/rollout/part-00000-of-00004.parquet, _MANIFEST.json
//	runs/<run>/iter=000007/advantage/est=drmas/part-…parquet, _MANIFEST.json
//	runs/<run>/iter=000007/diagnostics/est=drmas/agents.parquet, _MANIFEST.json
//	runs/<run>/iter=000007/learn/metrics.parquet, _MANIFEST.json
//	runs/<run>/eval/step=000008/results.parquet, _MANIFEST.json   (evaluation of a checkpoint)
//	runs/<run>/eval-train/step=000008/results.parquet, …          (the same on training prompts)
//	runs/<run>/checkpoints/step=000008/<model>/model.safetensors, optim.safetensors; _MANIFEST.json
//	runs/<run>/checkpoints/LATEST
//	runs/<run>/ablations/<mode>/summary.parquet, _MANIFEST.json      (an ablation's summary)

var runNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidateRunName rejects names that are empty, contain "/" or "..", or use characters other
// than letters, digits, ".", "_" and "-" (first character a letter or digit; ≤ 128 bytes).
func ValidateRunName(run string) error {
	switch {
	case run == "":
		return errors.New("run name is empty")
	case strings.Contains(run, ".."):
		return fmt.Errorf("run name %s contains ..", excerpt.Quote(run))
	case !runNameRE.MatchString(run):
		return fmt.Errorf("run name %s: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", excerpt.Quote(run))
	}
	return nil
}

// RunDir is the folder of a run.
func RunDir(run string) string { return "runs/" + run }

// IterDir is the folder of one iteration.
func IterDir(run string, iter int) string { return fmt.Sprintf("runs/%s/iter=%06d", run, iter) }

// RolloutDir holds an iteration's trajectory parts.
func RolloutDir(run string, iter int) string { return path.Join(IterDir(run, iter), "rollout") }

// AdvantageDir holds an estimator's sidecars for an iteration.
func AdvantageDir(run string, iter int, estimator string) string {
	return path.Join(IterDir(run, iter), "advantage", "est="+estimator)
}

// DiagnosticsDir holds an estimator's per-agent diagnostics for an iteration.
func DiagnosticsDir(run string, iter int, estimator string) string {
	return path.Join(IterDir(run, iter), "diagnostics", "est="+estimator)
}

// LearnDir holds an iteration's learner metrics.
func LearnDir(run string, iter int) string { return path.Join(IterDir(run, iter), "learn") }

// EvalDir holds the evaluation results of a checkpoint step. Evaluations are keyed by the
// checkpoint they measure (step 0 is the warm-up), not by iteration.
func EvalDir(run string, step int64) string { return fmt.Sprintf("runs/%s/eval/step=%06d", run, step) }

// TrainEvalDir holds the evaluation of a checkpoint step on training-split prompts (the
// in-distribution check; EvalDir holds the held-out one).
func TrainEvalDir(run string, step int64) string {
	return fmt.Sprintf("runs/%s/eval-train/step=%06d", run, step)
}

// CheckpointsDir holds a run's checkpoints and LATEST.
func CheckpointsDir(run string) string { return path.Join(RunDir(run), "checkpoints") }

// CheckpointDir is the folder of one checkpoint step.
func CheckpointDir(run string, step int64) string {
	return fmt.Sprintf("%s/step=%06d", CheckpointsDir(run), step)
}

// LatestKey is the key of the LATEST pointer.
func LatestKey(run string) string { return path.Join(CheckpointsDir(run), "LATEST") }

// AblationDir holds the summary of an ablation mode over a run.
func AblationDir(run, mode string) string { return path.Join(RunDir(run), "ablations", mode) }

// ParseStepDir extracts the step of a "step=000008" element.
func ParseStepDir(el string) (int64, bool) {
	s, ok := strings.CutPrefix(el, "step=")
	if !ok || s == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// ParseIterDir extracts the iteration of an "iter=000008" element spelt as IterDir spells
// it (not "iter=8" or "iter=+8", which no stage writes).
func ParseIterDir(el string) (int, bool) {
	s, ok := strings.CutPrefix(el, "iter=")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0 && fmt.Sprintf("%06d", n) == s
}
