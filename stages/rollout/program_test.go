package rollout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/jobs"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
)

// TestMain makes the test binary the agent program of the program tests: `rollout.test
// program` asks the solver, then the verifier, and reports reward 1 for even-numbered tasks
// (0 for the others) with the verifier's call penalized by 0.5.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "program" {
		os.Exit(agentProgram())
	}
	os.Exit(m.Run())
}

func agentProgram() int {
	var task struct{ ID string }
	_ = json.Unmarshal([]byte(os.Getenv("DRMAS_TASK")), &task)
	for _, agent := range []string{"solver", "verifier"} {
		body, _ := json.Marshal(map[string]any{"model": agent, "messages": []map[string]string{{"role": "user", "content": "task " + task.ID}}})
		req, _ := http.NewRequest(http.MethodPost, os.Getenv("OPENAI_BASE_URL")+"/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			fmt.Fprintln(os.Stderr, agent, err)
			return 1
		}
		resp.Body.Close()
	}
	reward := 0
	if task.ID[len(task.ID)-1]%2 == 0 {
		reward = 1
	}
	fmt.Printf("{\"reward\": %d, \"penalties\": [0, 0.5]}\n", reward)
	return 0
}

// programEnv is a program rollout's environment: the built-in model for both agents, two parts.
func programEnv(t *testing.T) *stages.Env {
	cfg := stagetest.Config(t, "math")
	cfg.Workflow.Name = "program"
	cfg.Workflow.Command = []string{os.Args[0], "program"}
	cfg.Dir = t.TempDir()
	cfg.Warmup.Steps, cfg.Evaluate.Every = 0, 0
	cfg.Rollout.GroupSize = 2
	cfg.Models["m1"] = stagetest.Config(t, "search").Models["m1"] // a context for the chat lines
	env := stagetest.Env(t, cfg)
	if _, err := warmup.Run(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	return env
}

// TestProgramRollout: an agent program's rollout writes a row per call scored by its reward
// less the call's penalty (penalized rows invalid, step = the call's index), and a rollout
// interrupted after its first part resumes to the bytes of an uninterrupted one.
func TestProgramRollout(t *testing.T) {
	ctx := context.Background()
	whole := programEnv(t)
	res, err := rollout.Run(ctx, whole, rollout.Options{Step: stages.LatestStep})
	if err != nil || !res.Committed || res.Episodes != 8 || res.Rows != 16 || res.EpisodesDropped != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	_, sum, err := commit.Read(ctx, whole.Bucket, layout.RolloutDir("t", 0))
	if err != nil {
		t.Fatal(err)
	}
	_, parts := stagetest.ReadRollout(t, whole, 0)
	for _, r := range slices.Concat(parts...) {
		want := map[string]float64{"solver": r.EpisodeReward, "verifier": r.EpisodeReward - 0.5}[r.Agent]
		step := map[string]int32{"solver": 0, "verifier": 1}[r.Agent]
		if r.Score != want || r.Valid != (r.Agent == "solver") || r.Step != step || len(r.ResponseLogprobs) != len(r.ResponseIDs) {
			t.Errorf("row %s step %d: score %v (reward %v) valid %v", r.Agent, r.Step, r.Score, r.EpisodeReward, r.Valid)
		}
	}
	resumed := programEnv(t)
	if res, err := rollout.Run(ctx, resumed, rollout.Options{Step: stages.LatestStep, Shard: jobs.Shard{Index: 0, Count: 2}}); err != nil || res.Committed {
		t.Fatalf("first part: %+v %v", res, err)
	}
	if res, err := rollout.Run(ctx, resumed, rollout.Options{Step: stages.LatestStep}); err != nil || !res.Committed {
		t.Fatalf("resume: %+v %v", res, err)
	}
	if _, sum2, err := commit.Read(ctx, resumed.Bucket, layout.RolloutDir("t", 0)); err != nil || sum2 != sum {
		t.Errorf("the resumed rollout's manifest differs from the uninterrupted one's (%v)", err)
	}
}
