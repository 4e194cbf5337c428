package learn_test

import (
	"context"
	"errors"
	"io"
	"path"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/normalize"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/storetest"
)

// TestWithdrawnLearnKeepsNoForeignMetrics: learn B (grpo) checks the learn folder (not
// committed), then learn A (drmas) runs whole and commits, then B's metrics upload lands on A's
// committed folder and withdraws A's commit. A rerun of A's learn must not commit B's metrics
// (another estimator's numbers) as the metrics of A's step.
func TestWithdrawnLearnKeepsNoForeignMetrics(t *testing.T) {
	ctx := context.Background()
	env := prepare(t, stagetest.Config(t, "math"), 1)
	if _, err := normalize.Run(ctx, env, normalize.Options{Iteration: 0, Estimators: []string{"grpo"}}); err != nil {
		t.Fatal(err)
	}
	outDir := layout.LearnDir("t", 0)
	var winner error
	var winnerSHA string
	loser := &stages.Env{Config: env.Config, Bucket: &storetest.PutHook{Bucket: env.Bucket, Prefix: path.Join(outDir, "metrics.parquet"), Before: func() {
		_, winner = learn.Run(ctx, env, learn.Options{Iteration: 0, Estimator: "drmas"})
		if m, _, err := commit.Read(ctx, env.Bucket, outDir); err == nil {
			winnerSHA = m.Files[0].SHA256
		}
	}}}
	_, err := learn.Run(ctx, loser, learn.Options{Iteration: 0, Estimator: "grpo"})
	t.Logf("A (drmas): %v", winner)
	t.Logf("B (grpo): %v", err)
	if winner != nil || winnerSHA == "" {
		t.Fatalf("A did not commit: %v", winner)
	}
	if ok, _ := commit.IsCommitted(ctx, env.Bucket, outDir); ok {
		t.Fatal("A's commit was not withdrawn: the interleaving did not happen")
	}
	// A's rerun (drmas run resumed, or run-stage learn again).
	if _, err := learn.Run(ctx, env, learn.Options{Iteration: 0, Estimator: "drmas"}); err != nil {
		t.Fatalf("A's rerun: %v", err)
	}
	m, _, err := commit.Read(ctx, env.Bucket, outDir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Params["estimator"] != "drmas" {
		t.Fatalf("estimator %s", m.Params["estimator"])
	}
	if m.Files[0].SHA256 != winnerSHA {
		t.Fatalf("A's rerun committed metrics %.12s, not the metrics A's update produced (%.12s): B's (grpo) metrics went into A's (drmas) learn folder", m.Files[0].SHA256, winnerSHA)
	}
}

// TestLearnCommittedOverAWithdrawnStep: learn B (3× the learning rate) starts uploading a file
// of step 1 (its check found the step uncommitted); while that upload is in flight, learn A
// runs whole: it publishes step 1 and commits its metrics. B's upload then lands on A's step
// and withdraws it. A committed learn folder must not name a step that is not committed (the
// run cannot go on: rollout of iteration 1 needs step 1, and learn of iteration 0 is "already
// committed").
func TestLearnCommittedOverAWithdrawnStep(t *testing.T) {
	ctx := context.Background()
	env := prepare(t, stagetest.Config(t, "math"), 1)
	outDir := layout.LearnDir("t", 0)
	step1 := layout.CheckpointDir("t", 1)
	key := path.Join(step1, "m1/optim.safetensors")
	var winner error
	bcfg := *env.Config
	bcfg.Learn.LR *= 3
	loser := &stages.Env{Config: &bcfg, Bucket: &storetest.PutHook{Bucket: env.Bucket, Prefix: key, Before: func() {
		_, winner = learn.Run(ctx, env, learn.Options{Iteration: 0, Estimator: "drmas"})
	}}}
	_, err := learn.Run(ctx, loser, learn.Options{Iteration: 0, Estimator: "drmas"})
	t.Logf("A (drmas): %v", winner)
	t.Logf("B (drmas, 3× the learning rate): %v", err)
	if err != nil && strings.Contains(err.Error(), "learn iter 0: learn iter 0:") {
		t.Errorf("B's error names the stage twice: %v", err)
	}
	learned, _ := commit.IsCommitted(ctx, env.Bucket, outDir)
	published, _ := commit.IsCommitted(ctx, env.Bucket, step1)
	t.Logf("learn folder committed %v, step 1 committed %v", learned, published)
	if !learned || published {
		t.Fatal("the interleaving did not happen")
	}
	// A's rerun (drmas run resumed, or run-stage learn again) must bring the run back to a
	// state it can go on from: step 1 committed again.
	_, rerr := learn.Run(ctx, env, learn.Options{Iteration: 0, Estimator: "drmas"})
	published, _ = commit.IsCommitted(ctx, env.Bucket, step1)
	learned, _ = commit.IsCommitted(ctx, env.Bucket, outDir)
	if rerr != nil || !published || !learned {
		t.Fatalf("A's rerun: %v; learn folder committed %v, step 1 committed %v: the learn folder names a step that is not committed, and a rerun does not repair it", rerr, learned, published)
	}
}

// withdrawOnStat deletes key (a concurrent learn withdrawing the step) at the first Stat of key
// after key was put.
type withdrawOnStat struct {
	storage.Bucket
	key      string
	put      bool
	withdraw func()
}

func (w *withdrawOnStat) Put(ctx context.Context, key string, r io.Reader, size int64, opts ...storage.PutOption) error {
	err := w.Bucket.Put(ctx, key, r, size, opts...)
	if key == w.key && err == nil {
		w.put = true
	}
	return err
}

func (w *withdrawOnStat) Stat(ctx context.Context, key string) (storage.Attributes, error) {
	if key == w.key && w.put && w.withdraw != nil {
		f := w.withdraw
		w.withdraw = nil
		f()
	}
	return w.Bucket.Stat(ctx, key)
}

// TestLearnWhoseStepIsWithdrawnBeforeLATEST: the step this learn committed is withdrawn (by a
// concurrent learn) right before Publish points LATEST at it. The error should say what
// happened (and match commit.ErrWithdrawn), as the other withdrawal paths do.
func TestLearnWhoseStepIsWithdrawnBeforeLATEST(t *testing.T) {
	ctx := context.Background()
	env := prepare(t, stagetest.Config(t, "math"), 1)
	mkey := path.Join(layout.CheckpointDir("t", 1), commit.ManifestName)
	w := &withdrawOnStat{Bucket: env.Bucket, key: mkey}
	w.withdraw = func() {
		if err := env.Bucket.Delete(ctx, mkey); err != nil {
			t.Fatal(err)
		}
	}
	_, err := learn.Run(ctx, &stages.Env{Config: env.Config, Bucket: w}, learn.Options{Iteration: 0})
	t.Logf("learn: %v", err)
	if !errors.Is(err, commit.ErrWithdrawn) {
		t.Fatalf("learn whose step was withdrawn before LATEST: %v, want an error matching commit.ErrWithdrawn that says so", err)
	}
	// What to do (one learn of the iteration) is cmd/drmas's advice, from the error's fields.
	if ce := (*learn.ConflictError)(nil); !errors.As(err, &ce) || ce.Remedy != learn.OneLearn || ce.Iter != 0 {
		t.Fatalf("learn whose step was withdrawn before LATEST: %+v, want a *learn.ConflictError with remedy OneLearn for iteration 0", ce)
	}
}
