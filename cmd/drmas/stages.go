package main

import (
	"fmt"
	"math"
	"os"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/estimators"
	"github.com/drmas-dev/drmas/jobs"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/evaluate"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/normalize"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/warmup"
)

func newRunStageCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "run-stage",
		Short: "Run one pipeline stage for one iteration",
		Long: `Run one stage alone. Stages read only committed inputs and commit their outputs with a
_MANIFEST.json written last; rerunning a committed stage is a no-op, and a stage interrupted at
any point can simply be rerun.`,
		Example: `  drmas run-stage warmup
  drmas run-stage rollout --iter 0
  drmas run-stage normalize --iter 0 --estimator drmas,grpo
  drmas run-stage learn --iter 0
  drmas run-stage evaluate --step 1`,
	})
	cmd.PersistentFlags().String("shard", "", `worker "i/n" of a sharded stage (default: from JOB_COMPLETION_INDEX and DRMAS_SHARD_COUNT,
else the whole stage). rollout and normalize split their parts; the worker that finds every
part written commits the folder. warmup, learn and evaluate are not split: worker 0 does them.`)
	cmd.AddCommand(newWarmupCmd(), newRolloutCmd(), newNormalizeCmd(), newLearnCmd(), newEvaluateCmd())
	return cmd
}

// shardOf resolves --shard, falling back to the Kubernetes Indexed Job environment.
func shardOf(cmd *cobra.Command) (jobs.Shard, error) {
	if v, _ := cmd.Flags().GetString("shard"); v != "" {
		return jobs.ParseShard(v)
	}
	s, ok, err := jobs.ShardFromEnv(os.LookupEnv)
	if err != nil || !ok {
		return jobs.Whole, err
	}
	return s, nil
}

// checkIter rejects a value of the iteration flag (--iter, --iteration) that names no
// iteration (they are numbered from 0), before anything is opened.
func checkIter(flag string, iter int) error {
	switch {
	case iter < 0:
		return fmt.Errorf("--%s %d: must be ≥ 0", flag, iter)
	case iter > math.MaxInt32:
		return fmt.Errorf("--%s %d: must be ≤ %d", flag, iter, math.MaxInt32)
	}
	return nil
}

// requireIter is checkIter for a stage of one iteration, which must be named: an iteration
// left out would silently be iteration 0.
func requireIter(cmd *cobra.Command, iter int) error {
	if !cmd.Flags().Changed("iter") {
		return fmt.Errorf("%s: --iter N is required (iterations are numbered from 0)", cmd.Name())
	}
	return checkIter("iter", iter)
}

// checkStep rejects a --step that names no checkpoint: steps are ≥ 0, or -1 for LATEST.
func checkStep(step int64) error {
	if step < stages.LatestStep {
		return fmt.Errorf("--step %d: must be ≥ 0, or -1 for LATEST", step)
	}
	return nil
}

// unsharded reports whether this worker should skip a stage that is not split across shards.
func unsharded(cmd *cobra.Command, stage string) (bool, error) {
	s, err := shardOf(cmd)
	if err != nil {
		return false, err
	}
	if s.Index != 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s is not split across shards: worker %s has nothing to do (worker 0 runs it)\n", stage, s)
		return true, nil
	}
	return false, nil
}

func newWarmupCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "warmup",
		Short: "Train each model on the workflow's demonstrations and publish checkpoint step 0",
		Long: `Supervised warm-up: each model is trained from scratch on demonstrations that the workflow's
expert generates for its agents, with a share (warmup.noise) of plausible mistakes, so that RL
starts from a policy that is sometimes right. Publishes checkpoint step 0 and LATEST.`,
		Example: "  drmas --run demo run-stage warmup",
		Args:    cobra.NoArgs,
		RunE: withEnv(func(cmd *cobra.Command, env *stages.Env) error {
			if skip, err := unsharded(cmd, "warmup"); err != nil || skip {
				return err
			}
			var err error
			_, err = warmup.Run(cmd.Context(), env)
			return err
		}),
	}
}

func newRolloutCmd() *cobra.Command {
	var o rollout.Options
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Play the workflow for an iteration's prompts and commit trajectory shards",
		Long: `Loads the checkpoint (LATEST by default), plays tasks.per_iteration prompts × rollout.group_size
samples of the configured workflow (agents sharing a model are batched together each step), and
commits Parquet parts under runs/<run>/iter=N/rollout/ — one row per agent invocation with
token ids and behaviour log-probs. Same seed + same checkpoint ⇒ byte-identical parts.`,
		Example: "  drmas --run demo run-stage rollout --iter 0",
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireIter(cmd, o.Iteration); err != nil {
				return err
			}
			return checkStep(o.Step)
		},
		RunE: withEnv(func(cmd *cobra.Command, env *stages.Env) error {
			var err error
			if o.Shard, err = shardOf(cmd); err != nil {
				return err
			}
			res, err := rollout.Run(cmd.Context(), env, o)
			if err != nil || res.Skipped || !res.Committed {
				return err
			}
			for _, a := range stages.SortedKeys(res.AgentScore) {
				fmt.Fprintf(cmd.OutOrStdout(), "%-10s mean score %.3f\n", a, res.AgentScore[a])
			}
			return nil
		}),
	}
	cmd.Flags().IntVar(&o.Iteration, "iter", 0, "iteration to roll out (required)")
	cmd.Flags().Int64Var(&o.Step, "step", stages.LatestStep, "checkpoint step to sample from (-1: LATEST)")
	return cmd
}

func newEvaluateCmd() *cobra.Command {
	var o evaluate.Options
	cmd := &cobra.Command{
		Use:   "evaluate",
		Short: "Measure avg@k and pass@k on the held-out eval split",
		Long: `Plays tasks.eval_size held-out prompts × evaluate.k samples at evaluate.temperature /
evaluate.top_p with the checkpoint (LATEST by default), and commits avg@k and pass@k per data
source under runs/<run>/eval/step=N/. The held-out prompts are the workflow's held-out split
(disjoint from its generated training prompts) or the evaluate.source file; either way none
may be a question of a tasks.source file.`,
		Example: "  drmas --run demo run-stage evaluate --step 1",
		Args:    cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error { return checkStep(o.Step) },
		RunE: withEnv(func(cmd *cobra.Command, env *stages.Env) error {
			if skip, err := unsharded(cmd, "evaluate"); err != nil || skip {
				return err
			}
			var err error
			rows, err := evaluate.Run(cmd.Context(), env, o)
			if err != nil {
				return err
			}
			for _, r := range rows {
				fmt.Fprintf(cmd.OutOrStdout(), "step %d %-12s prompts=%-4d avg@%d=%.3f pass@%d=%.3f%s\n", r.Step, r.DataSource, r.Prompts, r.K, r.AvgAtK, r.K, r.PassAtK, evaluate.Extras(r))
			}
			return nil
		}),
	}
	cmd.Flags().Int64Var(&o.Step, "step", stages.LatestStep, "checkpoint step to evaluate (-1: LATEST)")
	cmd.Flags().BoolVar(&o.Train, "train-split", false, "evaluate on training-split prompts (in-distribution) instead of the held-out split")
	return cmd
}

func newNormalizeCmd() *cobra.Command {
	var o normalize.Options
	cmd := &cobra.Command{
		Use:   "normalize",
		Short: "Compute advantages (Dr. MAS, GRPO, …) for an iteration's committed rollout",
		Long: `Reads only the key and score columns of the iteration's committed rollout parts and writes,
per estimator, one narrow advantage sidecar per part (row_id, uid, agent, advantage and the
baseline statistics used) plus per-agent diagnostics (μ_k, σ_k, μ, σ, the Lemma 4.2 inflation
factor), each folder committed with a manifest.

Estimators (several at once, one pass over the data):
` + estimators.EstimatorHelp(),
		Example: "  drmas --run demo run-stage normalize --iter 0 --estimator drmas,grpo",
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return requireIter(cmd, o.Iteration) },
		RunE: withEnv(func(cmd *cobra.Command, env *stages.Env) error {
			var err error
			if o.Shard, err = shardOf(cmd); err != nil {
				return err
			}
			res, err := normalize.Run(cmd.Context(), env, o)
			if err != nil {
				return err
			}
			for _, est := range res.Estimators {
				for _, d := range res.Diagnostics[est] {
					fmt.Fprintf(cmd.OutOrStdout(), "%-12s %-10s rows=%-7d μ_k=%.3f σ_k=%.3f μ=%.3f σ=%.3f inflation=%.3f (max %.3f) σ_k=0 in %.0f%% of groups\n",
						est, d.Agent, d.Rows, d.MuK, d.SigmaK, d.Mu, d.Sigma, d.InflationMean, d.InflationMax, 100*d.ZeroSigmaKShare)
				}
			}
			return nil
		}),
	}
	cmd.Flags().IntVar(&o.Iteration, "iter", 0, "iteration to normalize (required)")
	cmd.Flags().StringSliceVar(&o.Estimators, "estimator", nil, "estimators, comma-separated (default: normalize.estimators)")
	return cmd
}

func newLearnCmd() *cobra.Command {
	var o learn.Options
	cmd := &cobra.Command{
		Use:   "learn",
		Short: "PPO update per model from an iteration's rollout + advantages; publish a checkpoint",
		Long: `Zips the iteration's committed rollout parts with the chosen estimator's advantage sidecars
and runs PPO-clip (token-mean, AdamW, grad-norm clipping) per model; agents sharing a model are
trained together with per-agent statistics, including each agent's own gradient norm. Publishes
checkpoint step S+1 (S = the step that generated the rollout), moves LATEST, keeps the last
learn.keep_checkpoints steps, and commits iter=N/learn/metrics.parquet.`,
		Example: "  drmas --run demo run-stage learn --iter 0 --estimator grpo",
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return requireIter(cmd, o.Iteration) },
		RunE: withEnv(func(cmd *cobra.Command, env *stages.Env) error {
			if skip, err := unsharded(cmd, "learn"); err != nil || skip {
				return err
			}
			var err error
			res, err := learn.Run(cmd.Context(), env, o)
			if err != nil || res.Skipped {
				return err
			}
			for _, m := range res.Metrics {
				fmt.Fprintf(cmd.OutOrStdout(), "%-6s %-10s loss=%.4f grad_norm=%.3f (max %.3f) clip=%.3f entropy=%.3f |A|=%.3f tokens=%d\n",
					m.Model, m.Agent, m.Loss, m.GradNorm, m.GradNormMax, m.ClipFrac, m.Entropy, m.MeanAbsAdv, m.Tokens)
			}
			return nil
		}),
	}
	cmd.Flags().IntVar(&o.Iteration, "iter", 0, "iteration to learn from (required)")
	cmd.Flags().StringVar(&o.Estimator, "estimator", "", "advantage estimator whose sidecars to use (default: learn.estimator)")
	return cmd
}
