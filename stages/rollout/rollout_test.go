package rollout_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/jobs"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
	"github.com/drmas-dev/drmas/workflows"
)

// rolloutOnce warms up and rolls out iteration 0 in a fresh store; it returns the env and the
// rollout manifest.
func rolloutOnce(t *testing.T, workflow string) (*stages.Env, *commit.Manifest) {
	t.Helper()
	ctx := context.Background()
	env := stagetest.Env(t, stagetest.Config(t, workflow))
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	res, err := rollout.Run(ctx, env, rollout.Options{Iteration: 0, Step: stages.LatestStep})
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped || res.Rows == 0 || res.Episodes != 16 {
		t.Fatalf("unexpected result %+v", res)
	}
	m, _, err := commit.Read(ctx, env.Bucket, layout.RolloutDir("t", 0))
	if err != nil {
		t.Fatal(err)
	}
	return env, m
}

func TestRolloutIsByteIdentical(t *testing.T) {
	for _, wf := range []string{"math", "search"} {
		t.Run(wf, func(t *testing.T) {
			_, a := rolloutOnce(t, wf)
			_, b := rolloutOnce(t, wf)
			if len(a.Files) != 2 {
				t.Fatalf("want 2 parts, got %+v", a.Files)
			}
			for i := range a.Files {
				if a.Files[i] != b.Files[i] {
					t.Fatalf("part %d differs between identical runs: %+v vs %+v", i, a.Files[i], b.Files[i])
				}
			}
			if a.Params["policy_version"] != "0" || a.Params["workflow"] != wf {
				t.Fatalf("params %v", a.Params)
			}
		})
	}
}

func TestRolloutRowsAndDuckDB(t *testing.T) {
	for _, wf := range []string{"math", "search"} {
		t.Run(wf, func(t *testing.T) {
			env, m := rolloutOnce(t, wf)
			ctx := context.Background()
			w, err := stages.Workflow(env.Config)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			var all []shards.Row
			for _, f := range m.Files {
				data, err := commit.ReadFile(ctx, env.Bucket, layout.RolloutDir("t", 0), f)
				if err != nil {
					t.Fatal(err)
				}
				rows, err := shards.ReadTrajectories(bytes.NewReader(data), int64(len(data)), f.Name)
				if err != nil {
					t.Fatal(err)
				}
				checkRows(t, w, rows)
				all = append(all, rows...)
				if err := os.WriteFile(filepath.Join(dir, f.Name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// Expected mean score and row count per agent, computed in Go.
			want := map[string][2]float64{}
			for _, r := range all {
				x := want[r.Agent]
				want[r.Agent] = [2]float64{x[0] + r.Score, x[1] + 1}
			}
			db, err := sql.Open("duckdb", "")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			q := "SELECT agent, count(*), avg(score) FROM read_parquet(?) GROUP BY agent ORDER BY agent"
			res, err := db.Query(q, filepath.Join(dir, "*.parquet"))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Close()
			got := 0
			for res.Next() {
				var agent string
				var n int64
				var avg float64
				if err := res.Scan(&agent, &n, &avg); err != nil {
					t.Fatal(err)
				}
				w := want[agent]
				if float64(n) != w[1] || math.Abs(avg-w[0]/w[1]) > 1e-12 {
					t.Errorf("duckdb: agent %s: %d rows mean %v, want %v rows mean %v", agent, n, avg, w[1], w[0]/w[1])
				}
				got++
			}
			if got != len(want) || got < 2 {
				t.Fatalf("duckdb returned %d agents, want %d", got, len(want))
			}
		})
	}
}

// checkRows checks the invariants of docs/design.md, "Shard schemas" on one part's rows.
func checkRows(t *testing.T, wf workflows.Workflow, rows []shards.Row) {
	t.Helper()
	order := map[string]int{}
	for i, a := range wf.Agents() {
		order[a] = i
	}
	for i, r := range rows {
		if len(r.ResponseLogprobs) != len(r.ResponseIDs) || len(r.PromptIDs) == 0 {
			t.Fatalf("row %d: %d logprobs for %d tokens, %d prompt ids", i, len(r.ResponseLogprobs), len(r.ResponseIDs), len(r.PromptIDs))
		}
		if !strings.HasPrefix(r.TrajUID, r.UID) || r.UID != rollout.UID("t", 0, r.TaskID) {
			t.Fatalf("row %d: uid %s traj %s task %s", i, r.UID, r.TrajUID, r.TaskID)
		}
		want := workflows.RowScore(r.EpisodeReward, r.Valid, wf.InvalidPenalty())
		if r.Score != want {
			t.Fatalf("row %d: score %v, want %v", i, r.Score, want)
		}
		for _, lp := range r.ResponseLogprobs {
			if lp > 0 || math.IsNaN(float64(lp)) {
				t.Fatalf("row %d: log-prob %v", i, lp)
			}
		}
		if i == 0 {
			continue
		}
		p := rows[i-1]
		if p.UID > r.UID || (p.UID == r.UID && (p.Sample > r.Sample || (p.Sample == r.Sample && (p.Step > r.Step || (p.Step == r.Step && order[p.Agent] >= order[r.Agent]))))) {
			t.Fatalf("rows %d, %d out of (uid, sample, step, agent) order", i-1, i)
		}
	}
}

func TestRolloutNeedsACheckpoint(t *testing.T) {
	env := stagetest.Env(t, stagetest.Config(t, "math"))
	_, err := rollout.Run(context.Background(), env, rollout.Options{Step: stages.LatestStep})
	if err == nil || !strings.Contains(err.Error(), "warmup") {
		t.Fatalf("want an error that says to run warmup, got %v", err)
	}
}

func TestRolloutRefusesUnmappedAgent(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	delete(cfg.Agents, "verifier")
	_, err := stages.Workflow(cfg)
	if err == nil || !strings.Contains(err.Error(), "agents.verifier") {
		t.Fatalf("want an error naming agents.verifier, got %v", err)
	}
}

// TestShardedRolloutEqualsSingleProcess runs 3 shard workers (plus a duplicate of one index, as
// Kubernetes may start) on one store and checks the committed iteration equals the
// single-process one byte for byte, and that receipts are cleaned up.
func TestShardedRolloutEqualsSingleProcess(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	cfg.Tasks.PerIteration = 6
	cfg.Rollout.Parts = 3
	single := stagetest.Env(t, cfg)
	if _, err := warmup.Run(ctx, single); err != nil {
		t.Fatal(err)
	}
	want, err := rollout.Run(ctx, single, rollout.Options{Step: 0})
	if err != nil || !want.Committed {
		t.Fatalf("%+v %v", want, err)
	}
	sharded := stagetest.Env(t, cfg)
	if _, err := warmup.Run(ctx, sharded); err != nil {
		t.Fatal(err)
	}
	var committed []bool
	for _, s := range []jobs.Shard{{Index: 1, Count: 3}, {Index: 0, Count: 3}, {Index: 1, Count: 3}, {Index: 2, Count: 3}} {
		res, err := rollout.Run(ctx, sharded, rollout.Options{Step: 0, Shard: s})
		if err != nil {
			t.Fatal(err)
		}
		committed = append(committed, res.Committed)
		if res.Committed && (res.Rows != want.Rows || res.MeanReward != want.MeanReward) {
			t.Fatalf("finalizing worker reports %d rows mean %v, single process %d rows mean %v", res.Rows, res.MeanReward, want.Rows, want.MeanReward)
		}
	}
	if fmt.Sprint(committed) != "[false false false true]" {
		t.Fatalf("committed after each worker: %v; want only the last worker to commit", committed)
	}
	a, sa, _ := commit.Read(ctx, single.Bucket, layout.RolloutDir("t", 0))
	b, sb, _ := commit.Read(ctx, sharded.Bucket, layout.RolloutDir("t", 0))
	if sa != sb {
		t.Fatalf("manifests differ:\n%+v\n%+v", a, b)
	}
	var receipts []string
	_ = sharded.Bucket.Iter(ctx, layout.RolloutDir("t", 0)+"/"+commit.ReceiptsDir+"/", func(k string) error { receipts = append(receipts, k); return nil })
	if len(receipts) != 0 {
		t.Fatalf("receipts left after commit: %v", receipts)
	}
	// A late duplicate worker finds the folder committed and does nothing but remove receipts a
	// worker killed after the commit left behind.
	stray := commit.Receipt{File: b.Files[0], Writer: "a late worker"}
	if err := commit.PutReceipt(ctx, sharded.Bucket, layout.RolloutDir("t", 0), stray); err != nil {
		t.Fatal(err)
	}
	late, err := rollout.Run(ctx, sharded, rollout.Options{Step: 0, Shard: jobs.Shard{Index: 2, Count: 3}})
	if err != nil || !late.Skipped {
		t.Fatalf("late worker: %+v %v", late, err)
	}
	receipts = nil
	_ = sharded.Bucket.Iter(ctx, layout.RolloutDir("t", 0)+"/"+commit.ReceiptsDir+"/", func(k string) error { receipts = append(receipts, k); return nil })
	if len(receipts) != 0 {
		t.Fatalf("stray receipts left: %v", receipts)
	}
}

// TestRolloutResumesFinishedParts: a part whose receipt exists is not regenerated.
func TestRolloutResumesFinishedParts(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	env := stagetest.Env(t, cfg)
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	if _, err := rollout.Run(ctx, env, rollout.Options{Step: 0, Shard: jobs.Shard{Index: 0, Count: 2}}); err != nil {
		t.Fatal(err)
	}
	key := layout.RolloutDir("t", 0) + "/" + shards.PartName(0, 2)
	before, err := env.Bucket.Stat(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	res, err := rollout.Run(ctx, env, rollout.Options{Step: 0})
	if err != nil || !res.Committed {
		t.Fatalf("%+v %v", res, err)
	}
	after, _ := env.Bucket.Stat(ctx, key)
	if !after.LastModified.Equal(before.LastModified) {
		t.Fatal("a finished part was rewritten")
	}
}

// A policy samples arbitrary bytes; the stored text must still be UTF-8 (DuckDB refuses a
// Parquet string column that is not), while the token ids keep the exact bytes.
func TestRowsStoreValidUTF8(t *testing.T) {
	wf, err := workflows.New("math", workflows.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	raw := "ans \xff\xfe7"
	ids := make([]int32, len(raw))
	for i := range len(raw) {
		ids[i] = int32(raw[i])
	}
	ep := &rollout.Episode{Task: workflows.Task{ID: "t1", DataSource: workflows.SourceMathEasy}, Turns: []rollout.Turn{{
		Agent: workflows.AgentSolver, Model: "m1", PromptText: "solver\nQ 1+\xc3\n", ResponseText: raw,
		Response: actors.Response{Tokens: ids, LogProbs: make([]float32, len(ids))},
	}}}
	rows := rollout.Rows("r", 0, "u", wf, []*rollout.Episode{ep})
	if len(rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rows))
	}
	r := rows[0]
	if r.ResponseText != "ans \uFFFD7" || r.PromptText != "solver\nQ 1+\uFFFD\n" {
		t.Fatalf("stored text %q / %q, want invalid bytes replaced by U+FFFD", r.PromptText, r.ResponseText)
	}
	for i := range ids {
		if r.ResponseIDs[i] != ids[i] {
			t.Fatalf("response id %d = %d, want %d (ids keep the exact bytes)", i, r.ResponseIDs[i], ids[i])
		}
	}
}

// TestShardsOfAnotherConfigAreNotMixed: a worker that runs another config (a retried pod after
// the ConfigMap changed) must not commit its part together with the others' parts. The mixed
// set is refused with a conflict naming the foreign part; rerunning that shard with the same
// config redoes the part, and the folder then equals a single process's with that config.
func TestShardsOfAnotherConfigAreNotMixed(t *testing.T) {
	ctx := context.Background()
	cfgA := stagetest.Config(t, "math")
	cfgA.Tasks.PerIteration, cfgA.Rollout.Parts = 4, 2
	cfgB := *cfgA
	cfgB.Rollout.Temperature = cfgA.Rollout.Temperature / 2
	dir := t.TempDir()
	envA, envB := stagetest.EnvAt(t, cfgA, dir), stagetest.EnvAt(t, &cfgB, dir)
	if _, err := warmup.Run(ctx, envA); err != nil {
		t.Fatal(err)
	}
	run := func(env *stages.Env, index int) (*rollout.Result, error) {
		return rollout.Run(ctx, env, rollout.Options{Step: 0, Shard: jobs.Shard{Index: index, Count: 2}})
	}
	if res, err := run(envA, 1); err != nil || res.Committed {
		t.Fatalf("worker 1 of config A: %+v %v", res, err)
	}
	part1 := shards.PartName(1, 2)
	_, err := run(envB, 0)
	if !errors.Is(err, commit.ErrConflict) || !strings.Contains(err.Error(), part1) || !strings.Contains(err.Error(), "another config") {
		t.Fatalf("worker 0 of config B over config A's part: %v, want a conflict naming %s", err, part1)
	}
	if ok, _ := commit.IsCommitted(ctx, envB.Bucket, layout.RolloutDir("t", 0)); ok {
		t.Fatal("a mixed set of parts was committed")
	}
	res, err := run(envB, 1)
	if err != nil || !res.Committed {
		t.Fatalf("worker 1 rerun with config B: %+v %v", res, err)
	}
	single := stagetest.Env(t, &cfgB)
	if _, err := warmup.Run(ctx, single); err != nil {
		t.Fatal(err)
	}
	if _, err := rollout.Run(ctx, single, rollout.Options{Step: 0}); err != nil {
		t.Fatal(err)
	}
	_, want, _ := commit.Read(ctx, single.Bucket, layout.RolloutDir("t", 0))
	_, got, _ := commit.Read(ctx, envB.Bucket, layout.RolloutDir("t", 0))
	if got != want || got == "" {
		t.Fatalf("manifest sha %s, single process with config B %s", got, want)
	}
}

// TestTasksFileEntersByContent: a rollout's digest covers the tasks it ran on, not the
// tasks.source path. Two workers that read different files at one path (the file was replaced
// between pods) are refused as a mixed set; one file named by two paths, or another
// tasks.eval_size (held-out prompts only), gives the same folder.
func TestTasksFileEntersByContent(t *testing.T) {
	ctx := context.Background()
	write := func(path string, first int) {
		var b strings.Builder
		for i := range 6 {
			fmt.Fprintf(&b, `{"id": "q%d", "question": "%d+%d", "answer": "%d"}`+"\n", i, first+i, i, first+2*i)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files := t.TempDir()
	src := filepath.Join(files, "tasks.jsonl")
	write(src, 10)
	base := stagetest.Config(t, "math")
	base.Tasks.Source, base.Tasks.PerIteration, base.Tasks.EvalSize, base.Rollout.Parts = src, 4, 0, 2
	dir := t.TempDir()
	env := stagetest.EnvAt(t, base, dir)
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	run := func(env *stages.Env, index int) (*rollout.Result, error) {
		return rollout.Run(ctx, env, rollout.Options{Step: 0, Shard: jobs.Shard{Index: index, Count: 2}})
	}
	if res, err := run(env, 1); err != nil || res.Committed {
		t.Fatalf("worker 1: %+v %v", res, err)
	}
	write(src, 40) // another file at the same path
	if _, err := run(env, 0); !errors.Is(err, commit.ErrConflict) || !strings.Contains(err.Error(), "another config") {
		t.Fatalf("worker 0 on another tasks file at the same path: %v, want a conflict", err)
	}
	if ok, _ := commit.IsCommitted(ctx, env.Bucket, layout.RolloutDir("t", 0)); ok {
		t.Fatal("parts of two tasks files were committed together")
	}
	// The same content by another path (a file in another folder)
	// and another eval_size: the same manifest as the first.
	write(src, 10)
	other := filepath.Join(t.TempDir(), "tasks.jsonl")
	write(other, 10)
	manifest := func(cfg *configs.Config) string {
		e := stagetest.Env(t, cfg)
		if _, err := warmup.Run(ctx, e); err != nil {
			t.Fatal(err)
		}
		if _, err := rollout.Run(ctx, e, rollout.Options{Step: 0}); err != nil {
			t.Fatal(err)
		}
		_, sha, err := commit.Read(ctx, e.Bucket, layout.RolloutDir("t", 0))
		if err != nil {
			t.Fatal(err)
		}
		return sha
	}
	moved := *base
	moved.Tasks.Source, moved.Tasks.EvalSize = other, 2
	if a, b := manifest(base), manifest(&moved); a != b {
		t.Fatalf("one tasks file at two paths: manifests %.12s and %.12s", a, b)
	}
}
