package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/ablate"
	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/report"
)

func newAblateCmd() *cobra.Command {
	var (
		o                 ablate.Options
		estimators, iters string
		seeds, reportOut  string
		cache             string
	)
	cmd := &cobra.Command{
		Use:   "ablate --run SRC [--mode replay|onpolicy]",
		Short: "Compare advantage estimators on a run: replay its stored rollouts, or train on-policy",
		Long: `replay (default): for each committed rollout iteration of run SRC (--iters a..b to choose) and
each estimator, copies the rollout (objects + manifest, byte for byte) and the checkpoint that
generated it into run SRC-ablate-<estimator>, recomputes normalize with that estimator on those
same rollouts and runs the learner from that same checkpoint: the only difference between the
estimators is the estimator. Each iteration's checkpoints live in runs/SRC-ablate-<est>/iter=N/
checkpoints/ (step N copied, step N+1 produced). --eval also evaluates every produced checkpoint.
Iterations whose checkpoint was deleted by learn.keep_checkpoints are skipped (and listed).
The learner runs with the config's learn section: set learn objective options (docs/objectives.md,
e.g. DRMAS_LEARN_LOSS_AGG=seq-mean-token-mean) to learn the same rows under them; such a replay
writes runs SRC-ablate-<est>-o<8 hex> named by the options, beside the defaults' runs.

onpolicy: a full 'drmas run' per estimator × seed into runs SRC-<estimator>-s<seed>, for --iters
0..b iterations (default: the config's iterations).

Both write runs/SRC/ablations/<mode>/summary.parquet (+ _MANIFEST.json), one row per (estimator,
seed, iteration, model, agent): loss, grad norm, reward, eval avg@k/pass@k where present, and
print a report; --report FILE also renders 'drmas report --ablation <mode>' of it to FILE (for
onpolicy: the statistics pooled over seeds, whose held-out, paired-difference and spike tables
are printed as well). Use the config SRC was trained with. Same inputs and config give byte-identical
outputs; committed work is not redone.`,
		Example: `  drmas ablate --run demo --iters 0..4 --estimators drmas,grpo --eval
  drmas ablate --run demo --mode onpolicy --iters 0..9 --seeds 1,2,3 --report demo-onpolicy.html`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Iterations, err = ablate.ParseRange(iters); err != nil {
				return fmt.Errorf("--iters: %w", err)
			}
			if o.Seeds, err = ablate.ParseSeeds(seeds); err != nil {
				return fmt.Errorf("--seeds: %w", err)
			}
			if len(o.Seeds) > 0 && o.Mode != ablate.OnPolicy {
				return fmt.Errorf("ablate: --seeds applies to --mode onpolicy (replay uses the source's seed)")
			}
			// A flag of the other mode would be ignored without a word.
			f := cmd.Flags()
			if f.Changed("eval-every") && o.Mode != ablate.OnPolicy {
				return fmt.Errorf("ablate: --eval-every applies to --mode onpolicy (replay: --eval evaluates every checkpoint)")
			}
			if o.Eval && o.Mode == ablate.OnPolicy {
				return fmt.Errorf("ablate: --eval applies to --mode replay (onpolicy: --eval-every N)")
			}
			if o.EvalEvery < 0 {
				return fmt.Errorf("ablate: --eval-every %d: must be ≥ 0 (0: the config's evaluate.every)", o.EvalEvery)
			}
			for _, e := range strings.Split(estimators, ",") {
				if e = strings.TrimSpace(e); e != "" {
					o.Estimators = append(o.Estimators, e)
				}
			}
			if len(o.Estimators) == 0 {
				return fmt.Errorf("ablate: --estimators %q names no estimator (default %s)", estimators, strings.Join(ablate.DefaultEstimators, ","))
			}
			if reportOut != "" {
				if err := checkOutput(reportOut); err != nil {
					return err
				}
			}
			env, done, err := openEnv(cmd)
			if err != nil {
				return err
			}
			defer done()
			res, err := ablate.Run(cmd.Context(), env, o)
			if err != nil {
				return err
			}
			if err := ablate.WriteReport(cmd.OutOrStdout(), res); err != nil || reportOut == "" {
				return err
			}
			rep, err := writeReport(cmd, env, cache, nil, report.Options{Ablation: o.Mode, Params: analysis.ReportParams{SpikeK: 2, Window: 5}}, reportOut)
			if err != nil {
				return err
			}
			// The comparison itself, for a terminal or a log without the HTML.
			return rep.WriteText(cmd.OutOrStdout(), report.TableHeldOut, report.TablePaired, report.TableSpikes)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Mode, "mode", ablate.Replay, "replay or onpolicy")
	f.StringVar(&estimators, "estimators", strings.Join(ablate.DefaultEstimators, ","), "estimators to compare")
	f.StringVar(&iters, "iters", "", "iterations a..b (replay: which stored ones, default all; onpolicy: run 0..b)")
	f.StringVar(&seeds, "seeds", "", "onpolicy seeds, e.g. 1,2,3 (default: the config's seed)")
	f.BoolVar(&o.Eval, "eval", false, "replay: evaluate every checkpoint the ablation produces")
	f.IntVar(&o.EvalEvery, "eval-every", 0, "onpolicy: evaluate every N iterations (default: evaluate.every)")
	f.StringVar(&reportOut, "report", "", "also render the ablation's HTML report (drmas report --ablation <mode>) to this file")
	f.StringVar(&cache, "cache", "", "--report: local cache folder (default: ~/.cache/drmas/<hash of the store URL>)")
	return cmd
}
