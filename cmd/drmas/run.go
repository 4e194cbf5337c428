package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/pipeline"
	"github.com/drmas-dev/drmas/stages"
)

func newRunCmd() *cobra.Command {
	var o pipeline.Options
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the whole loop: warm-up, then rollout → normalize → learn per iteration",
		Long: `Runs warm-up if the run has no checkpoint, evaluates it, then per iteration rollout →
normalize → learn (iteration i samples from checkpoint step i and publishes step i+1), and
evaluates every --eval-every iterations and at the end. Committed work is never redone: a
killed run resumes where it stopped when started again with the same config.`,
		Example: `  drmas --store ./drmas-data --run demo run
  DRMAS_ITERATIONS=3 drmas --config my.yaml run --eval-every 1`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if o.Iterations < 0 {
				return fmt.Errorf("--iters %d: must be ≥ 0 (0: the config's iterations)", o.Iterations)
			}
			if o.EvalEvery < 0 {
				return fmt.Errorf("--eval-every %d: must be ≥ 0 (0: the config's evaluate.every)", o.EvalEvery)
			}
			return nil
		},
		RunE: withEnv(func(cmd *cobra.Command, env *stages.Env) error {
			// A bad dataset file would otherwise surface only after warm-up.
			if err := stages.CheckTasks(env.Config); err != nil {
				return err
			}
			var err error
			o.Summary = func(s pipeline.IterationSummary) { fmt.Fprintln(cmd.OutOrStdout(), s) }
			_, err = pipeline.Run(cmd.Context(), env, o)
			return err
		}),
	}
	cmd.Flags().IntVar(&o.Iterations, "iters", 0, "iterations; 0 or unset: the config's iterations")
	cmd.Flags().IntVar(&o.EvalEvery, "eval-every", 0, "evaluate every N iterations; 0 or unset: evaluate.every")
	return cmd
}
