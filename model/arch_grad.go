package model

// weightGrad adds dYᵀ·x into dW [out×in] (dY [n×out], x [n×in]), the gradient of a linear
// weight. A nil dW is a frozen weight (a LoRA's base): the product is skipped.
func weightGrad(g GEMM, n int, dY []float32, out int, x []float32, in int, dW []float32) {
	if dW == nil {
		return
	}
	g.Sgemm(true, false, out, in, n, 1, dY, out, x, in, 1, dW, in)
}
