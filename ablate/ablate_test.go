package ablate_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/ablate"
	"github.com/drmas-dev/drmas/analysis/analysistest"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/importer"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/filestore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	analysistest.Cleanup()
	os.Exit(code)
}

// hashes returns the sha256 of every object under the given key prefixes.
func hashes(t *testing.T, b storage.Bucket, prefixes ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range prefixes {
		err := b.Iter(context.Background(), p, func(key string) error {
			data, err := storage.ReadAll(context.Background(), b, key)
			if err != nil {
				return err
			}
			s := sha256.Sum256(data)
			out[key] = hex.EncodeToString(s[:])
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func readSummary(t *testing.T, b storage.Bucket, mode string) []ablate.SummaryRow {
	t.Helper()
	return readSummaryRun(t, b, analysistest.Run, mode)
}

func TestReplay(t *testing.T) {
	ctx := context.Background()
	env, store := analysistest.Env(t)
	b, cfg := env.Bucket, env.Config
	ests := []string{"drmas", "grpo", "grpo_step"}
	t0 := time.Now()
	res, err := ablate.Run(ctx, env, ablate.Options{Mode: ablate.Replay, Estimators: ests})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replay of %d iterations × %d estimators: %s", analysistest.Iterations, len(ests), time.Since(t0))
	var rep strings.Builder
	if err := ablate.WriteReport(&rep, res); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
	if want := len(ests) * analysistest.Iterations * 3; len(res.Rows) != want || len(res.Skipped) != 0 {
		t.Fatalf("%d summary rows (skipped %v), want %d", len(res.Rows), res.Skipped, want)
	}
	if got := readSummary(t, b, ablate.Replay); len(got) != len(res.Rows) {
		t.Fatalf("committed summary has %d rows, want %d", len(got), len(res.Rows))
	}

	src := analysistest.Run
	srcHashes := hashes(t, b, layout.RunDir(src)+"/")
	rel := func(m map[string]string, run string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if r, ok := strings.CutPrefix(k, layout.RunDir(run)+"/"); ok {
				out[r] = v
			}
		}
		return out
	}
	srcRel := rel(srcHashes, src)
	for _, est := range ests {
		run := ablate.RunName(ablate.Replay, src, est, cfg.Seed)
		got := rel(hashes(t, b, layout.RunDir(run)+"/"), run)
		for it := 0; it < analysistest.Iterations; it++ {
			iter := path.Base(layout.IterDir(src, it))
			// Same rollout bytes (parts and manifest) for every estimator.
			n := 0
			for k, v := range srcRel {
				if strings.HasPrefix(k, iter+"/rollout/") {
					n++
					if got[k] != v {
						t.Errorf("%s %s: rollout object %s differs from the source", est, iter, k)
					}
				}
			}
			if n != 3 {
				t.Fatalf("source rollout of %s has %d objects", iter, n)
			}
			// The start checkpoint is the source's step it, byte for byte.
			for _, f := range []string{"m1/model.safetensors", "m1/optim.safetensors", commit.ManifestName} {
				sk := path.Join("checkpoints", checkpointEl(it), f)
				ak := path.Join(iter, "checkpoints", checkpointEl(it), f)
				if it == 0 && f == "m1/optim.safetensors" {
					continue // the warm-up has no optimizer state
				}
				if srcRel[sk] == "" || got[ak] != srcRel[sk] {
					t.Errorf("%s %s: start checkpoint %s: %q vs source %q", est, iter, f, got[ak], srcRel[sk])
				}
			}
			sidecar := path.Join(iter, "advantage", "est="+est, shards.PartName(0, 2))
			if got[sidecar] != srcRel[sidecar] {
				t.Errorf("%s %s: sidecar differs from the source's own normalize", est, iter)
			}
			// The source learned with drmas: replaying drmas reproduces its update exactly.
			if est == "drmas" {
				for _, k := range []string{path.Join(iter, "learn", "metrics.parquet")} {
					if got[k] != srcRel[k] {
						t.Errorf("drmas replay of %s: %s differs from the source", iter, k)
					}
				}
				next := path.Join(iter, "checkpoints", checkpointEl(it+1), "m1", "model.safetensors")
				if got[next] != srcRel[path.Join("checkpoints", checkpointEl(it+1), "m1", "model.safetensors")] {
					t.Errorf("drmas replay of %s: step %d model differs from the source's", iter, it+1)
				}
			}
		}
	}
	// grpo really differs from drmas somewhere (otherwise the test proves nothing).
	if res.Rows[0].Estimator != "drmas" {
		t.Fatalf("rows not sorted by estimator: %+v", res.Rows[0])
	}
	differ := false
	for i := 0; i < len(res.Rows)/3; i++ {
		a, g := res.Rows[i], res.Rows[i+len(res.Rows)/3]
		if a.Iteration != g.Iteration || a.Agent != g.Agent || a.Reward != g.Reward || a.Rows != g.Rows {
			t.Errorf("drmas vs grpo row %d: %+v vs %+v: same iteration, agent and rollout expected", i, a, g)
		}
		differ = differ || a.GradNorm != g.GradNorm
	}
	if !differ {
		t.Error("drmas and grpo replays have identical grad norms everywhere")
	}

	// Determinism: delete every output, replay again, compare every object's sha256.
	outPrefixes := []string{layout.AblationDir(src, ablate.Replay) + "/"}
	for _, r := range res.Runs {
		outPrefixes = append(outPrefixes, layout.RunDir(r)+"/")
	}
	first := hashes(t, b, outPrefixes...)
	// A rerun over committed outputs is a no-op that succeeds, and the estimators in another
	// order are the same ablation: the same summary manifest.
	rev := slices.Clone(ests)
	slices.Reverse(rev)
	rerun, err := ablate.Run(ctx, env, ablate.Options{Mode: ablate.Replay, Estimators: rev})
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if rerun.SummarySHA256 != res.SummarySHA256 {
		t.Errorf("estimators %v and %v give different summaries", ests, rev)
	}
	if err := os.RemoveAll(filepath.Join(store, "runs", src, "ablations")); err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Runs {
		if err := os.RemoveAll(filepath.Join(store, "runs", r)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(hashes(t, b, outPrefixes...)); n != 0 {
		t.Fatalf("%d outputs left after delete", n)
	}
	if _, err := ablate.Run(ctx, env, ablate.Options{Mode: ablate.Replay, Estimators: ests}); err != nil {
		t.Fatal(err)
	}
	second := hashes(t, b, outPrefixes...)
	if len(first) < 50 || len(first) != len(second) {
		t.Fatalf("%d outputs first, %d second", len(first), len(second))
	}
	for k, v := range first {
		if second[k] != v {
			t.Errorf("%s: sha256 %s first, %s second", k, v[:12], second[k][:12])
		}
	}
	t.Logf("%d output objects byte-identical across two replays", len(first))
}

func checkpointEl(step int) string { return path.Base(layout.CheckpointDir("x", int64(step))) }

func TestReplaySkipsRetiredCheckpoint(t *testing.T) {
	ctx := context.Background()
	store, cfg := analysistest.Store(t)
	b, _ := filestore.New(store)
	defer b.Close()
	// Retention deleted step 0: iteration 0 cannot be replayed, iteration 1 can.
	if err := os.Remove(filepath.Join(store, filepath.FromSlash(path.Join(layout.CheckpointDir(analysistest.Run, 0), commit.ManifestName)))); err != nil {
		t.Fatal(err)
	}
	env := &stages.Env{Bucket: b, Config: cfg}
	r, _ := ablate.ParseRange("0..1")
	res, err := ablate.Run(ctx, env, ablate.Options{Estimators: []string{"grpo"}, Iterations: r})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0], "iteration 0") || len(res.Rows) != 3 || res.Rows[0].Iteration != 1 {
		t.Fatalf("skipped %v, %d rows", res.Skipped, len(res.Rows))
	}
	r, _ = ablate.ParseRange("0")
	if _, err := ablate.Run(ctx, env, ablate.Options{Estimators: []string{"grpo"}, Iterations: r}); err == nil || !strings.Contains(err.Error(), "nothing to replay") {
		t.Fatalf("only a retired iteration: %v", err)
	}
	if _, err := ablate.Run(ctx, env, ablate.Options{Estimators: []string{"nope"}}); err == nil {
		t.Fatal("unknown estimator accepted")
	}
}

func TestOnPolicy(t *testing.T) {
	ctx := context.Background()
	cfg := analysistest.Config(t)
	cfg.Run = "op"
	cfg.Evaluate.Every = 1
	env := stagetest.Env(t, cfg)
	r, _ := ablate.ParseRange("0..0")
	t0 := time.Now()
	res, err := ablate.Run(ctx, env, ablate.Options{Mode: ablate.OnPolicy, Estimators: []string{"drmas", "grpo"}, Seeds: []uint64{1}, Iterations: r})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("on-policy, 2 runs × 1 iteration: %s", time.Since(t0))
	var rep strings.Builder
	_ = ablate.WriteReport(&rep, res)
	t.Log("\n" + rep.String())
	if strings.Join(res.Runs, ",") != "op-drmas-s1,op-grpo-s1" {
		t.Errorf("runs %v", res.Runs)
	}
	rows := readSummaryRun(t, env.Bucket, "op", ablate.OnPolicy)
	if len(rows) != 2*3 {
		t.Fatalf("%d summary rows, want 6", len(rows))
	}
	if rows[0].Estimator != "drmas" || rows[3].Estimator != "grpo" || rows[0].Agent != "*" || rows[0].GradNorm == rows[3].GradNorm {
		t.Errorf("drmas vs grpo model rows: %+v vs %+v", rows[0], rows[3])
	}
	for _, x := range rows {
		if x.Mode != ablate.OnPolicy || x.Seed != 1 || x.Iteration != 0 || x.Step != 1 || x.AvgAtK == nil || x.PassAtK == nil || *x.EvalK != 2 || x.Rows == 0 {
			t.Errorf("row %+v", x)
		}
	}
}

func readSummaryRun(t *testing.T, b storage.Bucket, run, mode string) []ablate.SummaryRow {
	t.Helper()
	ctx := context.Background()
	dir := layout.AblationDir(run, mode)
	m, _, err := commit.Read(ctx, b, dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := commit.ReadFile(ctx, b, dir, m.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	rows, err := shards.ReadTable[ablate.SummaryRow](bytes.NewReader(data), int64(len(data)), dir)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestParse(t *testing.T) {
	for in, want := range map[string]ablate.Range{"": {}, "3": {3, 3, true}, "2..5": {2, 5, true}, "4..": {4, 1<<31 - 1, true}} {
		got, err := ablate.ParseRange(in)
		if err != nil || got != want {
			t.Errorf("ParseRange(%q) = %+v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"5..2", "a..b", "-1"} {
		if _, err := ablate.ParseRange(bad); err == nil {
			t.Errorf("ParseRange(%q) accepted", bad)
		}
	}
	s, err := ablate.ParseSeeds("1, 2,3")
	if err != nil || len(s) != 3 || s[2] != 3 {
		t.Errorf("ParseSeeds: %v %v", s, err)
	}
	// A seed twice would run once and be summarized twice, as if two seeds agreed.
	if _, err := ablate.ParseSeeds("1,2,1"); err == nil || !strings.Contains(err.Error(), "seed 1 given twice") {
		t.Errorf("ParseSeeds(1,2,1): %v", err)
	}
	cfg := stagetest.Config(t, "math")
	env := stagetest.Env(t, cfg)
	r, _ := ablate.ParseRange("0..0")
	_, err = ablate.Run(context.Background(), env, ablate.Options{Mode: ablate.OnPolicy, Estimators: []string{"drmas"}, Seeds: []uint64{3, 3}, Iterations: r})
	if err == nil || !strings.Contains(err.Error(), "seed 3 given twice") {
		t.Errorf("on-policy with seeds 3,3: %v", err)
	}
	// A replay of a run with no rollout at all (a misspelt --run) says what to check.
	_, err = ablate.Run(context.Background(), env, ablate.Options{Mode: ablate.Replay, Estimators: []string{"drmas"}, Iterations: r})
	if err == nil || !strings.Contains(err.Error(), "check --run and --store") {
		t.Errorf("replay of a run without rollouts: %v", err)
	}
	// Evaluation asked for with no held-out prompts is an error, not a summary without it.
	env.Config.Tasks.EvalSize = 0
	_, err = ablate.Run(context.Background(), env, ablate.Options{Mode: ablate.Replay, Estimators: []string{"drmas"}, Eval: true})
	if err == nil || !strings.Contains(err.Error(), "tasks.eval_size is 0") {
		t.Errorf("replay --eval with tasks.eval_size 0: %v", err)
	}
}

// TestReplayEvaluatesEachIterationsCheckpoint: two source iterations rolled out by the same
// policy step both publish step 1 in a replay, with different weights; each must be evaluated
// (under its iteration), not the second one handed the first one's evaluation.
func TestReplayEvaluatesEachIterationsCheckpoint(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	cfg.Learn.Epochs, cfg.Learn.MiniBatches = 1, 1
	env := stagetest.Env(t, cfg)
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	if _, err := rollout.Run(ctx, env, rollout.Options{Step: 0}); err != nil {
		t.Fatal(err)
	}
	// The same rollout of step 0 twice, with varied scores (the test policy scores everything
	// alike), different per iteration so that the two replayed updates differ.
	_, parts := stagetest.ReadRollout(t, env, 0)
	env = stagetest.Env(t, cfg)
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	for it := range 2 {
		stagetest.VaryScores(parts, int64(it))
		stagetest.WriteRollout(t, env, it, parts, false)
	}
	res, err := ablate.Run(ctx, env, ablate.Options{Mode: ablate.Replay, Estimators: []string{"drmas"}, Eval: true})
	if err != nil {
		t.Fatal(err)
	}
	run := res.Runs[0]
	var evaluated []string
	for it := range 2 {
		ckpt, ckptSHA, err := commit.Read(ctx, env.Bucket, layout.IterDir(run, it)+"/checkpoints/"+checkpointEl(1))
		if err != nil || *ckpt.Step != 1 {
			t.Fatalf("iteration %d's step 1: %v", it, err)
		}
		ev, _, err := commit.Read(ctx, env.Bucket, layout.IterDir(run, it)+"/eval/"+checkpointEl(1))
		if err != nil {
			t.Fatalf("iteration %d's evaluation: %v", it, err)
		}
		if len(ev.Inputs) == 0 || ev.Inputs[0].ManifestSHA256 != ckptSHA {
			t.Fatalf("iteration %d's evaluation measured %+v, not its own step 1 (%s)", it, ev.Inputs, ckptSHA)
		}
		evaluated = append(evaluated, ckptSHA)
	}
	if evaluated[0] == evaluated[1] {
		t.Fatal("the two replayed step-1 checkpoints are the same: the test no longer tells them apart")
	}
	if ok, _ := commit.IsCommitted(ctx, env.Bucket, layout.EvalDir(run, 1)); ok {
		t.Fatal("a replay evaluation was written to the run-wide eval folder, shared by iterations")
	}
}

// TestReplayRefusesOutputsOfAnotherConfig: committed work is not redone, so a replay under a
// changed learn config over the output runs of an earlier replay must not summarize the earlier
// config's updates as this config's; it says so, and after deleting the output run it redoes
// the update with the new config.
func TestReplayRefusesOutputsOfAnotherConfig(t *testing.T) {
	ctx := context.Background()
	env, store := analysistest.Env(t)
	b, cfg := env.Bucket, env.Config
	r, _ := ablate.ParseRange("1")
	o := ablate.Options{Mode: ablate.Replay, Estimators: []string{"grpo"}, Iterations: r}
	first, err := ablate.Run(ctx, &stages.Env{Bucket: b, Config: cfg}, o)
	if err != nil {
		t.Fatal(err)
	}
	run := first.Runs[0]
	next := path.Join(layout.IterDir(run, 1), "checkpoints", checkpointEl(2), "m1", "model.safetensors")
	before := hashes(t, b, next)[next]

	other := *cfg
	other.Learn.LR *= 10
	_, err = ablate.Run(ctx, &stages.Env{Bucket: b, Config: &other}, o)
	if err == nil || !strings.Contains(err.Error(), "another config") || !strings.Contains(err.Error(), run) {
		t.Fatalf("replay under another learn.lr over the earlier replay's outputs: %v", err)
	}
	if err := os.RemoveAll(filepath.Join(store, "runs", run)); err != nil {
		t.Fatal(err)
	}
	if _, err := ablate.Run(ctx, &stages.Env{Bucket: b, Config: &other}, o); err != nil {
		t.Fatal(err)
	}
	if after := hashes(t, b, next)[next]; after == "" || after == before {
		t.Fatalf("step 2 under lr ×10: %q, under the first lr %q: want a new, different update", after, before)
	}
}

// TestReplayOfImportedRolloutWithoutCheckpoint: an imported rollout's checkpoint was never in
// the run; the skip says so and how to provide it, rather than blaming retention.
func TestReplayOfImportedRolloutWithoutCheckpoint(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	cfg.Run = "imp"
	env := stagetest.Env(t, cfg)
	file := filepath.Join(t.TempDir(), "trajectories.jsonl")
	var lines []string
	for g := range 2 {
		for s := range 2 {
			for st, ag := range []string{"solver", "verifier"} {
				lines = append(lines, fmt.Sprintf(`{"uid":"q%d","traj_uid":"q%d-s%d","agent":%q,"step":%d,"score":%d}`, g, g, s, ag, st, s))
			}
		}
	}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := importer.Run(ctx, env, importer.Options{Path: file, Iteration: 0}); err != nil {
		t.Fatal(err)
	}
	_, err := ablate.Run(ctx, env, ablate.Options{Estimators: []string{"drmas"}})
	if err == nil || !strings.Contains(err.Error(), "imported") || !strings.Contains(err.Error(), "run-stage warmup") || strings.Contains(err.Error(), "keep_checkpoints") {
		t.Fatalf("replay of an imported rollout with no checkpoint: %v", err)
	}
}

// TestRerunRepairsDamagedSummary: a rerun over committed outputs is a no-op, except that a
// summary file damaged or lost since its commit (which analyze refuses) is written again.
func TestRerunRepairsDamagedSummary(t *testing.T) {
	ctx := context.Background()
	env, store := analysistest.Env(t)
	b := env.Bucket
	r, _ := ablate.ParseRange("2")
	o := ablate.Options{Mode: ablate.Replay, Estimators: []string{"grpo"}, Iterations: r}
	if _, err := ablate.Run(ctx, env, o); err != nil {
		t.Fatal(err)
	}
	dir := layout.AblationDir(analysistest.Run, ablate.Replay)
	want := hashes(t, b, dir+"/")
	file := filepath.Join(store, filepath.FromSlash(dir), "summary.parquet")
	for _, damage := range []func() error{
		func() error { return os.WriteFile(file, []byte("not parquet"), 0o644) },
		func() error { return os.Remove(file) },
	} {
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		if _, err := ablate.Run(ctx, env, o); err != nil {
			t.Fatal(err)
		}
		got := hashes(t, b, dir+"/")
		if len(got) != len(want) {
			t.Fatalf("after the rerun: %v, want %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: sha256 %.12s after the rerun, %.12s committed", k, got[k], v)
			}
		}
		if m, _, err := commit.Read(ctx, b, dir); err != nil {
			t.Fatal(err)
		} else if _, err := commit.ReadFile(ctx, b, dir, m.Files[0]); err != nil {
			t.Errorf("summary still unreadable after the rerun: %v", err)
		}
	}
}

// TestWriteReportGradNormColumns: "grad_norm max" is the largest per-iteration grad norm, as
// `drmas report` and the gradnorm report show it, not the peak of the mini-batches, which has a
// column of its own.
func TestWriteReportGradNormColumns(t *testing.T) {
	rows := []ablate.SummaryRow{
		{Estimator: "grpo", Seed: 1, Iteration: 0, Model: "m1", Agent: "solver", Rows: 8, GradNorm: 1, GradNormMax: 5, Loss: 0.5, Reward: 0.25},
		{Estimator: "grpo", Seed: 1, Iteration: 1, Model: "m1", Agent: "solver", Rows: 8, GradNorm: 2, GradNormMax: 3, Loss: 0.5, Reward: 0.25},
		// No rows in iteration 2 (the agent never acted): no update, left out of the means.
		{Estimator: "grpo", Seed: 1, Iteration: 2, Model: "m1", Agent: "solver"},
	}
	var buf strings.Builder
	if err := ablate.WriteReport(&buf, &ablate.Result{Mode: ablate.Replay, Source: "s", Rows: rows}); err != nil {
		t.Fatal(err)
	}
	// Header words joined per column, then matched with the row's fields.
	lines := strings.Split(buf.String(), "\n")
	head := strings.Fields(strings.NewReplacer("grad_norm mean", "gn_mean", "grad_norm max", "gn_max", "peak mini-batch", "peak",
		"loss mean", "loss", "reward mean", "reward", "avg@k last", "avg", "pass@k last", "pass").Replace(lines[1]))
	row := strings.Fields(lines[2])
	cols := map[string]string{}
	for i, h := range head {
		if i < len(row) {
			cols[h] = row[i]
		}
	}
	if cols["gn_mean"] != "1.5000" || cols["gn_max"] != "2.0000" || cols["peak"] != "5.0000" || cols["iters"] != "2" || cols["loss"] != "0.5000" {
		t.Fatalf("columns %v\n%s", cols, buf.String())
	}
}

// An ablation stopped by Ctrl-C says it was interrupted, not "context canceled", and still
// matches context.Canceled (drmas exits 130 on it).
func TestInterruptedAblationSaysSo(t *testing.T) {
	store, cfg := analysistest.Store(t)
	b, _ := filestore.New(store)
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, mode := range []string{ablate.Replay, ablate.OnPolicy} {
		_, err := ablate.Run(ctx, &stages.Env{Bucket: b, Config: cfg}, ablate.Options{Mode: mode, Estimators: []string{"grpo"}})
		want := ": interrupted (what was committed is kept): run the same command again to resume"
		if err == nil || !strings.HasSuffix(err.Error(), want) || strings.Contains(err.Error(), "context canceled") || !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want an interruption matching context.Canceled", mode, err)
		}
	}
}

// TestReplayWithKLToReference: with learn.kl_coef > 0 the learner also loads the reference
// policy (step 0); a replay of an iteration N > 0 must find it in the iteration's checkpoints.
func TestReplayWithKLToReference(t *testing.T) {
	ctx := context.Background()
	env, _ := analysistest.Env(t)
	env.Config.Learn.KLCoef = 0.01
	r, _ := ablate.ParseRange("0..1")
	res, err := ablate.Run(ctx, env, ablate.Options{Estimators: []string{"drmas"}, Iterations: r})
	if err != nil {
		t.Fatalf("replay with kl_coef > 0: %v", err)
	}
	its := map[int32]bool{}
	for _, row := range res.Rows {
		its[row.Iteration] = true
	}
	if !its[0] || !its[1] || len(res.Skipped) != 0 {
		t.Fatalf("replayed iterations %v, skipped %v", its, res.Skipped)
	}
}

// TestOnPolicyOrderIndependent: the order of --estimators and --seeds chooses nothing: the
// runs that share a seed's warm-up copy the step-0 manifest of the run that trained it, which
// names that run, so it must be the same run whatever the order given.
func TestOnPolicyOrderIndependent(t *testing.T) {
	ctx := context.Background()
	r, _ := ablate.ParseRange("0..0")
	var stores []map[string]string
	for _, o := range []ablate.Options{
		{Mode: ablate.OnPolicy, Estimators: []string{"drmas", "grpo"}, Seeds: []uint64{1, 2}, Iterations: r},
		{Mode: ablate.OnPolicy, Estimators: []string{"grpo", "drmas"}, Seeds: []uint64{2, 1}, Iterations: r},
	} {
		cfg := analysistest.Config(t)
		cfg.Run = "op"
		env := stagetest.Env(t, cfg)
		if _, err := ablate.Run(ctx, env, o); err != nil {
			t.Fatal(err)
		}
		stores = append(stores, hashes(t, env.Bucket, "runs/"))
	}
	if len(stores[0]) == 0 || !reflect.DeepEqual(stores[0], stores[1]) {
		for k, v := range stores[0] {
			if stores[1][k] != v {
				t.Errorf("%s differs", k)
			}
		}
		t.Fatalf("%d and %d objects: the stores differ", len(stores[0]), len(stores[1]))
	}
}

// TestReplayVariesObjectiveOptions: a replay under learn objective options learns the same
// stored rows into runs of its own, named by the options, beside the defaults' replay (whose
// names and bytes are unchanged), and its update differs.
func TestReplayVariesObjectiveOptions(t *testing.T) {
	ctx := context.Background()
	env, _ := analysistest.Env(t)
	r, _ := ablate.ParseRange("0..0")
	src := analysistest.Run
	def, err := ablate.Run(ctx, env, ablate.Options{Estimators: []string{"drmas"}, Iterations: r})
	if err != nil {
		t.Fatal(err)
	}
	if want := ablate.RunName(ablate.Replay, src, "drmas", env.Config.Seed); !slices.Equal(def.Runs, []string{want}) {
		t.Fatalf("default replay runs %v, want [%s]", def.Runs, want)
	}
	env.Config.Learn.LossAgg, env.Config.Learn.EntropyCoef = "seq-mean-token-mean", 0.01
	alt, err := ablate.Run(ctx, env, ablate.Options{Estimators: []string{"drmas"}, Iterations: r})
	if err != nil {
		t.Fatalf("replay under other objective options: %v", err)
	}
	tag := env.Config.Learn.ObjectiveTag()
	if want := def.Runs[0] + "-" + tag; len(tag) != 9 || !slices.Equal(alt.Runs, []string{want}) {
		t.Fatalf("replay under options: runs %v, want [%s]", alt.Runs, want)
	}
	model := func(run string) string {
		k := path.Join(layout.IterDir(run, 0), "checkpoints", checkpointEl(1), "m1", "model.safetensors")
		h := hashes(t, env.Bucket, k)[k]
		if h == "" {
			t.Fatalf("%s is missing", k)
		}
		return h
	}
	if model(def.Runs[0]) == model(alt.Runs[0]) {
		t.Error("the replay under other objective options trained the default's weights")
	}
}
