package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/internal/llamacpp"
	"github.com/drmas-dev/drmas/internal/oracles"
)

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The testdata files are the programs' own outputs from the runs of 2026-12-07 that
// docs/performance.md quotes; each parser must read back the figures printed there.
func TestParseSavedRuns(t *testing.T) {
	tr, err := parseTorch(readTestdata(t, "benchqwen.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := torchRun{Tokens: 256, Threads: 2, Drmas: 82.91, Torch: 42.54, DrmasCPU: 85.40, TorchCPU: 43.27, DecodeBatch: 8,
		Decode: 46.73, TorchDecode: 13.55, DecodeCPU: 49.49, LogProbDrmas: -3079.7852, LogProbTorch: -3079.7852,
		GreedySame: 256, GreedyAll: 256, PeakRSSGB: 5.14, TorchPeakRSSGB: 6.90, AdamWStepRSSGB: 9.14}
	if !reflect.DeepEqual(tr, want) {
		t.Errorf("benchqwen: got %+v\nwant %+v", tr, want)
	}

	// A run of three rounds (a small shape): the rounds' ratios come back, and the table's
	// ratio is their median.
	tr, err = parseTorch(readTestdata(t, "benchqwen-rounds.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tr.Rounds, []float64{68.05, 15.86, 35.38}) {
		t.Errorf("rounds %v", tr.Rounds)
	}
	r := &results{torch: &tr, failed: map[string]error{}}
	if row := r.trainRows()[0]; row.ratio != "35.38×, median of 3 rounds (15.86–68.05×)" {
		t.Errorf("rounds' ratio cell %q", row.ratio)
	}

	// A run that says how PyTorch's side was set up: the line comes back and is printed
	// under the table; older outputs have none.
	tr, err = parseTorch(readTestdata(t, "benchqwen-anchor.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tr.Setup, "PyTorch runs with jemalloc") || !strings.Contains(tr.Setup, "OPENBLAS_CORETYPE=SkylakeX") {
		t.Errorf("setup %q", tr.Setup)
	}
	var md strings.Builder
	(&results{torch: &tr, failed: map[string]error{}}).write(&md, "")
	if !strings.Contains(md.String(), tr.Setup+".") {
		t.Errorf("the table's notes leave out the setup:\n%s", md.String())
	}

	g, err := parseGEMM(readTestdata(t, "benchengine.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if g != (gemmRun{CorePeak: 242.5, StepRate: 327.9, StepShare: 68, StepSeconds: 2.3, Threads: 2}) {
		t.Errorf("benchengine: %+v", g)
	}

	for file, want := range map[string]memRun{"stepmem-full.txt": {9.13, 9.10}, "stepmem-lora.txt": {2.58, 2.83}} {
		m, err := parseStepMem(readTestdata(t, file))
		if err != nil || m != want {
			t.Errorf("%s: %+v, %v; want %+v", file, m, err, want)
		}
	}

	b, err := parseGoBench(readTestdata(t, "rollout.txt"), "BenchmarkGroupRollout")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]float64{"ratio": 3.569, "cpu-ratio": 3.655, "shared-tokens/s": 140.6, "unshared-tokens/s": 39.40, "ns/op": 141546346171} {
		if b[k] != v {
			t.Errorf("rollout %s = %v, want %v", k, b[k], v)
		}
	}
	s, err := parseGoBench(readTestdata(t, "sampler.txt"), "BenchmarkTopPFlat/pick")
	if err != nil || s["ns/op"] != 2936735 {
		t.Errorf("sampler: %v, %v", s, err)
	}

	rows, err := parseLlama(readTestdata(t, "llamacpp.txt"))
	if err != nil {
		t.Fatal(err)
	}
	wantRows := []llamaRow{
		{"F32", 1, 6.67, 5.94, 1.12, 6.66, 5.94, 1.12, 8, 8},
		{"F32", 8, 23.40, 8.79, 2.66, 23.34, 8.78, 2.66, 40, 64},
		{"BF16", 1, 12.13, 9.32, 1.30, 12.10, 9.32, 1.30, 8, 8},
		{"BF16", 8, 40.28, 14.19, 2.84, 40.20, 14.15, 2.84, 30, 64},
	}
	if len(rows) != len(wantRows) {
		t.Fatalf("llamacpp: %d rows, want %d", len(rows), len(wantRows))
	}
	for i := range rows {
		if rows[i] != wantRows[i] {
			t.Errorf("llamacpp row %d: %+v, want %+v", i, rows[i], wantRows[i])
		}
	}
}

// TestParseNamesMissingLine: an output without the line a parser needs is an error that names
// it, not a row of zeros.
func TestParseNamesMissingLine(t *testing.T) {
	out := strings.Replace(readTestdata(t, "benchqwen.txt"), "KV-cache decode", "decode", 1)
	if _, err := parseTorch(out); err == nil || !strings.Contains(err.Error(), "KV-cache decode") {
		t.Errorf("got %v", err)
	}
	if _, err := parseGoBench("BenchmarkOther-2 1 5 ns/op", "BenchmarkGroupRollout"); err == nil {
		t.Error("a missing benchmark parsed")
	}
	if _, err := parseLlama("nothing here"); err == nil {
		t.Error("an empty llama.cpp table parsed")
	}
}

// TestTableStatuses: the table compares each figure with its target (met on the right side of
// the threshold, not met on the other) and reports a failed step in its row.
func TestTableStatuses(t *testing.T) {
	tr := torchRun{Tokens: 256, Threads: 2, Drmas: 100, Torch: 40, DrmasCPU: 100, TorchCPU: 41, DecodeBatch: 8, DecodeCPU: 50}
	r := &results{torch: &tr, memFull: &memRun{9.13, 9.10}, memLoRA: &memRun{4.5, 2.8}, memTokens: 4096,
		rollout: goBench{"ratio": 3.5, "cpu-ratio": 3.6, "shared-tokens/s": 140, "unshared-tokens/s": 40},
		picked:  0.6, flatPicked: 2.6, llama: []llamaRow{{DType: "F32", Batch: 1, RatioC: 0.99}},
		failed: map[string]error{"gemm": errors.New("benchengine: exit status 1")}}
	var buf bytes.Buffer
	r.write(&buf, "note")
	got := buf.String()
	for _, want := range []string{
		"| forward+backward, 256 tokens | 100.00 tokens/s | PyTorch 40.00 | 2.50× (2.44× per CPU-s) | ≥ 2.5×: met |",
		"| gemm | failed: benchengine: exit status 1 |",
		"full AdamW, checkpointed | 9.13 GiB | estimate 9.10 GiB | 1.00 | ≤ 24 GiB: met |",
		"LoRA r16 over a BF16 base, checkpointed | 4.50 GiB | estimate 2.80 GiB | 1.61 | ≤ 4 GiB: **not met** |",
		"| 3.50× (3.60× per CPU-s) | ≥ 4×: **not met** |",
		// 8 rows × 0.6 ms against a step of 8 tokens × 2 threads / 50 tokens per CPU-s = 0.32 CPU-s.
		"| a decode step, 0.32 CPU-s | 1.5 % peaked, 6.5 % flat | < 10 %: met |",
		"| decode, batch 1, F32 | 0.00 tokens per CPU-s | llama.cpp 0.00 | 0.99 (0.00 wall) | ≥ 1: **not met** |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
}

// TestTinyRun runs every step at the small shapes against the real programs, PyTorch and
// llama.cpp: each must run and its output parse (the figures are not checked).
func TestTinyRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every benchmark program (~15 s)")
	}
	python := oracles.Torch(t)
	if err := llamacpp.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	var stdout, log bytes.Buffer
	o := options{tiny: true, python: python, log: &log}
	if err := run(context.Background(), o, &stdout); err != nil {
		t.Fatalf("%v\n%s\n%s", err, log.String(), stdout.String())
	}
	got := stdout.String()
	for _, want := range []string{"forward+backward, 64 tokens", "peak RSS, 256 tokens, full AdamW", "group rollout", "sampler at top_p 0.95, batch 2", "decode, batch 8, BF16", "-tiny"} {
		if !strings.Contains(got, want) {
			t.Errorf("the tiny table lacks %q:\n%s", want, got)
		}
	}
}
