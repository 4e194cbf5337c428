package configs

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// loadBudget is the time and memory one Load of a fuzzed input may take: the caps make
// loading linear, so a small input must load quickly whatever its shape (before them a
// 25 KB file nested 5,000 deep took 553 s).
const (
	loadTime     = 2 * time.Second
	loadAllocMiB = 64
)

// bounded runs load and fails t if it takes more than loadBudget for an input of n bytes.
func bounded(t *testing.T, n int, load func() (*Config, error)) {
	t.Helper()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	t0 := time.Now()
	cfg, err := load()
	elapsed := time.Since(t0)
	runtime.ReadMemStats(&ms)
	if got := ms.TotalAlloc - before; got > loadAllocMiB<<20+1000*uint64(n) {
		t.Fatalf("Load allocated %d MiB for %d bytes", got>>20, n)
	}
	if elapsed > loadTime {
		t.Fatalf("Load took %s for %d bytes", elapsed, n)
	}
	if err != nil {
		if len(err.Error()) > 64<<10 {
			t.Fatalf("a %d-byte message", len(err.Error()))
		}
		return
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Load returned a config that does not validate: %v", err)
	}
}

// FuzzLoadFormats: Load of any file as YAML, JSON or TOML stays within the time and memory
// budget, and never panics.
func FuzzLoadFormats(f *testing.F) {
	f.Add([]byte(`{"run": "x", "learn": {"lr": 0.1}}`), uint8(1))
	f.Add([]byte("run = \"x\"\n[learn]\nlr = 0.1\n[models.m1]\ndim = 16\n"), uint8(2))
	f.Add([]byte(nested("json", 40)), uint8(1))
	f.Add([]byte(nested("toml", 40)), uint8(2))
	f.Add([]byte(nested("yaml", 40)), uint8(0))
	f.Add([]byte(manyKeys("toml", 300)), uint8(2))
	f.Add([]byte("[[a]]\n[[a]]\nb = [[1, [2]], {c = 3}]\n"), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, format uint8) {
		ext := []string{"yaml", "json", "toml"}[format%3]
		path := filepath.Join(t.TempDir(), "fuzz."+ext)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		bounded(t, len(data), func() (*Config, error) { return Load(LoadOptions{File: path, LookupEnv: noEnv}) })
	})
}

// TestLoadEnvExcerptsEveryKey: a long value of any DRMAS_* variable, printable or not, is
// refused (or accepted) with a message that quotes it as an excerpt. FuzzLoadEnv found
// workflow.critic_reward quoting all of a 1,021-byte value; this checks every key at once.
func TestLoadEnvExcerptsEveryKey(t *testing.T) {
	for _, key := range FixedKeys() {
		name := EnvVar(key)
		for _, val := range []string{strings.Repeat("a", 3000), strings.Repeat("\x00", 1021)} {
			env := func(v string) (string, bool) { return val, v == name }
			_, err := Load(LoadOptions{LookupEnv: env})
			if err == nil {
				continue
			}
			if msg := err.Error(); len(msg) > 1024 || strings.Contains(msg, val[:200]) {
				t.Errorf("%s of %d bytes: a %d-byte message: %.300s", name, len(val), len(msg), msg)
			}
		}
	}
}

// FuzzLoadEnv: any value of any DRMAS_* variable loads within the budget, and a refusal
// quotes it as a short excerpt.
func FuzzLoadEnv(f *testing.F) {
	f.Add(uint8(0), "demo")
	f.Add(uint8(3), "010")
	f.Add(uint8(20), "1000000000")
	f.Add(uint8(7), strings.Repeat("9", 5000))
	f.Add(uint8(11), "1e400")
	f.Fuzz(func(t *testing.T, k uint8, val string) {
		keys := FixedKeys()
		name := EnvVar(keys[int(k)%len(keys)])
		env := func(v string) (string, bool) {
			if v == name {
				return val, true
			}
			return "", false
		}
		var msg string
		bounded(t, len(val), func() (*Config, error) {
			cfg, err := Load(LoadOptions{LookupEnv: env})
			if err != nil {
				msg = err.Error()
			}
			return cfg, err
		})
		if len(msg) > 4096 {
			t.Fatalf("%s of %d bytes: a %d-byte message", name, len(val), len(msg))
		}
	})
}
