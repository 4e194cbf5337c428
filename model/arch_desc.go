package model

// The block skeleton's description: what one architecture chooses for each
// slot of a pre-norm decoder block. The forward (arch_forward.go), the
// hand-written backward (arch_backward.go) and the KV-cache decoder
// (arch_sample.go) are written once over it; the built-in GPT-2-style
// policy (Model) and the Llama family (LLM) are two descriptions.

// netDesc is one model's description: sizes and the op of each slot.
type netDesc struct {
	blockDims
	layers, vocab, context int
	norm                   NormKind
	pos                    PosKind
	mlp                    MLPKind
	ropeTheta              float64
	ropeScaling            RopeScaling
	// keepMaps: the forward keeps the attention maps for the backward
	// (memory quadratic in the sequence length; the built-in model's
	// contexts are short) instead of recomputing them.
	keepMaps bool
	// directLinear: every projection is the direct GEMM y = x·Wᵀ, never the
	// transposed few-rows path of linear (same bits under the GEMM
	// contract, but the built-in model's results were fixed under the
	// direct call with any GEMM).
	directLinear bool
}

// up is the width of the MLP's first projection (gate|up for SwiGLU).
func (d netDesc) up() int {
	if d.mlp == MLPSwiGLU {
		return 2 * d.F
	}
	return d.F
}

// descOf is the description of a registered architecture's config.
func descOf(c ArchConfig) netDesc {
	b := c.Block()
	return netDesc{
		blockDims: dimsOf(c),
		layers:    c.Layers, vocab: c.Vocab, context: c.Context,
		norm: b.Norm, pos: b.Pos, mlp: b.MLP, ropeTheta: c.RopeTheta,
		ropeScaling: c.RopeScaling,
	}
}

// builtinDesc is the description of the built-in policy: LayerNorm with
// bias, learned positions, multi-head attention (KV heads = heads), a GELU
// MLP, biases on every projection.
func builtinDesc(c Config) netDesc {
	return netDesc{
		blockDims: blockDims{D: c.Dim, H: c.Heads, KV: c.Heads, hd: c.Dim / c.Heads, F: c.FFMult * c.Dim, eps: lnEps},
		layers:    c.Layers, vocab: c.Vocab, context: c.Context,
		norm: builtinBlock.Norm, pos: builtinBlock.Pos, mlp: builtinBlock.MLP,
		keepMaps: true, directLinear: true,
	}
}

// normRows normalises the rows of x[n×D] into y with weight w (and bias b
// for LayerNorm), saving xhat and rstd when they are not nil.
func (d netDesc) normRows(x []float32, n int, w, b, y, xhat, rstd []float32) {
	if d.norm == NormLayer {
		layerNorm(x, n, d.D, w, b, y, xhat, rstd)
		return
	}
	rmsNorm(x, n, d.D, w, d.eps, y, xhat, rstd)
}

// normRowsBackward adds to dx the input gradient of normRows given dy and
// accumulates the weight (and bias) gradients dw, db.
func (d netDesc) normRowsBackward(dy, xhat, rstd []float32, n int, w, dx, dw, db []float32) {
	if d.norm == NormLayer {
		layerNormBackward(dy, xhat, rstd, n, d.D, w, dx, dw, db)
		return
	}
	rmsNormBackward(dy, xhat, rstd, n, d.D, w, dx, dw)
}

// act writes the MLP's activation act[n×F] of its first projection
// pre[n×up()].
func (d netDesc) act(pre []float32, n int, act []float32) {
	if d.mlp == MLPGELU {
		gelu(pre[:n*d.F], act[:n*d.F])
		return
	}
	swiglu(pre, n, d.F, act)
}

// actBackward turns dact[n×F] into dpre[n×up()], the gradient of act's
// input. For GELU dpre must be dact (the product is taken in place).
func (d netDesc) actBackward(pre, dact []float32, n int, dpre []float32) {
	if d.mlp == MLPGELU {
		geluBackward(pre[:n*d.F], dact[:n*d.F])
		return
	}
	swigluBackward(pre, dact, n, d.F, dpre)
}

// embed writes into x[len(tokens)×D] each token's embedding, plus its
// position's for learned positions.
func (d netDesc) embed(w *llmW, tokens, pos []int32, x []float32) {
	D := d.D
	var row []float32
	if w.embedH.bits != nil {
		row = make([]float32, D)
	}
	for r, tok := range tokens {
		te, xr := w.embedRow(int(tok), D, row), x[r*D:(r+1)*D]
		if d.pos != PosLearned {
			copy(xr, te)
			continue
		}
		pe := w.pos[int(pos[r])*D:][:D]
		for j := range xr {
			xr[j] = te[j] + pe[j]
		}
	}
}

// embedBackward adds each row of dX into the gradients of its token's
// embedding (and its position's).
func (d netDesc) embedBackward(gw *llmW, tokens, pos []int32, dX []float32) {
	D := d.D
	for r, tok := range tokens {
		dx := dX[r*D : (r+1)*D]
		addInto(gw.embed[int(tok)*D:][:D], dx)
		if d.pos == PosLearned {
			addInto(gw.pos[int(pos[r])*D:][:D], dx)
		}
	}
}

// rotary returns the RoPE tables of the rows' positions (nil for learned
// positions).
func (d netDesc) rotary(pos []int32) (cos, sin []float32) {
	if d.pos != PosRotary {
		return nil, nil
	}
	return ropeTable(pos, d.hd, d.ropeTheta, d.ropeScaling)
}
