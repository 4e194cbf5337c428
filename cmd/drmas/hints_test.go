package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/commit"
)

func TestCompleteHints(t *testing.T) {
	args := [][2]string{{"--config", "my runs/a.yaml"}, {"--run", "r1"}}
	for _, c := range []struct{ in, want string }{
		{"normalize iteration 3: rollout is not committed (run `drmas run-stage rollout --iter 3` first)",
			"normalize iteration 3: rollout is not committed (run `drmas run-stage rollout --iter 3 --config 'my runs/a.yaml' --run r1` first)"},
		// A flag the hint gives already is not repeated; two hints are both completed.
		{"run `drmas ablate --run r1 --mode x` or `drmas run --iters 2`",
			"run `drmas ablate --run r1 --mode x --config 'my runs/a.yaml'` or `drmas run --iters 2 --config 'my runs/a.yaml' --run r1`"},
		{"see `drmas report --run=r2`", "see `drmas report --run=r2 --config 'my runs/a.yaml'`"},
		// Quoted text that is not a drmas command, and an unpaired backquote, are left alone.
		{"key `store` is empty; run `drmas", "key `store` is empty; run `drmas"},
		{"no hint", "no hint"},
	} {
		if got := completeHints(c.in, args); got != c.want {
			t.Errorf("completeHints(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
	if got := completeHints("run `drmas run-stage warmup` first", nil); got != "run `drmas run-stage warmup` first" {
		t.Errorf("no flags given: %q", got)
	}
	for in, want := range map[string]string{"s3://b/p": "s3://b/p", "a b": "'a b'", "it's": `'it'\''s'`, "": "''", "x$y": "'x$y'"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSuggestedCommandsRepeatThePlace: a stage that fails for want of an earlier stage
// suggests the command to run with the --store and --run it was given, and the error still
// matches what the stage's error matched.
func TestSuggestedCommandsRepeatThePlace(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	_, _, err := execute(t, "run-stage", "normalize", "--iter", "0", "--store", store, "--run", "r1", "-q")
	want := "(run `drmas run-stage rollout --iter 0 --store " + store + " --run r1` first)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want it to contain %q", err, want)
	}
	if !errors.Is(err, commit.ErrNotCommitted) {
		t.Fatalf("the completed error no longer matches commit.ErrNotCommitted: %v", err)
	}
	// --seed sets the config's seed: a stage run without it would not be this run's.
	_, _, err = execute(t, "--seed", "5", "run-stage", "normalize", "--iter", "0", "--store", store, "--run", "r1", "-q")
	want = "(run `drmas run-stage rollout --iter 0 --store " + store + " --run r1 --seed 5` first)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want it to contain %q", err, want)
	}
	// Without the flags, the hint is as the stage wrote it.
	t.Setenv("DRMAS_STORE", store)
	_, _, err = execute(t, "run-stage", "normalize", "--iter", "0", "-q")
	if err == nil || !strings.Contains(err.Error(), "(run `drmas run-stage rollout --iter 0` first)") {
		t.Fatalf("error %v", err)
	}
}
