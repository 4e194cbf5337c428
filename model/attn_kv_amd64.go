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
func attnVals64x2AVX512(vb **float32, nb, last int, p *float32, pstride, kvd int, o *float32, ostride int)

//go:noescape
func attnVals64x3AVX512(vb **float32, nb, last int, p *float32, pstride, kvd int, o *float32, ostride int)

//go:noescape
func attnVals64x4AVX512(vb **float32, nb, last int, p *float32, pstride, kvd int, o *float32, ostride int)

//go:noescape
func attnDots4x2AVX512(q *float32, qstride, hd int, k0, k1, k2, k3 *float32, scale float32, s *float32, sstride int)

//go:noescape
func attnDots4x3AVX512(q *float32, qstride, hd int, k0, k1, k2, k3 *float32, scale float32, s *float32, sstride int)

//go:noescape
func attnDots4x4AVX512(q *float32, qstride, hd int, k0, k1, k2, k3 *float32, scale float32, s *float32, sstride int)

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

// valueBlocksHeads is valueBlocks for heads that share one KV head: head h's probabilities at
// pr[h*ps:][:n], its output at o[h*hd:][:hd]. With AVX-512 and a head dim a multiple of 64,
// up to four heads at a time read each value row once, over all blocks in one call; otherwise
// head by head. The same bits either way.
func valueBlocksHeads(pr []float32, ps, n, heads int, blocks []*kvBlock, l, off, kvd int, o []float32, hd int) {
	if attnLevel < 2 || hd%64 != 0 || heads < 2 || n == 0 {
		for h := range heads {
			valueBlocks(pr[h*ps:][:n], blocks, l, off, kvd, o[h*hd:][:hd])
		}
		return
	}
	nb := (n + kvBlockLen - 1) / kvBlockLen
	last := n - (nb-1)*kvBlockLen
	var vbs [64]*float32 // up to 1,024 positions without a heap allocation (decode's hot path)
	vb := vbs[:]
	if nb > len(vbs) {
		vb = make([]*float32, nb)
	}
	vb = vb[:nb]
	_ = pr[(heads-1)*ps+n-1]
	_ = o[heads*hd-1]
	for e := 0; e < hd; e += 64 {
		for b := range vb {
			v := blocks[b].v[l]
			_ = v[(kvBlockLen-1)*kvd+off+e+63]
			vb[b] = &v[off+e]
		}
		for h := 0; h < heads; {
			g := min(4, heads-h)
			p, out := &pr[h*ps], &o[h*hd+e]
			switch g {
			case 4:
				attnVals64x4AVX512(&vb[0], nb, last, p, ps, kvd, out, hd)
			case 3:
				attnVals64x3AVX512(&vb[0], nb, last, p, ps, kvd, out, hd)
			case 2:
				attnVals64x2AVX512(&vb[0], nb, last, p, ps, kvd, out, hd)
			default:
				valueBlocks(pr[h*ps:][:n], blocks, l, off+e, kvd, o[h*hd+e:][:64])
			}
			h += g
		}
	}
}

// scoreBlocksHeads is scoreBlocks for heads that share one KV head: head h's query at
// q[h*hd:][:hd], its scores at s[h*ps:] (whole blocks). With AVX-512, four blocks of keys
// at a time are read once for up to four heads; otherwise head by head. The same bits.
func scoreBlocksHeads(q []float32, heads, hd int, blocks []*kvBlock, l, off int, scale float32, s []float32, ps int) {
	nb := len(blocks)
	if attnLevel < 2 || heads < 2 || hd == 0 || nb < 4 {
		for h := range heads {
			scoreBlocks(q[h*hd:][:hd], blocks, l, off, scale, s[h*ps:][:nb*kvBlockLen])
		}
		return
	}
	_ = q[heads*hd-1]
	_ = s[(heads-1)*ps+nb*kvBlockLen-1]
	key := func(b int) *float32 {
		k := blocks[b].k[l]
		_ = k[(off+hd)*kvBlockLen-1]
		return &k[off*kvBlockLen]
	}
	// The last 1–3 blocks run as the last four (nb ≥ 4): the blocks computed twice get the
	// same bits again.
	for b0 := 0; b0 < nb; b0 += 4 {
		b := min(b0, nb-4)
		k0, k1, k2, k3 := key(b), key(b+1), key(b+2), key(b+3)
		for h := 0; h < heads; {
			g := min(4, heads-h)
			qh, sh := &q[h*hd], &s[h*ps+b*kvBlockLen]
			switch g {
			case 4:
				attnDots4x4AVX512(qh, hd, hd, k0, k1, k2, k3, scale, sh, ps)
			case 3:
				attnDots4x3AVX512(qh, hd, hd, k0, k1, k2, k3, scale, sh, ps)
			case 2:
				attnDots4x2AVX512(qh, hd, hd, k0, k1, k2, k3, scale, sh, ps)
			default:
				attnDots4AVX512(qh, hd, k0, k1, k2, k3, scale, sh)
			}
			h += g
		}
	}
}
