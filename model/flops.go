package model

// ForwardFLOPs estimates the floating-point operations (2 per multiply-add)
// of the matrix products of Forward on seqs: the linear layers on every fed
// token, the attention products as computed (full L×L per head, causal
// half included), and the head on the response-predicting rows.
// Element-wise work (LayerNorm, GELU, softmax) is not counted.
func ForwardFLOPs(cfg Config, seqs []Sequence) float64 {
	D, F, V := float64(cfg.Dim), float64(cfg.FFMult*cfg.Dim), float64(cfg.Vocab)
	var f float64
	for _, s := range seqs {
		if len(s.Response) == 0 {
			continue
		}
		L := float64(len(s.Prompt) + len(s.Response) - 1)
		perLayer := L*(2*D*3*D+2*D*D+2*2*D*F) + 2*2*L*L*D
		f += float64(cfg.Layers)*perLayer + 2*float64(len(s.Response))*D*V
	}
	return f
}

// TrainFLOPs estimates Forward + Backward (backward ≈ 2× forward) on seqs.
func TrainFLOPs(cfg Config, seqs []Sequence) float64 { return 3 * ForwardFLOPs(cfg, seqs) }
