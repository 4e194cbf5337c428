package warmup_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
)

func TestWarmupIsDeterministicAndPublishesStepZero(t *testing.T) {
	ctx := context.Background()
	var files []string
	for i := 0; i < 2; i++ {
		env := stagetest.Env(t, stagetest.Config(t, "math"))
		res, err := warmup.Run(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		if res.Demos["m1"] == 0 || !(res.Loss["m1"] > 0) {
			t.Fatalf("result %+v", res)
		}
		if step, err := checkpoints.ReadLatest(ctx, env.Bucket, "t"); err != nil || step != 0 {
			t.Fatalf("LATEST %d %v", step, err)
		}
		m, _, err := commit.Read(ctx, env.Bucket, layout.CheckpointDir("t", 0))
		if err != nil {
			t.Fatal(err)
		}
		if m.Parent != nil || len(m.Files) != 1 || m.ConfigDigest != warmup.Digest(env.Config) {
			t.Fatalf("manifest %+v", m)
		}
		files = append(files, fmt.Sprint(m.Files))
		var log strings.Builder
		env.Log = &log
		again, err := warmup.Run(ctx, env)
		if err != nil || !again.Skipped || strings.Contains(log.String(), "other settings") {
			t.Fatalf("rerun: %+v %v, log %q", again, err, log.String())
		}
		// Other warm-up settings keep step 0, with a warning that says so.
		changed := *env
		cfg := *env.Config
		cfg.Warmup.Steps++
		changed.Config = &cfg
		log.Reset()
		if again, err := warmup.Run(ctx, &changed); err != nil || !again.Skipped || !strings.Contains(log.String(), "was warmed up with other settings") {
			t.Fatalf("rerun with other warm-up steps: %+v %v, log %q", again, err, log.String())
		}
	}
	if files[0] != files[1] {
		t.Fatalf("same config and seed, different checkpoints:\n%s\n%s", files[0], files[1])
	}
}

func TestWarmupLearnsTheDemonstrations(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	cfg.Warmup.Steps, cfg.Warmup.Batch, cfg.Warmup.LR = 200, 16, 3e-3
	env := stagetest.Env(t, cfg)
	res, err := warmup.Run(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	// A uniform guess over the 264-token vocabulary costs ln 264 ≈ 5.6 nats a token.
	if res.Loss["m1"] > 2.5 {
		t.Fatalf("final warm-up loss %.3f: the model did not learn the demonstrations' format", res.Loss["m1"])
	}
}

func TestWarmupRejectsTooSmallContext(t *testing.T) {
	cfg := stagetest.Config(t, "search")
	cfg.Models["m1"] = configs.Model{Dim: 16, Layers: 1, Heads: 2, Context: 32, FFMult: 2}
	_, err := warmup.Run(context.Background(), stagetest.Env(t, cfg))
	if err == nil || !strings.Contains(err.Error(), "models.m1.context") {
		t.Fatalf("want an error telling to raise models.m1.context, got %v", err)
	}
}
