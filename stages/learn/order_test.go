package learn_test

import (
	"context"
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/gpu"
	"github.com/drmas-dev/drmas/gpu/cuda"
	gpuengine "github.com/drmas-dev/drmas/gpu/engine"
	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/normalize"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/storage"
)

// aheadOfTurn returns a store where iteration 0 is learned (step 1), iteration 1 is rolled out
// from step 1 and normalized, and iteration 3 holds a rollout sampled from step 1 (with params,
// and scores that give a gradient), normalized: what `drmas run --iters 1` and then
// `run-stage rollout --iter 3`, `normalize --iter 3` left in a store before rollout checked
// the order.
func aheadOfTurn(t *testing.T, params map[string]string) *stages.Env {
	t.Helper()
	cfg := stagetest.Config(t, "math")
	cfg.Learn.Epochs, cfg.Learn.MiniBatches = 1, 1
	env := prepare(t, cfg, 2)
	_, parts := stagetest.ReadRollout(t, env, 1)
	stagetest.VaryScores(parts, 1)
	stagetest.WriteRolloutWith(t, env, 3, parts, false, params)
	if _, err := normalize.Run(context.Background(), env, normalize.Options{Iteration: 3, Estimators: []string{"drmas"}}); err != nil {
		t.Fatal(err)
	}
	return env
}

// learnFails runs iteration iter's learn twice, as `drmas run` run again would, and checks
// that both attempts fail with want and leave the iteration uncommitted, without metrics a
// later attempt could commit.
//
// The error carries the facts; what to do is cmd/drmas's (advice.go), which words it from the
// *learn.ConflictError's fields: it must be one, with remedy.
func learnFails(t *testing.T, env *stages.Env, iter int, remedy learn.Remedy, want ...string) *learn.ConflictError {
	t.Helper()
	ctx := context.Background()
	var ce *learn.ConflictError
	for attempt := 1; attempt <= 2; attempt++ {
		var log strings.Builder
		env.Log = &log
		res, err := learn.Run(ctx, env, learn.Options{Iteration: iter})
		if err == nil {
			t.Fatalf("attempt %d: learn iter %d committed %+v\n%s", attempt, iter, res, log.String())
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("attempt %d: %v\nwant it to say %q", attempt, err, w)
			}
		}
		if !errors.As(err, &ce) || ce.Remedy != remedy || ce.Iter != iter {
			t.Fatalf("attempt %d: %v (%T): want a *learn.ConflictError of iteration %d with remedy %d, got %+v", attempt, err, err, iter, remedy, ce)
		}
		if ok, _ := commit.IsCommitted(ctx, env.Bucket, layout.LearnDir("t", iter)); ok {
			t.Fatalf("attempt %d: iteration %d's learn committed", attempt, iter)
		}
		if _, err := env.Bucket.Stat(ctx, path.Join(layout.LearnDir("t", iter), "metrics.parquet")); !storage.IsNotFound(err) {
			t.Fatalf("attempt %d: iteration %d's metrics left behind (%v)", attempt, iter, err)
		}
	}
	return ce
}

// TestRolloutRefusesAnIterationAheadOfItsStep: the reviewer's first step, `drmas run --iters 1`
// then `run-stage rollout --iter 3`, sampled iteration 3 from step 1 (LATEST); iteration N
// samples from step N, so rollout refuses and says which iterations to run first.
func TestRolloutRefusesAnIterationAheadOfItsStep(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	cfg.Learn.Epochs, cfg.Learn.MiniBatches = 1, 1
	env := prepare(t, cfg, 2) // step 1 published by iteration 0
	// What to do (which iterations to run first, or --step) is cmd/drmas's advice, from the
	// *rollout.OrderError's fields.
	for _, c := range []struct {
		iter   int
		step   int64
		want   string
		latest bool
	}{
		{3, stages.LatestStep, "rollout iter 3: would sample from step 1, but iteration 3 samples from step 3, which iteration 2's learn publishes (the iterations of a run run in order)", true},
		{2, stages.LatestStep, "rollout iter 2: would sample from step 1, but iteration 2 samples from step 2, which iteration 1's learn publishes", true},
		{3, 1, "rollout iter 3: would sample from step 1, but iteration 3 samples from step 3", false},
		{0, 1, "iteration 0 samples from step 0, the warm-up", false},
	} {
		dir := layout.RolloutDir("t", c.iter)
		if c.iter == 0 { // committed: roll it out again
			if err := env.Bucket.Delete(ctx, path.Join(dir, commit.ManifestName)); err != nil {
				t.Fatal(err)
			}
		}
		_, err := rollout.Run(ctx, env, rollout.Options{Iteration: c.iter, Step: c.step})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("rollout iter %d from step %d: %v\nwant it to say %q", c.iter, c.step, err, c.want)
		}
		if oe := (*rollout.OrderError)(nil); !errors.As(err, &oe) || oe.Iter != c.iter || oe.Step != 1 || oe.Latest != c.latest {
			t.Fatalf("rollout iter %d from step %d: %+v, want a *rollout.OrderError of iteration %d sampling from step 1, latest %v", c.iter, c.step, oe, c.iter, c.latest)
		}
		if ok, _ := commit.IsCommitted(ctx, env.Bucket, dir); ok {
			t.Fatalf("rollout iter %d committed", c.iter)
		}
	}
	if _, err := rollout.Run(ctx, env, rollout.Options{Iteration: 0, Step: stages.LatestStep}); err == nil {
		t.Fatal("iteration 0 rolled out again from step 1")
	}
}

// TestLearnRefusesARolloutOutOfOrder: a rollout of iteration 3 sampled from step 1 (committed
// by a drmas that did not check the order) is refused by learn, which says what to do, and no
// step is published: it would be step 2, which iteration 1 publishes.
func TestLearnRefusesARolloutOutOfOrder(t *testing.T) {
	env := aheadOfTurn(t, map[string]string{"policy_version": "1"})
	ce := learnFails(t, env, 3, learn.RollOutAgain, "learn iter 3: its rollout was sampled from step 1, but iteration 3 samples from step 3, which iteration 2's learn publishes")
	// cmd/drmas: "run iterations 1..2 first, then delete runs/t/iter=000003/ and roll iteration 3 out again, …"
	if ce.Step != 1 || ce.Dir != "runs/t/iter=000003" {
		t.Fatalf("out of order: step %d, folder %q; want step 1, runs/t/iter=000003", ce.Step, ce.Dir)
	}
	if ok, _ := commit.IsCommitted(context.Background(), env.Bucket, layout.CheckpointDir("t", 2)); ok {
		t.Fatal("step 2 was published")
	}
}

// publishThird learns iteration 3 (imported, so sampled from any step: here step 1), which
// publishes step 2 from step 1, the step iteration 1 publishes in the loop's order.
func publishThird(t *testing.T) *stages.Env {
	t.Helper()
	env := aheadOfTurn(t, map[string]string{"policy_version": "1", "imported": "true"})
	res, err := learn.Run(context.Background(), env, learn.Options{Iteration: 3})
	if err != nil || res.Step != 2 {
		t.Fatalf("learn iter 3: %+v %v", res, err)
	}
	return env
}

// stripInputs rewrites step's manifest without its inputs.
func stripInputs(t *testing.T, env *stages.Env, step int64) {
	t.Helper()
	rewriteCheckpointManifest(t, env, step, func(m *commit.Manifest) {
		if len(m.Inputs) == 0 {
			t.Fatalf("step %d records no inputs", step)
		}
		m.Inputs = nil
	})
}

// rewriteCheckpointManifest commits step's manifest again as edit changes it.
func rewriteCheckpointManifest(t *testing.T, env *stages.Env, step int64, edit func(m *commit.Manifest)) {
	t.Helper()
	ctx := context.Background()
	dir := layout.CheckpointDir("t", step)
	m, _, err := commit.Read(ctx, env.Bucket, dir)
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	if err := env.Bucket.Delete(ctx, path.Join(dir, commit.ManifestName)); err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Commit(ctx, env.Bucket, dir, m); err != nil {
		t.Fatal(err)
	}
}

// TestLearnNeverTakesAnotherIterationsStep is the reviewer's sequence: step 2 is published by
// iteration 3's learn (from step 1), then `drmas run --iters 3` learns iteration 1 (from step
// 1, so it would publish step 2). The first attempt used to fail with a bare commit conflict,
// leaving its metrics, and the second committed them against the weights iteration 3 trained.
// Both attempts must fail and say whose step 2 is.
func TestLearnNeverTakesAnotherIterationsStep(t *testing.T) {
	env := publishThird(t)
	m, _, err := commit.Read(context.Background(), env.Bucket, layout.CheckpointDir("t", 2))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Inputs) != 2 || m.Inputs[0].Dir != layout.RolloutDir("t", 3) || m.Inputs[1].Dir != layout.AdvantageDir("t", 3, "drmas") {
		t.Fatalf("step 2 records inputs %+v, want iteration 3's rollout and drmas advantages", m.Inputs)
	}
	learnFails(t, env, 1, learn.AnotherRun, "learn iter 1: checkpoint step 2 is already published (by iteration 3's learn, from step 1), so iteration 1 cannot publish its update",
		"the iterations of a run must run in order", "this run's step belongs to iteration 3 (runs/t/iter=000003)")
}

// TestLearnRefusesAStepWithoutRecordedInputs: step 2 committed without a rollout among its
// inputs (no learn published it) is no iteration's own: learn refuses to take it over, says
// so and what to do, and commits nothing.
func TestLearnRefusesAStepWithoutRecordedInputs(t *testing.T) {
	env := publishThird(t)
	stripInputs(t, env, 2)
	if err := env.Bucket.Delete(context.Background(), path.Join(layout.LearnDir("t", 3), commit.ManifestName)); err != nil {
		t.Fatal(err)
	}
	learnFails(t, env, 1, learn.AnotherRun, "learn iter 1: checkpoint step 2 is already published (recording no rollout among its inputs, from step 1), so iteration 1 cannot publish its update")
	if ok, err := commit.IsCommitted(context.Background(), env.Bucket, layout.LearnDir("t", 1)); err != nil || ok {
		t.Fatalf("iteration 1's learn committed over a step it did not publish: %v", err)
	}
}

// TestConflictWithThisIterationsOwnStep: an earlier attempt at this iteration (CPU engine)
// published step 1 and its metrics are gone; the rerun on the GPU engine trains again and its
// publish conflicts with the step (other bits, same inputs). The error says it is this
// iteration's own step, and the attempt's metrics stay, so that the next run commits them with
// the published step instead of failing the same way forever.
func TestConflictWithThisIterationsOwnStep(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	cfg.Learn.Epochs, cfg.Learn.MiniBatches = 1, 2
	env := prepare(t, cfg, 1)
	_, parts := stagetest.ReadRollout(t, env, 0)
	parts = parts[:1] // the interpreted GPU engine trains on it: keep it small
	stagetest.VaryScores(parts, 0)
	env = withRollout(t, cfg, parts)
	t.Setenv(gpu.EngineEnv, "cpu")
	store := env.Bucket
	dieBeforeMetricsCommit(t, env, 0)
	metrics := path.Join(layout.LearnDir("t", 0), "metrics.parquet")
	if err := store.Delete(ctx, metrics); err != nil {
		t.Fatal(err)
	}
	ks, err := kernels.All()
	if err != nil {
		t.Fatal(err)
	}
	if cuda.Init() == nil {
		t.Setenv(gpu.EngineEnv, "gpu")
	} else {
		t.Setenv(gpu.EngineEnv, "")
		learn.SetTestDevice(t, func() gpuengine.Device { return ir.NewInterp(ks) })
	}
	_, err = learn.Run(ctx, env, learn.Options{})
	if err == nil || !strings.Contains(err.Error(), "step 1 was published by an earlier attempt at this iteration, from the same inputs but with other weights") ||
		!strings.Contains(err.Error(), "run learn again") || !errors.Is(err, commit.ErrConflict) {
		t.Fatalf("rerun on the GPU engine: %v", err)
	}
	if _, err := store.Stat(ctx, metrics); err != nil {
		t.Fatalf("the attempt's metrics are gone: %v", err)
	}
	var log strings.Builder
	env.Log = &log
	if res, err := learn.Run(ctx, env, learn.Options{}); err != nil || res.Step != 1 || !strings.Contains(log.String(), "published by an earlier attempt") {
		t.Fatalf("next run: %+v %v\n%s", res, err, log.String())
	}
}

// TestLearnRefusesARolloutOutOfOrderWhoseStepIsGone: the same, after iteration 1's learn has
// published step 2 and retention (keep_checkpoints 1) deleted step 1, the step iteration 3's
// rollout was sampled from: the error still says the rollout is out of order, not only that
// the step that generated it cannot be loaded.
func TestLearnRefusesARolloutOutOfOrderWhoseStepIsGone(t *testing.T) {
	ctx := context.Background()
	env := aheadOfTurn(t, map[string]string{"policy_version": "1"})
	env.Config.Learn.KeepCheckpoints = 1
	if res, err := learn.Run(ctx, env, learn.Options{Iteration: 1}); err != nil || res.Step != 2 {
		t.Fatalf("learn iter 1: %+v %v", res, err)
	}
	if ok, _ := commit.IsCommitted(ctx, env.Bucket, layout.CheckpointDir("t", 1)); ok {
		t.Fatal("retention kept step 1")
	}
	if ce := learnFails(t, env, 3, learn.RollOutAgain, "learn iter 3: its rollout was sampled from step 1, but iteration 3 samples from step 3, which iteration 2's learn publishes"); ce.Dir != "runs/t/iter=000003" {
		t.Fatalf("out of order: folder %q, want runs/t/iter=000003", ce.Dir)
	}
}
