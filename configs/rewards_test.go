package configs

import (
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/workflows"
)

// The reward designs load from a file and the environment, reach the workflow, and are left out
// of a config's JSON (and so of every digest) while unset.
func TestRewardDesignKeys(t *testing.T) {
	p := write(t, "c.yaml", `workflow:
  verifier_reward: verdict
  format_penalty: {verifier: 0.5}
  step_cost: 0.1
`)
	env := func(k string) (string, bool) {
		if k == "DRMAS_WORKFLOW_VERDICT_SHARE" {
			return "0.25", true
		}
		return "", false
	}
	c, err := Load(LoadOptions{File: p, LookupEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Workflow
	if w.VerifierReward != "verdict" || w.VerdictShare != 0.25 || w.FormatPenalty["verifier"] != 0.5 || w.StepCost != 0.1 {
		t.Fatalf("workflow %+v", w)
	}
	wf, err := c.NewWorkflow()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := wf.NewEpisode(workflows.Task{ID: "t", Question: "1+1", Answer: "2"}).(workflows.TurnScorer); !ok {
		t.Error("the configured reward design does not reach the workflow's episodes")
	}
	for _, key := range []string{"verifier_reward", "verdict_share", "format_penalty", "step_cost", "router_reward", "searcher_reward", "critic_reward"} {
		if strings.Contains(string(mustJSON(Default().Workflow)), key) {
			t.Errorf("the default workflow's JSON names %s: digests of existing runs would change", key)
		}
	}

	bad := write(t, "b.yaml", "workflow: {verifier_reward: judge, format_penalty: {router: 1}}\n")
	_, err = Load(LoadOptions{File: bad, LookupEnv: noEnv})
	if err == nil || !strings.Contains(err.Error(), `workflow.verifier_reward: "judge", want outcome or verdict`) {
		t.Errorf("bad verifier_reward: %v", err)
	}
}

// The search job rewards load, reach the episodes, and a bad value or a workflow without the
// agent is refused by key.
func TestSearchJobRewardKeys(t *testing.T) {
	p := write(t, "c.yaml", `workflow: {name: search, router_reward: decision, searcher_reward: retrieval}
agents: {router: {model: m1}, searcher: {model: m1}, answerer: {model: m1}}
`)
	c, err := Load(LoadOptions{File: p, LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if c.Workflow.RouterReward != "decision" || c.Workflow.SearcherReward != "retrieval" {
		t.Fatalf("workflow %+v", c.Workflow)
	}
	wf, err := c.NewWorkflow()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := wf.NewEpisode(wf.Tasks(1, workflows.Train, 1)[0]).(workflows.TurnScorer); !ok {
		t.Error("the job rewards do not reach the workflow's episodes")
	}
	_, err = Load(LoadOptions{File: write(t, "b.yaml", "workflow: {router_reward: decision}\n"), LookupEnv: noEnv})
	if err == nil || !strings.Contains(err.Error(), "router_reward: decision: workflow math has no router") {
		t.Errorf("router_reward on math: %v", err)
	}
	_, err = Load(LoadOptions{File: write(t, "d.yaml", "workflow: {name: search, searcher_reward: recall}\n"), LookupEnv: noEnv})
	if err == nil || !strings.Contains(err.Error(), `workflow.searcher_reward: "recall", want outcome or retrieval`) {
		t.Errorf("bad searcher_reward: %v", err)
	}
}

// workflow.critic_reward loads and reaches a math_critic team's episodes; a bad value, or the
// key on a workflow without a critic, is refused by key.
func TestCriticRewardKey(t *testing.T) {
	p := write(t, "c.yaml", `workflow: {name: math_critic, critic_reward: verdict}
agents: {solver: {model: m1}, critic: {model: m1}, refiner: {model: m1}, verifier: {model: m1}}
`)
	c, err := Load(LoadOptions{File: p, LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := c.NewWorkflow()
	if err != nil {
		t.Fatal(err)
	}
	if c.Workflow.CriticReward != "verdict" || wf.Name() != workflows.MathCriticName {
		t.Fatalf("workflow %+v", c.Workflow)
	}
	if _, ok := wf.NewEpisode(wf.Tasks(1, workflows.Train, 1)[0]).(workflows.TurnScorer); !ok {
		t.Error("the critic reward does not reach the workflow's episodes")
	}
	_, err = Load(LoadOptions{File: write(t, "b.yaml", "workflow: {critic_reward: verdict}\n"), LookupEnv: noEnv})
	if err == nil || !strings.Contains(err.Error(), "critic_reward: verdict: workflow math has no critic") {
		t.Errorf("critic_reward on math: %v", err)
	}
	_, err = Load(LoadOptions{File: write(t, "d.yaml", "workflow: {name: math_critic, critic_reward: judge}\n"), LookupEnv: noEnv})
	if err == nil || !strings.Contains(err.Error(), `workflow.critic_reward: "judge", want outcome or verdict`) {
		t.Errorf("bad critic_reward: %v", err)
	}
	// The team's agents must all be mapped: the default's two are not enough.
	_, err = Load(LoadOptions{File: write(t, "e.yaml", "workflow: {name: math_critic}\n"), LookupEnv: noEnv})
	if err == nil || !strings.Contains(err.Error(), "agents.critic, agents.refiner") {
		t.Errorf("math_critic without its agents: %v", err)
	}
}

// workflow.verifier_check loads, reaches the workflow's episodes, is left out of the default's
// JSON (digests of existing runs keep), and a bad value is one line naming the key.
func TestVerifierCheckKey(t *testing.T) {
	c, err := Load(LoadOptions{File: write(t, "c.yaml", "workflow: {verifier_check: digits}\n"), LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := c.NewWorkflow()
	if err != nil {
		t.Fatal(err)
	}
	ep := wf.NewEpisode(workflows.Task{ID: "t", Question: "74+58", Answer: "231"})
	ep.Next()
	ep.Act("ans 231")
	ep.Next()
	if !ep.Act("231 yyy") {
		t.Error(`verifier_check: digits did not reach the episode: "231 yyy" invalid`)
	}
	if strings.Contains(string(mustJSON(Default().Workflow)), "verifier_check") {
		t.Error("the default workflow's JSON names verifier_check: digests of existing runs would change")
	}
	_, err = Load(LoadOptions{File: write(t, "b.yaml", "workflow: {verifier_check: marks}\n"), LookupEnv: noEnv})
	if err == nil || !strings.Contains(err.Error(), `workflow.verifier_check: "marks", want answer, digits or recompute`) || strings.Count(err.Error(), "\n") != 0 {
		t.Errorf("bad verifier_check: %v", err)
	}
}
