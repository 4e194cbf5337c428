package rollout_test

import (
	"bytes"
	"context"
	"path"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/jobs"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/normalize"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
	"github.com/drmas-dev/drmas/storage"
)

// TestFilterGroups: with rollout.filter_groups every stored group carries a signal under the
// learner's estimator (drmas: some agent's scores differ within the group), each part holds at
// most its share of groups, refilled from reserve prompts; the counts add up; three shards
// write the very folder one process does; and normalize and learn run on it.
func TestFilterGroups(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	cfg.Tasks.PerIteration, cfg.Rollout.Parts, cfg.Rollout.GroupSize = 6, 3, 2
	cfg.Warmup.Steps, cfg.Warmup.Batch, cfg.Warmup.Demos, cfg.Warmup.LR = 220, 16, 200, 3e-3
	cfg.Rollout.FilterGroups, cfg.Rollout.MaxOversample = true, 4
	env := stagetest.Env(t, cfg)
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	res, err := rollout.Run(ctx, env, rollout.Options{Step: 0})
	if err != nil || !res.Committed {
		t.Fatalf("%+v %v", res, err)
	}
	dir := layout.RolloutDir("t", 0)
	m, sha, err := commit.Read(ctx, env.Bucket, dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Params["filter_groups"] != "true" || m.Params["max_oversample"] != "4" {
		t.Errorf("manifest params %v", m.Params)
	}
	groups := 0
	for _, f := range m.Files {
		data, err := storage.ReadAll(ctx, env.Bucket, path.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := shards.ReadTrajectories(bytes.NewReader(data), int64(len(data)), f.Name)
		if err != nil {
			t.Fatal(err)
		}
		scores := map[string]map[string]map[float64]bool{} // uid → agent → scores
		for _, r := range rows {
			if scores[r.UID] == nil {
				scores[r.UID] = map[string]map[float64]bool{}
			}
			if scores[r.UID][r.Agent] == nil {
				scores[r.UID][r.Agent] = map[float64]bool{}
			}
			scores[r.UID][r.Agent][r.Score] = true
		}
		if len(scores) > 2 {
			t.Errorf("%s holds %d groups, more than its share of 2", f.Name, len(scores))
		}
		for uid, by := range scores {
			signal := false
			for _, s := range by {
				signal = signal || len(s) > 1
			}
			if !signal {
				t.Errorf("%s: group %s has one score per agent: no signal, yet kept", f.Name, uid)
			}
		}
		groups += len(scores)
	}
	t.Logf("kept %d groups, dropped %d", res.GroupsKept, res.GroupsDropped)
	if res.GroupsKept != groups || res.GroupsKept+res.GroupsDropped < cfg.Tasks.PerIteration || res.GroupsKept == 0 || res.GroupsDropped == 0 {
		t.Errorf("kept %d and dropped %d groups; the parts hold %d", res.GroupsKept, res.GroupsDropped, groups)
	}
	sharded := stagetest.Env(t, cfg)
	if _, err := warmup.Run(ctx, sharded); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := rollout.Run(ctx, sharded, rollout.Options{Step: 0, Shard: jobs.Shard{Index: 2 - i, Count: 3}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, sb, err := commit.Read(ctx, sharded.Bucket, dir); err != nil || sb != sha {
		t.Fatalf("three shards committed %s (%v), one process %s", sb, err, sha)
	}
	if _, err := normalize.Run(ctx, env, normalize.Options{Estimators: []string{"drmas"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := learn.Run(ctx, env, learn.Options{}); err != nil {
		t.Fatal(err)
	}
}
