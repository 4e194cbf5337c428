// Package analysistest builds a small committed run once per test binary, shared by the tests
// of analysis, ablate and report.
package analysistest

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/pipeline"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/storage/filestore"
)

// Run is the name of the fixture run.
const Run = "src"

// Iterations is the number of RL iterations of the fixture run.
const Iterations = 3

// Estimators are the estimators the fixture run normalizes with (it learns with the first).
var Estimators = []string{"drmas", "grpo", "grpo_step"}

var (
	once    sync.Once
	dir     string
	cfg     *configs.Config
	onceErr error
)

// Config returns the tiny math config of the fixture run (a fresh copy; Store unset).
func Config(t testing.TB) *configs.Config {
	t.Helper()
	c := stagetest.Config(t, "math")
	c.Run = Run
	c.Iterations = Iterations
	c.Normalize.Estimators = append([]string(nil), Estimators...)
	c.Learn.Estimator = Estimators[0]
	c.Evaluate.Every = 1
	// Enough warm-up that the policy sometimes answers validly and correctly, so rewards,
	// advantages and grad norms vary (about 1.5 s).
	c.Models = map[string]configs.Model{"m1": {Dim: 32, Layers: 1, Heads: 2, Context: 96, FFMult: 2, TiedHead: true}}
	c.Warmup.Steps = 150
	c.Warmup.Batch = 16
	c.Warmup.LR = 1e-2
	c.Rollout.MaxTokens = 16
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// Source returns the folder of a local store holding the fixture run, building it on first use
// with pipeline.Run (a few seconds). Tests must not modify it: copy it with CopyDir first.
func Source(t testing.TB) (string, *configs.Config) {
	t.Helper()
	once.Do(func() {
		cfg = Config(t)
		dir, onceErr = os.MkdirTemp("", "drmas-analysistest-")
		if onceErr != nil {
			return
		}
		var b *filestore.Bucket
		if b, onceErr = filestore.New(dir); onceErr != nil {
			return
		}
		defer b.Close()
		c := *cfg
		c.Store = dir
		env := &stages.Env{Bucket: b, Config: &c}
		_, onceErr = pipeline.Run(context.Background(), env, pipeline.Options{Iterations: Iterations, EvalEvery: 1})
	})
	if onceErr != nil {
		t.Fatalf("build fixture run: %v", onceErr)
	}
	c := *cfg
	c.Store = dir
	return dir, &c
}

// Cleanup removes the fixture store; call it from TestMain after m.Run.
func Cleanup() {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// CopyDir copies the folder tree src into dst (created), for tests that modify a store.
func CopyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Store returns a private copy of the fixture store (in a test temp dir) and its config.
func Store(t testing.TB) (string, *configs.Config) {
	t.Helper()
	src, c := Source(t)
	dst := t.TempDir()
	CopyDir(t, src, dst)
	c.Store = dst
	return dst, c
}

// Env returns a private copy of the fixture store opened as a folder bucket (closed when the
// test ends), with its config, and the copy's folder.
func Env(t testing.TB) (*stages.Env, string) {
	t.Helper()
	store, c := Store(t)
	b, err := filestore.New(store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return &stages.Env{Bucket: b, Config: c}, store
}
