//go:build amd64 && !purego

package model

func fmaLoopAVX2(n int)
func fmaLoopAVX512(n int)

// The loops hold 12 FMAs an iteration: 12·8·2 flops for AVX2, 12·16·2 for
// AVX-512.
func fmaProbeAVX2() *fmaProbe {
	if !hasAVX2FMA {
		return nil
	}
	return &fmaProbe{run: fmaLoopAVX2, flops: 12 * 8 * 2}
}

func fmaProbeAVX512() *fmaProbe {
	if !hasAVX512 {
		return nil
	}
	return &fmaProbe{run: fmaLoopAVX512, flops: 12 * 16 * 2}
}
