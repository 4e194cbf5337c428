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
			compareLLM(t, interp(t), randLLM(t, "llama", c), long(c.Vocab, [2]int{70, 30}, [2]int{3, 5}), 65535, 0, 0)
		})
	}
}

// TestGPULlama3MatchesCPU is compareLLM on the GPU (gpu/devicecheck.sh runs it) for Llama 3
// shapes: llama3 scaling with an original context of 64 over sequences past position 128 at
// head dim 64, untied; and Llama 3's 128,256-token vocabulary, tied (two embedding-gradient
// launches).
func TestGPULlama3MatchesCPU(t *testing.T) {
	d := gpuDevice(t)
	s := model.RopeScaling{Type: model.RopeLlama3, Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 64}
	mid := model.ArchConfig{Hidden: 128, Layers: 3, Heads: 8, KVHeads: 2, HeadDim: 64, Intermediate: 352, Vocab: 1000, Context: 512, RopeScaling: s}
	t.Run("llama3-mid", func(t *testing.T) {
		compareLLM(t, d, randLLM(t, "llama", mid), long(mid.Vocab, [2]int{100, 160}, [2]int{1, 200}, [2]int{30, 40}), 65535, 0, 0)
	})
	big := model.ArchConfig{Hidden: 64, Layers: 1, Heads: 4, KVHeads: 1, HeadDim: 16, Intermediate: 128, Vocab: 128256, Context: 512, Tie: true, RopeScaling: s}
	t.Run("llama3-vocab128256", func(t *testing.T) {
		compareLLM(t, d, randLLM(t, "llama", big), long(big.Vocab, [2]int{100, 50}, [2]int{3, 10}), 65535, 0, 0)
	})
}
