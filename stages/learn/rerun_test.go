package learn_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path"
	"reflect"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/gpu"
	"github.com/drmas-dev/drmas/gpu/cuda"
	gpuengine "github.com/drmas-dev/drmas/gpu/engine"
	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/normalize"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/storetest"
)

// failCommit is a store on which committing one folder fails, as if the process died (or the
// store refused) between publishing a checkpoint and committing the learn metrics.
type failCommit struct {
	storage.Bucket
	dir string
}

func (f *failCommit) Put(ctx context.Context, key string, r io.Reader, size int64, opts ...storage.PutOption) error {
	if key == path.Join(f.dir, commit.ManifestName) {
		return errors.New("injected: the store refused the manifest")
	}
	return f.Bucket.Put(ctx, key, r, size, opts...)
}

// dieBeforeMetricsCommit runs learn for iteration iter on env with the commit of its metrics
// failing (the attempt publishes its step, then "dies"), checks that it failed so, and puts
// env's store back.
func dieBeforeMetricsCommit(t *testing.T, env *stages.Env, iter int) {
	t.Helper()
	store := env.Bucket
	env.Bucket = &failCommit{Bucket: store, dir: layout.LearnDir("t", iter)}
	defer func() { env.Bucket = store }()
	if _, err := learn.Run(context.Background(), env, learn.Options{Iteration: iter}); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("first attempt: %v, want the injected failure", err)
	}
}

// prepare runs warm-up, rollout and normalize (drmas) for iterations 0..iters-1 of a fresh
// store, learning each but the last, and returns the environment.
func prepare(t *testing.T, cfg *configs.Config, iters int) *stages.Env {
	t.Helper()
	ctx := context.Background()
	env := stagetest.Env(t, cfg)
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	for it := range iters {
		if _, err := rollout.Run(ctx, env, rollout.Options{Iteration: it, Step: stages.LatestStep}); err != nil {
			t.Fatal(err)
		}
		if _, err := normalize.Run(ctx, env, normalize.Options{Iteration: it, Estimators: []string{"drmas"}}); err != nil {
			t.Fatal(err)
		}
		if it < iters-1 {
			if _, err := learn.Run(ctx, env, learn.Options{Iteration: it}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return env
}

// withRollout returns a fresh store with a warm-up, parts committed as iteration 0's rollout
// and their drmas advantages: iteration 0 ready to learn from rows a test edited.
func withRollout(t *testing.T, cfg *configs.Config, parts [][]shards.Row) *stages.Env {
	t.Helper()
	ctx := context.Background()
	env := stagetest.Env(t, cfg)
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	stagetest.WriteRollout(t, env, 0, parts, false)
	if _, err := normalize.Run(ctx, env, normalize.Options{Estimators: []string{"drmas"}}); err != nil {
		t.Fatal(err)
	}
	return env
}

// TestRerunAfterDyingBeforeMetricsCommit: with keep_checkpoints 1, an attempt that publishes
// step 2 and then fails to commit its metrics must not have deleted step 1 (the policy that
// generated iteration 1's rollout): the rerun commits the earlier attempt's metrics, and only
// then does retention remove step 1.
func TestRerunAfterDyingBeforeMetricsCommit(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	cfg.Learn.Epochs, cfg.Learn.MiniBatches, cfg.Learn.KeepCheckpoints = 1, 1, 1
	env := prepare(t, cfg, 2)
	store := env.Bucket
	dieBeforeMetricsCommit(t, env, 1)
	if ok, _ := commit.IsCommitted(ctx, store, layout.CheckpointDir("t", 2)); !ok {
		t.Fatal("the first attempt did not publish step 2 (the test no longer reaches the window it is about)")
	}
	if ok, _ := commit.IsCommitted(ctx, store, layout.CheckpointDir("t", 1)); !ok {
		t.Fatal("step 1 was deleted before the metrics were committed")
	}
	var log strings.Builder
	env.Log = &log
	res, err := learn.Run(ctx, env, learn.Options{Iteration: 1})
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if res.Skipped || res.Step != 2 || len(res.Metrics) == 0 {
		t.Fatalf("rerun: %+v", res)
	}
	if !strings.Contains(log.String(), "published by an earlier attempt") {
		t.Fatalf("the rerun trained again instead of committing the earlier metrics:\n%s", log.String())
	}
	if ok, _ := commit.IsCommitted(ctx, store, layout.LearnDir("t", 1)); !ok {
		t.Fatal("metrics not committed by the rerun")
	}
	if steps, err := checkpoints.Steps(ctx, store, "t"); err != nil || len(steps) != 2 || steps[0] != 0 || steps[1] != 2 {
		t.Fatalf("steps after the rerun: %v %v, want [0 2] (keep 1, step 0 always kept)", steps, err)
	}

	// The same iteration trained without a failure commits the same metrics.
	clean := prepare(t, cfg, 2)
	want, err := learn.Run(ctx, clean, learn.Options{Iteration: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Metrics) != len(res.Metrics) {
		t.Fatalf("metrics rows: %d, uninterrupted %d", len(res.Metrics), len(want.Metrics))
	}
	for i := range want.Metrics {
		if !reflect.DeepEqual(want.Metrics[i], res.Metrics[i]) { // optional columns are pointers: compare values
			t.Fatalf("metrics row %d: %+v, uninterrupted %+v", i, res.Metrics[i], want.Metrics[i])
		}
	}
}

// TestRerunOnAnotherEngineKeepsThePublishedStep: an attempt on the CPU engine publishes step 1
// and fails to commit its metrics; the rerun on the GPU engine (whose bits differ from the
// CPU's in the last places) must keep the published step rather than train again and
// conflict with it.
func TestRerunOnAnotherEngineKeepsThePublishedStep(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	cfg.Learn.Epochs, cfg.Learn.MiniBatches = 1, 2
	env := prepare(t, cfg, 1)
	_, parts := stagetest.ReadRollout(t, env, 0)
	stagetest.VaryScores(parts, 0) // so that there is a gradient
	env = withRollout(t, cfg, parts)
	t.Setenv(gpu.EngineEnv, "cpu")
	store := env.Bucket
	dieBeforeMetricsCommit(t, env, 0)
	published, _, err := commit.Read(ctx, store, layout.CheckpointDir("t", 1))
	if err != nil {
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
	res, err := learn.Run(ctx, env, learn.Options{})
	if err != nil {
		t.Fatalf("rerun on the GPU engine: %v", err)
	}
	if res.Step != 1 {
		t.Fatalf("rerun published step %d", res.Step)
	}
	again, _, err := commit.Read(ctx, store, layout.CheckpointDir("t", 1))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := commit.Encode(published)
	b, _ := commit.Encode(again)
	if !bytes.Equal(a, b) {
		t.Fatal("the rerun replaced the published step")
	}
	m, _, err := commit.Read(ctx, store, layout.LearnDir("t", 0))
	if err != nil {
		t.Fatal(err)
	}
	data, err := commit.ReadFile(ctx, store, layout.LearnDir("t", 0), m.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	rows, err := shards.ReadTable[learn.MetricsRow](bytes.NewReader(data), int64(len(data)), "metrics")
	if err != nil || len(rows) == 0 || rows[0].Step != 1 || rows[0].GradNorm == 0 {
		t.Fatalf("committed metrics: %+v %v", rows, err)
	}
}

// TestLearnRefusesForeignCommits: a committed learn folder for another estimator, or with a
// manifest that is not a learn manifest, is an error that says so, not a silent skip or a
// crash; and a step published from another parent is refused before training.
func TestLearnRefusesForeignCommits(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	cfg.Learn.Epochs, cfg.Learn.MiniBatches = 1, 1
	env := prepare(t, cfg, 1)
	if _, err := normalize.Run(ctx, env, normalize.Options{Estimators: []string{"grpo"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := learn.Run(ctx, env, learn.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := learn.Run(ctx, env, learn.Options{Estimator: "grpo"}); err == nil || !strings.Contains(err.Error(), "already committed with estimator drmas, not grpo") {
		t.Fatalf("another estimator on a committed iteration: %v", err)
	}

	// A learn folder committed without a step (not written by drmas learn).
	dir := layout.LearnDir("t", 0)
	if err := env.Bucket.Delete(ctx, path.Join(dir, commit.ManifestName)); err != nil {
		t.Fatal(err)
	}
	iter := 0
	if _, err := commit.Commit(ctx, env.Bucket, dir, &commit.Manifest{Kind: "learn", SchemaVersion: 1, Run: "t", Iteration: &iter}); err != nil {
		t.Fatal(err)
	}
	if _, err := learn.Run(ctx, env, learn.Options{}); err == nil || !strings.Contains(err.Error(), "without a step") {
		t.Fatalf("a learn manifest without a step: %v", err)
	}

	// Step 1 published from another config: this run's history and the store disagree.
	if err := env.Bucket.Delete(ctx, path.Join(dir, commit.ManifestName)); err != nil {
		t.Fatal(err)
	}
	env.Config.Learn.Epochs = 2
	if _, err := learn.Run(ctx, env, learn.Options{}); err == nil || !strings.Contains(err.Error(), "already published from parent 0 with config") {
		t.Fatalf("step 1 from another config: %v", err)
	}
}

// TestMetricsCountRowsOnce: rows and tokens are what the iteration holds, not multiplied by
// the epochs that go over them; the ratios (clip fraction, entropy, ...) stay per token seen.
func TestMetricsCountRowsOnce(t *testing.T) {
	ctx := context.Background()
	metrics := map[int][]learn.MetricsRow{}
	for _, epochs := range []int{1, 3} {
		cfg := stagetest.Config(t, "math")
		cfg.Learn.Epochs, cfg.Learn.MiniBatches = epochs, 2
		res, err := learn.Run(ctx, prepare(t, cfg, 1), learn.Options{})
		if err != nil {
			t.Fatal(err)
		}
		metrics[epochs] = res.Metrics
	}
	one, three := metrics[1], metrics[3]
	if len(one) != len(three) || len(one) == 0 {
		t.Fatalf("metrics rows: %d and %d", len(one), len(three))
	}
	for i := range one {
		if one[i].Rows == 0 || one[i].Rows != three[i].Rows || one[i].Tokens != three[i].Tokens {
			t.Fatalf("agent %s: 1 epoch %d rows %d tokens, 3 epochs %d rows %d tokens",
				one[i].Agent, one[i].Rows, one[i].Tokens, three[i].Rows, three[i].Tokens)
		}
		if three[i].Updates != 3*one[i].Updates {
			t.Fatalf("agent %s: %d updates with 3 epochs, %d with 1", one[i].Agent, three[i].Updates, one[i].Updates)
		}
		if three[i].Entropy <= 0 || three[i].Entropy > 10 {
			t.Fatalf("agent %s: mean entropy %g per token is not per token", one[i].Agent, three[i].Entropy)
		}
	}
}

// TestLearnRefusesRowsOfUnknownModels: rows whose model the config does not have (an import
// whose model column names another framework's model) are an error, not skipped while a step
// is published having learnt nothing.
func TestLearnRefusesRowsOfUnknownModels(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	cfg.Learn.Epochs, cfg.Learn.MiniBatches = 1, 1
	env := prepare(t, cfg, 1)
	_, parts := stagetest.ReadRollout(t, env, 0)
	for _, rows := range parts {
		for i := range rows {
			if rows[i].Agent == "verifier" {
				rows[i].Model = "verifier"
			}
		}
	}
	env = withRollout(t, cfg, parts)
	_, err := learn.Run(ctx, env, learn.Options{})
	if err == nil || !strings.Contains(err.Error(), `of model "verifier", which the config does not have (models: m1)`) {
		t.Fatalf("rows of an unknown model: %v", err)
	}
	if ok, _ := commit.IsCommitted(ctx, env.Bucket, layout.CheckpointDir("t", 1)); ok {
		t.Fatal("a step was published")
	}
}

// TestMetricsOfAnAgentTheConfigDoesNotName: rows of model m1 whose agent the config does not
// name (an import whose model column maps its own agents to a configured model) are trained
// with m1, and their statistics are a metrics row of their own: the agents' rows and tokens add
// up to the model's.
func TestMetricsOfAnAgentTheConfigDoesNotName(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	cfg.Learn.Epochs, cfg.Learn.MiniBatches = 1, 1
	_, parts := stagetest.ReadRollout(t, prepare(t, cfg, 1), 0)
	critic := 0
	for _, rows := range parts {
		for i := range rows {
			if rows[i].Agent == "verifier" {
				rows[i].Agent = "critic"
				critic++
			}
		}
	}
	res, err := learn.Run(ctx, withRollout(t, cfg, parts), learn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var agents []string
	var rows, tokens int64
	for _, r := range res.Metrics[1:] {
		agents = append(agents, r.Agent)
		rows += r.Rows
		tokens += r.Tokens
	}
	model := res.Metrics[0]
	if model.Agent != "*" || strings.Join(agents, ",") != "critic,solver,verifier" || rows != model.Rows || tokens != model.Tokens || res.Metrics[1].Rows != int64(critic) {
		t.Fatalf("metrics rows %v (%d rows, %d tokens) for a model row of %d rows, %d tokens; want critic (%d rows), solver, verifier adding up",
			agents, rows, tokens, model.Rows, model.Tokens, critic)
	}
}

// replaceRollout deletes iteration iter's committed rollout and commits its rows again with
// other scores, as a user who re-imports a corrected file (or rolls out again from a
// non-deterministic server) does.
func replaceRollout(t *testing.T, env *stages.Env, iter int, k int64) {
	t.Helper()
	m, parts := stagetest.ReadRollout(t, env, iter)
	stagetest.DeleteFolder(t, env, layout.RolloutDir(env.Config.Run, iter))
	stagetest.VaryScores(parts, k)
	stagetest.WriteRolloutWith(t, env, iter, parts, false, m.Params)
}

// TestLearnRefusesWorkOfAReplacedRollout: advantages computed from a rollout that was replaced
// since (same row ids, other scores) are not trained on, and a learn committed from it does not
// pass for one of the new rows; both errors say what to delete.
func TestLearnRefusesWorkOfAReplacedRollout(t *testing.T) {
	ctx := context.Background()
	env := prepare(t, stagetest.Config(t, "math"), 1)
	replaceRollout(t, env, 0, 1)
	_, err := learn.Run(ctx, env, learn.Options{Iteration: 0})
	// What to delete is cmd/drmas's advice, from the error's fields.
	var se *stages.StaleAdvantagesError
	if err == nil || !errors.Is(err, commit.ErrConflict) || !strings.Contains(err.Error(), "computed from another rollout") ||
		!errors.As(err, &se) || se.Dir != layout.AdvantageDir("t", 0, "drmas") || se.Diagnostics != layout.DiagnosticsDir("t", 0, "drmas") || se.Iter != 0 || se.Estimator != "drmas" {
		t.Fatalf("learn on stale advantages: %v (%+v)", err, se)
	}
	if ok, _ := commit.IsCommitted(ctx, env.Bucket, layout.CheckpointDir("t", 1)); ok {
		t.Fatal("a step was published from stale advantages")
	}
	// Normalized afresh (the advantages deleted), it trains; then the rollout is replaced again.
	for _, dir := range []string{layout.AdvantageDir("t", 0, "drmas"), layout.DiagnosticsDir("t", 0, "drmas")} {
		stagetest.DeleteFolder(t, env, dir)
	}
	if _, err := normalize.Run(ctx, env, normalize.Options{Estimators: []string{"drmas"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := learn.Run(ctx, env, learn.Options{Iteration: 0}); err != nil {
		t.Fatal(err)
	}
	if r, err := learn.Run(ctx, env, learn.Options{Iteration: 0}); err != nil || !r.Skipped {
		t.Fatalf("rerun of a committed learn: %+v, %v", r, err)
	}
	replaceRollout(t, env, 0, 2)
	_, err = learn.Run(ctx, env, learn.Options{Iteration: 0})
	if err == nil || !errors.Is(err, commit.ErrConflict) || !strings.Contains(err.Error(), "step 1 was trained on other rows") {
		t.Fatalf("rerun of a learn committed from a replaced rollout: %v", err)
	}
}

// TestRetentionIsNotPartOfTheDigest: learn.keep_checkpoints changes no bit a learn computes,
// so a run resumed with another value commits the step its earlier attempt published (it was
// refused as "another config"), and learn.estimator, which --estimator overrides, is left out
// too.
func TestRetentionIsNotPartOfTheDigest(t *testing.T) {
	ctx := context.Background()
	env := prepare(t, stagetest.Config(t, "math"), 1)
	dieBeforeMetricsCommit(t, env, 0)
	env.Config.Learn.KeepCheckpoints += 4
	res, err := learn.Run(ctx, env, learn.Options{Iteration: 0})
	if err != nil || res.Step != 1 {
		t.Fatalf("resumed with another keep_checkpoints: %+v, %v", res, err)
	}
	cfg := *env.Config
	other := cfg
	other.Learn.KeepCheckpoints, other.Learn.Estimator = 9, "grpo"
	if learn.Digest(&cfg, "drmas") != learn.Digest(&other, "drmas") {
		t.Error("the digest depends on keep_checkpoints or learn.estimator")
	}
	other.Learn.LR *= 2
	if learn.Digest(&cfg, "drmas") == learn.Digest(&other, "drmas") {
		t.Error("the digest does not depend on learn.lr")
	}
	if mine := learn.Digest(&cfg, "drmas"); !learn.SameConfig(&cfg, "drmas", mine) || learn.SameConfig(&other, "drmas", mine) {
		t.Error("SameConfig does not accept exactly this config's digest")
	}
}

// TestRunNameDoesNotChooseMiniBatches: two runs of one seed and config (an on-policy
// ablation's estimator runs, which differ in name) roll out the same rows, which a rollout
// stores sorted by uid, a hash of the run's name. The learner draws its mini-batches from the
// rows in a canonical order, so both train the same step; from stored order they did not.
func TestRunNameDoesNotChooseMiniBatches(t *testing.T) {
	ctx := context.Background()
	var weights [][]byte
	for _, run := range []string{"a", "zz"} {
		cfg := stagetest.Config(t, "math")
		cfg.Run = run
		cfg.Learn.MiniBatches, cfg.Learn.MicroBatch = 3, 4
		env := stagetest.Env(t, cfg)
		if _, err := warmup.Run(ctx, env); err != nil {
			t.Fatal(err)
		}
		if _, err := rollout.Run(ctx, env, rollout.Options{Step: stages.LatestStep}); err != nil {
			t.Fatal(err)
		}
		// Scores that vary by (task, sample, step), not by position, for a gradient.
		m, parts := stagetest.ReadRollout(t, env, 0)
		for _, rows := range parts {
			for i := range rows {
				r := &rows[i]
				r.Score = float64((len(r.TaskID)*7+int(r.TaskID[len(r.TaskID)-1])+int(r.Sample)*3+int(r.Step))%3) / 2
			}
		}
		stagetest.DeleteFolder(t, env, layout.RolloutDir(run, 0))
		stagetest.WriteRolloutWith(t, env, 0, parts, false, m.Params)
		if _, err := normalize.Run(ctx, env, normalize.Options{Estimators: []string{"drmas"}}); err != nil {
			t.Fatal(err)
		}
		res, err := learn.Run(ctx, env, learn.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Metrics[0].GradNorm == 0 {
			t.Fatal("no gradient: the test would prove nothing")
		}
		data, err := storage.ReadAll(ctx, env.Bucket, path.Join(layout.CheckpointDir(run, 1), "m1", "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		weights = append(weights, data)
	}
	if !bytes.Equal(weights[0], weights[1]) {
		t.Fatal("runs a and zz trained different weights from the same rows")
	}
}

// TestConcurrentLearnsKeepTheWinnersMetrics: two learns of one iteration with different
// estimators at the same time. The one that publishes first commits its metrics; the other's
// publish conflicts, and it must not delete the metrics file, which is now the winner's (the
// committed learn folder lost its metrics: drmas run and analyze failed on the run for good).
func TestConcurrentLearnsKeepTheWinnersMetrics(t *testing.T) {
	ctx := context.Background()
	env := prepare(t, stagetest.Config(t, "math"), 1)
	if _, err := normalize.Run(ctx, env, normalize.Options{Iteration: 0, Estimators: []string{"grpo"}}); err != nil {
		t.Fatal(err)
	}
	outDir := layout.LearnDir("t", 0)
	var winner error
	loser := &stages.Env{Config: env.Config, Bucket: &storetest.PutHook{Bucket: env.Bucket, Prefix: path.Join(outDir, "metrics.parquet"), After: func() {
		// The winner runs whole between the loser's metrics upload and its publish.
		_, winner = learn.Run(ctx, env, learn.Options{Iteration: 0, Estimator: "drmas"})
	}}}
	_, err := learn.Run(ctx, loser, learn.Options{Iteration: 0, Estimator: "grpo"})
	if winner != nil {
		t.Fatalf("winner: %v", winner)
	}
	if !errors.Is(err, commit.ErrConflict) {
		t.Fatalf("loser: %v, want a conflict", err)
	}
	m, _, err := commit.Read(ctx, env.Bucket, outDir)
	if err != nil || m.Params["estimator"] != "drmas" {
		t.Fatalf("committed learn folder: %+v, %v", m, err)
	}
	if err := commit.Verify(ctx, env.Bucket, outDir, m, true); err != nil {
		t.Fatalf("the winner's committed learn folder is damaged: %v", err)
	}
}
