package rollout_test

import (
	"bytes"
	"context"
	"database/sql"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/drmas-dev/drmas/commit"
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
	m, _, err := commit.Read(ctx, env.Bucket, commit.RolloutDir("t", 0))
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
				data, err := commit.ReadFile(ctx, env.Bucket, commit.RolloutDir("t", 0), f)
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

// checkRows checks the invariants of DESIGN §2 on one part's rows.
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
