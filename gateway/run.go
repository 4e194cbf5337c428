package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/workflows"
)

// RunOptions configure Run.
type RunOptions struct {
	// Program is the program and its limits (defaults filled: WithDefaults).
	Program workflows.ProgramOptions
	// Grade, when not nil and ok, grades an episode's final answer (its last call's text) in
	// place of the reward the program prints.
	Grade func(t workflows.Task, final string) (reward float64, why string, ok bool)
	// Agents maps each agent to its backend; Sampling is every call's.
	Agents   map[string]actors.Backend
	Sampling actors.Sampling
	// Tasks and Samples: Samples episodes per task, returned task-major.
	Tasks   []workflows.Task
	Samples int
	// Seed is the sampling seed of call `call` of sample `sample` of task.
	Seed func(task workflows.Task, sample, call int) uint64
	// Done is called with the episodes that just finished and their tokens (progress).
	Done func(episodes, tokens int)
	// Logf logs a failed episode (nil: discarded).
	Logf func(format string, args ...any)
}

// Outcome is one finished episode of a program.
type Outcome struct {
	Task   workflows.Task
	Sample int
	Calls  []Call // by index; none when Dropped
	Reward float64
	// Penalties are the per-call penalties the program reported, one per call (0 when none).
	Penalties []float64
	// Failed: the program failed (Why says how); its reward is the failure reward, or the
	// episode is Dropped when there is none.
	Failed, Dropped bool
	Why             string
}

// stdoutTail and stderrTail bound what is kept of a program's output: the reward is its last
// line, and a failure is logged with the end of its stderr.
const (
	stdoutTail = 64 << 10
	stderrTail = 2 << 10
	// drainWait bounds the wait for a program's pipes to close after its process group is
	// killed (a process that left the group may still hold them).
	drainWait = 2 * time.Second
)

// Run plays Samples episodes of each task: one process of the program per episode, at most
// Program.Concurrency at once, each with its own gateway address and token. A failing program
// is an outcome, not an error; Run fails only when ctx ends or the gateway cannot start.
func Run(ctx context.Context, o RunOptions) ([]Outcome, error) {
	p := o.Program.WithDefaults()
	if err := findProgram(p); err != nil {
		return nil, err
	}
	gw, err := Start(Config{Agents: o.Agents, Sampling: o.Sampling, MaxCalls: p.MaxCalls})
	if err != nil {
		return nil, err
	}
	defer gw.Close()
	out := make([]Outcome, len(o.Tasks)*o.Samples)
	var mu sync.Mutex // serializes Done and Logf
	if logf := o.Logf; logf != nil {
		o.Logf = func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			logf(format, args...)
		}
	}
	sem := make(chan struct{}, p.Concurrency)
	var wg sync.WaitGroup
	for i := range out {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			t, s := o.Tasks[i/o.Samples], i%o.Samples
			out[i] = episode(ctx, gw, p, o, t, s)
			if o.Done != nil {
				tokens := 0
				for _, c := range out[i].Calls {
					tokens += len(c.Response.Tokens)
				}
				mu.Lock()
				o.Done(1, tokens)
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// findProgram checks that the program exists before any episode runs: a missing one is the
// config's mistake, not the episodes' outcome.
func findProgram(p workflows.ProgramOptions) error {
	if len(p.Command) == 0 {
		return errors.New("workflow.command is empty: give the agent program's argv")
	}
	name := p.Command[0]
	if !strings.ContainsRune(name, filepath.Separator) {
		if _, err := exec.LookPath(name); err != nil {
			return fmt.Errorf("workflow.command: %s is not on PATH: %w", name, err)
		}
		return nil
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(p.Dir, name)
	}
	if _, err := os.Stat(name); err != nil {
		return fmt.Errorf("workflow.command: %w (a relative path is relative to the config file's folder)", err)
	}
	return nil
}

// episode runs one episode and judges its outcome.
func episode(ctx context.Context, gw *Gateway, p workflows.ProgramOptions, o RunOptions, t workflows.Task, sample int) Outcome {
	ep := gw.Open(func(call int) uint64 { return o.Seed(t, sample, call) })
	res := runProcess(ctx, p, ep, taskJSON(t, p.RevealAnswer))
	calls, overflow := ep.Close()
	oc := Outcome{Task: t, Sample: sample, Calls: calls}
	why := judge(&oc, res, overflow, o.Grade)
	if why == "" {
		return oc
	}
	oc.Failed, oc.Why, oc.Penalties = true, why, nil
	if p.FailureReward != nil {
		oc.Reward = *p.FailureReward
	} else {
		oc.Dropped, oc.Calls, oc.Reward = true, nil, 0
	}
	if o.Logf != nil {
		what := "dropped"
		if !oc.Dropped {
			what = fmt.Sprintf("reward %g (workflow.failure_reward)", oc.Reward)
		}
		o.Logf("program episode of task %s sample %d failed (%s): %s; stderr: %s", t.ID, sample, what, why, res.stderr)
	}
	return oc
}

// judge sets the outcome's reward and penalties, or returns why the episode failed.
func judge(oc *Outcome, res procResult, overflow bool, grade func(workflows.Task, string) (float64, string, bool)) string {
	switch {
	case res.timedOut:
		return fmt.Sprintf("timed out after %v (workflow.timeout)", res.timeout)
	case res.err != nil:
		return res.err.Error()
	case overflow:
		return "made more calls than workflow.max_calls"
	}
	line, perr := rewardLine(res.stdout)
	if grade != nil && len(oc.Calls) > 0 {
		if r, _, ok := grade(oc.Task, oc.Calls[len(oc.Calls)-1].Text); ok {
			oc.Reward = r
			oc.Penalties = penalties(line.Penalties, len(oc.Calls))
			return ""
		}
	}
	if grade != nil && len(oc.Calls) == 0 {
		if _, _, ok := grade(oc.Task, ""); ok {
			return "made no calls: there is no final answer to grade"
		}
	}
	if perr != nil {
		return perr.Error()
	}
	if len(line.Penalties) > len(oc.Calls) {
		return fmt.Sprintf("reported %d penalties for %d calls", len(line.Penalties), len(oc.Calls))
	}
	oc.Reward = *line.Reward
	oc.Penalties = penalties(line.Penalties, len(oc.Calls))
	return ""
}

func penalties(p []float64, n int) []float64 {
	out := make([]float64, n)
	copy(out, p)
	return out
}

// rewardOut is the last line of a program's stdout.
type rewardOut struct {
	Reward    *float64  `json:"reward"`
	Penalties []float64 `json:"penalties"`
}

// rewardLine reads the reward line: the last non-empty line of stdout, {"reward": x} with x
// finite, and optionally "penalties": one per call, subtracted from that call's row.
func rewardLine(stdout []byte) (rewardOut, error) {
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	var r rewardOut
	if !strings.HasPrefix(last, "{") {
		return r, fmt.Errorf(`printed no reward: the last line of stdout is %q, want {"reward": <number>}`, cut(last, 120))
	}
	if err := json.Unmarshal([]byte(last), &r); err != nil || r.Reward == nil || math.IsNaN(*r.Reward) || math.IsInf(*r.Reward, 0) {
		return r, fmt.Errorf(`malformed reward line %q: want {"reward": <number>} (optionally "penalties": [<number per call>])`, cut(last, 120))
	}
	for _, v := range r.Penalties {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return r, fmt.Errorf("penalties: %v is not a finite number", v)
		}
	}
	return r, nil
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// taskJSON is DRMAS_TASK: the task's id, question and data source, and its answer when
// revealed.
func taskJSON(t workflows.Task, reveal bool) string {
	v := map[string]string{"id": t.ID, "question": t.Question, "data_source": t.DataSource}
	if reveal {
		v["answer"] = t.Answer
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// procResult is how a program's process ended.
type procResult struct {
	stdout   []byte
	stderr   string // the end of stderr, one line
	timedOut bool
	timeout  time.Duration
	err      error // a start failure or a non-zero exit
}

// runProcess runs the program for one episode in its own process group, with only the
// episode's variables (and PATH), and kills the whole group when the program exits or times
// out, so nothing it forked outlives the episode.
func runProcess(ctx context.Context, p workflows.ProgramOptions, ep *Episode, task string) procResult {
	res := procResult{timeout: p.Timeout}
	cmd := exec.Command(p.Command[0], p.Command[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = []string{"OPENAI_BASE_URL=" + ep.BaseURL(), "OPENAI_API_KEY=" + ep.Token(), "DRMAS_TASK=" + task,
		"OPENAI_AGENTS_DISABLE_TRACING=1", "PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := capture(stdoutTail)
	if err != nil {
		res.err = fmt.Errorf("start %s: %w", p.Command[0], err)
		return res
	}
	stderr, err := capture(stderrTail)
	if err != nil {
		stdout.close(0)
		res.err = fmt.Errorf("start %s: %w", p.Command[0], err)
		return res
	}
	cmd.Stdout, cmd.Stderr = stdout.w, stderr.w
	err = cmd.Start()
	stdout.w.Close() // the child holds its own copies
	stderr.w.Close()
	if err != nil {
		res.err = fmt.Errorf("start %s: %w (workflow.command)", p.Command[0], err)
	} else {
		res.timedOut, res.err = waitOrKill(ctx, cmd, p.Timeout)
	}
	res.stdout = stdout.close(drainWait)
	res.stderr = strings.Join(strings.Fields(strings.ToValidUTF8(string(stderr.close(drainWait)), "\uFFFD")), " ")
	if res.stderr == "" {
		res.stderr = "(empty)"
	}
	return res
}

// waitOrKill waits for the started cmd until it exits, the timeout passes or ctx ends, then
// kills its process group (the program and what it forked). err is a non-zero exit or ctx's
// error.
func waitOrKill(ctx context.Context, cmd *exec.Cmd, timeout time.Duration) (timedOut bool, err error) {
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var exit error
	waited := false
	select {
	case exit = <-exited:
		waited = true
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
		err = ctx.Err()
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if !waited {
		<-exited
	} else if exit != nil {
		err = fmt.Errorf("exited with %w", exit)
	}
	return timedOut, err
}

// captured is a pipe whose read end is copied into a bounded tail.
type captured struct {
	r, w *os.File
	t    *tail
	done chan struct{}
}

// capture opens a pipe for a child's output, keeping its last max bytes.
func capture(max int) (*captured, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c := &captured{r: r, w: w, t: &tail{max: max}, done: make(chan struct{})}
	go func() { _, _ = io.Copy(c.t, r); close(c.done) }()
	return c, nil
}

// close waits up to wait for the writers to close the pipe (a process that left the group may
// still hold it), closes it, and returns what was kept.
func (c *captured) close(wait time.Duration) []byte {
	c.w.Close()
	select {
	case <-c.done:
	case <-time.After(wait):
	}
	c.r.Close()
	<-c.done
	return c.t.bytes()
}

// tail is an io.Writer that keeps the last max bytes written.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tail) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.buf)
}
