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

// sizeClass is the smallest c with 1<<c ≥ n.
func sizeClass(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

func getScratch(n int) *[]float32 {
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
	if p == nil || cap(*p) == 0 {
		return
	}
	scratchPools[sizeClass(cap(*p))].Put(p)
}
