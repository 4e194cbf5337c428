package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// tinyCriticConfig is the smallest math_critic run: the four-agent team on one tiny model, two
// iterations, an evaluation at each step.
const tinyCriticConfig = `run: t
seed: 3
iterations: 2
workflow: {name: math_critic, max_loop: 2, verifier_check: recompute, critic_reward: verdict}
tasks: {per_iteration: 4, eval_size: 4}
models:
  m1: {dim: 16, layers: 1, heads: 2, context: 96, ff_mult: 2, tied_head: true}
agents:
  solver: {model: m1}
  critic: {model: m1}
  refiner: {model: m1}
  verifier: {model: m1}
rollout: {group_size: 4, parts: 1, max_tokens: 8}
warmup: {steps: 100, batch: 16, demos: 100, lr: 3.0e-3}
evaluate: {every: 1, k: 2}
learn: {micro_batch: 16}
`

// TestRunMathCritic: `drmas run` trains the four-agent team through the real pipeline (warm-up
// on its demonstrations, rollout, normalize, learn, evaluate), and `drmas analyze --report
// condition` reports the condition for each of its agents. The critic's rows score their
// verdicts (1, 0, or −0.1 when invalid), not the episode outcome its teammates score: some
// critic row scores 1 in an episode that failed (its solver row 0 or −0.1) or 0 in one that
// succeeded, which the outcome reward cannot give, while the solver's and the refiner's rows of
// an episode differ by at most the invalid-action penalty.
func TestRunMathCritic(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte(tinyCriticConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "store")
	if _, errOut, err := execute(t, "-q", "--config", cfg, "--store", store, "run"); err != nil {
		t.Fatalf("drmas run: %v\n%s", err, errOut)
	}
	out, errOut, err := execute(t, "-q", "--config", cfg, "--store", store, "analyze", "--report", "condition", "--format", "json")
	if err != nil {
		t.Fatalf("analyze: %v\n%s", err, errOut)
	}
	var rows []struct {
		Agent      string `json:"agent"`
		Iterations int64  `json:"iterations"`
		Groups     int64  `json:"groups"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("condition report %q: %v", out, err)
	}
	var agents []string
	for _, r := range rows {
		agents = append(agents, r.Agent)
		if r.Iterations != 2 || r.Groups != 8 {
			t.Errorf("agent %s: %d iterations, %d groups; want 2 and 8 (4 prompts × 2 iterations)", r.Agent, r.Iterations, r.Groups)
		}
	}
	if got, want := agents, []string{"critic", "refiner", "solver", "verifier"}; len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("condition report agents %v, want %v", got, want)
	}
	const q = `SELECT
  count(*) FILTER (WHERE round(c.score, 6) NOT IN (1, 0, -0.1)) AS bad_critic,
  count(*) FILTER (WHERE round(c.score, 6) = 1 AND round(s.score, 6) IN (0, -0.1)
    OR round(c.score, 6) = 0 AND round(s.score, 6) IN (1, 0.9)) AS critic_differs,
  (SELECT count(*) FROM rollouts s2 JOIN rollouts r2 USING (iteration, traj_uid)
    WHERE s2.agent = 'solver' AND r2.agent = 'refiner' AND round(abs(s2.score - r2.score), 6) NOT IN (0, 0.1)) AS outcome_differs
FROM rollouts c JOIN rollouts s USING (iteration, traj_uid)
WHERE c.agent = 'critic' AND s.agent = 'solver'`
	out, errOut, err = execute(t, "-q", "--config", cfg, "--store", store, "analyze", "--sql", q, "--format", "json")
	if err != nil {
		t.Fatalf("analyze --sql: %v\n%s", err, errOut)
	}
	var counts []struct {
		Bad     int64 `json:"bad_critic"`
		Differs int64 `json:"critic_differs"`
		Outcome int64 `json:"outcome_differs"`
	}
	if err := json.Unmarshal([]byte(out), &counts); err != nil || len(counts) != 1 {
		t.Fatalf("counts %q: %v", out, err)
	}
	if c := counts[0]; c.Bad != 0 || c.Differs == 0 || c.Outcome != 0 {
		t.Errorf("critic scores outside {1, 0, −0.1}: %d; critic rows unlike their solver's: %d (want > 0); refiner rows unlike their solver's beyond a penalty: %d (want 0)", c.Bad, c.Differs, c.Outcome)
	}
}
