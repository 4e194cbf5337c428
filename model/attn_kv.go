package model

// Attention over the KV cache's blocks, split into its two products so that each has a vector
// kernel (attn_kv_amd64.s) beside the plain Go here. Keys are stored dim-major inside a block
// (kvBlock), so that the kvBlockLen keys of a block lie in adjacent lanes: a vector register
// holds one element of 16 keys, and each lane runs one key's dot product as the reference's
// sequential chain (a rounded multiply, then a rounded add; never a fused multiply-add). The
// values' product runs across the head's elements, each lane one element's chain over the
// positions in order. Both therefore give the reference's bits.

// scoreBlocksGo writes into s[b·kvBlockLen+i] the scaled dot product of q with the key in slot
// i of blocks[b] at layer l, elements off..off+len(q)-1 (all kvBlockLen slots of every block).
func scoreBlocksGo(q []float32, blocks []*kvBlock, l, off int, scale float32, s []float32) {
	for b, blk := range blocks {
		k := blk.k[l][off*kvBlockLen:][:len(q)*kvBlockLen]
		var dot [kvBlockLen]float32 // one chain a key, over e in order
		for e, qv := range q {
			for i, kv := range k[e*kvBlockLen : (e+1)*kvBlockLen] {
				dot[i] += qv * kv
			}
		}
		for i, d := range dot {
			s[b*kvBlockLen+i] = d * scale
		}
	}
}

// valueBlocksGo adds into o, position j at a time, pr[j] times the value of position j
// (elements off..off+len(o)-1 of a row of kvd floats).
func valueBlocksGo(pr []float32, blocks []*kvBlock, l, off, kvd int, o []float32) {
	for j, pj := range pr {
		v := blocks[j/kvBlockLen].v[l][(j%kvBlockLen)*kvd+off:][:len(o)]
		for e := range o {
			o[e] += pj * v[e]
		}
	}
}
