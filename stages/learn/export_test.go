package learn

import (
	gpuengine "github.com/drmas-dev/drmas/gpu/engine"
	"github.com/drmas-dev/drmas/model"
)

// EngineFor exposes engineFor to the external tests.
var EngineFor = engineFor

// SetTestDevice makes every learner use the GPU engine on f's device until the test ends.
func SetTestDevice(t interface{ Cleanup(func()) }, f func() gpuengine.Device) {
	testDevice = f
	t.Cleanup(func() { testDevice = nil })
}

// ObjectiveTerms runs the objective over batch with the given log-probs and entropies in place
// of a model's forward pass: the loss, its gradient with respect to each log-prob and entropy
// (nil rows without an entropy bonus), and the statistics per agent.
func ObjectiveTerms(h Hyper, batch []Example, lps, ents [][]float32) (loss float64, d, de [][]float32, st map[string]*AgentStats) {
	tokens := 0
	for i := range batch {
		tokens += len(batch[i].Seq.Response)
	}
	den := h.denominators(batch, tokens)
	st = map[string]*AgentStats{}
	d, de = make([][]float32, len(batch)), make([][]float32, len(batch))
	for i := range batch {
		as := st[batch[i].Agent]
		if as == nil {
			as = &AgentStats{}
			st[batch[i].Agent] = as
		}
		d[i], de[i] = h.row(as, &batch[i], lps[i], ents[i], den[i])
	}
	for _, as := range st {
		loss += as.Loss
	}
	return loss, d, de, st
}

// BalanceWeights exposes balanceWeights.
var BalanceWeights = balanceWeights

// AdapterOff exposes adapterOff.
var AdapterOff = adapterOff

// GradientsReusing is GradientsOn(CPU) as the optimizer step runs it: the agents' gradients
// are not kept, so each agent's buffer is the last one cleared.
func GradientsReusing(m *model.Model, batch []Example, h Hyper) (total *model.Grads, st Stats, err error) {
	hg := newHostGrads(CPU, m)
	st, err = gradients(CPU, m, batch, h, hg)
	if err != nil {
		return nil, st, err
	}
	return hg.total.(*model.Grads), st, nil
}
