package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestBenchInterp runs the whole benchmark, GPU path included, with the GPU engine on the
// gpu/ir interpreter at a tiny shape: the code the GPU machine runs is exercised here. Both
// engines must report a result, their first-step losses must agree to float32 tolerance, and
// the profile must list the GEMMs with their flops.
func TestBenchInterp(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"-device", "interp", "-dim", "16", "-layers", "1", "-heads", "2", "-batch", "3", "-seq", "12", "-prompt", "4", "-micro-batch", "1", "-gpu-steps", "1", "-host-optimizer-steps", "1", "-cpu-steps", "1"}, &out)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"GPU: gpu/ir interpreter", "RESULT gpu: median step", "RESULT gpu-host-optimizer: median step", "RESULT device optimizer vs host optimizer", "RESULT cpu: median step", "adamw ", "sumsq_part ", "profiled step", "gemm_nn ", "profiled kernels:"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	m := regexp.MustCompile(`\|diff\| ([0-9.e+-]+)\)`).FindStringSubmatch(s)
	if m == nil {
		t.Fatal("no speed-up line with the loss difference")
	}
	if d, err := strconv.ParseFloat(m[1], 64); err != nil || !(d < 1e-4) {
		t.Errorf("first-step loss differs by %s between the engines (want < 1e-4)", m[1])
	}
	// The two GPU runs start from the same weights: their first steps' losses are the same bits.
	first := regexp.MustCompile(`(?m)^(gpu|gpu-host-optimizer) (?:warm-up step|step 1): [0-9.]+s.*loss ([0-9.e+-]+),`).FindAllStringSubmatch(s, -1)
	loss := map[string]string{}
	for _, f := range first {
		if _, ok := loss[f[1]]; !ok {
			loss[f[1]] = f[2]
		}
	}
	if len(loss) != 2 || loss["gpu"] != loss["gpu-host-optimizer"] {
		t.Errorf("first-step losses of the two GPU runs: %v", loss)
	}
	if err := run([]string{"-device", "tpu"}, &out); err == nil || !strings.Contains(err.Error(), "want cuda or interp") {
		t.Errorf("-device tpu: %v", err)
	}
}
