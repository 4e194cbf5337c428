package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNegativeIterationsRejected(t *testing.T) {
	store := t.TempDir()
	for _, args := range [][]string{
		{"run-stage", "rollout", "--iter", "-1"},
		{"run-stage", "rollout", "--iter", "3", "--step", "-2"},
		{"run-stage", "normalize", "--iter", "-1"},
		{"run-stage", "learn", "--iter", "-1"},
		{"run-stage", "evaluate", "--step", "-2"},
		{"run", "--iters", "-5"},
		{"run", "--eval-every", "-2"},
		{"import", "x.jsonl", "--iter", "-1"},
		{"jobs", "render", "--stage", "rollout", "--iter", "-1"},
		{"jobs", "render", "--iteration", "-1"},
	} {
		bad := args[len(args)-2] + " " + args[len(args)-1]
		_, _, err := execute(t, append([]string{"-q", "--store", store}, args...)...)
		if err == nil || !strings.Contains(err.Error(), bad+": must be ≥ 0") {
			t.Errorf("%s: want an error saying %s must be ≥ 0, got %v", strings.Join(args, " "), bad, err)
		}
	}
	// A stage of one iteration must be told which: left out, it silently meant iteration 0.
	for _, stage := range []string{"rollout", "normalize", "learn"} {
		_, _, err := execute(t, "-q", "--store", store, "run-stage", stage)
		if want := stage + ": --iter N is required"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("run-stage %s without --iter: %v, want %q", stage, err, want)
		}
	}
	if entries, _ := os.ReadDir(store); len(entries) > 0 {
		t.Errorf("a rejected command wrote to the store: %v", entries)
	}
}

func TestNegativeIterationWithTasksFileDoesNotPanic(t *testing.T) {
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.jsonl")
	if err := os.WriteFile(tasks, []byte(`{"id":"a","question":"1+1","answer":"2"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DRMAS_TASKS_SOURCE", tasks)
	_, _, err := execute(t, "-q", "--store", filepath.Join(dir, "store"), "run-stage", "rollout", "--iter", "-3")
	if err == nil || !strings.Contains(err.Error(), "--iter -3") {
		t.Fatalf("want an error naming --iter -3, got %v", err)
	}
}

func TestUnknownSubcommandFails(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"run-stage rolout", `unknown command "rolout" for "drmas run-stage": did you mean rollout?`},
		{"config shw", `unknown command "shw" for "drmas config": did you mean show?`},
		{"jobs rendr", `unknown command "rendr" for "drmas jobs": did you mean render?`},
		{"rnu", `unknown command "rnu" for "drmas": did you mean run?`},
		{"jobs xyzzy", `unknown command "xyzzy" for "drmas jobs": see 'drmas jobs --help'`},
		// With the subcommand's flags after it, the typo is still what is reported.
		{"run-stage rolout --iter 0", `unknown command "rolout" for "drmas run-stage": did you mean rollout?`},
		{"config shw --format json", `unknown command "shw" for "drmas config": did you mean show?`},
		{"jobs rendr --stage rollout --iter 0", `unknown command "rendr" for "drmas jobs": did you mean render?`},
		{"rnu --iters 3", `unknown command "rnu" for "drmas": did you mean run?`},
	} {
		out, _, err := execute(t, strings.Fields(tc.args)...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("drmas %s: want error %q, got %v", tc.args, tc.want, err)
		}
		if out != "" {
			t.Errorf("drmas %s printed help for an unknown command:\n%s", tc.args, out)
		}
	}
	// An unknown flag with no subcommand is still an unknown flag, in a group and below it.
	for _, args := range []string{"--bogus", "run-stage --bogus", "run-stage rollout --bogus"} {
		if _, _, err := execute(t, strings.Fields(args)...); err == nil || err.Error() != "unknown flag: --bogus" {
			t.Errorf("drmas %s: want error %q, got %v", args, "unknown flag: --bogus", err)
		}
	}
	// A misspelt flag names the nearest ones.
	for _, tc := range []struct{ args, want string }{
		{"run --iter 3", "unknown flag: --iter (did you mean --iters? see 'drmas run --help')"},
		{"run-stage rollout --iters 3", "unknown flag: --iters (did you mean --iter? see 'drmas run-stage rollout --help')"},
		{"run-stage normalize --iter 0 --estimater drmas", "unknown flag: --estimater (did you mean --estimator? see 'drmas run-stage normalize --help')"},
		{"jobs render --paralelism 4", "unknown flag: --paralelism (did you mean --parallelism? see 'drmas jobs render --help')"},
		// A short name suggests only what is near for its length (not --k for --sq).
		{"analyze --sq x", "unknown flag: --sq (did you mean --sql? see 'drmas analyze --help')"},
	} {
		if _, _, err := execute(t, strings.Fields(tc.args)...); err == nil || err.Error() != tc.want {
			t.Errorf("drmas %s: want error %q, got %v", tc.args, tc.want, err)
		}
	}
	// Alone, a command that groups others prints its help and succeeds.
	out, _, err := execute(t, "run-stage")
	if err != nil || !strings.Contains(out, "rollout") {
		t.Fatalf("drmas run-stage: %v\n%s", err, out)
	}
}

func TestRunChecksTasksFileBeforeWarmup(t *testing.T) {
	store := t.TempDir()
	t.Setenv("DRMAS_TASKS_SOURCE", filepath.Join(t.TempDir(), "missing.jsonl"))
	// Keep the warm-up short, for when the check is missing and it runs.
	t.Setenv("DRMAS_WARMUP_STEPS", "1")
	t.Setenv("DRMAS_WARMUP_DEMOS", "1")
	t.Setenv("DRMAS_TASKS_EVAL_SIZE", "0")
	_, _, err := execute(t, "-q", "--store", store, "run")
	if err == nil || !strings.HasPrefix(err.Error(), "tasks.source: open ") || !strings.Contains(err.Error(), "missing.jsonl") {
		t.Fatalf("want a tasks.source error naming the file, got %v", err)
	}
	if entries, _ := os.ReadDir(store); len(entries) > 0 {
		t.Errorf("work started before the tasks file was checked: %v", entries)
	}
}

func TestUnknownEnvWarned(t *testing.T) {
	t.Setenv("DRMAS_LEARN_LRR", "1")
	t.Setenv("DRMAS_LEARNER_ENGINE", "cpu")
	t.Setenv("DRMAS_SHARD_COUNT", "2")
	_, errOut, err := execute(t, "config", "show")
	if err != nil {
		t.Fatal(err)
	}
	if want := "drmas: warning: DRMAS_LEARN_LRR sets no config key: ignored (did you mean DRMAS_LEARN_LR?)\n"; !strings.Contains(errOut, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut)
	}
	if strings.Contains(errOut, "DRMAS_LEARNER_ENGINE") || strings.Contains(errOut, "DRMAS_SHARD_COUNT") {
		t.Errorf("warned about a variable that is not a config key:\n%s", errOut)
	}
}

func TestBadEnvValueBlamesTheVariable(t *testing.T) {
	t.Setenv("DRMAS_LEARN_LR", "abc")
	p := filepath.Join(t.TempDir(), "cfg.yaml")
	if err := os.WriteFile(p, []byte("run: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := execute(t, "--config", p, "config", "show")
	if want := `DRMAS_LEARN_LR="abc": learn.lr: not a decimal number (e.g. 0.001 or 1e-3)`; err == nil || err.Error() != want {
		t.Fatalf("want %q, got %v", want, err)
	}
}

// TestSeedFlagReadAsWritten: --seed is decimal, as the config and DRMAS_SEED are (a Uint64
// flag parsed Go syntax: --seed 010 was seed 8, --seed 0x10 seed 16).
func TestSeedFlagReadAsWritten(t *testing.T) {
	for arg, want := range map[string]string{
		"010":  `--seed "010": a leading zero makes it octal: write 10`,
		"0x10": `--seed "0x10": not an integer: write decimal digits`,
		"-1":   `--seed "-1": not an integer ≥ 0`,
	} {
		if _, _, err := execute(t, "--seed", arg, "config", "show"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--seed %s: want %q, got %v", arg, want, err)
		}
	}
	out, _, err := execute(t, "--seed", "18446744073709551615", "config", "show")
	if err != nil || !strings.Contains(out, "\nseed: 18446744073709551615\n") {
		t.Errorf("largest seed: %v\n%s", err, out)
	}
}

// TestBadEngineSettingRefusedUpFront: a DRMAS_LEARNER_ENGINE that the learner would refuse is
// refused before anything runs, not after warm-up, rollout and normalize.
func TestBadEngineSettingRefusedUpFront(t *testing.T) {
	store := t.TempDir()
	t.Setenv("DRMAS_LEARNER_ENGINE", "foo")
	_, _, err := execute(t, "-q", "--store", store, "run", "--iters", "1")
	if err == nil || !strings.Contains(err.Error(), `DRMAS_LEARNER_ENGINE="foo": want auto, cpu or gpu`) {
		t.Fatalf("run with a bad engine setting: %v", err)
	}
	if entries, _ := os.ReadDir(store); len(entries) > 0 {
		t.Errorf("the refused run wrote to the store: %v", entries)
	}
}

// TestBadFlagsRefusedBeforeWork: a flag value that a library would refuse after the run is
// synced, silently replace by its default, or ignore in the mode given is refused first, by
// name, and nothing is written.
func TestBadFlagsRefusedBeforeWork(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store") // does not exist: the flag must be refused before it is opened
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"analyze", "--report", "gradnorm", "--k", "NaN"}, "analyze: --k NaN: want a finite number > 0"},
		{[]string{"analyze", "--report", "gradnorm", "--k", "0"}, "analyze: --k 0: want a finite number > 0"},
		{[]string{"analyze", "--report", "gradnorm", "--window", "0"}, "analyze: --window 0: want a number of iterations ≥ 1"},
		{[]string{"analyze", "--report", "bogus"}, `analyze: unknown report "bogus"`},
		{[]string{"analyze", "--sql", " "}, "analyze: --sql is empty"},
		{[]string{"report", "--k", "-1"}, "report: --k -1: want a finite number > 0"},
		{[]string{"report", "--window", "-2"}, "report: --window -2: want a number of iterations ≥ 1"},
		{[]string{"report", "--ablation", "bogus"}, `report: --ablation "bogus": want replay or onpolicy`},
		{[]string{"report", "-o", dir}, "report: -o " + dir + " is a folder"},
		{[]string{"report", "-o", filepath.Join(dir, "no", "r.html")}, "no such file or directory"},
		{[]string{"report", "-o", ""}, "report: -o is empty"},
		{[]string{"serve", "--max-batch", "0"}, "--max-batch 0: must be ≥ 1"},
		{[]string{"serve", "--window", "-1s"}, "--window -1s: must be > 0"},
		{[]string{"serve", "--poll", "0s"}, "--poll 0: must be > 0"},
		{[]string{"serve", "--max-prefill", "0"}, "--max-prefill 0: must be ≥ 1, or negative"},
		{[]string{"serve", "--stream-backlog", "0"}, "--stream-backlog 0: must be ≥ 1"},
		{[]string{"serve", "--write-timeout", "0s"}, "--write-timeout 0s: must be > 0"},
		{[]string{"ablate", "--estimators", ","}, `ablate: --estimators "," names no estimator`},
		{[]string{"ablate", "--eval-every", "2"}, "ablate: --eval-every applies to --mode onpolicy"},
		{[]string{"ablate", "--mode", "onpolicy", "--eval-every", "-1"}, "ablate: --eval-every -1: must be ≥ 0"},
		{[]string{"ablate", "--mode", "onpolicy", "--eval"}, "ablate: --eval applies to --mode replay"},
		{[]string{"import"}, "import: give one FILE to import (JSONL or Parquet), not 0"},
	} {
		_, _, err := execute(t, append([]string{"-q", "--store", store}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error containing %q, got %v", strings.Join(c.args, " "), c.want, err)
		}
	}
	if _, err := os.Stat(store); !os.IsNotExist(err) {
		t.Errorf("a rejected command created the store: %v", err)
	}
}

// --cache=~/x gets no shell expansion (the shell expands ~ only at the start of a word): it
// must not create a folder named "~" in the working folder.
func TestCacheTildeRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	traj := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(traj, []byte(`{"uid":"q","traj_uid":"q-0","agent":"solver","step":0,"score":1}`+"\n"+
		`{"uid":"q","traj_uid":"q-1","agent":"solver","step":0,"score":0}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "store")
	if _, _, err := execute(t, "-q", "--store", store, "--run", "r", "import", traj, "--iter", "0"); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"analyze"}, {"report", "-o", filepath.Join(dir, "r.html")}} {
		args := append([]string{"-q", "--store", store, "--run", "r"}, cmd...)
		_, _, err := execute(t, append(args, "--cache=~/drmas-cache")...)
		if err == nil || !strings.Contains(err.Error(), "~ is not expanded") {
			t.Errorf("%s --cache=~/drmas-cache: %v, want an error saying ~ is not expanded", cmd[0], err)
		}
		if _, err := os.Stat(filepath.Join(dir, "~")); err == nil {
			t.Fatalf("%s --cache=~/drmas-cache created a folder named ~", cmd[0])
		}
	}
}
