package model

import (
	"bytes"
	"runtime"
	"testing"
)

// TestTrainingBitReproducible: a few full training steps at the default
// size (forward, backward, clipping, AdamW) give the same parameter bytes run
// to run and whatever the number of cores (the GEMM tiling, the chunked
// column sums and the element-wise kernels do not depend on it).
func TestTrainingBitReproducible(t *testing.T) {
	steps := 3
	if testing.Short() || raceEnabled {
		steps = 1
	}
	run := func(procs int) []byte {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		m, err := New(DefaultConfig(), 11)
		if err != nil {
			t.Fatal(err)
		}
		opt := NewAdamW(m, DefaultAdamWConfig())
		g := m.NewGrads()
		for i := 0; i < steps; i++ {
			trainStep(t, m, opt, g, benchBatch(8, 64, 16, uint64(i)))
		}
		var buf bytes.Buffer
		if err := m.SaveSafetensors(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	a := run(2)
	b := run(2)
	c := run(1)
	if !bytes.Equal(a, b) {
		t.Fatal("training not bit-reproducible run to run")
	}
	if !bytes.Equal(a, c) {
		t.Fatal("training result depends on GOMAXPROCS")
	}
}
