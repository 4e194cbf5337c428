package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStageRefusedOverMemory: sizes that would not fit are refused before the store is
// opened, with the estimate, the limit and the keys to lower; sizes over a key's bound are
// refused by the config check. Neither reaches the allocator.
func TestStageRefusedOverMemory(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	t.Setenv("DRMAS_TASKS_PER_ITERATION", "100000")
	t.Setenv("DRMAS_ROLLOUT_GROUP_SIZE", "64")
	_, _, err := execute(t, "-q", "--store", store, "--memory-limit", "8GiB", "run-stage", "rollout", "--iter", "0")
	if err == nil || !strings.Contains(err.Error(), "rollout would need about ") || !strings.Contains(err.Error(), "more than the 8.0 GiB of --memory-limit") ||
		!strings.Contains(err.Error(), "lower tasks.per_iteration or rollout.group_size") {
		t.Fatalf("got %v", err)
	}
	_, _, err = execute(t, "-q", "--store", store, "--memory-limit", "8GiB", "run", "--iters", "1")
	if err == nil || !strings.Contains(err.Error(), "would need about ") {
		t.Fatalf("run: got %v", err)
	}
	t.Setenv("DRMAS_ROLLOUT_GROUP_SIZE", "1000000000")
	_, _, err = execute(t, "-q", "--store", store, "run-stage", "rollout", "--iter", "0")
	if err == nil || !strings.Contains(err.Error(), "rollout.group_size: 1000000000, want at most 1024") {
		t.Fatalf("group size: got %v", err)
	}
	if _, err := os.Stat(store); !os.IsNotExist(err) {
		t.Errorf("a refused stage created the store: %v", err)
	}
	t.Setenv("DRMAS_ROLLOUT_GROUP_SIZE", "8")
	_, _, err = execute(t, "-q", "--store", store, "--memory-limit", "lots", "run-stage", "learn", "--iter", "0")
	if err == nil || !strings.Contains(err.Error(), "--memory-limit lots: want a size such as 8GiB") {
		t.Fatalf("bad limit: got %v", err)
	}
}

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]float64{"1048576": 1 << 20, "8GiB": 8 << 30, "8G": 8 << 30, "512 MiB": 512 << 20, "1.5TB": 1.5 * (1 << 40)} {
		if got, err := parseBytes(s); err != nil || got != want {
			t.Errorf("%s: %g %v, want %g", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0", "-1G", "8XB", "NaN", "1e400"} {
		if _, err := parseBytes(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}
