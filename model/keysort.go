package model

import (
	"math/bits"
	"slices"
	"sync"
)

// radixMin is the fewest keys sortKeys radix-sorts; below it a comparison sort is cheaper
// than the digit histograms.
const radixMin = 2048

// radixDigit is the widest digit of one radix pass: 2,048 counters fit in L1.
const radixDigit = 11

var keyScratch = sync.Pool{New: func() any { return new([]uint64) }}

func getKeys(n int) *[]uint64 {
	p := keyScratch.Get().(*[]uint64)
	if cap(*p) < n {
		*p = make([]uint64, 0, n)
	}
	*p = (*p)[:0]
	return p
}

// sortKeys sorts topPCandidates' keys ascending. The keys are distinct (each carries its
// index), so the order is the one slices.Sort gives, the plain reference
// (TestSortKeysMatchesSort). Many keys (a flat distribution's nucleus holds most of the
// vocabulary) take a least-significant-digit radix sort over only the bits in which they
// can differ: each key is first packed as its high word less the smallest one's, above the
// index's bits up to the largest index, and unpacked after the passes.
func sortKeys(keys []uint64) {
	if len(keys) < radixMin {
		slices.Sort(keys)
		return
	}
	base, hiMax, idxMax := keys[0]>>32, keys[0]>>32, uint32(0)
	for _, k := range keys {
		base, hiMax = min(base, k>>32), max(hiMax, k>>32)
		idxMax = max(idxMax, uint32(k))
	}
	ib := uint(bits.Len32(idxMax))
	width := int(ib) + bits.Len64(hiMax-base)
	for i, k := range keys {
		keys[i] = (k>>32-base)<<ib | uint64(uint32(k))
	}
	sp := getKeys(len(keys))
	src, dst := keys, (*sp)[:len(keys)]
	passes := (width + radixDigit - 1) / radixDigit
	for p, at := 0, 0; p < passes; p++ {
		w := (width - at + passes - p - 1) / (passes - p)
		if radixPass(src, dst, uint(at), uint(w)) {
			src, dst = dst, src
		}
		at += w
	}
	for i, k := range src {
		keys[i] = (k>>ib+base)<<32 | k&(1<<ib-1)
	}
	keyScratch.Put(sp)
}

// radixPass moves src into dst stably by the digit of width bits at shift and reports
// whether it did; a digit every key shares moves nothing.
func radixPass(src, dst []uint64, shift, width uint) bool {
	var count [1 << radixDigit]int
	mask := uint64(1)<<width - 1
	for _, k := range src {
		count[k>>shift&mask]++
	}
	if count[src[0]>>shift&mask] == len(src) {
		return false
	}
	at := 0
	for i, c := range count[:1<<width] {
		count[i] = at
		at += c
	}
	for _, k := range src {
		b := k >> shift & mask
		dst[count[b]] = k
		count[b]++
	}
	return true
}
