package learn

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/drmas-dev/drmas/model"
)

// Example is one training row: an agent's (prompt, response) with its advantage and the
// log-probs of the response under the pre-update policy (and the reference, for KL).
type Example struct {
	Agent     string
	Seq       model.Sequence
	Advantage float32
	Old       []float32 // log-probs before this iteration's first update
	Ref       []float32 // reference-policy log-probs; nil unless KLCoef > 0
}

// Hyper are the PPO settings of one model.
type Hyper struct {
	ClipLow, ClipHigh float64 // ratio clipped to [1−ClipLow, 1+ClipHigh]
	KLCoef            float64 // weight of the k3 KL estimate to the reference
	Temperature       float32 // the sampling temperature the rows were generated at
	MicroBatch        int     // rows per forward/backward
}

// AgentStats are the statistics of one agent's share of a mini-batch.
type AgentStats struct {
	Rows, Tokens int
	// Loss is the agent's share of the mini-batch loss: Σ over its tokens / all tokens.
	Loss float64
	// GradNorm is the L2 norm of the agent's share of the gradient (its micro-batches
	// accumulated separately), before clipping.
	GradNorm                          float64
	ClipTokens                        int
	SumKL, SumEntropy, SumAbsAdv      float64
	SumRatio, MaxRatio, SumLogRatioSq float64
}

// Stats are the statistics of one mini-batch update.
type Stats struct {
	Loss     float64
	GradNorm float64 // before clipping
	Tokens   int
	Agents   map[string]*AgentStats
}

// Gradients computes the PPO-clip loss of batch with token-mean aggregation over the whole
// batch and its gradient, accumulating each agent's micro-batches into that agent's own Grads.
// total is the sum of the agents' gradients, added in sorted agent order. It runs on the CPU
// engine; GradientsOn takes the engine.
func Gradients(m *model.Model, batch []Example, h Hyper) (total *model.Grads, perAgent map[string]*model.Grads, st Stats, err error) {
	return GradientsOn(CPU, m, batch, h)
}

// GradientsOn is Gradients with the forward and backward passes on eng.
func GradientsOn(eng Engine, m *model.Model, batch []Example, h Hyper) (total *model.Grads, perAgent map[string]*model.Grads, st Stats, err error) {
	if h.MicroBatch < 1 {
		return nil, nil, st, errors.New("micro_batch must be ≥ 1")
	}
	byAgent := map[string][]int{}
	for i, ex := range batch {
		if len(ex.Old) != len(ex.Seq.Response) || (h.KLCoef > 0 && len(ex.Ref) != len(ex.Seq.Response)) {
			return nil, nil, st, fmt.Errorf("example %d (agent %s): %d old log-probs for %d response tokens", i, ex.Agent, len(ex.Old), len(ex.Seq.Response))
		}
		byAgent[ex.Agent] = append(byAgent[ex.Agent], i)
		st.Tokens += len(ex.Seq.Response)
	}
	st.Agents = map[string]*AgentStats{}
	perAgent = map[string]*model.Grads{}
	if st.Tokens == 0 {
		return m.NewGrads(), perAgent, st, nil
	}
	n := float64(st.Tokens)
	agents := make([]string, 0, len(byAgent))
	for a := range byAgent {
		agents = append(agents, a)
	}
	sort.Strings(agents)
	total = m.NewGrads()
	for _, a := range agents {
		g := m.NewGrads()
		as := &AgentStats{}
		idx := byAgent[a]
		for lo := 0; lo < len(idx); lo += h.MicroBatch {
			mb := idx[lo:min(lo+h.MicroBatch, len(idx))]
			seqs := make([]model.Sequence, len(mb))
			for j, i := range mb {
				seqs[j] = batch[i].Seq
			}
			pass, err := eng.Forward(m, seqs, h.Temperature)
			if err != nil {
				return nil, nil, st, fmt.Errorf("forward: %w", err)
			}
			lps, ents := pass.LogProbs(), pass.Entropy()
			d := make([][]float32, len(mb))
			for j, i := range mb {
				ex := &batch[i]
				adv := float64(ex.Advantage)
				d[j] = make([]float32, len(lps[j]))
				for t, lp := range lps[j] {
					logRatio := float64(lp) - float64(ex.Old[t])
					r := math.Exp(logRatio)
					rc := math.Min(math.Max(r, 1-h.ClipLow), 1+h.ClipHigh)
					unclipped, clipped := -adv*r, -adv*rc
					var grad float64
					if unclipped >= clipped {
						as.Loss += unclipped / n
						grad = -adv * r / n
					} else {
						as.Loss += clipped / n
						as.ClipTokens++
					}
					if h.KLCoef > 0 {
						diff := float64(ex.Ref[t]) - float64(lp)
						kl := math.Exp(diff) - diff - 1
						as.Loss += h.KLCoef * kl / n
						grad += h.KLCoef * (1 - math.Exp(diff)) / n
						as.SumKL += kl
					}
					d[j][t] = float32(grad)
					as.SumRatio += r
					as.MaxRatio = math.Max(as.MaxRatio, r)
					as.SumLogRatioSq += logRatio * logRatio
					as.SumEntropy += float64(ents[j][t])
					as.SumAbsAdv += math.Abs(adv)
				}
				as.Tokens += len(lps[j])
				as.Rows++
			}
			if err := pass.Backward(d, nil, g); err != nil {
				return nil, nil, st, fmt.Errorf("backward: %w", err)
			}
		}
		as.GradNorm = g.Norm()
		total.Add(g)
		perAgent[a] = g
		st.Agents[a] = as
		st.Loss += as.Loss
	}
	st.GradNorm = total.Norm()
	return total, perAgent, st, nil
}

// Update runs one optimizer step on batch: gradients, global grad-norm clipping at gradClip,
// AdamW, on the CPU engine; UpdateOn takes the engine.
func Update(m *model.Model, opt *model.AdamW, batch []Example, h Hyper, gradClip float64) (Stats, error) {
	return UpdateOn(CPU, m, opt, batch, h, gradClip)
}

// UpdateOn is Update with the forward and backward passes on eng (the optimizer step runs on
// the host either way, so checkpoints do not depend on the engine).
func UpdateOn(eng Engine, m *model.Model, opt *model.AdamW, batch []Example, h Hyper, gradClip float64) (Stats, error) {
	g, _, st, err := GradientsOn(eng, m, batch, h)
	if err != nil {
		return st, err
	}
	if st.Tokens == 0 {
		return st, nil
	}
	model.ClipGradNorm(g, gradClip)
	if err := opt.Step(g); err != nil {
		return st, fmt.Errorf("adamw: %w", err)
	}
	eng.Stepped(m)
	return st, nil
}
