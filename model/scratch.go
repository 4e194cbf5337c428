package model

import (
	"math/bits"
	"sync"
)

// Scratch buffers for the temporaries of Forward and Backward (not the
// activations a Pass keeps), pooled by power-of-two size class so that steps
// of similar shape reuse memory instead of allocating and zeroing it anew.
// A buffer from getScratch has undefined contents.
var scratchPools [64]sync.Pool

// scratchPoolMax is the largest pooled buffer (floats, 64 MiB): a larger
// one (a large vocabulary's logit gradients) is allocated at its size, as a
// size class could waste up to half of it, and left to the GC.
const scratchPoolMax = 1 << 24

// sizeClass is the smallest c with 1<<c ≥ n.
func sizeClass(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

func getScratch(n int) *[]float32 {
	if n > scratchPoolMax {
		s := make([]float32, n)
		return &s
	}
	c := sizeClass(n)
	if v := scratchPools[c].Get(); v != nil {
		p := v.(*[]float32)
		*p = (*p)[:n]
		return p
	}
	s := make([]float32, n, 1<<c)
	return &s
}

func putScratch(p *[]float32) {
	if p == nil || cap(*p) == 0 || cap(*p) > scratchPoolMax {
		return
	}
	scratchPools[sizeClass(cap(*p))].Put(p)
}
