package pipeline_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/pipeline"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/evaluate"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/storage/client"
	"github.com/drmas-dev/drmas/storage/filestore"
	"github.com/drmas-dev/drmas/storage/miniotest"
	"github.com/drmas-dev/drmas/storage/s3store"
)

const tinyConfig = stagetest.TinyConfigYAML

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// buildDrmas builds the drmas binary once per test process.
func buildDrmas(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "drmas-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "drmas")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/drmas-dev/drmas/cmd/drmas").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("build drmas: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// finalState returns the sha256 of every file of the final checkpoint, keyed by name.
func finalState(t *testing.T, store string) map[string]string {
	t.Helper()
	ctx := context.Background()
	b, err := filestore.New(store)
	if err != nil {
		t.Fatal(err)
	}
	step, err := checkpoints.ReadLatest(ctx, b, "t")
	if err != nil {
		t.Fatal(err)
	}
	if step != 2 {
		t.Fatalf("LATEST = %d, want 2", step)
	}
	m, _, err := commit.Read(ctx, b, layout.CheckpointDir("t", step))
	if err != nil {
		t.Fatal(err)
	}
	if err := commit.Verify(ctx, b, layout.CheckpointDir("t", step), m, true); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range m.Files {
		out[f.Name] = f.SHA256
	}
	return out
}

// checkLatest asserts LATEST, if present, names a complete checkpoint that verifies.
func checkLatest(t *testing.T, store string) {
	t.Helper()
	ctx := context.Background()
	b, err := filestore.New(store)
	if err != nil {
		t.Fatal(err)
	}
	step, err := checkpoints.ReadLatest(ctx, b, "t")
	if err != nil {
		return // no LATEST yet
	}
	if _, err := checkpoints.LoadStep(ctx, b, "t", step, true); err != nil {
		t.Fatalf("LATEST names step %d, which does not load: %v", step, err)
	}
}

// TestKillAnywhereAndResume SIGKILLs `drmas run` at seeded random points, reruns it until it
// finishes, and checks that the final checkpoint is byte-identical to an uninterrupted run and
// that LATEST never names an incomplete step.
func TestKillAnywhereAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary repeatedly")
	}
	bin := buildDrmas(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tiny.yaml")
	if err := os.WriteFile(cfgPath, []byte(tinyConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(store string) *exec.Cmd {
		cmd := exec.Command(bin, "--config", cfgPath, "--store", store, "-q", "run")
		return cmd
	}
	clean := filepath.Join(dir, "clean")
	start := time.Now()
	if out, err := run(clean).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, out)
	}
	full := time.Since(start)
	if out, _ := run(clean).CombinedOutput(); !strings.Contains(string(out), "already committed") {
		t.Fatalf("a rerun of a finished run should redo nothing:\n%s", out)
	}
	want := finalState(t, clean)

	rng := rand.New(rand.NewPCG(11, 12))
	killed := filepath.Join(dir, "killed")
	kills := 0
	for attempt := 0; attempt < 30; attempt++ {
		cmd := run(killed)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		if kills < 6 {
			select {
			case err = <-done:
			case <-time.After(time.Duration((0.05 + 0.35*rng.Float64()) * float64(full))):
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-done
				kills++
				checkLatest(t, killed)
				continue
			}
		} else {
			err = <-done
		}
		if err != nil {
			t.Fatalf("run after %d kills failed: %v", kills, err)
		}
		break
	}
	if kills < 3 {
		t.Fatalf("only %d kills landed before the run finished", kills)
	}
	got := finalState(t, killed)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after %d kills the final checkpoint differs:\n got %v\nwant %v", kills, got, want)
	}
	t.Logf("uninterrupted run %s; %d kills; final checkpoint identical", full.Round(time.Millisecond), kills)
}

func TestHeterogeneousModels(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	cfg.Models = map[string]configs.Model{
		"big":   {Dim: 32, Layers: 2, Heads: 4, Context: 96, FFMult: 2, TiedHead: true},
		"small": {Dim: 16, Layers: 1, Heads: 2, Context: 96, FFMult: 2, TiedHead: false},
	}
	cfg.Agents = map[string]configs.Agent{"solver": {Model: "big", LR: 1e-4}, "verifier": {Model: "small", LR: 1e-3, GradClip: 0.5}}
	cfg.Learn.LRWarmupSteps = 0 // the optimizers' recorded lr is then each agent's own
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	env := stagetest.Env(t, cfg)
	sums, err := pipeline.Run(context.Background(), env, pipeline.Options{Iterations: 2, EvalEvery: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 2 || sums[1].Step != 2 || len(sums[1].Eval) == 0 {
		t.Fatalf("summaries %+v", sums)
	}
	// The paired change from step 0 is that of the committed per-prompt results, and the
	// summary line shows it.
	var prompts [2][]evaluate.PromptRow
	for i, step := range []int64{0, 2} {
		if prompts[i], err = evaluate.ReadPrompts(context.Background(), env.Bucket, layout.EvalDir("t", step)); err != nil {
			t.Fatal(err)
		}
	}
	want := evaluate.PairedDelta(prompts[0], prompts[1])
	if d := sums[1].EvalDelta; d == nil || *d != want || d.Prompts != int(cfg.Tasks.EvalSize) || d.ToStep != 2 {
		t.Fatalf("EvalDelta %+v, want %+v over %d prompts", d, want, cfg.Tasks.EvalSize)
	}
	if line := sums[1].String(); !strings.Contains(line, fmt.Sprintf("(%+.3f ± %.3f vs step 0, paired)", want.Delta, want.SE)) {
		t.Fatalf("summary line %q lacks the paired change", line)
	}
	set, err := checkpoints.LoadStep(context.Background(), env.Bucket, "t", 2, true)
	if err != nil {
		t.Fatal(err)
	}
	if set.Models["big"].Config().Dim != 32 || set.Models["small"].Config().Dim != 16 {
		t.Fatalf("models %v", set.ModelNames())
	}
	if lr := set.Optims["small"].LR; lr != 1e-3 {
		t.Fatalf("verifier's model trained with lr %v, want its own 1e-3", lr)
	}
	if lr := set.Optims["big"].LR; lr != 1e-4 {
		t.Fatalf("solver's model trained with lr %v, want its own 1e-4", lr)
	}
}

// TestPipelineOnMinIO runs the whole loop against a real S3-compatible server and checks that it
// writes the same checkpoint bytes as the local-folder store.
func TestPipelineOnMinIO(t *testing.T) {
	srv := miniotest.Start(t)
	t.Logf("minio %s at %s", srv.Version(), srv.Endpoint)
	bucket := srv.NewBucket(t)
	ctx := context.Background()
	b, err := client.Open(ctx, "s3://"+bucket+"/experiments", s3store.Config{
		Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Insecure: true, PathStyle: true, MaxRetries: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := stagetest.Config(t, "math")
	s3env := &stages.Env{Bucket: b, Config: cfg}
	if _, err := pipeline.Run(ctx, s3env, pipeline.Options{Iterations: 2, EvalEvery: 1}); err != nil {
		t.Fatal(err)
	}
	local := stagetest.Env(t, cfg)
	if _, err := pipeline.Run(ctx, local, pipeline.Options{Iterations: 2, EvalEvery: 1}); err != nil {
		t.Fatal(err)
	}
	for _, env := range []*stages.Env{s3env, local} {
		if step, err := checkpoints.ReadLatest(ctx, env.Bucket, "t"); err != nil || step != 2 {
			t.Fatalf("%s: LATEST %d %v", env.Bucket.Name(), step, err)
		}
	}
	ms, _, err := commit.Read(ctx, b, layout.CheckpointDir("t", 2))
	if err != nil {
		t.Fatal(err)
	}
	ml, _, err := commit.Read(ctx, local.Bucket, layout.CheckpointDir("t", 2))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ms.Files) != fmt.Sprint(ml.Files) {
		t.Fatalf("S3 and local runs differ:\n%v\n%v", ms.Files, ml.Files)
	}
	// Every object under the run is listed in sorted order and every committed folder verifies.
	var keys []string
	if err := b.Iter(ctx, "runs/t/", func(k string) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(keys); i++ {
		if keys[i-1] >= keys[i] {
			t.Fatalf("Iter not sorted at %q, %q", keys[i-1], keys[i])
		}
	}
	manifests := 0
	for _, k := range keys {
		if strings.HasSuffix(k, "/"+commit.ManifestName) {
			dir := strings.TrimSuffix(k, "/"+commit.ManifestName)
			m, _, err := commit.Read(ctx, b, dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := commit.Verify(ctx, b, dir, m, true); err != nil {
				t.Fatal(err)
			}
			manifests++
		}
	}
	if manifests < 10 {
		t.Fatalf("only %d committed folders", manifests)
	}
}

// TestResumeAppliesRetention resumes a loop whose learn iterations are all committed but whose
// older checkpoints were not deleted (a kill between learn's commit and its retention, or a
// lowered learn.keep_checkpoints): the resumed run must delete the steps beyond
// keep_checkpoints, as an uninterrupted run does, keeping step 0 and LATEST.
func TestResumeAppliesRetention(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	cfg.Learn.KeepCheckpoints = 10
	env := stagetest.Env(t, cfg)
	if _, err := pipeline.Run(ctx, env, pipeline.Options{Iterations: 3, EvalEvery: -1}); err != nil {
		t.Fatal(err)
	}
	if steps, err := checkpoints.Steps(ctx, env.Bucket, "t"); err != nil || fmt.Sprint(steps) != "[0 1 2 3]" {
		t.Fatalf("steps %v %v, want [0 1 2 3]", steps, err)
	}
	env.Config.Learn.KeepCheckpoints = 1
	if _, err := pipeline.Run(ctx, env, pipeline.Options{Iterations: 3, EvalEvery: -1}); err != nil {
		t.Fatal(err)
	}
	if steps, err := checkpoints.Steps(ctx, env.Bucket, "t"); err != nil || fmt.Sprint(steps) != "[0 3]" {
		t.Fatalf("after resuming with keep_checkpoints 1: steps %v %v, want [0 3]", steps, err)
	}
}
