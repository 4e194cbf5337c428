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

// scratchPoolMax is the largest buffer pooled by size class (floats, 64 MiB):
// a larger one (a chunk of a large vocabulary's logits) is pooled by its exact
// size, as a size class could waste up to half of it; a step asks for few
// such sizes, so a chunk's buffers serve the next chunk, the backward and the
// next step instead of waiting for the collector.
const scratchPoolMax = 1 << 24

// bigPools holds the buffers over scratchPoolMax, one pool per exact size.
var bigPools sync.Map // int → *sync.Pool

func bigPool(n int) *sync.Pool {
	p, _ := bigPools.LoadOrStore(n, new(sync.Pool))
	return p.(*sync.Pool)
}

// sizeClass is the smallest c with 1<<c ≥ n.
func sizeClass(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

func getScratch(n int) *[]float32 {
	if n > scratchPoolMax {
		if v := bigPool(n).Get(); v != nil {
			return v.(*[]float32)
		}
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
	if p == nil || cap(*p) == 0 {
		return
	}
	if c := cap(*p); c > scratchPoolMax {
		*p = (*p)[:c]
		bigPool(c).Put(p)
		return
	}
	scratchPools[sizeClass(cap(*p))].Put(p)
}
