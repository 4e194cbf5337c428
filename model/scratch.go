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

// scratchPoolMax is the largest buffer pooled by power-of-two size class
// (floats, 64 MiB): a larger one (a chunk of a large vocabulary's logits) is
// pooled by a finer class, sixteen to an octave (at most 1/16 wasted), so that
// a chunk's buffers serve the next chunk (a ragged last one included), the
// backward and the next step instead of waiting for the collector.
const scratchPoolMax = 1 << 24

// bigPools holds the buffers over scratchPoolMax, one pool per bigClass.
var bigPools sync.Map // int → *sync.Pool

func bigPool(c int) *sync.Pool {
	p, _ := bigPools.LoadOrStore(c, new(sync.Pool))
	return p.(*sync.Pool)
}

// bigClass is n rounded up to a sixteenth of the power of two below it.
func bigClass(n int) int {
	step := 1 << (bits.Len(uint(n)) - 5)
	return (n + step - 1) / step * step
}

// arenas keeps one idle arena for getArena (a pass's activations, carveActs), of the size its
// pass asked for: a training step's next pass takes its predecessor's (no fresh pages each
// step), and a run whose passes vary in size keeps no more than one idle. (The scratch pools
// would round an arena up to a power of two and keep one per size class until the collector
// clears them: 3× the peak memory of the main job.)
var arenas struct {
	sync.Mutex
	idle *[]float32
}

// getArena returns a buffer of n floats with undefined contents: the idle arena if it holds n
// and is at most twice n, else a new one.
func getArena(n int) *[]float32 {
	arenas.Lock()
	p := arenas.idle
	if p != nil && cap(*p) >= n && cap(*p) <= 2*n {
		arenas.idle = nil
		arenas.Unlock()
		*p = (*p)[:n]
		return p
	}
	arenas.Unlock()
	s := make([]float32, n)
	return &s
}

// putArena keeps an arena from getArena for a later pass, in place of the idle one if larger.
func putArena(p *[]float32) {
	if p == nil || cap(*p) == 0 {
		return
	}
	arenas.Lock()
	if arenas.idle == nil || cap(*p) > cap(*arenas.idle) {
		arenas.idle = p
	}
	arenas.Unlock()
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
		c := bigClass(n)
		if v := bigPool(c).Get(); v != nil {
			p := v.(*[]float32)
			*p = (*p)[:n]
			return p
		}
		s := make([]float32, n, c)
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
		if c == bigClass(c) {
			bigPool(c).Put(p)
		}
		return
	}
	scratchPools[sizeClass(cap(*p))].Put(p)
}

// ScratchFloats is the capacity a scratch buffer of n floats takes from the pools (for memory
// estimates).
func ScratchFloats(n int) int {
	switch {
	case n <= 1:
		return n
	case n > scratchPoolMax:
		return bigClass(n)
	}
	return 1 << sizeClass(n)
}
