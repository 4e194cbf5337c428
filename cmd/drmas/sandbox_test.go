package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/analysis/analysistest"
)

// TestAnalyzeSandbox: --sandbox (or analyze.sandbox through DRMAS_ANALYZE_SANDBOX) refuses a
// COPY … TO that the default runs, and --timeout stops a long query naming the flag.
func TestAnalyzeSandbox(t *testing.T) {
	store, _ := analysistest.Store(t)
	dir := t.TempDir()
	args := func(out string, extra ...string) []string {
		return append([]string{"-q", "--store", store, "--run", analysistest.Run, "analyze", "--cache", filepath.Join(dir, "cache"),
			"--sql", "COPY (SELECT agent FROM rollouts) TO '" + filepath.Join(dir, out) + "'"}, extra...)
	}
	if _, _, err := execute(t, args("plain.csv")...); err != nil {
		t.Fatalf("default: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "plain.csv")); err != nil {
		t.Fatalf("default COPY wrote nothing: %v", err)
	}
	_, _, err := execute(t, args("boxed.csv", "--sandbox")...)
	if err == nil || !strings.Contains(err.Error(), "refused in the sandbox (analyze --sandbox): ") || !strings.Contains(err.Error(), "boxed.csv") {
		t.Fatalf("--sandbox: %v", err)
	}
	t.Setenv("DRMAS_ANALYZE_SANDBOX", "true")
	if _, _, err := execute(t, args("env.csv")...); err == nil || !strings.Contains(err.Error(), "refused in the sandbox") {
		t.Fatalf("analyze.sandbox: %v", err)
	}
	for _, f := range []string{"boxed.csv", "env.csv"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("the sandbox wrote %s: %v", f, err)
		}
	}
	_, _, err = execute(t, "-q", "--store", store, "--run", analysistest.Run, "analyze", "--cache", filepath.Join(dir, "cache"),
		"--timeout", "200ms", "--sql", "SELECT count(*) FROM range(1000000000000) a WHERE a.range % 7 = 3")
	if err == nil || !strings.Contains(err.Error(), "ran past --timeout 200ms") {
		t.Fatalf("--timeout: %v", err)
	}
}
