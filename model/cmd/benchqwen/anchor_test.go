package main

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func lookup(env []string, key string) (string, bool) {
	var v string
	found := false
	for _, kv := range env { // the last one wins, as in exec
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v, found = val, true
		}
	}
	return v, found
}

func TestTorchEnv(t *testing.T) {
	t.Setenv("OPENBLAS_CORETYPE", "")
	os.Unsetenv("OPENBLAS_CORETYPE")
	env, desc, err := torchEnv("system", "Zen")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := lookup(env, "OPENBLAS_CORETYPE"); v != "Zen" {
		t.Errorf("core Zen: OPENBLAS_CORETYPE=%q", v)
	}
	if !slices.Equal(env[:len(env)-1], os.Environ()) || len(env) != len(os.Environ())+1 {
		t.Errorf("system malloc adds more than the core to the environment: %q", env[len(os.Environ()):])
	}
	if !strings.Contains(desc, "glibc") || !strings.Contains(desc, "Zen") {
		t.Errorf("description %q does not say what was set", desc)
	}

	env, desc, err = torchEnv("jemalloc", "none")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := lookup(env, "OPENBLAS_CORETYPE"); ok {
		t.Errorf("core none sets OPENBLAS_CORETYPE")
	}
	if lib := jemalloc(); lib != "" {
		if v, _ := lookup(env, "LD_PRELOAD"); v != lib || !strings.HasSuffix(v, "/libjemalloc.so.2") {
			t.Errorf("jemalloc installed but LD_PRELOAD=%q", v)
		}
		if v, _ := lookup(env, "MALLOC_CONF"); !strings.Contains(v, "retain:true") {
			t.Errorf("MALLOC_CONF=%q does not retain pages", v)
		}
	} else if !strings.Contains(desc, "not installed") {
		t.Errorf("jemalloc missing but the description %q does not say so", desc)
	}

	// An inherited core: none keeps it, auto replaces it only on an AVX-512 CPU.
	t.Setenv("OPENBLAS_CORETYPE", "Haswell")
	for _, c := range []struct{ core, want string }{{"none", "Haswell"}, {"auto", map[bool]string{true: "SkylakeX", false: "Haswell"}[hasAVX512()]}} {
		env, desc, err = torchEnv("system", c.core)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := lookup(env, "OPENBLAS_CORETYPE"); v != c.want {
			t.Errorf("core %s over the environment's Haswell: OPENBLAS_CORETYPE=%q, want %q", c.core, v, c.want)
		}
		if !strings.Contains(desc, c.want) {
			t.Errorf("core %s: description %q does not name %s", c.core, desc, c.want)
		}
	}

	for _, bad := range [][2]string{{"tcmalloc", "auto"}, {"system", " "}} {
		if _, _, err := torchEnv(bad[0], bad[1]); err == nil {
			t.Errorf("torchEnv(%q, %q) accepted", bad[0], bad[1])
		}
	}
}
