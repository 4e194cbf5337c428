package warmup_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/hf/hftest"
	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
)

// TestWarmupLoRA: with models.<id>.lora, step 0 is a LoRA adapter over the base: with
// warmup.steps 0 a new one (B = 0, so it scores as the base), with steps one the warm-up
// trained (B moved, the base's weights as the folder holds them, stored in BF16 when the
// folder is), of the configured shape.
func TestWarmupLoRA(t *testing.T) {
	tok := oracles.Qwen3TokenizerDir(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	base := hftest.TinyHF(t, filepath.Join(t.TempDir(), "q"), tok, 2)
	ctx := context.Background()
	baseLLM, baseCfg, err := hf.LoadLLM(base)
	if err != nil {
		t.Fatal(err)
	}
	seqs := []model.Sequence{{Prompt: []int32{151644, 872, 198}, Response: []int32{3838, 151645}}}
	want, _, err := baseLLM.Score(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	step0 := func(steps int) *model.LoRA {
		cfg := stagetest.Config(t, "math")
		cfg.Models = map[string]configs.Model{"q": {HF: base, LoRA: &configs.LoRA{R: 2, Dropout: 0.1, TargetModules: []string{"q_proj", "up_proj"}}}}
		cfg.Agents = map[string]configs.Agent{"solver": {Model: "q"}, "verifier": {Model: "q"}}
		cfg.Warmup.Steps, cfg.Warmup.Batch, cfg.Warmup.Demos, cfg.Warmup.LR = steps, 2, 2, 1e-2
		env := stagetest.Env(t, cfg)
		if _, err := warmup.Run(ctx, env); err != nil {
			t.Fatal(err)
		}
		set, err := checkpoints.LoadStep(ctx, env.Bucket, "t", 0, false)
		if err != nil {
			t.Fatal(err)
		}
		l, ok := set.HF["q"].Model.(*model.LoRA)
		if !ok {
			t.Fatalf("step 0 holds a %T", set.HF["q"].Model)
		}
		c := l.Config()
		if c.R != 2 || c.Alpha != 4 || c.Dropout != 0.1 || !slices.Equal(c.Targets, []string{"q_proj", "up_proj"}) || set.HF["q"].DropoutSeed == 0 {
			t.Errorf("adapter %+v, dropout seed %d", c, set.HF["q"].DropoutSeed)
		}
		for i, p := range l.Base().Params() {
			if !slices.Equal(p.Float32(), baseLLM.Params()[i].Data) {
				t.Fatalf("base tensor %s differs from the folder's", p.Name)
			}
		}
		if l.Base().StoredBF16() != (baseCfg.TorchDtype == "bfloat16") {
			t.Errorf("base stored in BF16 %v, the folder's dtype %s", l.Base().StoredBF16(), baseCfg.TorchDtype)
		}
		return l
	}
	l := step0(0)
	got, _, err := l.Score(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[0], want[0]) {
		t.Errorf("an untrained adapter scores %v, the base %v", got[0], want[0])
	}
	l = step0(3)
	var moved float64
	for _, p := range l.Params() {
		if strings.HasSuffix(p.Name, "lora_B.weight") {
			for _, v := range p.Data {
				moved += float64(v) * float64(v)
			}
		}
	}
	if moved == 0 {
		t.Error("3 warm-up steps left B = 0")
	}
}
