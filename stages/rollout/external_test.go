package rollout_test

import (
	"context"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// TestExternalRolloutRecordsItsIterationsStep: with every model served elsewhere there is no
// checkpoint, but learn publishes step N+1 from iteration N's rollout, so iteration N's rollout
// must record step N, as under `drmas run` (which passes --step N). It recorded step 0 for
// every iteration rolled out with LATEST (`run-stage rollout --iter N`, the Kubernetes Jobs),
// and iteration 1's learn then found step 1 published by iteration 0. An explicit step of
// another iteration is refused, as for a config with checkpoints.
func TestExternalRolloutRecordsItsIterationsStep(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.ExternalConfig(t)
	cfg.Tasks.PerIteration, cfg.Rollout.GroupSize = 2, 2
	env := stagetest.Env(t, cfg)
	res, err := rollout.Run(ctx, env, rollout.Options{Iteration: 1, Step: stages.LatestStep})
	if err != nil || res.PolicyVersion != 1 {
		t.Fatalf("rollout iter 1 from LATEST: %+v %v, want policy version 1", res, err)
	}
	m, _, err := commit.Read(ctx, env.Bucket, layout.RolloutDir("ext", 1))
	if err != nil || m.Params["policy_version"] != "1" {
		t.Fatalf("rollout iter 1's manifest: %+v %v, want policy_version 1", m, err)
	}
	if _, err := rollout.Run(ctx, env, rollout.Options{Iteration: 2, Step: 0}); err == nil || !strings.Contains(err.Error(), "would sample from step 0, but iteration 2 samples from step 2") {
		t.Fatalf("rollout iter 2 from step 0: %v", err)
	}
}
