package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/storage/filestore"
)

func newAnalyzeCmd() *cobra.Command {
	var (
		reportName, query, format, cache string
		showSQL, sandbox                 bool
		timeout                          time.Duration
		p                                analysis.ReportParams
	)
	cmd := &cobra.Command{
		Use:   "analyze [--report NAME | --sql QUERY]",
		Short: "Query a run's committed outputs with an embedded DuckDB (canned reports or any SQL)",
		Long: `Lists the run's committed folders (those with a _MANIFEST.json), downloads their files through
the store into a local cache that mirrors the key layout (verified against the manifests' sha256;
files already cached with the right sha256 are not downloaded again; a store file that does not
match its manifest is refused), and registers DuckDB views over them:

  rollouts     one row per agent invocation (iter=N/rollout)
  advantages   advantage sidecars, with iteration and estimator columns (iter=N/advantage/est=E)
  diagnostics  per-agent μ_k, σ_k, μ, σ and inflation factor per estimator (iter=N/diagnostics/est=E)
  metrics      learner metrics per model ("*") and agent (iter=N/learn)
  evals        avg@k / pass@k per data source per checkpoint step (eval/step=N)
  train_evals  avg@k / pass@k on training-split prompts (eval-train/step=N, evaluate --train-split)
  eval_prompts successes of each evaluated prompt per split and step (eval[-train]/step=N/prompts.parquet)
  ablations    drmas ablate summaries (ablations/<mode>)

Canned reports (--report):

  ` + strings.Join(analysis.Reports(), "\n  ") + `

or any SQL (--sql), e.g.
  drmas analyze --run demo --sql "SELECT agent, avg(advantage) FROM rollouts JOIN advantages USING (iteration, row_id, agent) WHERE estimator = 'drmas' GROUP BY agent"

Without --report or --sql it prints the views and their row counts.` + sandboxHelp,
		Example: `  drmas analyze --run demo
  drmas analyze --run demo --report gradnorm --k 3
  drmas analyze --run demo --sql "SELECT agent, count(*) FROM rollouts GROUP BY agent" --format csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if reportName != "" && query != "" {
				return fmt.Errorf("analyze: give --report or --sql, not both")
			}
			if !slices.Contains(analysis.Formats, format) {
				return fmt.Errorf("analyze: --format %q: want %s", format, strings.Join(analysis.Formats, ", "))
			}
			if timeout < 0 {
				return fmt.Errorf("analyze: --timeout %s: must be ≥ 0 (0: none)", timeout)
			}
			if cmd.Flags().Changed("sql") && strings.TrimSpace(query) == "" {
				return fmt.Errorf("analyze: --sql is empty: give a query (leave --sql out to list the views)")
			}
			if err := checkReportFlags(cmd, reportName, p); err != nil {
				return fmt.Errorf("analyze: %w", err)
			}
			if showSQL {
				if reportName == "" {
					return fmt.Errorf("analyze: --show-sql needs --report")
				}
				q, err := analysis.ReportSQL(reportName, p)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), q+";")
				return nil
			}
			env, done, err := openEnv(cmd)
			if err != nil {
				return err
			}
			defer done()
			s, err := openSession(cmd, env, cache)
			if err != nil {
				return err
			}
			defer s.Close()
			var t *analysis.Table
			ctx, cancel := withTimeout(cmd.Context(), timeout)
			defer cancel()
			switch {
			case reportName != "":
				t, err = s.Report(ctx, reportName, p)
				err = timedOut(err, ctx, timeout)
			case query != "":
				if t, err = s.Query(ctx, query); err != nil {
					err = timedOut(err, ctx, timeout)
					// DuckDB's message alone does not say it is about the query given.
					// DuckDB may quote the query (a column it cannot bind): cut what it says.
					err = fmt.Errorf("analyze --sql: %w", excerpt.Message(err))
				}
			default:
				return s.Describe(cmd.Context(), cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			return t.Write(cmd.OutOrStdout(), format)
		},
	}
	f := cmd.Flags()
	f.StringVar(&reportName, "report", "", "canned report: rewards, inflation, gradnorm, success or evaldelta (see the list above)")
	f.StringVar(&query, "sql", "", "SQL to run over the views")
	f.StringVar(&format, "format", "table", "output format: table, csv or json")
	f.StringVar(&cache, "cache", "", "local cache folder (default: ~/.cache/drmas/<hash of the store URL>)")
	f.BoolVar(&showSQL, "show-sql", false, "print the SQL of --report instead of running it")
	f.BoolVar(&sandbox, "sandbox", false, "for SQL someone else wrote: only one SELECT over the run's views, no files, ATTACH or extensions, settings locked (see above; config key analyze.sandbox)")
	f.DurationVar(&timeout, "timeout", 0, "stop a query that runs longer, e.g. 30s (0: no limit)")
	f.Float64Var(&p.SpikeK, "k", 2, "gradnorm: a spike exceeds k × the rolling median")
	f.IntVar(&p.Window, "window", 5, "gradnorm: rolling-median window, in iterations")
	return cmd
}

// checkReportFlags rejects, before the run is synced, a --report that names no report and a
// --k or --window that the report would refuse, or silently replace by its default (0).
func checkReportFlags(cmd *cobra.Command, report string, p analysis.ReportParams) error {
	f := cmd.Flags()
	if f.Changed("k") && (!(p.SpikeK > 0) || math.IsInf(p.SpikeK, 0)) {
		return fmt.Errorf("--k %g: want a finite number > 0 (default 2)", p.SpikeK)
	}
	if f.Changed("window") && p.Window < 1 {
		return fmt.Errorf("--window %d: want a number of iterations ≥ 1 (default 5)", p.Window)
	}
	if report != "" {
		if _, err := analysis.ReportSQL(report, p); err != nil {
			return err
		}
	}
	return nil
}

// openSession syncs the run of env into the cache and opens the DuckDB views, reporting what it
// fetched on stderr.
func openSession(cmd *cobra.Command, env *stages.Env, cache string) (*analysis.Session, error) {
	if strings.HasPrefix(cache, "~") {
		// The shell expands ~ only at the start of a word (--cache ~/x, not --cache=~/x).
		return nil, fmt.Errorf("--cache %s: ~ is not expanded here: write the absolute path (or --cache ~/… with a space, which the shell expands); a folder named ~ is ./%s", cache, cache)
	}
	if cache == "" {
		var err error
		if cache, err = analysis.DefaultCacheDir(env.Config.Store); err != nil {
			return nil, err
		}
	}
	sb, err := sandboxOf(cmd, env.Config)
	if err != nil {
		return nil, err
	}
	s, err := analysis.Open(cmd.Context(), analysis.Options{Bucket: env.Bucket, Run: env.Config.Run, CacheDir: cache, Sandbox: sb})
	if err != nil {
		return nil, err
	}
	st := s.Stats
	if st.Folders == 0 {
		s.Close()
		return nil, nothingToAnalyze(cmd.Context(), env)
	}
	env.Logf("analyze: run %s: %d committed folders, %d files (%.1f MB): %d downloaded (%d re-fetched), %d cached in %s; views in %s",
		s.Run, st.Folders, st.Files, float64(st.Bytes)/1e6, st.Downloaded, st.Refetched, st.Cached, s.SyncTime.Round(1e6), s.ViewTime.Round(1e6))
	return s, nil
}

// nothingToAnalyze says why a run has no committed folder to analyze: a store folder that does
// not exist, a run with only checkpoints (warm-up done, no iteration yet), or no such run.
func nothingToAnalyze(ctx context.Context, env *stages.Env) error {
	run, store := env.Config.Run, env.Config.Store
	if fb, ok := env.Bucket.(*filestore.Bucket); ok {
		if _, err := os.Stat(fb.Root()); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("store folder %s does not exist: check --store", fb.Root())
		}
	}
	if steps, err := checkpoints.Steps(ctx, env.Bucket, run); err == nil && len(steps) > 0 {
		return fmt.Errorf("run %s in store %s has checkpoints (steps %s) but no committed iteration or evaluation to analyze yet: run iterations first (`drmas run`)",
			run, store, checkpoints.FormatSteps(steps))
	}
	return fmt.Errorf("run %s has nothing committed in store %s: check --run and --store (`drmas run` writes a run)", run, store)
}
