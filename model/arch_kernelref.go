package model

import "fmt"

// BlockRef exposes the CPU engine's Llama-family block ops (arch_ops.go) to
// the GPU side: the kernels' tests in gpu/kernels run each kernel on the IR
// interpreter and compare it with the op the CPU engine uses, on the same
// inputs, and the GPU engine takes its RoPE tables from RopeTable. Every
// method calls the op LLM's passes call; none is a second implementation. Layouts are LLM's: a q|k|v row holds the Heads query heads,
// then the KVHeads key heads, then the KVHeads value heads, HeadDim each; a
// gate|up row holds Intermediate gate values, then Intermediate up values.
type BlockRef struct {
	Heads, KVHeads, HeadDim, Intermediate int
	Eps                                   float64     // RMSNorm epsilon
	RopeScaling                           RopeScaling // of RopeTable's frequencies
}

func (b BlockRef) dims() blockDims {
	return blockDims{D: b.Heads * b.HeadDim, H: b.Heads, KV: b.KVHeads, hd: b.HeadDim, F: b.Intermediate, eps: b.Eps}
}

// check refuses shapes the ops would index out of range with.
func (b BlockRef) check() error {
	if b.Heads <= 0 || b.KVHeads <= 0 || b.Heads%b.KVHeads != 0 || b.HeadDim <= 0 || b.HeadDim%2 != 0 {
		return fmt.Errorf("model: block ref: heads %d, kv heads %d, head dim %d: want heads a multiple of kv heads and an even head dim", b.Heads, b.KVHeads, b.HeadDim)
	}
	return nil
}

// QKVWidth is the width of a q|k|v row.
func (b BlockRef) QKVWidth() int { return b.dims().ld() }

// RMSNorm normalises each row of x[n×d] (d = len(w)) and returns y, xhat and
// rstd as LLM's forward keeps them.
func (b BlockRef) RMSNorm(x []float32, n int, w []float32) (y, xhat, rstd []float32) {
	d := len(w)
	y, xhat, rstd = make([]float32, n*d), make([]float32, n*d), make([]float32, n)
	rmsNorm(x, n, d, w, b.Eps, y, xhat, rstd)
	return y, xhat, rstd
}

// RMSNormBackward returns dx0 plus the input gradient, and the weight
// gradient, of RMSNorm given dy.
func (b BlockRef) RMSNormBackward(dy, xhat, rstd []float32, n int, w, dx0 []float32) (dx, dw []float32) {
	dx, dw = append([]float32(nil), dx0...), make([]float32, len(w))
	rmsNormBackward(dy, xhat, rstd, n, len(w), w, dx, dw)
	return dx, dw
}

// QKNorm applies Qwen3's per-head q_norm/k_norm in place to qkv[n×QKVWidth]
// and returns the saved xhat [n×(H+KV)·hd] and rstd [n×(H+KV)].
func (b BlockRef) QKNorm(qkv []float32, n int, qn, kn []float32) (xhat, rstd []float32, err error) {
	if err := b.check(); err != nil {
		return nil, nil, err
	}
	nh := b.Heads + b.KVHeads
	xhat, rstd = make([]float32, n*nh*b.HeadDim), make([]float32, n*nh)
	qkNorm(qkv, n, b.dims(), qn, kn, xhat, rstd)
	return xhat, rstd, nil
}

// QKNormBackward replaces the q and k parts of dqkv by their input
// gradients and returns the gradients of qn and kn.
func (b BlockRef) QKNormBackward(dqkv []float32, n int, qn, kn, xhat, rstd []float32) (dqn, dkn []float32, err error) {
	if err := b.check(); err != nil {
		return nil, nil, err
	}
	dqn, dkn = make([]float32, b.HeadDim), make([]float32, b.HeadDim)
	qkNormBackward(dqkv, n, b.dims(), qn, kn, xhat, rstd, dqn, dkn)
	return dqn, dkn, nil
}

// RopeTable returns the cos and sin tables [len(pos)×hd/2] LLM's passes use
// (frequencies rescaled by b.RopeScaling).
func (b BlockRef) RopeTable(pos []int32, theta float64) (cos, sin []float32) {
	return ropeTable(pos, b.HeadDim, theta, b.RopeScaling)
}

// Rope rotates the q and k heads of qkv[n×QKVWidth] in place (inverse: the
// backward's transposed rotation).
func (b BlockRef) Rope(qkv []float32, n int, cos, sin []float32, inverse bool) error {
	if err := b.check(); err != nil {
		return err
	}
	rope(qkv, n, b.dims(), cos, sin, inverse)
	return nil
}

// SwiGLU returns silu(gate)·up [n×Intermediate] of gu[n×2·Intermediate].
func (b BlockRef) SwiGLU(gu []float32, n int) []float32 {
	act := make([]float32, n*b.Intermediate)
	swiglu(gu, n, b.Intermediate, act)
	return act
}

// SwiGLUBackward returns the gradient of gu given dact.
func (b BlockRef) SwiGLUBackward(gu, dact []float32, n int) []float32 {
	dgu := make([]float32, n*2*b.Intermediate)
	swigluBackward(gu, dact, n, b.Intermediate, dgu)
	return dgu
}

// refSeqs packs sequences of lens rows back to back.
func refSeqs(lens []int) (seqs []seqInfo, rows int) {
	for _, l := range lens {
		seqs = append(seqs, seqInfo{start: rows, n: l})
		rows += l
	}
	return seqs, rows
}

// GQA returns causal grouped-query attention [rows×H·hd] of qkv (post-RoPE)
// for sequences of lens rows packed back to back.
func (b BlockRef) GQA(qkv []float32, lens []int) ([]float32, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	seqs, rows := refSeqs(lens)
	out := make([]float32, rows*b.Heads*b.HeadDim)
	gqaForward(DefaultGEMM, seqs, b.dims(), qkv, out, nil)
	return out, nil
}

// GQABackward returns the gradient of qkv given dO [rows×H·hd].
func (b BlockRef) GQABackward(qkv, dO []float32, lens []int) ([]float32, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	seqs, rows := refSeqs(lens)
	dqkv := make([]float32, rows*b.dims().ld())
	gqaBackward(DefaultGEMM, seqs, b.dims(), qkv, nil, dO, dqkv)
	return dqkv, nil
}

// Linear returns x[n×in]·Wᵀ (+ b when b is not nil) [n×out] by LLM's
// projection (the path Qwen2's q/k/v biases take).
func (b BlockRef) Linear(x []float32, n, in int, W, bias []float32, out int) []float32 {
	y := make([]float32, n*out)
	(&LLM{gemm: DefaultGEMM}).linear(x, n, in, weight{f: W}, bias, out, y)
	return y
}
