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
	Behaviour []float32 // the sampler's log-probs (rows' response_logprobs); for RolloutIS
	Weight    float64   // the policy term's weight under Objective.AgentBalance
}

// Hyper are the PPO settings of one model.
type Hyper struct {
	ClipLow, ClipHigh float64 // ratio clipped to [1−ClipLow, 1+ClipHigh]
	KLCoef            float64 // weight of the k3 KL estimate to the reference
	Temperature       float32 // the sampling temperature the rows were generated at
	MicroBatch        int     // rows per forward/backward
	Objective
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
	// ClipLowTokens and ClipHighTokens split ClipTokens by the side clipped; DualClipTokens
	// were bounded by Objective.ClipC (clipped or not).
	ClipLowTokens, ClipHighTokens, DualClipTokens int
	// The rollout correction's weights before capping, per unit (token or row): count, sum,
	// max, and how many were capped or masked.
	ISUnits, ISCapped int
	SumIS, MaxIS      float64
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
// total is the sum of the agents' gradients, added in sorted agent order. A non-finite
// advantage is an error. It runs on the CPU engine; GradientsOn takes the engine.
func Gradients(m *model.Model, batch []Example, h Hyper) (total *model.Grads, perAgent map[string]*model.Grads, st Stats, err error) {
	return GradientsOn(CPU, m, batch, h)
}

// GradientsOn is Gradients with the forward and backward passes on eng; the gradients come
// back to the host.
func GradientsOn(eng Engine, m *model.Model, batch []Example, h Hyper) (total *model.Grads, perAgent map[string]*model.Grads, st Stats, err error) {
	hg := newHostGrads(eng, m)
	hg.perAgent = map[string]model.GradBuf{}
	if st, err = gradients(eng, m, batch, h, hg); err != nil {
		return nil, nil, st, err
	}
	perAgent = make(map[string]*model.Grads, len(hg.perAgent))
	for a, g := range hg.perAgent {
		perAgent[a] = g.(*model.Grads)
	}
	return hg.total.(*model.Grads), perAgent, st, nil
}

// gradStore is where gradients accumulates the agents' gradients and what runs the optimizer
// step on their total: the host (hostGrads, any engine) or the engine's device (gpuGrads).
type gradStore interface {
	// begin starts the next agent's gradient at zero.
	begin() error
	// backward adds pass's gradient of Σ dLogProb·logprob + Σ dEntropy·entropy (dEntropy
	// may be nil) into the current agent's.
	backward(p Pass, dLogProb, dEntropy [][]float32) error
	// end adds the current agent's gradient into the total and returns the agent's norm.
	end(agent string) (float64, error)
	// totalNorm is the norm of the total.
	totalNorm() (float64, error)
	// step multiplies the total by clip (model.ClipScale's factor; 1: unclipped) and runs
	// opt's step with it on m.
	step(m model.Trainable, opt *model.AdamW, clip float32) error
}

// hostGrads keeps the gradients on the host: the model's GradBuf, AdamW.Apply, then
// eng.Stepped.
type hostGrads struct {
	eng      Engine
	m        model.Trainable
	total    model.GradBuf
	cur      model.GradBuf
	perAgent map[string]model.GradBuf // nil: the agents' gradients are not kept
}

func newHostGrads(eng Engine, m model.Trainable) *hostGrads {
	return &hostGrads{eng: eng, m: m, total: m.NewGradBuf()}
}

// begin starts an agent's gradient: a fresh buffer when the agents' gradients are kept,
// otherwise the last one cleared (a model's worth of new pages an agent and a step is what
// the page faults and the collector would otherwise pay for).
func (g *hostGrads) begin() error {
	if g.cur != nil && g.perAgent == nil {
		g.cur.Zero()
		return nil
	}
	g.cur = g.m.NewGradBuf()
	return nil
}

func (g *hostGrads) backward(p Pass, d, de [][]float32) error { return p.Backward(d, de, g.cur) }

func (g *hostGrads) end(agent string) (float64, error) {
	if err := model.AddGrads(g.total, g.cur); err != nil {
		return 0, err
	}
	if g.perAgent != nil {
		g.perAgent[agent] = g.cur
	}
	return g.cur.Norm(), nil
}

func (g *hostGrads) totalNorm() (float64, error) { return g.total.Norm(), nil }

func (g *hostGrads) step(m model.Trainable, opt *model.AdamW, clip float32) error {
	if clip != 1 {
		g.total.Scale(clip)
	}
	if err := opt.Apply(g.total); err != nil {
		return fmt.Errorf("adamw: %w", err)
	}
	g.eng.Stepped(m)
	return nil
}

// gradients computes batch's PPO-clip loss and its gradient into store (see Gradients).
func gradients(eng Engine, m model.Trainable, batch []Example, h Hyper, store gradStore) (st Stats, err error) {
	if h.MicroBatch < 1 {
		return st, errors.New("micro_batch must be ≥ 1")
	}
	byAgent := map[string][]int{}
	for i, ex := range batch {
		if len(ex.Old) != len(ex.Seq.Response) || (h.KLCoef > 0 && len(ex.Ref) != len(ex.Seq.Response)) || (h.RolloutIS != "" && len(ex.Behaviour) != len(ex.Seq.Response)) {
			return st, fmt.Errorf("example %d (agent %s): %d old log-probs for %d response tokens", i, ex.Agent, len(ex.Old), len(ex.Seq.Response))
		}
		if a := float64(ex.Advantage); math.IsNaN(a) || math.IsInf(a, 0) {
			return st, fmt.Errorf("example %d (agent %s): advantage %v is not finite", i, ex.Agent, ex.Advantage)
		}
		byAgent[ex.Agent] = append(byAgent[ex.Agent], i)
		st.Tokens += len(ex.Seq.Response)
	}
	st.Agents = map[string]*AgentStats{}
	if st.Tokens == 0 {
		return st, nil
	}
	den := h.denominators(batch, st.Tokens)
	agents := make([]string, 0, len(byAgent))
	for a := range byAgent {
		agents = append(agents, a)
	}
	sort.Strings(agents)
	for _, a := range agents {
		if err := store.begin(); err != nil {
			return st, err
		}
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
				return st, fmt.Errorf("forward: %w", err)
			}
			lps, ents := pass.LogProbs(), pass.Entropy()
			d := make([][]float32, len(mb))
			var de [][]float32
			if h.EntropyCoef != 0 {
				de = make([][]float32, len(mb))
			}
			for j, i := range mb {
				dj, dej := h.row(as, &batch[i], lps[j], ents[j], den[i])
				d[j] = dj
				if de != nil {
					de[j] = dej
				}
				as.Tokens += len(lps[j])
				as.Rows++
			}
			if err := store.backward(pass, d, de); err != nil {
				return st, fmt.Errorf("backward: %w", err)
			}
		}
		if as.GradNorm, err = store.end(a); err != nil {
			return st, err
		}
		st.Agents[a] = as
		st.Loss += as.Loss
	}
	st.GradNorm, err = store.totalNorm()
	return st, err
}

// Update runs one optimizer step on batch: gradients, global grad-norm clipping at gradClip,
// AdamW, on the CPU engine; UpdateOn takes the engine. A gradient whose norm is not finite is
// an error, and no step is taken.
func Update(m model.Trainable, opt *model.AdamW, batch []Example, h Hyper, gradClip float64) (Stats, error) {
	return UpdateOn(CPU, m, opt, batch, h, gradClip)
}

// UpdateOn is Update on eng. On the CPU engine (and the GPU engine with a host optimizer) the
// gradients come back to the host and AdamW runs there; the GPU engine otherwise keeps
// gradients, clipping and AdamW on its device (the same arithmetic) and the host model and
// optimizer are current again after eng.Sync.
func UpdateOn(eng Engine, m model.Trainable, opt *model.AdamW, batch []Example, h Hyper, gradClip float64) (Stats, error) {
	store, err := storeFor(eng, m)
	if err != nil {
		return Stats{}, err
	}
	st, err := gradients(eng, m, batch, h, store)
	if err != nil || st.Tokens == 0 {
		return st, err
	}
	// A non-finite gradient cannot be clipped (model.ClipScale leaves it), and AdamW would
	// turn every weight into NaN: a checkpoint no reader accepts. Refuse it, changing nothing.
	if math.IsNaN(st.GradNorm) || math.IsInf(st.GradNorm, 0) {
		return st, fmt.Errorf("gradient norm is %v (loss %v over %d tokens): no step taken, the weights are unchanged (weights or advantages too large for float32?)", st.GradNorm, st.Loss, st.Tokens)
	}
	// Global grad-norm clipping (model.ClipGradNorm) with the norm gradients already took.
	clip, _ := model.ClipScale(st.GradNorm, gradClip)
	return st, store.step(m, opt, clip)
}
