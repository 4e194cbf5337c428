package model

import "slices"

// kvBlockLen is how many positions one KV block holds.
const kvBlockLen = 16

// kvBlock holds the keys and values of kvBlockLen consecutive positions, per layer: keys
// dim-major, k[l][e·kvBlockLen+i] is element e of position i's key row (KVHeads·HeadDim
// elements), so that one element of all the block's keys is one vector (attn_kv.go); values
// position-major, v[l][i·KVHeads·HeadDim+e]. Only its owner writes to it, and only at positions past those
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
		old := c.blocks[i]
		for l := range b.k {
			for e := range c.kvd {
				copy(b.k[l][e*kvBlockLen:][:used], old.k[l][e*kvBlockLen:])
			}
			copy(b.v[l], old.v[l][:used*c.kvd])
		}
		c.blocks[i] = b
	}
	for len(c.blocks)*kvBlockLen < c.n+extra {
		c.blocks = append(c.blocks, c.newBlock())
	}
}

// put writes layer l's key and value rows of position p (reserved).
func (c *kvCache) put(l, p int, k, v []float32) {
	b, i := c.blocks[p/kvBlockLen], p%kvBlockLen
	bk := b.k[l][:c.kvd*kvBlockLen]
	for e, x := range k[:c.kvd] {
		bk[e*kvBlockLen+i] = x
	}
	copy(b.v[l][i*c.kvd:][:c.kvd], v)
}

// fork is a cache that shares c's positions: no block is copied until one of the two writes.
func (c *kvCache) fork() *kvCache {
	return &kvCache{blocks: slices.Clone(c.blocks), n: c.n, layers: c.layers, kvd: c.kvd}
}

// attendPaged is attention over c's blocks at layer l for the query q at position p (head
// elements off..off+len(q)-1 of a key row): the operations of the contiguous reference
// (attendCached, in the tests) in the same order, so the same bits. s is scratch of at least
// pagedScratch(p) floats; o receives the output.
func attendPaged(q []float32, c *kvCache, l, off, p int, scale float32, s, o []float32) {
	attendPagedHeads(q, 1, c, l, off, p, scale, s, o)
}

// attendPagedHeads is attendPaged for heads query heads that share one KV head: head h's
// query at q[h*hd:], its output at o[h*hd:], hd = len(q)/heads; s is scratch of at least
// heads·pagedScratch(p) floats. Each head gets attendPaged's operations; the values' product
// reads each value row once for several heads (valueBlocksHeads).
func attendPagedHeads(q []float32, heads int, c *kvCache, l, off, p int, scale float32, s, o []float32) {
	hd := len(q) / heads
	n, ps := p+1, pagedScratch(p)
	blocks := c.blocks[:(n+kvBlockLen-1)/kvBlockLen]
	scoreBlocksHeads(q, heads, hd, blocks, l, off, scale, s, ps)
	for h := range heads {
		shiftExp(s[h*ps:][:n])
	}
	normalizeHeads(s, ps, n, heads)
	clear(o[:heads*hd])
	valueBlocksHeads(s, ps, n, heads, blocks, l, off, c.kvd, o, hd)
}

// groupChunk is how many shared blocks a group's requests run over in turn, so that the
// blocks' keys or values stay in the core's first-level cache (4 blocks of a 64-dim head:
// 16 KB).
const groupChunk = 4

// attendGroup is attendPagedHeads for the one row each of several requests at position p whose
// caches share their first nbS blocks (nbS·kvBlockLen ≤ p; a GRPO group's samples decoding
// over their prompt): request j's heads query qs[j] and output into os[j]; s is scratch of
// len(qs)·heads·pagedScratch(p) floats. The requests take turns over each chunk of shared
// blocks, so its keys and values are read from memory once for the group, not once a request.
// Every request gets attendPagedHeads's operations (each block's scores the same bits whichever
// kernel runs them, each output's chain over the positions in order, continued through os), so
// the same bits.
func attendGroup(qs, os [][]float32, heads int, cs []*kvCache, l, off, p, nbS int, scale float32, s []float32) {
	hd := len(qs[0]) / heads
	n, ps := p+1, pagedScratch(p)
	nb := (n + kvBlockLen - 1) / kvBlockLen
	shared := cs[0].blocks[:nbS]
	sc := func(j int) []float32 { return s[j*heads*ps:][:heads*ps] }
	for b0 := 0; b0 < nbS; b0 += groupChunk {
		// The last chunk ends at nbS: blocks computed twice get the same bits again.
		b := max(0, min(b0, nbS-groupChunk))
		e := min(nbS, b+groupChunk)
		for j, q := range qs {
			scoreBlocksHeads(q, heads, hd, shared[b:e], l, off, scale, sc(j)[b*kvBlockLen:], ps)
		}
	}
	for j, q := range qs {
		scoreBlocksHeads(q, heads, hd, cs[j].blocks[nbS:nb], l, off, scale, sc(j)[nbS*kvBlockLen:], ps)
		for h := range heads {
			shiftExp(sc(j)[h*ps:][:n])
		}
		normalizeHeads(sc(j), ps, n, heads)
		clear(os[j][:heads*hd])
	}
	for b := 0; b < nbS; b += groupChunk {
		e := min(nbS, b+groupChunk)
		for j, o := range os {
			valueBlocksHeads(sc(j)[b*kvBlockLen:], ps, (e-b)*kvBlockLen, heads, shared[b:e], l, off, cs[j].kvd, o, hd)
		}
	}
	for j, o := range os {
		valueBlocksHeads(sc(j)[nbS*kvBlockLen:], ps, n-nbS*kvBlockLen, heads, cs[j].blocks[nbS:nb], l, off, cs[j].kvd, o, hd)
	}
}

// shiftExp replaces s by exp(s - max s), the bits of one element at a time (shiftExpRef, in
// the tests): the vector maximum is the same but for the sign of a zero, and exp(±0) is 1
// either way.
func shiftExp(s []float32) {
	mx, n := maxVec(s)
	for _, v := range s[n:] {
		if v > mx {
			mx = v
		}
	}
	for j := subVec(s, mx); j < len(s); j++ {
		s[j] -= mx
	}
	expSpan(s)
}

// normalizeHeads divides each head's n values (head h at s[h*ps:]) by their sum, a float32
// chain in position order per head; four heads' chains run side by side, so that their adds
// overlap instead of each waiting on the last one's latency (a last group of fewer heads
// repeats its last head in the spare chains and drops their sums).
func normalizeHeads(s []float32, ps, n, heads int) {
	for h := 0; h < heads; h += 4 {
		g := min(4, heads-h)
		var r [4][]float32
		for i := range r {
			r[i] = s[(h+min(i, g-1))*ps:][:n]
		}
		a, b, c, d := r[0], r[1][:len(r[0])], r[2][:len(r[0])], r[3][:len(r[0])]
		var sa, sb, sc, sd float32
		for j, v := range a {
			sa += v
			sb += b[j]
			sc += c[j]
			sd += d[j]
		}
		sums := [4]float32{sa, sb, sc, sd}
		for i := range g {
			scaleBy(r[i], 1/sums[i])
		}
	}
}

// scaleBy multiplies x by f.
func scaleBy(x []float32, f float32) {
	for j := scaleVec(x, f); j < len(x); j++ {
		x[j] *= f
	}
}

// pagedScratch is the scratch attendPaged needs at position p: whole blocks of scores.
func pagedScratch(p int) int { return (p/kvBlockLen + 1) * kvBlockLen }
