package engine

import (
	"testing"

	"github.com/drmas-dev/drmas/model"
)

// TestLlama3MatchesCPU: the GPU engine's pass of a Llama 3 model (llama3 RoPE scaling with
// an original context of 32 positions, so the kept, blended and slowed frequency bands all
// occur at head dim 12 and θ 10⁴, over 100 positions; tied and untied heads)
// on the interpreter against model.LLM (compareLLM), whose tables it must share.
func TestLlama3MatchesCPU(t *testing.T) {
	for _, tie := range []bool{true, false} {
		c := model.ArchConfig{Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 12, Intermediate: 24, Vocab: 40, Context: 256, Tie: tie,
			RopeScaling: model.RopeScaling{Type: model.RopeLlama3, Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 32}}
		name := map[bool]string{true: "tied", false: "untied"}[tie]
		t.Run(name, func(t *testing.T) {
			compareLLM(t, interp(t), randLLM(t, "llama", c), long(c.Vocab, [2]int{70, 30}, [2]int{3, 5}), 65535)
		})
	}
}
