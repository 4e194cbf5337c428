//go:build !amd64 || purego

package model

func scoreBlocks(q []float32, blocks []*kvBlock, l, off int, scale float32, s []float32) {
	scoreBlocksGo(q, blocks, l, off, scale, s)
}

func valueBlocks(pr []float32, blocks []*kvBlock, l, off, kvd int, o []float32) {
	valueBlocksGo(pr, blocks, l, off, kvd, o)
}

func valueBlocksHeads(pr []float32, ps, n, heads int, blocks []*kvBlock, l, off, kvd int, o []float32, hd int) {
	for h := range heads {
		valueBlocks(pr[h*ps:][:n], blocks, l, off, kvd, o[h*hd:][:hd])
	}
}

func scoreBlocksHeads(q []float32, heads, hd int, blocks []*kvBlock, l, off int, scale float32, s []float32, ps int) {
	for h := range heads {
		scoreBlocks(q[h*hd:][:hd], blocks, l, off, scale, s[h*ps:][:len(blocks)*kvBlockLen])
	}
}

// attnLevel is 0: only the Go kernels exist here.
var attnLevel = 0
