package model

import "testing"

// BenchmarkAttnShapes: the per-(sequence, head) attention products at
// T=64, head dim 32 (row strides as in the packed QKV activations).
func BenchmarkAttnShapes(b *testing.B) {
	q := make([]float32, 64*384)
	for i := range q {
		q[i] = float32(i%7) * 0.1
	}
	P := make([]float32, 63*63)
	out := make([]float32, 64*128)
	g := BlockedGEMM{}
	for _, s := range []struct {
		name string
		f    func()
	}{
		{"QKt_63x63x32_NT", func() { g.Sgemm(false, true, 63, 63, 32, 1, q, 384, q[128:], 384, 0, P, 63) }},
		{"PV_63x32x63_NN", func() { g.Sgemm(false, false, 63, 32, 63, 1, P, 63, q[256:], 384, 0, out, 128) }},
		{"PtdO_63x32x63_TN", func() { g.Sgemm(true, false, 63, 32, 63, 1, P, 63, q[256:], 384, 0, out, 128) }},
	} {
		b.Run(s.name, func(b *testing.B) {
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				s.f()
			}
			b.ReportMetric((processCPU()-cpu0)/float64(b.N)*1e3, "cpu-ms/op")
			b.ReportMetric(2*63*63*32*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkAttention: the attention blocks alone (both layers' worth of one
// forward and one backward) at B=32, T=64.
func BenchmarkAttention(b *testing.B) {
	m, _ := New(DefaultConfig(), 1)
	seqs := benchBatch(32, 64, 16, 1)
	p, err := m.Forward(seqs, 1)
	if err != nil {
		b.Fatal(err)
	}
	a := &p.acts[0]
	D, b2 := m.cfg.Dim, m.core.d.blockDims
	dO := make([]float32, p.n*D)
	for i := range dO {
		dO[i] = float32(i%13) * 0.01
	}
	dQKV := make([]float32, p.n*3*D)
	b.Run("forward", func(b *testing.B) {
		cpu0 := processCPU()
		for i := 0; i < b.N; i++ {
			gqaForward(m.GEMM(), p.seqs, b2, a.qkv, a.attOut, a.maps)
		}
		b.ReportMetric((processCPU()-cpu0)/float64(b.N)*1e3, "cpu-ms/op")
	})
	b.Run("backward", func(b *testing.B) {
		cpu0 := processCPU()
		for i := 0; i < b.N; i++ {
			gqaBackward(m.GEMM(), p.seqs, b2, a.qkv, a.maps, dO, dQKV)
		}
		b.ReportMetric((processCPU()-cpu0)/float64(b.N)*1e3, "cpu-ms/op")
	})
}
