package model

import (
	"runtime"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
	gblas "gonum.org/v1/gonum/blas/gonum"
)

// GEMM is the matrix-multiply kernel the model runs on. Matrices are
// row-major: C[m×n] = alpha·op(A)·op(B) + beta·C where op(A) is m×k
// (A is k×m when transA) and op(B) is k×n (B is n×k when transB).
//
// Implementations must be deterministic and must compute every element of C
// independently of m and n (the same row of A always yields the same row of
// C, bit for bit): batch-composition independence of sampling relies on it.
type GEMM interface {
	Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
}

// GonumGEMM is the portable kernel: gonum.org/v1/gonum/blas/gonum (pure Go,
// with SSE assembly on amd64). gonum computes a product of fewer than four
// 64×64 blocks of C serially, each element one sequential chain over all of
// k, but a larger one in parallel with k split into blocks of 64, which
// rounds differently: the same row of A would give different bits depending
// on m. GonumGEMM therefore hands gonum tiles of at most 64×64 (always its
// serial path) and runs the tiles concurrently itself, so that it keeps the
// GEMM contract.
type GonumGEMM struct{}

// gonumTile is gonum's block size: a tile of at most gonumTile×gonumTile
// is computed by gonum's serial path.
const gonumTile = 64

func tr(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// Sgemm implements GEMM.
func (GonumGEMM) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	impl := gblas.Implementation{}
	if m <= gonumTile && n <= gonumTile || k <= 0 || alpha == 0 {
		// One tile, or no products (C is only scaled by beta).
		impl.Sgemm(tr(transA), tr(transB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if m <= 0 || n <= 0 {
		return
	}
	tilesN := (n + gonumTile - 1) / gonumTile
	tiles := (m + gonumTile - 1) / gonumTile * tilesN
	tile := func(t int) {
		i0, j0 := t/tilesN*gonumTile, t%tilesN*gonumTile
		mi, nj := min(gonumTile, m-i0), min(gonumTile, n-j0)
		ao, bo := i0*lda, j0 // offsets of the tile's operands
		if transA {
			ao = i0
		}
		if transB {
			bo = j0 * ldb
		}
		as, bs := a[ao:], b[bo:]
		impl.Sgemm(tr(transA), tr(transB), mi, nj, k, alpha, as, lda, bs, ldb, beta, c[i0*ldc+j0:], ldc)
	}
	if 2*m*n*k < 1<<20 || workers() == 1 {
		for t := 0; t < tiles; t++ {
			tile(t)
		}
		return
	}
	parallelTasks(tiles, func(_, t int) { tile(t) })
}

// DefaultGEMM is the kernel New, Clone and LoadModel install: BlockedGEMM
// when the CPU has AVX2+FMA (its assembly micro-kernel), GonumGEMM
// otherwise. Replace it (or call Model.SetGEMM) to use another kernel.
var DefaultGEMM GEMM = defaultGEMM()

func defaultGEMM() GEMM {
	if FastGEMMAvailable() {
		return BlockedGEMM{}
	}
	return GonumGEMM{}
}

// workers is the number of goroutines used for row-parallel work.
func workers() int {
	n := runtime.GOMAXPROCS(0)
	if n < 1 {
		n = 1
	}
	return n
}

// parallelRows splits [0,n) into contiguous chunks and runs fn on each
// concurrently. fn must write disjoint outputs per row; results then do not
// depend on the split.
func parallelRows(n, minChunk int, fn func(lo, hi int)) {
	w := workers()
	if minChunk < 1 {
		minChunk = 1
	}
	if w > n/minChunk {
		w = n / minChunk
	}
	if w <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + w - 1) / w
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, hi)
	}
	wg.Wait()
}

// parallelTasks runs fn(worker, task) for task in [0,n) on a pool of
// goroutines; worker indexes per-goroutine scratch space. Each task must write
// disjoint outputs.
func parallelTasks(n int, fn func(worker, task int)) {
	w := min(workers(), n)
	if w <= 1 {
		for t := 0; t < n; t++ {
			fn(0, t)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < w; i++ {
		wg.Add(1)
		go func(worker int) {
			defer wg.Done()
			for {
				t := int(next.Add(1) - 1)
				if t >= n {
					return
				}
				fn(worker, t)
			}
		}(i)
	}
	wg.Wait()
}
