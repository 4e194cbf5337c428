package hf

import (
	"testing"
	"time"
)

// BenchmarkDecode converts a 4M-value tensor of each dtype to float32 (what Weights.Float32 does
// on the mapped bytes), beside its anchor, a plain copy of the same float32 values, and reports
// the ratio to it (x-copy) and the values per second.
func BenchmarkDecode(b *testing.B) {
	const n = 4 << 20
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i%1000) * 0.001
	}
	dst := make([]float32, n)
	copy(dst, src) // the anchor times a copy, not page faults
	for _, dtype := range []string{BF16, F16, F32} {
		raw := encode(dtype, src, nil)
		b.Run(dtype, func(b *testing.B) {
			t0 := time.Now()
			for i := 0; i < b.N; i++ {
				copy(dst, src)
			}
			anchor := time.Since(t0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				decode(dtype, raw, dst)
			}
			b.ReportMetric(float64(b.Elapsed())/float64(anchor), "x-copy")
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mvalues/s")
		})
	}
}

// BenchmarkEncodeBF16 rounds float32 to BF16 as WriteFolder does, beside the same anchor.
func BenchmarkEncodeBF16(b *testing.B) {
	const n = 4 << 20
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i%1000) * 0.001
	}
	dst, buf := make([]float32, n), make([]byte, 0, 2*n)
	copy(dst, src)
	buf = encode(BF16, src, buf)
	t0 := time.Now()
	for i := 0; i < b.N; i++ {
		copy(dst, src)
	}
	anchor := time.Since(t0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf = encode(BF16, src, buf[:0])
	}
	b.ReportMetric(float64(b.Elapsed())/float64(anchor), "x-copy")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mvalues/s")
}
