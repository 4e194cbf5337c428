package configs

import (
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/workflows"
)

// TestNewWorkflowPaperFormat: an agent whose model is a Hugging Face model gets the paper's
// prompt format and an agent of a built-in model the compact one, in the same workflow.
func TestNewWorkflowPaperFormat(t *testing.T) {
	for _, c := range []struct {
		yaml           string
		solver, verify bool // paper format
	}{
		{"agents:\n  solver: {model: m1}\n  verifier: {model: m1}\n", false, false},
		{"models:\n  m1: {dim: 64, layers: 3, heads: 4, context: 128, ff_mult: 4}\n  qwen: {hf: /models/qwen3}\nagents:\n  solver: {model: qwen}\n  verifier: {model: m1}\n", true, false},
		{"models:\n  m1: {dim: 64, layers: 3, heads: 4, context: 128, ff_mult: 4}\n  qwen: {hf: /models/qwen3, lora: {r: 4}}\nagents:\n  solver: {model: m1}\n  verifier: {model: qwen}\n", false, true},
	} {
		cfg, err := Load(LoadOptions{File: write(t, "c.yaml", c.yaml)})
		if err != nil {
			t.Fatal(err)
		}
		wf, err := cfg.NewWorkflow()
		if err != nil {
			t.Fatal(err)
		}
		ep := wf.NewEpisode(workflows.Task{Question: "12+7", Answer: "19"})
		solver, _ := ep.Next()
		ep.Act(`\boxed{19}`)
		verifier, _ := ep.Next()
		paper := func(p string) bool { return strings.HasPrefix(p, "You are a member of a team") }
		if paper(solver.Prompt) != c.solver || paper(verifier.Prompt) != c.verify {
			t.Errorf("%s: solver prompt %q, verifier prompt %q", c.yaml, solver.Prompt, verifier.Prompt)
		}
	}
}
