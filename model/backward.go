package model

import "fmt"

// Backward accumulates into g the gradient of
//
//	L = Σ dLogProb[i][t]·logprob[i][t] + Σ dEntropy[i][t]·entropy[i][t]
//
// with respect to every parameter. dEntropy may be nil. dLogProb (and
// dEntropy) must have the shape of LogProbs(). Calling Backward on several
// passes into one Grads accumulates the gradients.
func (p *Pass) Backward(dLogProb, dEntropy [][]float32, g *Grads) error {
	m := p.m
	if g == nil || g.cfg != m.cfg {
		return fmt.Errorf("model: Backward: grads do not match the model config")
	}
	if err := p.checkShape("dLogProb", dLogProb, false); err != nil {
		return err
	}
	if err := p.checkShape("dEntropy", dEntropy, true); err != nil {
		return err
	}
	p.backward(dLogProb, dEntropy, g.core)
	return nil
}

func (p *Pass) checkShape(name string, d [][]float32, optional bool) error {
	return checkGradShape(p.seqs, name, d, optional)
}
