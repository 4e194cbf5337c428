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
// reference (attendCached, in the tests) in the same order, so the same bits. Each key's dot
// product and each output element is one sequential chain, as in the reference; four keys'
// chains run side by side, so that the chains' latencies overlap instead of adding up.
func attendPaged(q []float32, c *kvCache, l, off, p int, scale float32, s, o []float32) {
	hd := len(q)
	key := func(j int) []float32 { return c.blocks[j/kvBlockLen].k[l][(j%kvBlockLen)*c.kvd+off:][:hd] }
	val := func(j int) []float32 { return c.blocks[j/kvBlockLen].v[l][(j%kvBlockLen)*c.kvd+off:][:hd] }
	j := 0
	for ; j+4 <= p+1; j += 4 {
		k0, k1, k2, k3 := key(j), key(j+1), key(j+2), key(j+3)
		var d0, d1, d2, d3 float32
		for e, qv := range q {
			d0 += qv * k0[e]
			d1 += qv * k1[e]
			d2 += qv * k2[e]
			d3 += qv * k3[e]
		}
		s[j], s[j+1], s[j+2], s[j+3] = d0*scale, d1*scale, d2*scale, d3*scale
	}
	for ; j <= p; j++ {
		kj := key(j)
		var dot float32
		for e, qv := range q {
			dot += qv * kj[e]
		}
		s[j] = dot * scale
	}
	mx := float32(math.Inf(-1))
	for _, v := range s[:p+1] {
		if v > mx {
			mx = v
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
	j = 0
	for ; j+4 <= p+1; j += 4 {
		p0, p1, p2, p3 := s[j]*inv, s[j+1]*inv, s[j+2]*inv, s[j+3]*inv
		v0, v1, v2, v3 := val(j), val(j+1), val(j+2), val(j+3)
		for e := range o {
			t := o[e]
			t += p0 * v0[e]
			t += p1 * v1[e]
			t += p2 * v2[e]
			t += p3 * v3[e]
			o[e] = t
		}
	}
	for ; j <= p; j++ {
		pj := s[j] * inv
		vj := val(j)
		for e := range o {
			o[e] += pj * vj[e]
		}
	}
}
