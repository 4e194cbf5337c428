package learn

import (
	"fmt"
	"math"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/model"
)

// Objective holds the policy loss's options (docs/objectives.md), named after verl's. The zero
// value is PPO-clip with token-mean aggregation and, with Hyper.KLCoef, the k3 estimate of the
// KL to the reference: the learner's objective before the options, bit for bit.
type Objective struct {
	// LossAgg is how token losses make the mini-batch's loss: "" or token-mean (Σ/tokens),
	// seq-mean-token-sum (Σ/rows), seq-mean-token-mean (Σ_rows mean_t/rows) or
	// seq-mean-token-sum-norm (Σ/NormLen, Dr. GRPO's constant).
	LossAgg string
	NormLen int
	// ClipC > 1 bounds the loss of a negative advantage A by −A·ClipC (dual clip); 0 is off.
	ClipC float64
	// SeqRatio uses GSPO's sequence ratio exp(mean_t(log π − log π_old)) for every token of a
	// row, clipped to [1−SeqClipLow, 1+SeqClipHigh].
	SeqRatio                bool
	SeqClipLow, SeqClipHigh float64
	// EntropyCoef subtracts EntropyCoef × the aggregated entropy from the loss.
	EntropyCoef float64
	// AgentBalance weighs each row's policy term by Example.Weight.
	AgentBalance bool
	// KLType is the estimator of the KLCoef term: "" or k3, k1, k2, abs.
	KLType string
	// RolloutIS corrects for a sampler that differs from the learner with the weight
	// π_old/π_sampler per token ("token") or per row ("sequence"): min(w, ISCap), or, with
	// ISMask, 1 within [1/ISCap, ISCap] and 0 outside.
	RolloutIS string
	ISCap     float64
	ISMask    bool
}

// objectiveOf returns the learn section's objective; maxTokens is rollout.max_tokens.
func objectiveOf(l configs.Learn, maxTokens int) Objective {
	o := Objective{LossAgg: l.LossAgg, NormLen: l.LossNormLen, ClipC: l.ClipC, SeqRatio: l.RatioLevel == "sequence",
		SeqClipLow: l.SeqClipLow, SeqClipHigh: l.SeqClipHigh, EntropyCoef: l.EntropyCoef, AgentBalance: l.AgentBalance == "inverse_count",
		KLType: l.KLType, ISCap: l.RolloutISCap, ISMask: l.RolloutISMode == "mask"}
	if l.RolloutIS == "token" || l.RolloutIS == "sequence" {
		o.RolloutIS = l.RolloutIS
	}
	if o.NormLen == 0 {
		o.NormLen = maxTokens
	}
	return o
}

// denominators returns, per example of batch, what its token terms are divided by under
// LossAgg: the batch's tokens, its rows with tokens, rows × the row's tokens, or NormLen.
func (o Objective) denominators(batch []Example, tokens int) []float64 {
	rows := 0
	for i := range batch {
		if len(batch[i].Seq.Response) > 0 {
			rows++
		}
	}
	den := make([]float64, len(batch))
	for i := range batch {
		switch o.LossAgg {
		case "seq-mean-token-sum":
			den[i] = float64(rows)
		case "seq-mean-token-mean":
			den[i] = float64(rows) * float64(len(batch[i].Seq.Response))
		case "seq-mean-token-sum-norm":
			den[i] = float64(max(o.NormLen, 1))
		default:
			den[i] = float64(tokens)
		}
	}
	return den
}

// row adds one example's loss terms to as and returns the loss's gradient with respect to its
// tokens' log-probs lps and (with an entropy bonus; else nil) their entropies ents. den is the
// example's denominator (denominators).
func (h Hyper) row(as *AgentStats, ex *Example, lps, ents []float32, den float64) (d, de []float32) {
	adv := float64(ex.Advantage)
	w := 1.0
	if h.AgentBalance {
		w = ex.Weight
	}
	is := h.isWeights(as, ex)
	lo, hi := h.ClipLow, h.ClipHigh
	var seqLog float64
	if h.SeqRatio {
		lo, hi = h.SeqClipLow, h.SeqClipHigh
		for t, lp := range lps {
			seqLog += float64(lp) - float64(ex.Old[t])
		}
		seqLog /= float64(max(len(lps), 1))
	}
	d = make([]float32, len(lps))
	if h.EntropyCoef != 0 {
		de = make([]float32, len(lps))
	}
	for t, lp := range lps {
		logRatio := float64(lp) - float64(ex.Old[t])
		r := math.Exp(logRatio)
		ratio, dRatio := r, r // dRatio: ∂ratio/∂log π of this token
		if h.SeqRatio {
			// verl's GSPO: sg[s]·π/sg[π], its log clamped at 10 (no gradient beyond).
			ratio, dRatio = math.Exp(math.Min(seqLog, 10)), math.Exp(math.Min(seqLog, 10))
			if seqLog > 10 {
				dRatio = 0
			}
		}
		wt := w
		if is != nil {
			wt = w * is[t]
		}
		grad := h.policy(as, adv, ratio, dRatio, lo, hi, wt, den)
		if h.KLCoef > 0 {
			kl, dkl := klTerm(h.KLType, float64(lp), float64(ex.Ref[t]))
			as.Loss += h.KLCoef * kl / den
			grad += h.KLCoef * dkl / den
			as.SumKL += kl
		}
		if de != nil {
			as.Loss -= h.EntropyCoef * float64(ents[t]) / den
			de[t] = float32(-h.EntropyCoef / den)
		}
		d[t] = float32(grad)
		as.SumRatio += r
		as.MaxRatio = math.Max(as.MaxRatio, r)
		as.SumLogRatioSq += logRatio * logRatio
		as.SumEntropy += float64(ents[t])
		as.SumAbsAdv += math.Abs(adv)
	}
	return d, de
}

// policy adds one token's clipped policy term, weighted by wt and divided by den, to as and
// returns its derivative with respect to the token's log-prob (dRatio: the ratio's).
func (h Hyper) policy(as *AgentStats, adv, ratio, dRatio, lo, hi, wt, den float64) float64 {
	rc := math.Min(math.Max(ratio, 1-lo), 1+hi)
	unclipped, clipped := -adv*ratio, -adv*rc
	pg, grad := unclipped, 0.0
	if unclipped >= clipped {
		grad = wt * -adv * dRatio / den
	} else {
		pg = clipped
		as.ClipTokens++
		if ratio < 1 {
			as.ClipLowTokens++
		} else {
			as.ClipHighTokens++
		}
	}
	if h.ClipC > 0 && adv < 0 && -adv*h.ClipC < pg {
		pg, grad = -adv*h.ClipC, 0
		as.DualClipTokens++
	}
	as.Loss += wt * pg / den
	return grad
}

// klTerm is the estimate of KL(π‖π_ref) at one token of log-probs lp (the policy's) and ref,
// and its derivative with respect to lp (verl's kl_penalty: k1 "kl", k2 "mse", k3
// "low_var_kl" without its clamp, abs).
func klTerm(kind string, lp, ref float64) (kl, dkl float64) {
	switch kind {
	case "k1":
		return lp - ref, 1
	case "k2":
		return 0.5 * (lp - ref) * (lp - ref), lp - ref
	case "abs":
		if lp < ref {
			return ref - lp, -1
		}
		return lp - ref, 1
	}
	diff := ref - lp
	return math.Exp(diff) - diff - 1, 1 - math.Exp(diff)
}

// isWeights returns the rollout correction's weight per token of ex (nil when off) and adds
// its statistics to as: π_old/π_sampler per token, or one per row (the product over its tokens).
func (h Hyper) isWeights(as *AgentStats, ex *Example) []float64 {
	if h.RolloutIS == "" {
		return nil
	}
	n := len(ex.Old)
	w := make([]float64, n)
	weigh := func(logRatio float64) float64 {
		r := math.Exp(logRatio)
		as.ISUnits++
		as.SumIS += r
		as.MaxIS = math.Max(as.MaxIS, r)
		switch {
		case h.ISMask && (r < 1/h.ISCap || r > h.ISCap):
			as.ISCapped++
			return 0
		case h.ISMask:
			return 1
		case r > h.ISCap:
			as.ISCapped++
			return h.ISCap
		}
		return r
	}
	if h.RolloutIS == "token" {
		for t := range w {
			w[t] = weigh(float64(ex.Old[t]) - float64(ex.Behaviour[t]))
		}
		return w
	}
	var s float64
	for t := range w {
		s += float64(ex.Old[t]) - float64(ex.Behaviour[t])
	}
	v := weigh(s)
	for t := range w {
		w[t] = v
	}
	return w
}

// adapterOff returns the reference of learn.kl_ref base for model id, a LoRA adapter m: an
// adapter with B = 0 over m's own base, which scores as the base with the adapter switched off,
// with no second copy of the base in memory, on whichever engine scores m.
func adapterOff(id string, m model.Trainable) (model.Trainable, error) {
	l, ok := m.(*model.LoRA)
	if !ok {
		return nil, fmt.Errorf("learn.kl_ref base: model %s is a %T, not a LoRA adapter: its reference is step 0 (learn.kl_ref step0)", id, m)
	}
	off, err := model.NewLoRA(l.Base(), l.Config(), 0)
	if err != nil {
		return nil, fmt.Errorf("learn.kl_ref base: model %s: %w", id, err)
	}
	return off, nil
}
