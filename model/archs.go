package model

import (
	"fmt"
	"slices"
)

// The architecture registry: one entry per config.json model_type, each in
// its own file (arch_<name>.go) and registered by name. The CPU passes, the
// GPU engine's block program, hf's config reading and drmas model init all
// read the entry; nothing else compares model_type strings.

// NormKind is a block's normalisation.
type NormKind uint8

const (
	NormRMS   NormKind = iota // x·rsqrt(mean(x²)+eps)·w (arch_ops.go)
	NormLayer                 // LayerNorm with gain and bias, eps 1e-5 (ops.go)
)

// PosKind is how positions enter a model.
type PosKind uint8

const (
	PosRotary  PosKind = iota // RoPE on q and k (arch_ops.go)
	PosLearned                // a learned embedding added to the token's
)

// MLPKind is a block's MLP.
type MLPKind uint8

const (
	MLPSwiGLU MLPKind = iota // down(silu(gate(x))·up(x)), gate|up one matrix
	MLPGELU                  // proj(gelu(fc(x))), tanh approximation (ops.go)
)

// TensorNames are an architecture's tensor names. Layer is block l's prefix
// (a format with one %d); the block's names are relative to it. Norms and
// linears are named without ".weight" / ".bias". The fused groups start at
// QKV (then K, V) and Up (then Up2; SwiGLU's gate then up): their tensors
// are adjacent in storage, so the group's first tensor is the fused matrix.
type TensorNames struct {
	Layer           string
	Norm1, Norm2    string
	QKV, K, V, O    string
	Up, Up2, Down   string
	QNorm, KNorm    string
	Embed, PosEmbed string // full names ("" PosEmbed: no learned positions)
	Final, Head     string // final norm (without ".weight"), untied head's full name; a tied head is Embed
}

// Block is what an engine runs for one architecture: the op of each slot
// and the tensor names.
type Block struct {
	Norm  NormKind
	Pos   PosKind
	MLP   MLPKind
	Names TensorNames
}

// Arch is one registered architecture: its block, its Hugging Face class,
// and the rules its config.json follows.
type Arch struct {
	Name  string // config.json's model_type
	Class string // config.json's architectures[0]
	Block Block
	// QKVBias: the q/k/v projections always have biases (Qwen2).
	// AttentionBias: config.json's attention_bias (default false) puts
	// biases on q, k, v and o. With neither, no projection has a bias.
	QKVBias, AttentionBias bool
	QKNorm                 bool // per-head RMSNorm of q and k before RoPE
	// HeadDimFree: head_dim may differ from hidden/heads and config.json
	// states it; otherwise head_dim is hidden/heads.
	HeadDimFree bool
	// GGUF is llama.cpp's general.architecture for this block, for hf/gguf's export ("":
	// not exported).
	GGUF string
	// InitConfig is what drmas model init writes into config.json besides
	// the sizes, as the released configs of the family do (layers is
	// num_hidden_layers).
	InitConfig func(layers int) map[string]any
	// Refuse returns why a config.json (decoded with json.Number numbers)
	// asks for something this entry does not compute, or "" (nil: nothing).
	Refuse func(raw map[string]any) string
}

// LlamaNames are the tensor names of the Llama family (transformers'
// LlamaForCausalLM and the architectures written after it).
var LlamaNames = TensorNames{
	Layer: "model.layers.%d.",
	Norm1: "input_layernorm", Norm2: "post_attention_layernorm",
	QKV: "self_attn.q_proj", K: "self_attn.k_proj", V: "self_attn.v_proj", O: "self_attn.o_proj",
	Up: "mlp.gate_proj", Up2: "mlp.up_proj", Down: "mlp.down_proj",
	QNorm: "self_attn.q_norm", KNorm: "self_attn.k_norm",
	Embed: "model.embed_tokens.weight", Final: "model.norm", Head: "lm_head.weight",
}

// LlamaBlock is the Llama family's block: RMSNorm, RoPE, SwiGLU.
var LlamaBlock = Block{Norm: NormRMS, Pos: PosRotary, MLP: MLPSwiGLU, Names: LlamaNames}

// registry holds the architectures by model_type.
var registry = map[string]Arch{}

// registerArch adds a; a second entry of one name is a programming error.
func registerArch(a Arch) {
	if _, dup := registry[a.Name]; dup || a.Name == "" {
		panic(fmt.Sprintf("model: architecture %q registered twice or unnamed", a.Name))
	}
	registry[a.Name] = a
}

// LookupArch returns the architecture registered for model_type name.
func LookupArch(name string) (Arch, bool) {
	a, ok := registry[name]
	return a, ok
}

// ArchNames lists the supported architectures, sorted.
func ArchNames() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Biases reports whether q/k/v and o have biases given config.json's
// attention_bias.
func (a Arch) Biases(attentionBias bool) (qkv, o bool) {
	return a.QKVBias || a.AttentionBias && attentionBias, a.AttentionBias && attentionBias
}

// Block returns the block c's architecture runs (the Llama block for an
// unregistered name, which Validate refuses).
func (c ArchConfig) Block() Block {
	if a, ok := registry[c.Arch]; ok {
		return a.Block
	}
	return LlamaBlock
}

// Suffixes of a norm's or linear's tensors.
const (
	wSfx = ".weight"
	bSfx = ".bias"
)
