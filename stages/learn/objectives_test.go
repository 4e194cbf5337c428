package learn_test

import (
	"context"
	"math"
	"testing"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// TestLRScheduleContinuesAcrossIterations: with a cosine schedule over 3 iterations × 2
// mini-batches and 2 warm-up updates, each published step's optimizer holds the step count and
// the learning rate of its last update, and the next iteration (a fresh process would load the
// same state) continues the schedule where it stopped.
func TestLRScheduleContinuesAcrossIterations(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	cfg.Iterations, cfg.Learn.Epochs, cfg.Learn.MiniBatches = 3, 1, 2
	cfg.Learn.LRSchedule, cfg.Learn.LRWarmupSteps, cfg.Learn.MinLRRatio = "cosine", 2, 0.1
	base := cfg.Learn.LR
	env := prepare(t, cfg, 2) // learns iteration 0: updates 0 and 1 (the warm-up)
	if _, err := learn.Run(ctx, env, learn.Options{Iteration: 1}); err != nil {
		t.Fatal(err)
	}
	// By hand: update k's rate is base·k/2 for k < 2, then base·(0.1 + 0.9·½(1+cos(π(k−2)/4))).
	for _, tc := range []struct {
		step  int64
		steps int64
		lr    float64
	}{
		{1, 2, base * 0.5},
		{2, 4, base * (0.1 + 0.9*0.5*(1+math.Cos(math.Pi/4)))},
	} {
		set, err := checkpoints.LoadStep(ctx, env.Bucket, "t", tc.step, true)
		if err != nil {
			t.Fatal(err)
		}
		o := set.Optims["m1"]
		if o.Steps != tc.steps || math.Abs(o.LR-tc.lr) > 1e-15*base {
			t.Errorf("step %d: optimizer at %d steps with lr %v, want %d steps, lr %v", tc.step, o.Steps, o.LR, tc.steps, tc.lr)
		}
	}
}
