package warmup_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hf/hftest"
	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
)

// TestWarmupHF: with warmup.steps 0, step 0 of a Hugging Face model is its base as it is (the
// same weight bytes); with steps, the model is fine-tuned on the demonstrations rendered by
// its chat template, here from a base in a store; a model that will not fit in memory is refused before it is loaded.
func TestWarmupHF(t *testing.T) {
	tok := oracles.Qwen3TokenizerDir(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	base := hftest.TinyHF(t, filepath.Join(t.TempDir(), "q"), tok, 2)
	ctx := context.Background()
	newEnv := func(steps int, src string) (*configs.Config, string) {
		cfg := stagetest.Config(t, "math")
		cfg.Models = map[string]configs.Model{"q": {HF: src}}
		cfg.Agents = map[string]configs.Agent{"solver": {Model: "q"}, "verifier": {Model: "q"}}
		cfg.Warmup.Steps, cfg.Warmup.Batch, cfg.Warmup.Demos, cfg.Warmup.LR = steps, 2, 2, 1e-2
		env := stagetest.Env(t, cfg)
		res, err := warmup.Run(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		if res.Demos["q"] == 0 {
			t.Fatalf("result %+v", res)
		}
		set, err := checkpoints.LoadStep(ctx, env.Bucket, "t", 0, false)
		if err != nil || set.HF["q"] == nil || set.HF["q"].Base != src {
			t.Fatalf("step 0: %+v %v", set, err)
		}
		data, err := os.ReadFile(filepath.Join(set.HF["q"].Dir, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		return env.Config, commit.Digest(data)
	}
	want, _ := os.ReadFile(filepath.Join(base, "model.safetensors"))
	if _, got := newEnv(0, base); got != commit.Digest(want) {
		t.Error("warmup.steps 0: step 0's weights are not the base's bytes")
	}
	// A base in a store is fetched into the cache first.
	if _, got := newEnv(3, "file://"+filepath.ToSlash(base)); got == commit.Digest(want) {
		t.Error("3 warm-up steps left the weights as they were")
	}

	old := debug.SetMemoryLimit(1 << 10)
	defer debug.SetMemoryLimit(old)
	cfg := stagetest.Config(t, "math")
	cfg.Models = map[string]configs.Model{"q": {HF: base}}
	cfg.Agents = map[string]configs.Agent{"solver": {Model: "q"}, "verifier": {Model: "q"}}
	if _, err := warmup.Run(ctx, stagetest.Env(t, cfg)); err == nil || !strings.Contains(err.Error(), "models.q.lora") {
		t.Fatalf("a model over the memory limit: %v", err)
	}
}
