//go:build amd64 && !purego

package model

// attnLevel picks attention's kernels: 0 the Go ones, 1 AVX2, 2 AVX-512 (the tests lower it
// to check each level against the reference).
var attnLevel = func() int {
	switch {
	case hasAVX512:
		return 2
	case hasAVX2FMA:
		return 1
	}
	return 0
}()

//go:noescape
func attnDots4AVX512(q *float32, hd int, k0, k1, k2, k3 *float32, scale float32, s *float32)

//go:noescape
func attnDots1AVX512(q *float32, hd int, k *float32, scale float32, s *float32)

//go:noescape
func attnVals64AVX512(p *float32, n int, v *float32, kvd int, o *float32)

//go:noescape
func attnVals16AVX512(p *float32, n int, v *float32, kvd int, o *float32)

//go:noescape
func attnDots4AVX2(q *float32, hd int, k0, k1, k2, k3 *float32, scale float32, s *float32)

//go:noescape
func attnDots1AVX2(q *float32, hd int, k *float32, scale float32, s *float32)

//go:noescape
func attnVals64AVX2(p *float32, n int, v *float32, kvd int, o *float32)

//go:noescape
func attnVals16AVX2(p *float32, n int, v *float32, kvd int, o *float32)

// scoreBlocks is scoreBlocksGo, four blocks (64 keys) at a time in the vector kernels.
func scoreBlocks(q []float32, blocks []*kvBlock, l, off int, scale float32, s []float32) {
	if attnLevel == 0 || len(q) == 0 {
		scoreBlocksGo(q, blocks, l, off, scale, s)
		return
	}
	hd := len(q)
	_ = s[len(blocks)*kvBlockLen-1]
	key := func(b int) *float32 {
		k := blocks[b].k[l]
		_ = k[(off+hd)*kvBlockLen-1]
		return &k[off*kvBlockLen]
	}
	b := 0
	for ; b+4 <= len(blocks); b += 4 {
		if attnLevel == 2 {
			attnDots4AVX512(&q[0], hd, key(b), key(b+1), key(b+2), key(b+3), scale, &s[b*kvBlockLen])
		} else {
			attnDots4AVX2(&q[0], hd, key(b), key(b+1), key(b+2), key(b+3), scale, &s[b*kvBlockLen])
		}
	}
	for ; b < len(blocks); b++ {
		if attnLevel == 2 {
			attnDots1AVX512(&q[0], hd, key(b), scale, &s[b*kvBlockLen])
		} else {
			attnDots1AVX2(&q[0], hd, key(b), scale, &s[b*kvBlockLen])
		}
	}
}

// valueBlocks is valueBlocksGo, 64 (then 16) elements at a time in the vector kernels when the
// head dim is a multiple of 16.
func valueBlocks(pr []float32, blocks []*kvBlock, l, off, kvd int, o []float32) {
	hd := len(o)
	if attnLevel == 0 || hd%16 != 0 || len(pr) == 0 {
		valueBlocksGo(pr, blocks, l, off, kvd, o)
		return
	}
	for b := 0; b*kvBlockLen < len(pr); b++ {
		n := min(kvBlockLen, len(pr)-b*kvBlockLen)
		v := blocks[b].v[l]
		_ = v[(n-1)*kvd+off+hd-1]
		p := &pr[b*kvBlockLen]
		e := 0
		for ; e+64 <= hd; e += 64 {
			if attnLevel == 2 {
				attnVals64AVX512(p, n, &v[off+e], kvd, &o[e])
			} else {
				attnVals64AVX2(p, n, &v[off+e], kvd, &o[e])
			}
		}
		for ; e < hd; e += 16 {
			if attnLevel == 2 {
				attnVals16AVX512(p, n, &v[off+e], kvd, &o[e])
			} else {
				attnVals16AVX2(p, n, &v[off+e], kvd, &o[e])
			}
		}
	}
}
