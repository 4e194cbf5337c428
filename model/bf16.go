package model

import (
	"errors"
	"fmt"
	"math"
)

// A model that does not train (a LoRA adapter's base, a KL reference, an
// inference-only model) may keep its matrices (the block projections, the
// embedding and an untied head) as bfloat16 bits, half the bytes of float32,
// packed in strips of 16 rows at load (bf16strips.go). Every product reads
// them through gemvStrips or the blocked GEMM with bf16W.packB, which widen
// each value exactly as they load it, so log-probs, entropies and gradients
// have the bits of the same model with the values widened to float32. Norm
// weights and biases stay float32.

// ErrStoredBF16 is matched by the error of training every weight of a model
// stored in BF16: its weights are frozen (train a LoRA adapter over it).
var ErrStoredBF16 = errors.New("the model's weights are stored in BF16 and frozen")

// bf16SmallRows is the most rows for which a product by BF16 weights takes
// the small-M path (gemvStrips: passes of gemvMaxRows rows over a group of
// strips while it is in cache), which reads the bits in place where linearT
// would widen them into a buffer first: 1.5-4.4 times less CPU up to 128
// rows at the Qwen2.5-0.5B shapes (BenchmarkLinearTBF16's strips column).
const bf16SmallRows = transposedRows

// isMatrix reports whether s is one of the matrices a model stored in BF16
// keeps as bfloat16.
func isMatrix(s TensorSpec) bool { return len(s.Shape) == 2 }

// weight is a matrix as a product reads it: float32 (f) or bfloat16 bits
// packed in strips (h, bf16W).
type weight struct {
	f []float32
	h bf16W
}

// key identifies the matrix by its first element (a LoRA's sites).
func (w weight) key() any {
	if w.h.bits != nil {
		return &w.h.bits[0]
	}
	return &w.f[0]
}

func (b *blockW) qkvM() weight    { return weight{b.qkvW, b.qkvH} }
func (b *blockW) oM() weight      { return weight{b.oW, b.oH} }
func (b *blockW) gateUpM() weight { return weight{b.gateUp, b.gateUpH} }
func (b *blockW) downM() weight   { return weight{b.down, b.downH} }
func (w *llmW) headM() weight     { return weight{w.head, w.headH} }

// embedRow is token tok's embedding row (D values): a view of the float32
// embedding, or the bfloat16 row widened into dst.
func (w *llmW) embedRow(tok, D int, dst []float32) []float32 {
	if w.embedH.bits == nil {
		return w.embed[tok*D:][:D]
	}
	w.embedH.widenRows(dst[:D], tok, tok+1)
	return dst[:D]
}

// sgemmW is g.Sgemm with the matrix W as operand B (ldb its row length in
// the layout transB names): under BlockedGEMM a bfloat16 W is widened as
// the GEMM packs it (packB), for another kernel into a float32 copy.
func sgemmW(g GEMM, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, W weight, ldb int, beta float32, c []float32, ldc int) {
	if W.h.bits == nil {
		g.Sgemm(transA, transB, m, n, k, alpha, a, lda, W.f, ldb, beta, c, ldc)
		return
	}
	if bg, ok := g.(BlockedGEMM); ok {
		sgemm(bg, transA, m, n, k, alpha, a, lda, func(dst []float32, pc, kcur, jc, ncur int) {
			W.h.packB(dst, transB, pc, kcur, jc, ncur)
		}, beta, c, ldc)
		return
	}
	g.Sgemm(transA, transB, m, n, k, alpha, a, lda, W.h.widened(), W.h.in, beta, c, ldc)
}

// Float32 is the tensor's values: Data, or BF16 widened into a new slice.
func (p Param) Float32() []float32 {
	if p.BF16 != nil {
		return p.bf16W().widened()
	}
	return p.Data
}

// BF16Rows is a matrix's bfloat16 bits in row-major order (a new slice;
// BF16 holds them packed in strips), nil for a float32 tensor.
func (p Param) BF16Rows() []uint16 {
	if p.BF16 == nil {
		return nil
	}
	w := p.bf16W()
	h := make([]uint16, len(p.BF16))
	w.bitsRows(h, 0, w.rows())
	return h
}

// bf16W is p's BF16 as a matrix [Shape[0] × Shape[1]].
func (p Param) bf16W() bf16W {
	return bf16W{bits: p.BF16, in: p.Shape[1], segs: p.Shape[:1]}
}

// StoredBF16 reports whether m keeps its matrices as bfloat16 (frozen).
func (m *LLM) StoredBF16() bool { return m.hbuf != nil }

// NewLLMBF16 is NewLLM for a model that does not train, stored in BF16:
// getH fills each matrix (the block projections, the embedding, an untied
// head) with its bfloat16 bits in row-major order (packed in strips after),
// get every other tensor.
func NewLLMBF16(c ArchConfig, get func(name string, dst []float32) error, getH func(name string, dst []uint16) error) (*LLM, error) {
	m, err := newLLMStored(c, true)
	if err != nil {
		return nil, err
	}
	for _, p := range m.params {
		if p.BF16 != nil {
			err = getH(p.Name, p.BF16)
		} else {
			err = get(p.Name, p.Data)
		}
		if err != nil {
			return nil, fmt.Errorf("model: tensor %s %v: %w", p.Name, p.Shape, err)
		}
		if p.BF16 != nil {
			packStrips(p.BF16, p.Shape[0], p.Shape[1])
		}
	}
	return m, nil
}

// FrozenBF16 returns a copy of m stored in BF16. Every value of m's matrices
// must be a bfloat16 already (its low 16 bits zero, as a BF16 checkpoint's
// are): the copy computes exactly what m does.
func (m *LLM) FrozenBF16() (*LLM, error) {
	if m.StoredBF16() {
		return m, nil
	}
	byName := make(map[string][]float32, len(m.params))
	for _, p := range m.params {
		byName[p.Name] = p.Data
	}
	f, err := NewLLMBF16(m.cfg, func(name string, dst []float32) error {
		copy(dst, byName[name])
		return nil
	}, func(name string, dst []uint16) error {
		for i, v := range byName[name] {
			b := math.Float32bits(v)
			if b&0xffff != 0 {
				return fmt.Errorf("element %d is %v, not a bfloat16 value: round the weights to BF16 first", i, v)
			}
			dst[i] = uint16(b >> 16)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	f.gemm, f.ckpt = m.gemm, m.ckpt
	return f, nil
}

// Float32 returns m with float32 weights: m itself, or for a model stored in
// BF16 a copy with every value widened (twice the matrices' memory).
func (m *LLM) Float32() *LLM {
	if !m.StoredBF16() {
		return m
	}
	f, _ := newLLMStored(m.cfg, false) // m's config is valid
	for i, p := range m.params {
		if p.BF16 != nil {
			w := p.bf16W()
			w.widenRows(f.parts[i], 0, w.rows())
		} else {
			copy(f.parts[i], p.Data)
		}
	}
	f.gemm, f.ckpt = m.gemm, m.ckpt
	return f
}
