package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/internal/oracles"
)

// TestDefaultConfigTrainsSmallQwen3: the embedded default config with only models.m1 changed to
// {hf: DIR}, DIR a Qwen3 of hidden 64 and 2 layers over the real 151,680-token Qwen3 tokenizer
// (19.5 M parameters, untied), runs warm-up, evaluation, rollout, normalize and learn to step 1
// under a 4 GiB memory limit at the default micro_batch of 64 (a step estimated with the
// [tokens × vocabulary] logits and every attention map was ~39 GiB, and was refused). Only the
// counts (steps, tasks, samples) are lowered, through the environment, to keep it short.
func TestDefaultConfigTrainsSmallQwen3(t *testing.T) {
	tok := oracles.Qwen3TokenizerDir(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "q3")
	if _, _, err := execute(t, "model", "init", "--arch", "qwen3", "--hidden", "64", "--layers", "2", "--heads", "4", "--kv-heads", "2",
		"--head-dim", "32", "--intermediate", "128", "--untied", "--tokenizer", tok, "--seed", "1", "--out", dir); err != nil {
		t.Fatal(err)
	}
	def, _, err := execute(t, "config", "default")
	if err != nil {
		t.Fatal(err)
	}
	const sized = "  m1: {dim: 64, layers: 3, heads: 4, context: 128, ff_mult: 4, tied_head: true}\n"
	if strings.Count(def, sized) != 1 {
		t.Fatalf("the default config's model line changed; update this test:\n%s", def)
	}
	cfgFile := filepath.Join(tmp, "my.yaml")
	if err := os.WriteFile(cfgFile, []byte(strings.Replace(def, sized, "  m1: {hf: "+dir+"}\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"DRMAS_ITERATIONS": "1", "DRMAS_WARMUP_STEPS": "3", "DRMAS_WARMUP_DEMOS": "8", "DRMAS_WARMUP_BATCH": "4",
		"DRMAS_TASKS_PER_ITERATION": "2", "DRMAS_TASKS_EVAL_SIZE": "2", "DRMAS_EVALUATE_K": "2", "DRMAS_ROLLOUT_GROUP_SIZE": "2"} {
		t.Setenv(k, v)
	}
	old := debug.SetMemoryLimit(-1) // --memory-limit becomes the process's soft limit
	defer debug.SetMemoryLimit(old)
	out, errOut, err := execute(t, "-q", "--config", cfgFile, "--store", filepath.Join(tmp, "store"), "--memory-limit", "4GiB", "run")
	if err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, out, errOut)
	}
	if all := out + errOut; !strings.Contains(all, "→ step 1") || !strings.Contains(all, "learn iter 0 model m1") {
		t.Errorf("the run did not learn a step:\n%s", all)
	}
}
