package reliability_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/storage/miniotest"
)

// prepared holds folder stores at each point of the stage sequence, built once with the binary:
// empty, after warmup, after rollout --iter 0, after normalize --iter 0, after learn --iter 0.
var (
	prepOnce sync.Once
	prepErr  error
	prepared = map[string]string{}
)

// sequence is the stage order the prepared states follow.
var sequence = []struct {
	name string
	args []string
}{
	{"warmup", []string{"run-stage", "warmup"}},
	{"rollout", []string{"run-stage", "rollout", "--iter", "0"}},
	{"normalize", []string{"run-stage", "normalize", "--iter", "0"}},
	{"learn", []string{"run-stage", "learn", "--iter", "0"}},
}

// prepare returns the folder store of the state after the named stage ("" = empty store). Do
// not modify it: copy it with copyDir.
func prepare(t testing.TB, after string) string {
	t.Helper()
	binary(t)
	prepOnce.Do(func() {
		prev := filepath.Join(workDir, "prepared", "empty")
		if prepErr = os.MkdirAll(prev, 0o755); prepErr != nil {
			return
		}
		prepared[""] = prev
		for _, s := range sequence {
			dir := filepath.Join(workDir, "prepared", s.name)
			if err := copyTree(prev, dir); err != nil {
				prepErr = err
				return
			}
			cmd := drmas(t, dir, s.args...)
			if out, err := cmd.CombinedOutput(); err != nil {
				prepErr = fmt.Errorf("prepare %s: %v\n%s", s.name, err, out)
				return
			}
			prepared[s.name] = dir
			prev = dir
		}
	})
	if prepErr != nil {
		t.Fatal(prepErr)
	}
	dir, ok := prepared[after]
	if !ok {
		t.Fatalf("no prepared state after %q", after)
	}
	return dir
}

// copyTree copies the folder src to dst.
func copyTree(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	return os.CopyFS(dst, os.DirFS(src))
}

// crashCase is one command to kill: it starts from a prepared state.
type crashCase struct {
	name   string
	from   string // prepared state
	args   []string
	prefix []string // folders whose committed files are compared; nil: everything
}

var crashCases = []crashCase{
	{"warmup", "", []string{"run-stage", "warmup"}, nil},
	{"rollout", "warmup", []string{"run-stage", "rollout", "--iter", "0"}, nil},
	{"normalize", "rollout", []string{"run-stage", "normalize", "--iter", "0"}, nil},
	{"learn", "normalize", []string{"run-stage", "learn", "--iter", "0"}, nil},
	{"evaluate", "warmup", []string{"run-stage", "evaluate"}, nil},
	{"run", "", []string{"run"}, nil},
}

// TestCrashAnywhere SIGKILLs each stage, and `drmas run`, at seeded random points spread over
// the command's uninterrupted duration, checks the store right after the kill (every committed
// folder verifies, LATEST loads), reruns the command to completion and checks that every
// committed file, manifest and LATEST is byte-identical to an uninterrupted run.
func TestCrashAnywhere(t *testing.T) {
	t.Parallel()
	trials := 20
	if testing.Short() {
		trials = 4
	}
	for _, c := range crashCases {
		t.Run(c.name, func(t *testing.T) {
			from := prepare(t, c.from)

			// Uninterrupted runs: the reference bytes (three runs must agree) and the duration
			// to spread kills over (the fastest of the three: the machine is shared).
			var want state
			var full time.Duration
			for i := 0; i < 3; i++ {
				clean := copyDir(t, from)
				start := time.Now()
				if out, err := drmas(t, clean, c.args...).CombinedOutput(); err != nil {
					t.Fatalf("uninterrupted %s: %v\n%s", c.name, err, out)
				}
				if d := time.Since(start); i == 0 || d < full {
					full = d
				}
				got := inspect(t, openDir(t, clean), "runs/")
				if len(got.Leftovers) > 0 {
					t.Fatalf("uninterrupted run left uncommitted objects: %v", got.Leftovers)
				}
				if i == 0 {
					want = got
				} else if d := diff(got.Committed, want.Committed); d != "" {
					t.Fatalf("two uninterrupted runs differ:\n%s", d)
				}
			}

			rng := rand.New(rand.NewPCG(2026, uint64(len(c.name))))
			// A trial is a kill that landed; a command that finished before its kill time
			// (the machine was quicker than the measurement) is checked and retried.
			landed, leftovers, attempts := 0, 0, 0
			for ; landed < trials && attempts < 4*trials; attempts++ {
				trial := landed
				store := copyDir(t, from)
				at := time.Duration(rng.Float64() * float64(full))
				cmd := drmas(t, store, c.args...)
				out := &lockedWriter{}
				cmd.Stdout, cmd.Stderr = out, out
				killed, err := killAt(cmd, at)
				if err != nil {
					t.Fatalf("trial %d (kill at %v): %v\n%s", trial, at, err, out)
				}
				if killed {
					landed++
				}
				// Right after the kill: nothing torn, LATEST loads.
				mid := inspect(t, openDir(t, store), "runs/")
				leftovers += len(mid.Leftovers)

				if out, err := drmas(t, store, c.args...).CombinedOutput(); err != nil {
					t.Fatalf("trial %d: rerun after a kill at %v: %v\n%s", trial, at, err, out)
				}
				got := inspect(t, openDir(t, store), "runs/")
				if d := diff(got.Committed, want.Committed); d != "" {
					t.Fatalf("trial %d: after a kill at %v (of %v) the rerun's outputs differ from an uninterrupted run:\n%s",
						trial, at.Round(time.Millisecond), full.Round(time.Millisecond), d)
				}
				if len(got.Leftovers) > 0 {
					t.Errorf("trial %d: objects outside committed folders after the rerun: %v", trial, got.Leftovers)
				}
			}
			t.Logf("%s: uninterrupted %v; %d kills landed in %d attempts (%d uncommitted objects seen right after kills); every rerun byte-identical",
				c.name, full.Round(time.Millisecond), landed, attempts, leftovers)
			if landed < trials {
				t.Errorf("only %d of %d kills landed before the command finished", landed, trials)
			}
		})
	}
}

// killAt starts cmd, SIGKILLs it after d unless it has finished, and waits. It reports whether
// the kill landed; a command that finished on its own must have succeeded.
func killAt(cmd *exec.Cmd, d time.Duration) (bool, error) {
	if err := cmd.Start(); err != nil {
		return false, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return false, err
	case <-time.After(d):
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	err := <-done
	if err == nil {
		return false, nil // it finished just before the signal
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, nil
		}
	}
	return false, err
}

// TestRunOnMinIO covers `drmas run` on MinIO, with learn.keep_checkpoints 1 so that retention
// deletes checkpoints (the tiny config's never does): SIGKILLed at seeded random points, then
// rerun to completion, and run as two processes at once. Every committed file, manifest and
// LATEST must be byte-identical to an uninterrupted run on the folder store, and no object may
// lie outside a committed folder. TestCrashAnywhere kills every stage on the folder store;
// this adds what only an object store exercises (multipart checkpoints, listing after
// deletes) for the whole loop, at the cost of a few seconds.
func TestRunOnMinIO(t *testing.T) {
	t.Parallel()
	extra := []string{"DRMAS_ITERATIONS=3", "DRMAS_LEARN_KEEP_CHECKPOINTS=1"}
	start := func(st storeUnderTest) (*exec.Cmd, *lockedWriter) {
		cmd := drmas(t, st.url, "run")
		cmd.Env = append(cmd.Env, append(st.env, extra...)...)
		out := &lockedWriter{}
		cmd.Stdout, cmd.Stderr = out, out
		return cmd, out
	}
	runToEnd := func(st storeUnderTest, what string) {
		cmd, out := start(st)
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s on %s: %v\n%s", what, st.name, err, out)
		}
	}
	ref := folderStore(t)
	runToEnd(ref, "uninterrupted run")
	want := inspect(t, ref.open(t), "runs/")
	if len(want.Leftovers) > 0 {
		t.Fatalf("uninterrupted run left uncommitted objects: %v", want.Leftovers)
	}

	srv := miniotest.Start(t)
	clean := minioStore(t, srv)
	began := time.Now()
	runToEnd(clean, "uninterrupted run")
	full := time.Since(began)
	if d := diff(inspect(t, clean.open(t), "runs/").Committed, want.Committed); d != "" {
		t.Fatalf("uninterrupted run on MinIO differs from the folder store:\n%s", d)
	}

	trials, kills := 3, 0
	if testing.Short() {
		trials = 1
	}
	rng := rand.New(rand.NewPCG(2026, 3))
	for trial := range trials {
		st := minioStore(t, srv)
		// Three kills in a row, each resuming what the last left; then a rerun to the end.
		for range 3 {
			cmd, out := start(st)
			at := time.Duration(rng.Float64() * float64(full))
			killed, err := killAt(cmd, at)
			if err != nil {
				t.Fatalf("trial %d (kill at %v): %v\n%s", trial, at, err, out)
			}
			if killed {
				kills++
			}
			inspect(t, st.open(t), "runs/") // nothing torn, LATEST loads
		}
		runToEnd(st, "rerun after kills")
		got := inspect(t, st.open(t), "runs/")
		if d := diff(got.Committed, want.Committed); d != "" {
			t.Fatalf("trial %d: after kills the rerun's outputs differ from an uninterrupted run:\n%s", trial, d)
		}
		if len(got.Leftovers) > 0 {
			t.Errorf("trial %d: objects outside committed folders after the rerun: %v", trial, got.Leftovers)
		}
	}
	if kills == 0 {
		t.Errorf("no kill landed in %d trials", trials)
	}

	// Two `drmas run` at once on the same run: both finish (each either commits or finds the
	// other's identical commit), and the outputs are those of one run.
	st := minioStore(t, srv)
	var wg sync.WaitGroup
	errs, outs := make([]error, 2), make([]*lockedWriter, 2)
	for i := range 2 {
		cmd, out := start(st)
		outs[i] = out
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = cmd.Run() }()
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("concurrent run %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	got := inspect(t, st.open(t), "runs/")
	if d := diff(got.Committed, want.Committed); d != "" {
		t.Fatalf("two concurrent runs committed other outputs than one run:\n%s", d)
	}
	if len(got.Leftovers) > 0 {
		t.Errorf("objects outside committed folders after two concurrent runs: %v", got.Leftovers)
	}
	t.Logf("uninterrupted run on MinIO %v; %d kills landed in %d trials; every rerun byte-identical to the folder store",
		full.Round(time.Millisecond), kills, trials)
}
