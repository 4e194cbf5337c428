package configs

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/workflows"
	"github.com/drmas-dev/drmas/workflows/program"
)

// TestProgramWorkflowKeys: a program config loads with its keys, its agents and the config
// file's folder; each bad or missing setting is reported by key; the keys are refused with
// another workflow; and unset they leave the digest of a config as it was.
func TestProgramWorkflowKeys(t *testing.T) {
	good := "workflow: {name: program, command: [node, team.mjs], timeout: 30s, max_calls: 5, failure_reward: -1, reward: math}\n" +
		"agents:\n  planner: {model: m1}\n  coder: {model: m1}\nwarmup: {steps: 0}\nevaluate: {every: 0}\n"
	file := write(t, "team.yaml", good)
	c, err := Load(LoadOptions{File: file, LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := c.NewWorkflow()
	if err != nil {
		t.Fatal(err)
	}
	o := wf.(*program.Workflow).Options()
	if o.Dir != filepath.Dir(file) || !slices.Equal(o.Command, []string{"node", "team.mjs"}) || o.Timeout != 30*time.Second ||
		o.MaxCalls != 5 || *o.FailureReward != -1 || o.Reward != workflows.RewardMath || o.Concurrency != workflows.DefaultProgramConcurrency ||
		!slices.Equal(wf.Agents(), []string{"coder", "planner"}) {
		t.Errorf("options %+v, agents %v", o, wf.Agents())
	}
	def := Default()
	for name, c := range map[string]struct{ body, want string }{
		"nocmd.yaml":  {"workflow: {name: program}\nwarmup: {steps: 0}\nevaluate: {every: 0}\n", "workflow.command: empty"},
		"warm.yaml":   {"workflow: {name: program, command: [x]}\nevaluate: {every: 0}\n", fmt.Sprintf("warmup.steps: %d, want 0 with workflow program", def.Warmup.Steps)},
		"eval.yaml":   {"workflow: {name: program, command: [x]}\nwarmup: {steps: 0}\n", fmt.Sprintf("evaluate.every: %d, want 0 with workflow program", def.Evaluate.Every)},
		"limits.yaml": {"workflow: {name: program, command: [x], concurrency: 999, max_calls: -1, reward: vibes}\nwarmup: {steps: 0}\nevaluate: {every: 0}\n", "workflow.concurrency: 999, want 1..256"},
		"other.yaml":  {"workflow: {name: math, command: [x]}\n", "are for workflow.name: program, not \"math\""},
	} {
		_, err := Load(LoadOptions{File: write(t, name, c.body), LookupEnv: noEnv})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want %q, got %v", name, c.want, err)
		}
		if name == "limits.yaml" && (err == nil || !strings.Contains(err.Error(), "workflow.max_calls: -1") || !strings.Contains(err.Error(), `workflow.reward: "vibes"`)) {
			t.Errorf("limits: %v", err)
		}
	}
	// The default config's digest is the one it had before the program keys existed.
	d, err := Load(LoadOptions{LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if js, _ := json.Marshal(d.Workflow); strings.Contains(string(js), "command") || strings.Contains(string(js), "reward") ||
		Digest(d.Workflow) != Digest(struct {
			Name         string  `json:"name"`
			MaxLoop      int     `json:"max_loop"`
			MaxSteps     int     `json:"max_steps"`
			TopK         int     `json:"top_k"`
			HardFrac     float64 `json:"hard_frac"`
			CorpusSeed   uint64  `json:"corpus_seed"`
			CorpusPeople int     `json:"corpus_people"`
		}{"math", 2, 4, 1, 0.3, 1, 200}) {
		t.Errorf("unset program keys enter the digested form: %s", js)
	}
}
