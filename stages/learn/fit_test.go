package learn

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hfmodel"
	"github.com/drmas-dev/drmas/model"
)

// TestMicroBatchForSplits: on the CPU engine, a Hugging Face model whose step at micro_batch 8
// does not fit the memory limit while one of 2 sequences does trains in chunks of 2 (and says
// so); under a large limit, on another engine, or for the built-in model, micro_batch stands.
func TestMicroBatchForSplits(t *testing.T) {
	m, err := model.InitLLM(model.ArchConfig{Arch: "qwen3", Hidden: 32, Layers: 2, Heads: 2, KVHeads: 1, Intermediate: 64, Vocab: 512, Context: 2048,
		RopeTheta: 1e4}.WithDefaults(), 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := configs.Default()
	cfg.Rollout.MaxTokens = 1024
	s2, _ := hfmodel.TrainableStep(cfg, m, 2)
	s3, ok := hfmodel.TrainableStep(cfg, m, 3)
	if !ok || s3.Total() <= s2.Total() {
		t.Fatalf("steps of 2 and 3 sequences: %d, %d bytes", s2.Total(), s3.Total())
	}
	old := debug.SetMemoryLimit((s2.Total() + s3.Total()) / 2)
	defer debug.SetMemoryLimit(old)
	var said string
	logf := func(f string, a ...any) { said = f }
	if got := microBatchFor(cfg, "q", m, CPU, 8, logf); got != 2 || !strings.Contains(said, "accumulation chunks") {
		t.Errorf("micro-batch %d (said %q), want 2", got, said)
	}
	if got := microBatchFor(cfg, "q", m, nil, 8, nil); got != 8 {
		t.Errorf("another engine: micro-batch %d, want 8", got)
	}
	builtin, err := model.New(model.DefaultConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := microBatchFor(cfg, "q", builtin, CPU, 8, nil); got != 8 {
		t.Errorf("built-in model: micro-batch %d, want 8", got)
	}
	debug.SetMemoryLimit(1 << 50)
	if got := microBatchFor(cfg, "q", m, CPU, 8, nil); got != 8 {
		t.Errorf("under 1 PiB: micro-batch %d, want 8", got)
	}
}
