package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestEvaluatePrintsF1: run-stage evaluate prints the answers' F1 after pass@k for the search
// workflow, and nothing in its place for math (which has none); math's line has the verifier's
// accept rates instead, and search's (no verifier) does not.
func TestEvaluatePrintsF1(t *testing.T) {
	t.Setenv("DRMAS_WARMUP_STEPS", "1")
	t.Setenv("DRMAS_TASKS_EVAL_SIZE", "2")
	t.Setenv("DRMAS_EVALUATE_K", "1")
	for _, c := range []struct {
		config string
		f1     bool
	}{{"", false}, {"../../configs/search.yaml", true}} {
		args := []string{"-q", "--store", t.TempDir(), "--run", "f1"}
		if c.config != "" {
			args = append(args, "--config", filepath.FromSlash(c.config))
		}
		if _, _, err := execute(t, append(args, "run-stage", "warmup")...); err != nil {
			t.Fatal(err)
		}
		out, _, err := execute(t, append(args, "run-stage", "evaluate")...)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		for _, l := range lines {
			if !strings.Contains(l, " pass@1=") || strings.Contains(l, " f1=") != c.f1 {
				t.Errorf("config %q: line %q, want pass@1 and an f1 %v", c.config, l, c.f1)
			}
			if strings.Contains(l, " verifier accept correct=") == c.f1 || strings.Contains(l, " wrong=") == c.f1 {
				t.Errorf("config %q: line %q, want verifier accept rates %v", c.config, l, !c.f1)
			}
		}
		if len(lines) < 2 {
			t.Errorf("config %q: %q, want a line per data source and all", c.config, out)
		}
	}
}
