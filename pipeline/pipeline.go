// Package pipeline runs the whole training loop: warm-up if the run has no checkpoint, then per
// iteration rollout → normalize → learn, and evaluate every E iterations. Every stage skips
// work that is already committed, so a killed `drmas run` resumes where it stopped and never
// redoes committed work; iteration i samples from checkpoint step i and publishes step i+1.
// A resumed run also deletes the steps learn.keep_checkpoints no longer keeps, which a kill
// right after learn committed would otherwise leave behind (learn does, when it skips).
// Models behind `drmas serve` (backend openai with sizes) are sampled by step i too: the
// rollout, and the evaluation of step i+1, wait for the server to load the step learn just
// published (it polls LATEST every --poll) before they sample.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/evaluate"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/normalize"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/warmup"
)

// Options configure a run of the loop.
type Options struct {
	Iterations int // default: the config's iterations
	// EvalEvery evaluates every N iterations (and at the end); 0: evaluate.every (whose 0 means
	// never); negative: never.
	EvalEvery int
	// Summary, if set, receives one summary line per iteration.
	Summary func(IterationSummary)
}

// IterationSummary is what one iteration produced.
type IterationSummary struct {
	Iteration int
	Step      int64              // checkpoint published
	Reward    map[string]float64 // mean row score per agent (nil if the rollout was already committed)
	GradNorm  map[string]float64 // per agent, before clipping (mean over updates)
	Eval      []evaluate.ResultRow
	// EvalDelta is the paired change in held-out avg@k from step 0 (same prompts), when both
	// evaluations have per-prompt results.
	EvalDelta *evaluate.Delta
}

// String renders the summary as one line.
func (s IterationSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "iter %d → step %d", s.Iteration, s.Step)
	if len(s.Reward) > 0 {
		b.WriteString(" | score")
		for _, a := range stages.SortedKeys(s.Reward) {
			fmt.Fprintf(&b, " %s=%.3f", a, s.Reward[a])
		}
	}
	if len(s.GradNorm) > 0 {
		b.WriteString(" | grad norm")
		for _, a := range stages.SortedKeys(s.GradNorm) {
			fmt.Fprintf(&b, " %s=%.3f", a, s.GradNorm[a])
		}
	}
	for _, r := range s.Eval {
		if r.DataSource == "all" {
			fmt.Fprintf(&b, " | eval avg@%d=%.3f", r.K, r.AvgAtK)
			if d := s.EvalDelta; d != nil {
				fmt.Fprintf(&b, " (%+.3f ± %.3f vs step %d, paired)", d.Delta, d.SE, d.FromStep)
			}
			fmt.Fprintf(&b, " pass@%d=%.3f%s", r.K, r.PassAtK, evaluate.Extras(r))
		}
	}
	return b.String()
}

// heldOutPrompts returns the per-prompt results of step's held-out evaluation, or nil when it
// is not evaluated.
func heldOutPrompts(ctx context.Context, env *stages.Env, step int64) ([]evaluate.PromptRow, error) {
	rows, err := evaluate.ReadPrompts(ctx, env.Bucket, layout.EvalDir(env.Config.Run, step))
	if errors.Is(err, commit.ErrNotCommitted) {
		return nil, nil
	}
	return rows, err
}

// Run runs the loop.
func Run(ctx context.Context, env *stages.Env, o Options) ([]IterationSummary, error) {
	cfg := env.Config
	if o.Iterations == 0 {
		o.Iterations = cfg.Iterations
	}
	if o.EvalEvery == 0 {
		o.EvalEvery = cfg.Evaluate.Every
	}
	// Every stage's Run names itself (and its iteration) in its errors, once: the loop adds
	// nothing to them, and names what failed only in the errors of its own.
	if _, err := warmup.Run(ctx, env); err != nil {
		return nil, err
	}
	var warm []evaluate.PromptRow
	if o.EvalEvery > 0 && cfg.Tasks.EvalSize > 0 {
		rows, err := evaluate.Run(ctx, env, evaluate.Options{Step: 0})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if r.DataSource == "all" {
				env.Logf("warm-up (step 0): eval avg@%d=%.3f pass@%d=%.3f%s", r.K, r.AvgAtK, r.K, r.PassAtK, evaluate.Extras(r))
			}
		}
		// Step 0's per-prompt results, which every later evaluation is paired with.
		if warm, err = heldOutPrompts(ctx, env, 0); err != nil {
			return nil, stages.Fail(ctx, "evaluate step 0", fmt.Errorf("read the per-prompt results: %w", err))
		}
	}
	estimators := append([]string(nil), cfg.Normalize.Estimators...)
	learnSpec, err := normalize.ParseSpecs([]string{cfg.Learn.Estimator}, cfg.Normalize.Eps)
	if err != nil {
		return nil, fmt.Errorf("learn.estimator: %w", err)
	}
	have, err := normalize.ParseSpecs(estimators, cfg.Normalize.Eps)
	if err != nil {
		return nil, fmt.Errorf("normalize.estimators: %w", err)
	}
	found := false
	for _, s := range have {
		found = found || s.Name() == learnSpec[0].Name()
	}
	if !found {
		estimators = append(estimators, cfg.Learn.Estimator)
	}
	var out []IterationSummary
	for iter := 0; iter < o.Iterations; iter++ {
		sum := IterationSummary{Iteration: iter}
		ro, err := rollout.Run(ctx, env, rollout.Options{Iteration: iter, Step: int64(iter)})
		if err != nil {
			return out, err
		}
		if !ro.Skipped {
			sum.Reward = ro.AgentScore
		}
		if _, err := normalize.Run(ctx, env, normalize.Options{Iteration: iter, Estimators: estimators}); err != nil {
			return out, err
		}
		lr, err := learn.Run(ctx, env, learn.Options{Iteration: iter})
		if err != nil {
			return out, err
		}
		sum.Step = lr.Step
		sum.GradNorm = map[string]float64{}
		for _, m := range lr.Metrics {
			if m.Agent != "*" {
				sum.GradNorm[m.Agent] = m.GradNorm
			}
		}
		if o.EvalEvery > 0 && cfg.Tasks.EvalSize > 0 && ((iter+1)%o.EvalEvery == 0 || iter == o.Iterations-1) {
			if sum.Eval, err = evaluate.Run(ctx, env, evaluate.Options{Step: lr.Step}); err != nil {
				return out, err
			}
			if warm != nil {
				cur, err := heldOutPrompts(ctx, env, lr.Step)
				if err != nil {
					return out, stages.Fail(ctx, fmt.Sprintf("evaluate step %d", lr.Step), fmt.Errorf("read the per-prompt results: %w", err))
				}
				if cur != nil {
					d := evaluate.PairedDelta(warm, cur)
					sum.EvalDelta = &d
				}
			}
		}
		if o.Summary != nil {
			o.Summary(sum)
		}
		out = append(out, sum)
	}
	return out, nil
}
