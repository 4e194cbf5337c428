package hf

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"strings"

	"github.com/drmas-dev/drmas/model"
)

// Qwen25Shape is Qwen2.5-0.5B's shape (tied head), the size the memory estimates, the
// benchmarks and their tests are quoted at.
var Qwen25Shape = InitSpec{Arch: "qwen2", Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, Intermediate: 4864, Vocab: 151936}

// InitSpec describes a random model to make (drmas model init).
type InitSpec struct {
	Arch                                                  string // a registered model_type
	Hidden, Layers, Heads, KVHeads, Intermediate, HeadDim int    // HeadDim 0: Hidden/Heads
	Vocab                                                 int
	MaxPositions                                          int // 0: 32768
	Untied                                                bool
	BOS, EOS                                              []int
}

// VocabMultiple is what VocabFor rounds the tokenizer's id count up to: a multiple of 64 keeps
// the embedding's rows aligned for matrix kernels, as Qwen pads 151,669 ids to 151,936.
const VocabMultiple = 64

// VocabFor is the vocab_size for a tokenizer: its largest id + 1, rounded up to VocabMultiple.
func VocabFor(t TokenizerInfo) int {
	n := t.MaxID + 1
	return (n + VocabMultiple - 1) / VocabMultiple * VocabMultiple
}

// SpecialIDs picks bos_token_id and eos_token_id from a tokenizer's added tokens as Qwen's
// configs set them: BOS <|endoftext|>, EOS <|im_end|> (else <|endoftext|>); or, for Llama 3's
// tokens, as Llama 3 Instruct's do: BOS <|begin_of_text|>, EOS <|end_of_text|> and <|eot_id|>.
// Absent ones are nil.
func SpecialIDs(t TokenizerInfo) (bos, eos []int) {
	if id, ok := t.Tokens["<|begin_of_text|>"]; ok {
		bos = []int{id}
		for _, s := range []string{"<|end_of_text|>", "<|eot_id|>"} {
			if id, ok := t.Tokens[s]; ok {
				eos = append(eos, id)
			}
		}
		return bos, eos
	}
	if id, ok := t.Tokens["<|endoftext|>"]; ok {
		bos, eos = []int{id}, []int{id}
	}
	if id, ok := t.Tokens["<|im_end|>"]; ok {
		eos = []int{id}
	}
	return bos, eos
}

// NewConfig builds the config.json of a model of the spec's architecture and sizes, with the
// fields and defaults the architecture's registry entry gives (the released configs').
func NewConfig(s InitSpec) (Config, error) {
	arch, ok := model.LookupArch(s.Arch)
	if !ok || arch.InitConfig == nil {
		return Config{}, fmt.Errorf("--arch %q: want one of %s: %w", s.Arch, strings.Join(model.ArchNames(), ", "), ErrUnsupported)
	}
	if err := s.check(); err != nil {
		return Config{}, err
	}
	if s.HeadDim == 0 {
		if s.Hidden%s.Heads != 0 {
			return Config{}, fmt.Errorf("hidden %d is not a multiple of heads %d: give --head-dim", s.Hidden, s.Heads)
		}
		s.HeadDim = s.Hidden / s.Heads
	}
	if !arch.HeadDimFree && s.HeadDim*s.Heads != s.Hidden {
		return Config{}, fmt.Errorf("%s has head_dim = hidden/heads: --head-dim %d is not %d/%d", s.Arch, s.HeadDim, s.Hidden, s.Heads)
	}
	if s.MaxPositions == 0 {
		s.MaxPositions = 32768
	}
	m := arch.InitConfig(s.Layers)
	for k, v := range map[string]any{
		"architectures": []string{arch.Class}, "model_type": s.Arch,
		"hidden_size": s.Hidden, "num_hidden_layers": s.Layers, "num_attention_heads": s.Heads,
		"num_key_value_heads": s.KVHeads, "intermediate_size": s.Intermediate, "vocab_size": s.Vocab,
		"max_position_embeddings": s.MaxPositions, "tie_word_embeddings": !s.Untied,
		"bos_token_id": nil, "eos_token_id": nil,
	} {
		m[k] = v
	}
	if arch.HeadDimFree {
		m["head_dim"] = s.HeadDim
	}
	if arch.AttentionBias {
		m["attention_bias"] = false
	}
	data, err := json.Marshal(m)
	if err != nil {
		return Config{}, err
	}
	cfg, err := ParseConfig(data, "the new config")
	if err != nil {
		return Config{}, err
	}
	cfg.BOS, cfg.EOS = s.BOS, s.EOS
	return cfg, nil
}

// check names the flag of drmas model init whose value is out of range.
func (s InitSpec) check() error {
	for _, f := range []struct {
		name string
		v    int
		min  int
	}{{"hidden", s.Hidden, 1}, {"heads", s.Heads, 1}, {"kv-heads", s.KVHeads, 1},
		{"intermediate", s.Intermediate, 1}, {"head-dim", s.HeadDim, 0}, {"max-positions", s.MaxPositions, 0}, {"vocab", s.Vocab, 1}} {
		if f.v < f.min || f.v > maxDim {
			return fmt.Errorf("--%s %d: want %d to %d", f.name, f.v, f.min, maxDim)
		}
	}
	if s.Layers < 1 || s.Layers > maxLayers {
		return fmt.Errorf("--layers %d: want 1 to %d", s.Layers, maxLayers)
	}
	if s.Heads%s.KVHeads != 0 {
		return fmt.Errorf("--heads %d is not a multiple of --kv-heads %d", s.Heads, s.KVHeads)
	}
	return nil
}

// InitStd is the standard deviation of RandomTensors' matrices (transformers' initializer_range).
const InitStd = 0.02

// RandomTensors returns the initial values of each tensor of cfg: normal(0, InitStd) for
// matrices, ones for RMSNorm weights, zeros for biases. Each tensor's values depend only on
// seed and its name, with a generator and normal transform written here, so the bytes are the
// same on every platform and Go version.
func RandomTensors(cfg Config, seed uint64) func(name string) []float32 {
	shapes := map[string]int64{}
	for _, t := range cfg.Tensors() {
		shapes[t.Name] = t.Elements()
	}
	return func(name string) []float32 {
		out := make([]float32, shapes[name])
		switch {
		case strings.HasSuffix(name, ".bias"):
		case strings.HasSuffix(name, "norm.weight"):
			for i := range out {
				out[i] = 1
			}
		default:
			h := fnv.New64a()
			h.Write([]byte(name))
			r := splitMix{seed ^ h.Sum64()}
			for i := 0; i < len(out); i += 2 {
				a, b := r.normal()
				out[i] = float32(a * InitStd)
				if i+1 < len(out) {
					out[i+1] = float32(b * InitStd)
				}
			}
		}
		return out
	}
}

// splitMix is SplitMix64, a small generator whose stream is fixed by its definition.
type splitMix struct{ s uint64 }

func (r *splitMix) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// normal returns two standard normal values (Box–Muller).
func (r *splitMix) normal() (float64, float64) {
	u1 := (float64(r.next()>>11) + 1) / (1 << 53) // in (0, 1]: log is finite
	u2 := float64(r.next()>>11) / (1 << 53)
	rad := math.Sqrt(-2 * math.Log(u1))
	s, c := math.Sincos(2 * math.Pi * u2)
	return rad * c, rad * s
}
