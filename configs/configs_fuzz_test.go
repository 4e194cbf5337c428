package configs

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// FuzzLoad: Load on any YAML file either returns a configuration that validates or an error,
// never panics, and keeps memory proportional to the file.
func FuzzLoad(f *testing.F) {
	f.Add(DefaultYAML())
	for _, name := range []string{"minio.yaml", "search.yaml", "heterogeneous.yaml"} {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("run: t\nseed: 5\nmodels:\n  m1: {dim: 16, layers: 1, heads: 2, context: 96, ff_mult: 2, tied_head: true}\nagents:\n  solver: {model: m1}\n"))
	f.Add([]byte("learn: {lr: -1, clip: nan}\nrollout: {group_size: 0}\n"))
	f.Add([]byte("learn: {kl_coef: .nan, weight_decay: .inf}\nevaluate: {top_p: .nan}\n"))
	f.Add([]byte("unknown_key: 1\nmodels: [1, 2]\n"))
	f.Add([]byte("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"))
	f.Add([]byte("\t- ]["))
	noEnv := func(string) (string, bool) { return "", false }
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "fuzz.yaml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		cfg, err := Load(LoadOptions{File: path, LookupEnv: noEnv})
		runtime.ReadMemStats(&ms)
		if got := ms.TotalAlloc - before; got > 64<<20+1000*uint64(len(data)) {
			t.Fatalf("Load allocated %d MiB for %d bytes", got>>20, len(data))
		}
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Load returned a config that does not validate: %v", err)
		}
		_ = cfg.Redacted()
		_ = Digest(cfg.Learn)
	})
}
