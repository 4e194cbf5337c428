package learn_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/model"
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

// TestObjectiveMetrics: the metrics rows carry the objective's statistics, consistent with the
// older columns: the clip shares split clip_frac, the response length mean is tokens/rows, the
// rollout correction's columns are null unless it is on, and shares lie in [0, 1].
func TestObjectiveMetrics(t *testing.T) {
	ctx := context.Background()
	for _, is := range []string{"", "token"} {
		cfg := stagetest.Config(t, "math")
		cfg.Learn.Epochs, cfg.Learn.MiniBatches = 2, 2
		cfg.Learn.RolloutIS, cfg.Learn.RolloutISCap = is, 1.0001
		env := prepare(t, cfg, 1)
		res, err := learn.Run(ctx, env, learn.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Metrics {
			if r.ClipFracLow == nil || r.ClipFracHigh == nil || r.DualClipFrac == nil || r.ZeroStdShare == nil || r.ResponseLenMean == nil || r.ResponseLenMax == nil {
				t.Fatalf("rollout_is %q: a statistic is missing: %+v", is, r)
			}
			if d := *r.ClipFracLow + *r.ClipFracHigh - r.ClipFrac; math.Abs(d) > 1e-12 || *r.DualClipFrac != 0 {
				t.Errorf("agent %s: clip low %v + high %v != clip_frac %v (dual %v)", r.Agent, *r.ClipFracLow, *r.ClipFracHigh, r.ClipFrac, *r.DualClipFrac)
			}
			if *r.ResponseLenMean != float64(r.Tokens)/float64(r.Rows) || *r.ResponseLenMax < int64(math.Ceil(*r.ResponseLenMean)) || *r.ZeroStdShare < 0 || *r.ZeroStdShare > 1 {
				t.Errorf("agent %s: response length mean %v max %v for %d tokens in %d rows, zero-std share %v", r.Agent, *r.ResponseLenMean, *r.ResponseLenMax, r.Tokens, r.Rows, *r.ZeroStdShare)
			}
			switch on := r.RolloutISMean != nil && r.RolloutISMax != nil && r.RolloutISCapped != nil; {
			case on != (is != ""):
				t.Errorf("rollout_is %q: correction statistics %v, %v, %v", is, r.RolloutISMean, r.RolloutISMax, r.RolloutISCapped)
			case on && (*r.RolloutISMax < *r.RolloutISMean || *r.RolloutISCapped < 0 || *r.RolloutISCapped > 1 || *r.RolloutISMean <= 0):
				t.Errorf("agent %s: IS mean %v max %v capped %v", r.Agent, *r.RolloutISMean, *r.RolloutISMax, *r.RolloutISCapped)
			}
		}
	}
}

// TestKLRefBaseIsTheAdapterOff: learn.kl_ref base scores a LoRA model's rows as its base model
// does (the adapter switched off), bit for bit, after the adapter has moved away from it; and it
// is refused, naming step0, for a model that trains every weight.
func TestKLRefBaseIsTheAdapterOff(t *testing.T) {
	base := tinyLLM(t)
	l, err := model.NewLoRA(base, model.LoRAConfig{R: 2, Alpha: 4, Targets: []string{"q_proj", "v_proj"}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	exs := batchOf(t, l, 6, 40)
	opt := l.NewOptimizer(model.DefaultAdamWConfig())
	for range 2 { // B = 0 at first: the second update moves the adapter's output
		if _, err := learn.Update(l, opt, exs, hyper, 1); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := learn.AdapterOff("m", l)
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]model.Sequence, len(exs))
	for i := range exs {
		seqs[i] = exs[i].Seq
	}
	want, _, err := base.Score(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := ref.Score(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	adapted, _, err := l.Score(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	moved := false
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("row %d: the adapter switched off scores %v, the base %v", i, got[i], want[i])
		}
		moved = moved || !slices.Equal(adapted[i], want[i])
	}
	if !moved {
		t.Fatal("the adapter still scores as its base: the test checks nothing")
	}
	if _, err := learn.AdapterOff("m", base); err == nil || !strings.Contains(err.Error(), "learn.kl_ref step0") {
		t.Fatalf("kl_ref base of a full model: %v", err)
	}
}
