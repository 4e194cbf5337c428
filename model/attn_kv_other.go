//go:build !amd64 || purego

package model

func scoreBlocks(q []float32, blocks []*kvBlock, l, off int, scale float32, s []float32) {
	scoreBlocksGo(q, blocks, l, off, scale, s)
}

func valueBlocks(pr []float32, blocks []*kvBlock, l, off, kvd int, o []float32) {
	valueBlocksGo(pr, blocks, l, off, kvd, o)
}

// attnLevel is 0: only the Go kernels exist here.
var attnLevel = 0
