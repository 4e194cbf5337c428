// Command summary runs, one after the other, the benchmarks behind the engine's performance
// targets (docs/performance.md, "At a glance") and prints their table in Markdown: each
// figure beside its anchor (PyTorch, llama.cpp, the FMA peak, the memory estimate, the
// unshared rollout), the ratio and the target, met or not.
//
// At the Qwen2.5-0.5B shape it takes ~11 minutes and needs ~10 GB free, PyTorch (Debian
// python3-torch) and llama.cpp (bash .ci/install-oracles.sh). -tiny runs every step at a small
// shape in seconds: a check that the steps run and their outputs parse, not figures to quote.
// Progress goes to standard error, the table to standard output (and -o).
//
//	go run ./bench/summary [-tiny] [-skip rollout,llamacpp] [-o table.md]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/drmas-dev/drmas/internal/oracles"
)

// steps are the benchmarks in the order they run; each fills its part of results.
var steps = []struct {
	name string
	run  func(options, context.Context, *results) error
}{
	{"pytorch", options.torch}, {"gemm", options.gemm}, {"memory", options.memory},
	{"rollout", options.rollout}, {"sampler", options.sampler}, {"llamacpp", options.llama},
}

func stepNames() []string {
	var n []string
	for _, s := range steps {
		n = append(n, s.name)
	}
	return n
}

type options struct {
	tiny   bool
	python string // the interpreter with torch that benchqwen runs its PyTorch side in
	skip   []string
	out    string
	root   string // the repository's top folder
	bin    string // where the programs are built
	log    io.Writer
}

func main() {
	tiny := flag.Bool("tiny", false, "every step at a small shape (a check of the pipeline, seconds)")
	skip := flag.String("skip", "", "steps to leave out, comma-separated: "+strings.Join(stepNames(), ", "))
	out := flag.String("o", "", "also write the table to this file")
	python := flag.String("python", oracles.Python(), "python with torch for the PyTorch side ($DRMAS_PYTHON, else Debian's)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := options{tiny: *tiny, python: *python, out: *out, log: os.Stderr}
	if *skip != "" {
		o.skip = strings.Split(*skip, ",")
	}
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/summary:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, stdout io.Writer) error {
	for _, s := range o.skip {
		if !slices.Contains(stepNames(), s) {
			return fmt.Errorf("-skip %q: the steps are %s", s, strings.Join(stepNames(), ", "))
		}
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	o.root = root
	if o.bin, err = os.MkdirTemp("", "drmas-bench-summary"); err != nil {
		return err
	}
	defer os.RemoveAll(o.bin)
	if err := o.build(ctx); err != nil {
		return err
	}
	r := &results{failed: map[string]error{}}
	for _, s := range steps {
		if slices.Contains(o.skip, s.name) {
			r.notRun = append(r.notRun, s.name+" (-skip)")
			continue
		}
		o.progress(s.name)
		t0 := time.Now()
		if err := s.run(o, ctx, r); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.failed[s.name] = err
			fmt.Fprintf(o.log, "%s: %v\n", s.name, err)
			continue
		}
		fmt.Fprintf(o.log, "  %s done in %.0f s\n", s.name, time.Since(t0).Seconds())
	}
	var buf bytes.Buffer
	r.write(&buf, o.note())
	if o.out != "" {
		if err := os.WriteFile(o.out, buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	_, err = stdout.Write(buf.Bytes())
	if err == nil && len(r.failed) > 0 {
		err = fmt.Errorf("%d step(s) failed (their rows say why)", len(r.failed))
	}
	return err
}

func (o options) note() string {
	host, _ := os.Hostname()
	n := fmt.Sprintf("`go run ./bench/summary` on %s, %s UTC, load average %s", host, time.Now().UTC().Format("2006-01-02 15:04"), loadAvg())
	if o.tiny {
		n += " — **-tiny: small shapes, not comparable to the targets**"
	}
	return n
}

// build compiles the programs and the model package's benchmarks once, so that no step's
// timing includes a compilation.
func (o options) build(ctx context.Context) error {
	o.progress("building the benchmark programs")
	for _, p := range []string{"model/cmd/benchqwen", "model/cmd/benchengine", "model/cmd/stepmem", "bench/llamacpp"} {
		if _, err := o.exec(ctx, "go", "build", "-o", filepath.Join(o.bin, filepath.Base(p)), "./"+p); err != nil {
			return err
		}
	}
	_, err := o.exec(ctx, "go", "test", "-c", "-o", filepath.Join(o.bin, "model.test"), "./model")
	return err
}

// shape is the model shape flags of the programs that take benchutil.QwenShapeFlags.
func (o options) shape() []string {
	if !o.tiny {
		return nil
	}
	return []string{"-hidden", "64", "-layers", "2", "-heads", "4", "-kv-heads", "2", "-intermediate", "128", "-vocab", "512"}
}

func (o options) pick(full, tiny []string) []string {
	if o.tiny {
		return tiny
	}
	return full
}

func (o options) torch(ctx context.Context, r *results) error {
	args := append(o.shape(), o.pick(nil, []string{"-tokens", "64", "-batch", "2", "-new", "4"})...)
	if o.python != "" {
		args = append(args, "-python", o.python)
	}
	out, err := o.prog(ctx, "benchqwen", args...)
	if err != nil {
		return err
	}
	t, err := parseTorch(out)
	if err != nil {
		return err
	}
	r.torch = &t
	return nil
}

func (o options) gemm(ctx context.Context, r *results) error {
	out, err := o.prog(ctx, "benchengine", "-steps", "1", "-decode", "1", "-qwen="+fmt.Sprint(!o.tiny))
	if err != nil {
		return err
	}
	if o.tiny {
		// Without -qwen it prints no step GEMMs (the parser is checked on a saved run).
		r.notRun = append(r.notRun, "gemm's Qwen2.5-0.5B shapes (-tiny)")
		return nil
	}
	g, err := parseGEMM(out)
	if err != nil {
		return err
	}
	r.gemm = &g
	return nil
}

func (o options) memory(ctx context.Context, r *results) error {
	r.memTokens = 4096
	if o.tiny {
		r.memTokens = 256
	}
	base := append(o.shape(), "-tokens", fmt.Sprint(r.memTokens), "-checkpointing")
	for _, m := range []struct {
		extra []string
		dst   **memRun
	}{{nil, &r.memFull}, {[]string{"-lora", "16", "-bf16"}, &r.memLoRA}} {
		out, err := o.prog(ctx, "stepmem", append(slices.Clone(base), m.extra...)...)
		if err != nil {
			return err
		}
		v, err := parseStepMem(out)
		if err != nil {
			return err
		}
		*m.dst = &v
	}
	return nil
}

func (o options) rollout(ctx context.Context, r *results) error {
	shape := o.pick([]string{"-rollout-shape", "qwen05"}, []string{"-rollout-shape", "small", "-rollout-layers", "1"})
	args := append([]string{"-test.run", "XXX", "-test.bench", "BenchmarkGroupRollout$", "-test.benchtime", "1x", "-test.timeout", "90m"}, shape...)
	out, err := o.prog(ctx, "model.test", append(args, "-rollout-top-p", "1")...)
	if err != nil {
		return err
	}
	r.rollout, err = parseGoBench(out, "BenchmarkGroupRollout")
	return err
}

func (o options) sampler(ctx context.Context, r *results) error {
	out, err := o.prog(ctx, "model.test", "-test.run", "XXX", "-test.bench", "BenchmarkPickToken$|BenchmarkTopPFlat/pick", "-test.benchtime", o.pick([]string{"30x"}, []string{"3x"})[0])
	if err != nil {
		return err
	}
	for _, b := range []struct {
		name string
		dst  *float64
	}{{"BenchmarkPickToken", &r.picked}, {"BenchmarkTopPFlat/pick", &r.flatPicked}} {
		m, err := parseGoBench(out, b.name)
		if err != nil {
			return err
		}
		*b.dst = m["ns/op"] / 1e6
	}
	return nil
}

func (o options) llama(ctx context.Context, r *results) error {
	args := append(o.shape(), "-threads", "1", "-reps", "3", "-new", o.pick([]string{"8"}, []string{"4"})[0], "-batches", "1,8", "-dtypes", "f32,bf16")
	out, err := o.prog(ctx, "llamacpp", args...)
	if err != nil {
		return err
	}
	r.llama, err = parseLlama(out)
	return err
}

// prog runs a program built into o.bin from the repository's top folder.
func (o options) prog(ctx context.Context, name string, args ...string) (string, error) {
	return o.exec(ctx, filepath.Join(o.bin, name), args...)
}

func (o options) exec(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = o.root
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, tail(out.String(), 2000))
	}
	return out.String(), nil
}

func (o options) progress(what string) {
	fmt.Fprintf(o.log, "[%s UTC, load %s] %s\n", time.Now().UTC().Format("15:04:05"), loadAvg(), what)
}

// repoRoot is the folder above the working directory that holds drmas's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/drmas-dev/drmas\n")) {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("run it inside the drmas repository (no go.mod of github.com/drmas-dev/drmas above the working directory)")
		}
		dir = up
	}
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
