package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func rows(t *testing.T, cfg string, noise float64, iter int) []row {
	t.Helper()
	var buf bytes.Buffer
	if err := run(&buf, cfg, noise, iter); err != nil {
		t.Fatal(err)
	}
	var out []row
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var r row
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// With noise 0 every episode of the critic team is solver, critic, refiner, verifier, all
// valid and all scoring 1; with noise the critic's rows score its verdicts, so some differ from
// their episode's outcome, while the other agents' rows score the outcome. The output is the
// same bytes for the same inputs, and tasks.per_iteration × rollout.group_size trajectories.
func TestExpertRollouts(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte(`workflow: {name: math_critic, verifier_check: recompute, critic_reward: verdict}
agents: {solver: {model: m1}, critic: {model: m1}, refiner: {model: m1}, verifier: {model: m1}}
tasks: {per_iteration: 6}
rollout: {group_size: 4}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	clean := rows(t, cfg, 0, 0)
	trajs := map[string][]string{}
	for _, r := range clean {
		trajs[r.TrajUID] = append(trajs[r.TrajUID], r.Agent)
		if !r.Valid || r.Score != 1 || r.EpisodeReward != 1 || !strings.HasPrefix(r.PromptText, r.Agent+"\n") {
			t.Fatalf("noise 0: %+v", r)
		}
	}
	if len(trajs) != 24 {
		t.Fatalf("%d trajectories, want 6 × 4", len(trajs))
	}
	for id, agents := range trajs {
		if strings.Join(agents, " ") != "solver critic refiner verifier" {
			t.Fatalf("%s: agents %v", id, agents)
		}
	}
	noisy := rows(t, cfg, 0.5, 1)
	differs := 0
	for _, r := range noisy {
		switch {
		case r.Agent == "critic" && r.Score != r.EpisodeReward:
			differs++
		case r.Agent != "critic" && r.Score != r.EpisodeReward:
			t.Fatalf("a %s row scores %v in an episode with outcome %v", r.Agent, r.Score, r.EpisodeReward)
		}
	}
	if differs == 0 {
		t.Error("no critic row scores its verdict rather than the outcome")
	}
	var a, b bytes.Buffer
	if err := run(&a, cfg, 0.5, 1); err != nil {
		t.Fatal(err)
	}
	if err := run(&b, cfg, 0.5, 1); err != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("two runs differ (%v)", err)
	}
	if err := run(&a, cfg, 1.5, 0); err == nil || !strings.Contains(err.Error(), "-noise 1.5: want 0..1") {
		t.Errorf("bad noise: %v", err)
	}
}
