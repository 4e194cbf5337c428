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
	// TileCore and TileAll are BlockedGEMM's micro-kernel (GEMMKernel's tile) on
	// operands that stay in L1, one k block a call: what a GEMM can get from its
	// kernel before packing, caches and memory take their share (0 without the
	// assembly kernels).
	TileCore, TileAll float64
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
	if FastGEMMAvailable() {
		p.TileCore, p.TileAll = probeRate(tileProbe(), d)
	}
	return p
}

// tileWidth is how many 16-column strips BlockedGEMM's widest tile spans on this CPU.
func tileWidth() int {
	if (BlockedGEMM{}).quad() {
		return 4
	}
	return 1
}

// tileProbe's iteration is one k step of the widest tile (mr × tileWidth()·nr).
func tileProbe() fmaProbe {
	w := tileWidth()
	return fmaProbe{flops: float64(2 * mr * w * nr), run: func(n int) {
		a, b, c := make([]float32, mr*kc), make([]float32, w*nr*kc), make([]float32, mr*w*nr)
		tileSteps(w, n, a, b, c)
	}}
}

// tileSteps stores into c (mr × w·nr) the product of a packed strip a (mr rows × kc) and w
// packed strips b (kc × nr each), n k steps in all, kc at a time (the k blocks' products
// overwrite c: the probe times the kernel, not the sum).
func tileSteps(w, n int, a, b, c []float32) {
	for ; n > 0; n -= kc {
		edgeTile(w, min(n, kc), a, 1, mr, b, c, w*nr, mr, w*nr, 1, true)
	}
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
