package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/rollout"
)

// TestAdvice: each typed error, wrapped as a stage returns it, reads as its facts followed by
// what to do, worded as the libraries worded it before the advice moved here; the advised
// error still matches what the typed error matches.
func TestAdvice(t *testing.T) {
	const dir = "runs/r/iter=000002/rollout"
	replaced := errors.New("part-0.parquet holds other bytes than this writer's")
	for _, c := range []struct {
		err  error
		want string
		is   []error
	}{
		{&commit.ConflictError{Dir: dir, File: "part-0.parquet", State: commit.Kept, What: dir + " is committed with other content than this part-0.parquet"},
			"rollout iter 2: " + dir + " is committed with other content than this part-0.parquet: commit conflict: to redo " + dir + " with this command's settings, delete it first",
			[]error{commit.ErrConflict}},
		{&commit.ConflictError{Dir: dir, State: commit.Uncommitted, Withdrawn: true, Err: replaced, What: "commit " + dir + ": a file was replaced, so the commit is withdrawn"},
			"rollout iter 2: commit " + dir + ": a file was replaced, so the commit is withdrawn: " + replaced.Error() + ": commit withdrawn: commit conflict: rerun the stage with the settings you want",
			[]error{commit.ErrConflict, commit.ErrWithdrawn, replaced}},
		{&commit.ConflictError{Dir: dir, State: commit.Unsure, What: "withdrawing failed"},
			"rollout iter 2: withdrawing failed: commit conflict: if readers refuse " + dir + ", delete it and rerun",
			[]error{commit.ErrConflict}},
		{&commit.ConflictError{Dir: dir, State: commit.OtherWorker, What: "another worker"},
			"rollout iter 2: another worker: commit conflict: rerun with that config, or delete " + dir + " to redo it with this one",
			[]error{commit.ErrConflict}},
		{&commit.ConflictError{Dir: dir, File: "part-1.parquet", State: commit.ForeignParts, What: "foreign parts"},
			"rollout iter 2: foreign parts: commit conflict: rerun those shards with this config",
			[]error{commit.ErrConflict}},
		{&learn.ConflictError{Iter: 2, What: "checkpoint step 3 is already published"},
			"rollout iter 2: checkpoint step 3 is already published: train under another --run", nil},
		// A learn conflict that wraps a commit conflict: the learn's advice, not the commit's.
		{&learn.ConflictError{Iter: 2, What: "step 3 is already published with other weights", Err: &commit.ConflictError{Dir: dir, State: commit.Kept, What: "kept"}},
			"rollout iter 2: step 3 is already published with other weights: kept: commit conflict: train under another --run",
			[]error{commit.ErrConflict}},
		{&learn.ConflictError{Remedy: learn.RollOutAgain, Iter: 3, Step: 1, Dir: "runs/t/iter=000003", What: "its rollout was sampled from step 1"},
			"rollout iter 2: its rollout was sampled from step 1: run iterations 1..2 first, then delete runs/t/iter=000003/ and roll iteration 3 out again, or train under another --run", nil},
		{&learn.ConflictError{Remedy: learn.RollOutAgain, Iter: 3, Step: 4, Dir: "runs/t/iter=000003", What: "sampled from step 4"},
			"rollout iter 2: sampled from step 4: delete runs/t/iter=000003/ and roll iteration 3 out again, or train under another --run", nil},
		{&learn.ConflictError{Remedy: learn.RelearnOrAnotherRun, Iter: 2, Step: 3, Dir: "runs/t/iter=000002/learn", What: "replaced", Err: commit.ErrConflict},
			"rollout iter 2: replaced: commit conflict: train the new rollout under another --run, or delete runs/t/iter=000002/learn/ and checkpoint step 3 (and what later iterations made from it) and run learn again",
			[]error{commit.ErrConflict}},
		{&learn.ConflictError{Remedy: learn.OtherEstimator, Iter: 2, What: "already committed with estimator drmas, not grpo"},
			"rollout iter 2: already committed with estimator drmas, not grpo: compare estimators with `drmas ablate`, or train under another --run", nil},
		{&learn.ConflictError{Remedy: learn.OneLearn, Iter: 2, What: "another learn"},
			"rollout iter 2: another learn: run one learn of iteration 2, with the settings you want", nil},
		{&stages.StaleAdvantagesError{Dir: "runs/t/iter=000002/advantages/est=grpo", Diagnostics: "runs/t/iter=000002/diagnostics/est=grpo", Iter: 2, Estimator: "grpo", What: "stale"},
			"rollout iter 2: stale: commit conflict: delete runs/t/iter=000002/advantages/est=grpo/ and runs/t/iter=000002/diagnostics/est=grpo/, then run `drmas run-stage normalize --iter 2 --estimator grpo` again",
			[]error{commit.ErrConflict}},
		{&stages.TakenError{Stage: "evaluate", Dir: "runs/t/eval/step=000002", What: "runs/t/eval/step=000002 is already committed with k 2 (this config: 4)"},
			"rollout iter 2: runs/t/eval/step=000002 is already committed with k 2 (this config: 4): commit conflict: evaluate under another --run, or delete runs/t/eval/step=000002",
			[]error{commit.ErrConflict}},
		{&stages.TakenError{Stage: "import", Dir: "runs/t/iter=000002/rollout", What: "other content"},
			"rollout iter 2: other content: commit conflict: import into another --iter or --run",
			[]error{commit.ErrConflict}},
		{&rollout.OrderError{Iter: 3, Step: 1, Latest: true, What: "would sample from step 1"},
			"rollout iter 2: would sample from step 1: run iterations 1..2 first (`drmas run --iters 3` does), or roll out under another --run", nil},
		{&rollout.OrderError{Iter: 2, Step: 1, Latest: true, What: "would sample from step 1"},
			"rollout iter 2: would sample from step 1: run iteration 1 first (`drmas run --iters 2` does), or roll out under another --run", nil},
		{&rollout.OrderError{Iter: 3, Step: 1, What: "would sample from step 1"},
			"rollout iter 2: would sample from step 1: pass --step 3 if it is still kept, or roll out under another --run", nil},
		{&rollout.OrderError{Iter: 0, Step: 1, Latest: true, What: "would sample from step 1"},
			"rollout iter 2: would sample from step 1: pass --step 0 if it is still kept, or roll out under another --run", nil},
		{errors.New("no advice"), "rollout iter 2: no advice", nil},
	} {
		err := stages.Fail(context.Background(), "rollout iter 2", fmt.Errorf("%w", c.err))
		if got := advise(err); got != c.want {
			t.Errorf("advise(%T)\n got %q\nwant %q", c.err, got, c.want)
		}
		for _, target := range c.is {
			if !errors.Is(err, target) {
				t.Errorf("%v does not match %v", err, target)
			}
		}
	}
}

// TestConflictAdviceCompleted: the advice, like the facts, goes through completeHints, so a
// command it quotes repeats the invocation's --run.
func TestConflictAdviceCompleted(t *testing.T) {
	err := &learn.ConflictError{Remedy: learn.OtherEstimator, What: "already committed with estimator drmas, not grpo"}
	want := "already committed with estimator drmas, not grpo: compare estimators with `drmas ablate --run r1`, or train under another --run"
	if got := completeHints(advise(err), [][2]string{{"--run", "r1"}}); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// TestImportConflictAdvised: through the command line, importing other content into a
// committed iteration reads as the importer's facts followed by cmd/drmas's advice, and the
// error still matches commit.ErrConflict.
func TestImportConflictAdvised(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	for i, score := range []string{"1", "0.5"} {
		traj := filepath.Join(dir, fmt.Sprintf("t%d.jsonl", i))
		if err := os.WriteFile(traj, []byte(`{"uid":"q","traj_uid":"q-0","agent":"solver","step":0,"score":`+score+`}`+"\n"+
			`{"uid":"q","traj_uid":"q-1","agent":"solver","step":0,"score":0}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := execute(t, "-q", "--store", store, "--run", "r", "import", traj, "--iter", "0")
		if i == 0 {
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err == nil || !errors.Is(err, commit.ErrConflict) ||
			!strings.Contains(err.Error(), "runs/r/iter=000000/rollout is already committed with different content (") ||
			!strings.HasSuffix(err.Error(), "): commit conflict: import into another --iter or --run") {
			t.Fatalf("import of other content into iteration 0: %v", err)
		}
	}
}
