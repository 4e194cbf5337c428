package engine

import (
	"testing"

	"github.com/drmas-dev/drmas/model"
)

// TestEveryArchMatchesCPU: the GPU engine's block program, which takes its slots and tensor
// names from model's architecture registry, matches model.LLM on the interpreter for every
// registered architecture (untied, so the head is its own tensor), with attention_bias on
// where the architecture reads it.
func TestEveryArchMatchesCPU(t *testing.T) {
	for _, name := range model.ArchNames() {
		t.Run(name, func(t *testing.T) {
			a, _ := model.LookupArch(name)
			m := randLLM(t, name, model.ArchConfig{Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 12, Intermediate: 24,
				Vocab: 40, Context: 32, QKVBias: a.AttentionBias})
			compareLLM(t, interp(t), m, tinySeqs, 65535, 0, 0)
		})
	}
}
