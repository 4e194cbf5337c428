package learn_test

import (
	"context"
	"path"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// legacyDigest is the learn digest an older drmas recorded: the whole learn section, with
// keep_checkpoints and learn.estimator (an independent copy of that formula).
func legacyDigest(cfg *configs.Config, est string) string {
	return configs.Digest(struct {
		Seed      uint64
		Learn     configs.Learn
		Estimator string
		Agents    map[string]configs.Agent
		Models    map[string]configs.Model
		Temp      float64
	}{cfg.Seed, cfg.Learn, est, cfg.Agents, cfg.Models, cfg.Rollout.Temperature})
}

// TestRepublishUnderTheOlderDigest: a step published by an older drmas for this config records
// the older digest (learn.SameConfig accepts it); when its metrics are gone, the rerun trains
// the same bits, which are the same step, published under the digest it records. Every rerun
// failed with "already published ... with other weights: train under another --run" (a step
// from a drmas older still, with no inputs recorded), or the first one blamed "another
// engine's" weights (a step with inputs).
func TestRepublishUnderTheOlderDigest(t *testing.T) {
	ctx := context.Background()
	for _, withInputs := range []bool{false, true} {
		var env *stages.Env
		if withInputs {
			cfg := stagetest.Config(t, "math")
			cfg.Learn.Epochs, cfg.Learn.MiniBatches = 1, 1
			env = prepare(t, cfg, 2)
			dieBeforeMetricsCommit(t, env, 1)
		} else {
			env = olderDrmasDiedAfterPublishing(t)
		}
		rewriteCheckpointManifest(t, env, 2, func(m *commit.Manifest) { m.ConfigDigest = legacyDigest(env.Config, "drmas") })
		if err := env.Bucket.Delete(ctx, path.Join(commit.LearnDir("t", 1), "metrics.parquet")); err != nil {
			t.Fatal(err)
		}
		if res, err := learn.Run(ctx, env, learn.Options{Iteration: 1}); err != nil || res.Step != 2 {
			t.Errorf("inputs recorded %v: the first rerun: %+v, %v", withInputs, res, err)
		}
	}
}
