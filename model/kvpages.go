package model

import (
	"math"
	"slices"
)

// kvBlockLen is how many positions one KV block holds.
const kvBlockLen = 16

// kvBlock holds the keys and values of kvBlockLen consecutive positions, per layer
// [positions×KVHeads·HeadDim]. Only its owner writes to it, and only at positions past those
// it held when another cache began to share it, so a block never changes under a reader: a
// full block is immutable, and a cache that shares a partial block it does not own copies it
// before its first write (copy on write).
type kvBlock struct {
	k, v  [][]float32
	owner *kvCache
}

// kvCache is one request's keys and values as a table of blocks (position p lies in
// blocks[p/kvBlockLen]); n positions are filled. Forks and prefix-cache hits share blocks.
type kvCache struct {
	blocks []*kvBlock
	n      int
	layers int
	kvd    int // floats of one position in one layer
}

// newKVCache is an empty cache of a model with these layers and KV width.
func newKVCache(layers, kvd int) *kvCache { return &kvCache{layers: layers, kvd: kvd} }

// newBlock is an empty block owned by c.
func (c *kvCache) newBlock() *kvBlock {
	per := kvBlockLen * c.kvd
	buf := make([]float32, 2*c.layers*per)
	b := &kvBlock{k: make([][]float32, c.layers), v: make([][]float32, c.layers), owner: c}
	for l := range b.k {
		b.k[l] = buf[2*l*per:][:per:per]
		b.v[l] = buf[(2*l+1)*per:][:per:per]
	}
	return b
}

// reserve makes c own writable blocks for positions n..n+extra-1: new blocks, and a private
// copy of a partial last block that it shares.
func (c *kvCache) reserve(extra int) {
	if extra <= 0 {
		return
	}
	if i, used := c.n/kvBlockLen, c.n%kvBlockLen; used > 0 && c.blocks[i].owner != c {
		b := c.newBlock()
		for l := range b.k {
			copy(b.k[l], c.blocks[i].k[l][:used*c.kvd])
			copy(b.v[l], c.blocks[i].v[l][:used*c.kvd])
		}
		c.blocks[i] = b
	}
	for len(c.blocks)*kvBlockLen < c.n+extra {
		c.blocks = append(c.blocks, c.newBlock())
	}
}

// put writes layer l's key and value rows of position p (reserved).
func (c *kvCache) put(l, p int, k, v []float32) {
	b, o := c.blocks[p/kvBlockLen], (p%kvBlockLen)*c.kvd
	copy(b.k[l][o:o+c.kvd], k)
	copy(b.v[l][o:o+c.kvd], v)
}

// fork is a cache that shares c's positions: no block is copied until one of the two writes.
func (c *kvCache) fork() *kvCache {
	return &kvCache{blocks: slices.Clone(c.blocks), n: c.n, layers: c.layers, kvd: c.kvd}
}

// attendPaged is attention over c's blocks at layer l: the operations of the contiguous
// reference (attendCached, in the tests) in the same order, so the same bits.
func attendPaged(q []float32, c *kvCache, l, off, p int, scale float32, s, o []float32) {
	hd := len(q)
	mx := float32(math.Inf(-1))
	for j := 0; j <= p; j++ {
		kj := c.blocks[j/kvBlockLen].k[l][(j%kvBlockLen)*c.kvd+off:][:hd]
		var dot float32
		for e, qv := range q {
			dot += qv * kj[e]
		}
		dot *= scale
		s[j] = dot
		if dot > mx {
			mx = dot
		}
	}
	for j := 0; j <= p; j++ {
		s[j] -= mx
	}
	expSpan(s[:p+1])
	var sum float32
	for _, e := range s[:p+1] {
		sum += e
	}
	inv := 1 / sum
	clear(o)
	for j := 0; j <= p; j++ {
		pj := s[j] * inv
		vj := c.blocks[j/kvBlockLen].v[l][(j%kvBlockLen)*c.kvd+off:][:hd]
		for e := range o {
			o[e] += pj * vj[e]
		}
	}
}
