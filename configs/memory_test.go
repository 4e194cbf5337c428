package configs

import (
	"errors"
	"strings"
	"testing"
)

// TestMemoryDefault: the default config's stages fit in well under a GiB, the size of the
// default model and its batches, and learn counts the optimizer's copies of the weights.
func TestMemoryDefault(t *testing.T) {
	c := Default()
	params := float64(c.Models["m1"].Engine().NumParams())
	for _, s := range MemoryStages {
		e := c.Memory(s)
		if e.Bytes <= 0 || e.Bytes > 1<<30 {
			t.Errorf("%s: %s", s, Bytes(e.Bytes))
		}
	}
	var w float64
	for _, term := range c.Memory("learn").Terms {
		if strings.HasPrefix(term.What, "model weights") {
			w = term.Bytes
		}
	}
	if want := params * 4 * optimizerCopies * gcHeadroom; w != want {
		t.Errorf("learn's weights: %g bytes, want %g (params %g × 4 B × %d copies × %d)", w, want, params, optimizerCopies, gcHeadroom)
	}
}

// TestMemoryScales: rollout's estimate grows as tasks × group size, by hand: the default's
// 2 agents × max(max_loop 2, max_steps 4) = 8 turns of 128 tokens (m1's context), and m1's
// attention cache of 2 × 3 layers × 128 positions × 64 dims × 4 bytes per sequence.
func TestMemoryScales(t *testing.T) {
	c := Default()
	c.Tasks.PerIteration, c.Rollout.GroupSize = 1000, 100
	terms := map[string]float64{}
	for _, term := range c.Memory("rollout").Terms {
		terms[strings.Fields(term.What)[0]] = term.Bytes
	}
	if want := 1000.0 * 100 * 8 * (128*bytesPerToken + bytesPerTurn) * gcHeadroom; terms["episodes"] != want {
		t.Errorf("episodes: %g, want %g", terms["episodes"], want)
	}
	if want := 1000.0 * 100 * 2 * 3 * 128 * 64 * 4 * gcHeadroom; terms["attention"] != want {
		t.Errorf("attention caches: %g, want %g", terms["attention"], want)
	}
}

// TestCheckMemory: the largest allowed sizes give a refusal with the estimate, the limit and
// the keys to lower, never a number that overflowed.
func TestCheckMemory(t *testing.T) {
	c := Default()
	c.Tasks.PerIteration, c.Rollout.GroupSize = MaxTasks, MaxGroupSize
	err := c.CheckMemory(MemoryStages, 24<<30, "--memory-limit")
	var fit *FitError
	if !errors.As(err, &fit) || fit.Estimate.Stage != "rollout" {
		t.Fatalf("got %v, want rollout refused", err)
	}
	msg := err.Error()
	for _, want := range []string{"rollout would need about ", " TiB, more than the 24.0 GiB of --memory-limit", "lower tasks.per_iteration or rollout.group_size", "or raise --memory-limit"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if err := Default().CheckMemory(MemoryStages, 1<<30, "this machine's memory"); err != nil {
		t.Errorf("default: %v", err)
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[float64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 24 << 30: "24.0 GiB", 300 << 20: "300 MiB", 1 << 62: "4.0 EiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%g) = %s, want %s", n, got, want)
		}
	}
}

// TestSizeBounds: every size key has an upper bound, reported by key with the bound.
func TestSizeBounds(t *testing.T) {
	env := map[string]string{"DRMAS_ROLLOUT_GROUP_SIZE": "1000000000", "DRMAS_TASKS_PER_ITERATION": "100000000", "DRMAS_LEARN_MICRO_BATCH": "9223372036854775807"}
	_, err := Load(LoadOptions{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err == nil {
		t.Fatal("huge sizes accepted")
	}
	for _, want := range []string{"rollout.group_size: 1000000000, want at most 1024", "tasks.per_iteration: 100000000, want at most 1000000", "learn.micro_batch: 9223372036854775807, want at most 1000000"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}
	c := Default()
	for _, s := range c.sizeBounds() {
		if s.val > s.max || s.max <= 0 {
			t.Errorf("default %s = %d over its bound %d", s.key, s.val, s.max)
		}
	}
}
