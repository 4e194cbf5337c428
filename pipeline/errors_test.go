package pipeline_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/drmas-dev/drmas/pipeline"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/storage"
)

var errInjected = errors.New("injected store failure")

// faultBucket fails every Put of a key containing put and every Delete of a key containing
// del; onPut, if set, runs before every Put, and a Put after ctx is cancelled returns ctx's
// error (as a store does when Ctrl-C cancels a request).
type faultBucket struct {
	storage.Bucket
	put, del string
	onPut    func(key string)
}

func (f *faultBucket) Put(ctx context.Context, key string, r io.Reader, size int64, opts ...storage.PutOption) error {
	if f.onPut != nil {
		f.onPut(key)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if f.put != "" && strings.Contains(key, f.put) {
		return fmt.Errorf("put %s: %w", key, errInjected)
	}
	return f.Bucket.Put(ctx, key, r, size, opts...)
}

func (f *faultBucket) Delete(ctx context.Context, key string) error {
	if f.del != "" && strings.Contains(key, f.del) {
		return fmt.Errorf("delete %s: %w", key, errInjected)
	}
	return f.Bucket.Delete(ctx, key)
}

// A store failure in any stage of the loop names that stage (and its iteration or step)
// exactly once, at the start of the message, and keeps the store's error.
func TestStageErrorsNameTheStageOnce(t *testing.T) {
	cases := []struct{ put, want string }{
		{"checkpoints/step=000000/", "warmup: "},
		{"eval/step=000000/", "evaluate step 0: "},
		{"iter=000000/rollout/", "rollout iter 0: "},
		{"iter=000000/advantage/est=drmas/_receipts/", "normalize iter 0: "},
		{"iter=000000/diagnostics/", "normalize iter 0: "},
		{"iter=000000/learn/", "learn iter 0: "},
		{"checkpoints/step=000001/", "learn iter 0: "},
		{"eval/step=000001/", "evaluate step 1: "},
	}
	for _, c := range cases {
		t.Run(c.put, func(t *testing.T) {
			env := stagetest.Env(t, stagetest.Config(t, "math"))
			env.Bucket = &faultBucket{Bucket: env.Bucket, put: c.put}
			_, err := pipeline.Run(context.Background(), env, pipeline.Options{Iterations: 1, EvalEvery: 1})
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			stage := strings.Fields(c.want)[0]
			stage = strings.TrimSuffix(stage, ":")
			if !strings.HasPrefix(msg, c.want) || strings.Count(msg, stage+" ")+strings.Count(msg, stage+":") != 1 {
				t.Errorf("error %q\nwant it to start with %q and name %s once", msg, c.want, stage)
			}
			var se *stages.Error
			if !errors.Is(err, errInjected) || !errors.As(err, &se) {
				t.Errorf("error %q does not wrap the store's error in a *stages.Error", msg)
			}
		})
	}
}

// Ctrl-C during learn says which stage was interrupted and what to do, not "context canceled",
// and still matches context.Canceled (drmas exits 130).
func TestInterruptNamesTheStage(t *testing.T) {
	env := stagetest.Env(t, stagetest.Config(t, "math"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env.Bucket = &faultBucket{Bucket: env.Bucket, onPut: func(key string) {
		if strings.Contains(key, "iter=000000/learn/") {
			cancel()
		}
	}}
	_, err := pipeline.Run(ctx, env, pipeline.Options{Iterations: 1, EvalEvery: -1})
	const want = "learn iter 0: interrupted (what was committed is kept): run the same command again to resume"
	if err == nil || err.Error() != want || !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted learn: %v\nwant %q, matching context.Canceled", err, want)
	}
}

// Receipts that cannot be removed after rollout and normalize commit do not fail the loop:
// each stage warns, the loop goes on, and a resumed loop (which finds them again) succeeds too.
func TestLeftoverReceiptsWarn(t *testing.T) {
	env := stagetest.Env(t, stagetest.Config(t, "math"))
	env.Bucket = &faultBucket{Bucket: env.Bucket, del: "/_receipts/"}
	for attempt := range 2 {
		var log syncBuffer
		env.Log = &log
		sums, err := pipeline.Run(context.Background(), env, pipeline.Options{Iterations: 1, EvalEvery: -1})
		if err != nil || len(sums) != 1 || sums[0].Step != 1 {
			t.Fatalf("attempt %d: %+v, %v; want iteration 0 to publish step 1", attempt, sums, err)
		}
		for _, stage := range []string{"rollout", "normalize"} {
			if want := "warning: " + stage + " iter 0: committed, but receipts left behind"; !strings.Contains(log.String(), want) {
				t.Errorf("attempt %d: log\n%s\nwant a line with %q", attempt, log.String(), want)
			}
		}
	}
}

// A config error that warm-up finds is named "warmup" once in `drmas run` (the loop used to add
// a second "warmup: ").
func TestWarmupConfigErrorNamedOnce(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	m := cfg.Models["m1"]
	m.Context = 24 // shorter than the math workflow's demonstrations
	cfg.Models["m1"] = m
	env := stagetest.Env(t, cfg)
	_, err := pipeline.Run(context.Background(), env, pipeline.Options{Iterations: 1, EvalEvery: -1})
	if err == nil || !strings.HasPrefix(err.Error(), "warmup: demonstration ") || strings.Count(err.Error(), "warmup") != 1 ||
		!strings.HasSuffix(err.Error(), "raise models.m1.context") {
		t.Fatalf("warm-up with a short context: %v\nwant one \"warmup: demonstration …: raise models.m1.context\"", err)
	}
}

// TestCtrlCDuringLearn interrupts `drmas run` (SIGINT, and SIGTERM as Kubernetes sends) while
// learn trains: drmas exits 130 and its last line names the stage and says to rerun, instead
// of a bare "context canceled"; the rerun finishes.
func TestCtrlCDuringLearn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildDrmas(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "slow-learn.yaml")
	// Many epochs: learn takes seconds, long enough to be interrupted in.
	cfg := strings.Replace(tinyConfig, "learn: {micro_batch: 8,", "learn: {epochs: 300, micro_batch: 8,", 1)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		store := filepath.Join(dir, fmt.Sprint("store-", sig))
		cmd := exec.Command(bin, "--config", cfgPath, "--store", store, "-q", "run", "--iters", "1", "--eval-every", "0")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var lines []string
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.HasPrefix(sc.Text(), "normalize iter 0:") { // learn starts next
				_ = cmd.Process.Signal(sig)
			}
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Fatalf("%v: %v, want exit status 130\n%s", sig, err, strings.Join(lines, "\n"))
		}
		const want = "drmas: learn iter 0: interrupted (what was committed is kept): run the same command again to resume"
		if got := lines[len(lines)-1]; got != want {
			t.Errorf("%v: last line %q, want %q", sig, got, want)
		}
		if out, err := exec.Command(bin, "--config", cfgPath, "--store", store, "-q", "run", "--iters", "1", "--eval-every", "0").CombinedOutput(); err != nil {
			t.Fatalf("rerun after %v: %v\n%s", sig, err, out)
		}
	}
}
