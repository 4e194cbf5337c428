package model

import (
	"slices"
	"sync"
	"testing"
)

// countingGEMM wraps a kernel and sums 2·m·n·k over every call.
type countingGEMM struct {
	GEMM
	mu    sync.Mutex
	flops float64
}

func (c *countingGEMM) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, cc []float32, ldc int) {
	c.mu.Lock()
	c.flops += 2 * float64(m) * float64(n) * float64(k)
	c.mu.Unlock()
	c.GEMM.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc)
}

// TestTrainFLOPsHonest checks that the FLOP count the engine benchmark
// divides by is the GEMM work Forward + Backward really issue, never more.
func TestTrainFLOPsHonest(t *testing.T) {
	for _, seqs := range [][]Sequence{benchBatch(32, 64, 16, 1), benchBatch(3, 20, 5, 2), gradCheckSeqs()} {
		cfg := DefaultConfig()
		m, err := New(cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		cg := &countingGEMM{GEMM: m.GEMM()}
		m.SetGEMM(cg)
		p, err := m.Forward(seqs, 1)
		if err != nil {
			t.Fatal(err)
		}
		fwd := cg.flops
		d := make([][]float32, len(seqs))
		for i, s := range seqs {
			d[i] = slices.Repeat([]float32{0.1}, len(s.Response))
		}
		if err := p.Backward(d, d, m.NewGrads()); err != nil {
			t.Fatal(err)
		}
		total := cg.flops
		ef, et := ForwardFLOPs(cfg, seqs), TrainFLOPs(cfg, seqs)
		t.Logf("forward: counted %.4g, ForwardFLOPs %.4g; train: counted %.4g, TrainFLOPs %.4g", fwd, ef, total, et)
		if ef > fwd*(1+1e-9) {
			t.Errorf("ForwardFLOPs %.6g exceeds the GEMM work issued %.6g", ef, fwd)
		}
		if et > total*(1+1e-9) {
			t.Errorf("TrainFLOPs %.6g exceeds the GEMM work issued %.6g", et, total)
		}
	}
}
