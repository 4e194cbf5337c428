package model

import (
	"sync"
	"time"
)

// FMAPeak is this machine's measured FMA throughput in GFLOP/s (an FMA
// counts as 2 flops): one core, and all GOMAXPROCS cores at once, for 8-wide
// (AVX2) and 16-wide (AVX-512) FMAs. A width the CPU lacks reads 0. It is the
// ceiling a GEMM kernel of that width can reach.
type FMAPeak struct {
	AVX2Core, AVX2All     float64
	AVX512Core, AVX512All float64
}

// fmaProbe runs n iterations of a loop of independent FMAs; flops is the
// work of one iteration.
type fmaProbe struct {
	run   func(n int)
	flops float64
}

// MeasureFMAPeak times the probes for about d each (best of short rounds, so
// a moment of other load does not count).
func MeasureFMAPeak(d time.Duration) FMAPeak {
	var p FMAPeak
	if avx2 := fmaProbeAVX2(); avx2 != nil {
		p.AVX2Core, p.AVX2All = probeRate(*avx2, d)
	}
	if avx512 := fmaProbeAVX512(); avx512 != nil {
		p.AVX512Core, p.AVX512All = probeRate(*avx512, d)
	}
	return p
}

// probeRate returns the best one-core and all-cores rates of rounds of a
// fixed size, for about d each.
func probeRate(pr fmaProbe, d time.Duration) (core, all float64) {
	const iters = 1 << 18
	round := func(w int) float64 {
		t := time.Now()
		var wg sync.WaitGroup
		for i := 0; i < w; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); pr.run(iters) }()
		}
		wg.Wait()
		return float64(w) * iters * pr.flops / time.Since(t).Seconds() / 1e9
	}
	best := func(w int) float64 {
		b := 0.0
		for end := time.Now().Add(d); time.Now().Before(end); {
			b = max(b, round(w))
		}
		return b
	}
	return best(1), best(workers())
}
