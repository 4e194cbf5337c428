package model

import (
	"errors"
	"fmt"
	"math"
)

// Config sets the transformer's sizes.
type Config struct {
	Vocab    int  `json:"vocab"`     // output vocabulary; ≥ VocabSize
	Context  int  `json:"context"`   // maximum sequence length (prompt + response)
	Dim      int  `json:"dim"`       // model width
	Layers   int  `json:"layers"`    // number of transformer blocks
	Heads    int  `json:"heads"`     // attention heads; must divide Dim
	FFMult   int  `json:"ff_mult"`   // MLP hidden width = FFMult·Dim
	TiedHead bool `json:"tied_head"` // output head shares the token embedding
}

// Limits enforced by Validate (they keep a hostile checkpoint header from
// asking for absurd allocations).
const (
	MaxContext = 1 << 16
	MaxDim     = 1 << 14
	MaxLayers  = 256
	MaxParams  = 1 << 31 // total float32 parameters (and at most MaxInt/4 bytes' worth)
)

// DefaultConfig returns the documented defaults: Vocab=VocabSize,
// Context=256, Dim=128, Layers=2, Heads=4, FFMult=4, TiedHead=true.
func DefaultConfig() Config {
	return Config{Vocab: VocabSize, Context: 256, Dim: 128, Layers: 2, Heads: 4, FFMult: 4, TiedHead: true}
}

// Validate reports every problem with c at once (errors.Join).
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("model config: "+format, a...)) }
	if c.Vocab < VocabSize {
		bad("vocab %d < tokenizer vocabulary %d", c.Vocab, VocabSize)
	}
	if c.Vocab > 1<<24 {
		bad("vocab %d too large", c.Vocab)
	}
	if c.Context < 2 || c.Context > MaxContext {
		bad("context %d out of range [2, %d]", c.Context, MaxContext)
	}
	if c.Dim < 1 || c.Dim > MaxDim {
		bad("dim %d out of range [1, %d]", c.Dim, MaxDim)
	}
	if c.Layers < 1 || c.Layers > MaxLayers {
		bad("layers %d out of range [1, %d]", c.Layers, MaxLayers)
	}
	if c.Heads < 1 {
		bad("heads %d < 1", c.Heads)
	} else if c.Dim >= 1 && c.Dim%c.Heads != 0 {
		bad("dim %d not divisible by heads %d", c.Dim, c.Heads)
	}
	if c.FFMult < 1 || c.FFMult > 64 {
		bad("ff_mult %d out of range [1, 64]", c.FFMult)
	}
	if len(errs) == 0 {
		if n := c.NumParams(); n > MaxParams || n > math.MaxInt/4 {
			bad("%d parameters exceed the limit %d", n, min(int64(MaxParams), math.MaxInt/4))
		}
	}
	return errors.Join(errs...)
}

// NumParams is the number of float32 parameters a model with c has
// (computed in int64: no overflow where int is 32 bits).
func (c Config) NumParams() int64 {
	var n int64
	for _, s := range paramSpecs(c) {
		p := int64(1)
		for _, d := range s.shape {
			p *= int64(d)
		}
		n += p
	}
	return n
}

func prod(shape []int) int {
	p := 1
	for _, d := range shape {
		p *= d
	}
	return p
}
