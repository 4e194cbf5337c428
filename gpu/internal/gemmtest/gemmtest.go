// Package gemmtest lays out GEMM operands for the GPU packages' tests: row-major op(A) (m×k)
// and op(B) (k×n), stored transposed or not, with leading dimensions padded past the rows so
// that a kernel reading the wrong stride is caught.
package gemmtest

// Layout is the storage of C[m×n] = op(A)·op(B): A has ARows rows of Lda words, B BRows rows
// of Ldb words, C m rows of Ldc words.
type Layout struct {
	Lda, Ldb, Ldc int
	ARows, BRows  int
}

// For returns the layout of an m×n×k product with transposes ta, tb: A is m×k (k×m when
// ta), B is k×n (n×k when tb), every leading dimension a few words longer than its row.
func For(ta, tb bool, m, n, k int) Layout {
	l := Layout{Lda: k + 3, Ldb: n + 1, Ldc: n + 2, ARows: m, BRows: k}
	if ta {
		l.Lda, l.ARows = m+2, k
	}
	if tb {
		l.Ldb, l.BRows = k+5, n
	}
	return l
}
