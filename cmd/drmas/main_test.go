package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/analysis/analysistest"
	"github.com/drmas-dev/drmas/configs"
)

// TestConfigShowLoadsBack: what `config show` prints, in YAML and JSON, is a config file that
// loads back as the same config, for every example config and for seeds JSON cannot hold as a
// number (durations were printed as bare nanoseconds, which the loader refuses as a duration).
func TestConfigShowLoadsBack(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	files, err := filepath.Glob(filepath.Join("..", "..", "configs", "*.yaml"))
	if err != nil || len(files) < 8 {
		t.Fatalf("example configs: %v %v", files, err)
	}
	for _, src := range files {
		want, err := configs.Load(configs.LoadOptions{File: src, LookupEnv: noEnv})
		if err != nil {
			t.Fatal(err)
		}
		for _, seed := range []uint64{1 << 53, math.MaxUint64} {
			for _, format := range []string{"yaml", "json"} {
				out, _, err := execute(t, "--config", src, "--seed", strconv.FormatUint(seed, 10), "config", "show", "--format", format)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(out, "000000000,") || strings.Contains(out, `"1"`) {
					t.Errorf("%s %s: durations or numbers not as a config file writes them:\n%s", src, format, out)
				}
				p := filepath.Join(t.TempDir(), "shown."+format)
				if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				got, err := configs.Load(configs.LoadOptions{File: p, LookupEnv: noEnv})
				if err != nil {
					t.Fatalf("%s %s, seed %d: printed config does not load: %v", src, format, seed, err)
				}
				w := *want.Redacted()
				w.Seed = seed
				w.Dir = got.Dir // the folder of the file loaded, not a key
				if !reflect.DeepEqual(got, &w) {
					t.Errorf("%s %s: loads back as\n%+v\nwant\n%+v", src, format, got, &w)
				}
			}
		}
	}
	// A duration is written with its unit.
	out, _, err := execute(t, "--config", filepath.Join("..", "..", "configs", "vllm-hetero.yaml"), "config", "show")
	if err != nil || !strings.Contains(out, "timeout: 1m0s") {
		t.Errorf("durations: %v\n%s", err, out)
	}
}

// TestMain removes the analysis fixture store some tests build.
func TestMain(m *testing.M) {
	code := m.Run()
	analysistest.Cleanup()
	os.Exit(code)
}

// execute runs the CLI in process with args and returns stdout, stderr and the error.
func execute(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // a cap against hangs: the HF smokes take ~30 s alone, more on a loaded machine
	defer cancel()
	err := runRoot(ctx, root)
	return out.String(), errOut.String(), err
}

func TestVersion(t *testing.T) {
	out, _, err := execute(t, "version")
	if err != nil || !strings.HasPrefix(out, "drmas ") {
		t.Fatalf("%q %v", out, err)
	}
}

func TestConfigShowRedactsAndBindsFlags(t *testing.T) {
	t.Setenv("DRMAS_S3_SECRET_KEY", "very-secret-value")
	t.Setenv("DRMAS_LEARN_LR", "0.125")
	out, _, err := execute(t, "--store", "/tmp/somewhere", "--run", "flagrun", "config", "show", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "very-secret-value") || !strings.Contains(out, "<redacted>") {
		t.Fatalf("secret not redacted:\n%s", out)
	}
	for _, want := range []string{`"store": "/tmp/somewhere"`, `"run": "flagrun"`, `"lr": 0.125`} {
		if !strings.Contains(out, want) {
			t.Errorf("config show lacks %s:\n%s", want, out)
		}
	}
}

func TestUnknownConfigKeyIsNamed(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte("rollout:\n  group_sise: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := execute(t, "--config", p, "config", "show")
	if err == nil || !strings.Contains(err.Error(), "unknown key rollout.group_sise") || !strings.Contains(err.Error(), p) {
		t.Fatalf("want an error naming rollout.group_sise and %s, got %v", p, err)
	}
}

func TestBadRunNamesRejected(t *testing.T) {
	for _, run := range []string{"../x", "a/b", ""} {
		_, _, err := execute(t, "--run", run, "--store", t.TempDir(), "run-stage", "rollout", "--iter", "0")
		if err == nil || !strings.Contains(err.Error(), "run") {
			t.Errorf("run %q: %v", run, err)
		}
	}
}

func TestUnreachableS3FailsFastWithoutSecrets(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-value-123")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	start := time.Now()
	out, errOut, err := execute(t, "-q", "--store", "s3://bucket/prefix", "run-stage", "normalize", "--iter", "0")
	if err == nil {
		t.Fatal("no error from an unreachable store")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("took %s to report an unreachable store", d)
	}
	all := out + errOut + err.Error()
	if !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("error does not name the endpoint: %v", err)
	}
	if strings.Contains(all, "s3cr3t-value-123") {
		t.Fatalf("secret leaked: %s", all)
	}
}

func TestHelpExplains(t *testing.T) {
	out, _, err := execute(t, "run-stage", "normalize", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"drmas", "grpo_step", "rloo", "--estimator", "--iter"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// TestAnalyzeUnknownRun: analyze and report on a run with nothing committed (a typo in --run
// or --store) fail with a line that says what to check, instead of printing empty views.
func TestAnalyzeUnknownRun(t *testing.T) {
	store := t.TempDir()
	for _, args := range [][]string{
		{"analyze", "--report", "rewards"},
		{"report", "-o", filepath.Join(t.TempDir(), "r.html")},
	} {
		out, _, err := execute(t, append([]string{"-q", "--store", store, "--run", "nosuchrun"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "run nosuchrun has nothing committed") {
			t.Errorf("%v: err %v, out %q", args, err, out)
		}
	}
	// A store folder that does not exist is named as such, and not created.
	missing := filepath.Join(store, "typo")
	if _, _, err := execute(t, "-q", "--store", missing, "analyze"); err == nil || !strings.Contains(err.Error(), "store folder "+missing+" does not exist") {
		t.Errorf("analyze on a missing store folder: %v", err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("analyze created the missing store folder: %v", err)
	}
	// A run with only its warm-up checkpoint has nothing to analyze yet, and is told so.
	t.Setenv("DRMAS_WARMUP_STEPS", "1")
	if _, _, err := execute(t, "-q", "--store", store, "--run", "w", "run-stage", "warmup"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := execute(t, "-q", "--store", store, "--run", "w", "analyze"); err == nil || !strings.Contains(err.Error(), "has checkpoints (steps 0) but no committed iteration") {
		t.Errorf("analyze after warm-up only: %v", err)
	}
	// A bad --format is refused before anything is read.
	if _, _, err := execute(t, "-q", "--store", missing, "analyze", "--format", "xml"); err == nil || !strings.Contains(err.Error(), `--format "xml": want table, csv, json`) {
		t.Errorf("analyze --format xml: %v", err)
	}
}

// TestProgressOnlyOnATerminal: progress bars are drawn on a terminal only; stderr redirected to
// a file (a log, a pod's log) gets none of their carriage-return redraws.
func TestProgressOnlyOnATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if w := progressWriter(false, f); w != nil {
		t.Fatal("progress bars drawn into a regular file")
	}
	tty, err := os.OpenFile("/dev/null", os.O_WRONLY, 0) // a character device, like a terminal
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	if progressWriter(false, tty) == nil || progressWriter(true, tty) != nil {
		t.Fatal("a character device gets bars unless -q")
	}
}

// TestAnalyzeSQLErrorSaysSo: DuckDB's message for a bad --sql query is prefixed with where it
// comes from.
func TestAnalyzeSQLErrorSaysSo(t *testing.T) {
	store, _ := analysistest.Store(t)
	_, _, err := execute(t, "-q", "--store", store, "--run", analysistest.Run, "analyze", "--cache", t.TempDir(), "--sql", "SELEC 1")
	if err == nil || !strings.HasPrefix(err.Error(), "analyze --sql: ") || !strings.Contains(err.Error(), "SELEC") {
		t.Fatalf("bad --sql: %v", err)
	}
	huge := "SELECT " + strings.Repeat("x", 1<<20) + " FROM rollouts"
	_, _, err = execute(t, "-q", "--store", store, "--run", analysistest.Run, "analyze", "--cache", t.TempDir(), "--sql", huge)
	if err == nil {
		t.Fatal("a 1 MiB bad --sql query: no error")
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "analyze --sql: ") || len(msg) > 2048 {
		t.Fatalf("a 1 MiB bad --sql query: a message of %d bytes", len(msg))
	}
}
