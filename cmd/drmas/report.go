package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/ablate"
	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/report"
	"github.com/drmas-dev/drmas/stages"
)

func newReportCmd() *cobra.Command {
	var (
		o     report.Options
		out   string
		cache string
		pool  []string
	)
	cmd := &cobra.Command{
		Use:   "report --run NAME [--ablation replay|onpolicy] -o report.html",
		Short: "Render a run (and its ablation) as one self-contained HTML file of plots and tables",
		Long: `Reads the run's committed outputs like 'drmas analyze' (same cache), plots grad norm per agent,
mean score per agent, avg@k/pass@k per data source and a score histogram per agent (gonum/plot
PNGs, embedded as data URIs), with tables of the key numbers. --ablation adds the summary of
'drmas ablate --mode replay|onpolicy': grad norm per estimator per agent, evaluations per
estimator, and a per-estimator table. Every report plots the Lemma 4.2 inflation factor per agent
per iteration (mean and p90 over groups) and tables it per agent; --ablation replay adds the
measured grad-norm ratio (grpo, grpo_step over drmas, same rollouts) against the ratio the
rollouts' condition predicts, with the fit, pooled over the runs given to --pool; --ablation
onpolicy adds the statistics pooled over the ablation's output runs (one per estimator × seed):
held-out avg@k/pass@k per estimator and the paired difference drmas − estimator per seed with a
95 % t-interval over seeds, grad-norm spikes per agent (steps above 2× and 5× the run's median),
the grad-norm ratio estimator / drmas against √(inflation) with its fit, and the inflation factor
per agent per iteration (mean, p90, max over groups).`,
		Example: `  drmas report --run demo -o demo.html
  drmas report --run demo --ablation replay -o ablation.html
  drmas report --run sweep-a --ablation replay --pool sweep-b,sweep-c -o condition.html
  drmas report --run cond --ablation onpolicy -o pooled.html`,
		Args: cobra.NoArgs,
		// What would fail after the run is synced and the report drawn is refused first.
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkReportFlags(cmd, "", o.Params); err != nil {
				return fmt.Errorf("report: %w", err)
			}
			if o.Ablation != "" && o.Ablation != ablate.Replay && o.Ablation != ablate.OnPolicy {
				return fmt.Errorf("report: --ablation %q: want %s or %s", o.Ablation, ablate.Replay, ablate.OnPolicy)
			}
			return checkOutput(out)
		},
		RunE: withEnv(func(cmd *cobra.Command, env *stages.Env) error {
			_, err := writeReport(cmd, env, cache, pool, o, out)
			return err
		}),
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "report.html", "output HTML file (- for stdout)")
	f.StringVar(&o.Ablation, "ablation", "", "include an ablation summary: replay or onpolicy")
	f.StringSliceVar(&pool, "pool", nil, "replay: more runs (with a replay ablation) whose points join the predicted-vs-measured grad-norm figures, e.g. --pool a,b")
	f.StringVar(&o.Title, "title", "", "page title (default: drmas run NAME)")
	f.StringVar(&cache, "cache", "", "local cache folder (default: ~/.cache/drmas/<hash of the store URL>)")
	f.Float64Var(&o.Params.SpikeK, "k", 2, "grad-norm spike threshold: k × the rolling median")
	f.IntVar(&o.Params.Window, "window", 5, "grad-norm rolling-median window, in iterations")
	return cmd
}

// writeReport renders the report of env's run to out (- for stdout). An on-policy ablation's
// output runs are opened from the same store and cache as the report needs them.
func writeReport(cmd *cobra.Command, env *stages.Env, cache string, pool []string, o report.Options, out string) (*report.Report, error) {
	s, err := openSession(cmd, env, cache)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if o.Pool, err = openPool(cmd, env, cache, pool); err != nil {
		return nil, err
	}
	defer closePool(o.Pool)
	o.OpenRun = func(_ context.Context, run string) (*analysis.Session, error) {
		return openRun(cmd, env, cache, run)
	}
	var buf bytes.Buffer
	rep, err := report.Generate(cmd.Context(), s, o, &buf)
	if err != nil {
		return nil, err
	}
	if out == "-" {
		_, err = cmd.OutOrStdout().Write(buf.Bytes())
		return rep, err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: %d figures, %d tables, %d bytes\n", out, len(rep.Figures), len(rep.Tables), buf.Len())
	for _, n := range rep.Notes {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", n)
	}
	return rep, nil
}

// checkOutput rejects an -o that cannot be written: empty, a folder, or in a folder that does
// not exist ("-" is stdout).
func checkOutput(out string) error {
	switch fi, err := os.Stat(out); {
	case out == "-":
	case out == "":
		return fmt.Errorf("report: -o is empty: give a file name, or - for stdout")
	case err == nil && fi.IsDir():
		return fmt.Errorf("report: -o %s is a folder: give a file name, e.g. %s", out, filepath.Join(out, "report.html"))
	default:
		if _, err := os.Stat(filepath.Dir(out)); err != nil {
			return fmt.Errorf("report: -o %s: %w", out, err)
		}
	}
	return nil
}
