package hf

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/model"
)

// ConfigFile is the name of a model folder's configuration.
const ConfigFile = "config.json"

// maxConfigBytes bounds what ReadConfig loads: a config is a few kilobytes.
const maxConfigBytes = 4 << 20

// maxDim bounds every size a config gives, so that shape products fit an int64 with room and
// a lying config cannot make Tensors or StepMemory overflow.
const maxDim = 1 << 24

// maxLayers bounds num_hidden_layers: Tensors lists 11 tensors a layer, so a config claiming
// millions would cost memory its few bytes do not justify (the largest released models have
// about 130).
const maxLayers = 4096

// Config is a model's config.json, the fields drmas computes with. Raw is the file as read (or
// as built by NewConfig), so that writing it back keeps every field drmas does not interpret.
type Config struct {
	ModelType         string // a registered architecture (model.ArchNames)
	Hidden            int    // hidden_size
	Layers            int    // num_hidden_layers
	Heads             int    // num_attention_heads
	KVHeads           int    // num_key_value_heads (default Heads)
	HeadDim           int    // head_dim (default Hidden/Heads)
	Intermediate      int    // intermediate_size
	Vocab             int    // vocab_size
	MaxPositions      int    // max_position_embeddings (0 when absent)
	RMSNormEps        float64
	RopeTheta         float64
	RopeScaling       model.RopeScaling // rope_scaling or rope_parameters beyond rope_theta (zero: none)
	TieWordEmbeddings bool
	AttentionBias     bool   // biases on q, k, v and o, where the architecture reads attention_bias
	TorchDtype        string // torch_dtype (or dtype): bfloat16, float16, float32, or ""
	BOS, EOS          []int
	Raw               map[string]any
}

// Arch is the registered architecture of c's model_type (the zero Arch for an unknown one,
// which ParseConfig refuses).
func (c Config) Arch() model.Arch {
	a, _ := model.LookupArch(c.ModelType)
	return a
}

// QKVBias reports whether the q, k and v projections have biases.
func (c Config) QKVBias() bool {
	qkv, _ := c.Arch().Biases(c.AttentionBias)
	return qkv
}

// OBias reports whether the output projection has a bias.
func (c Config) OBias() bool {
	_, o := c.Arch().Biases(c.AttentionBias)
	return o
}

// QKNorm reports whether attention has the per-head RMSNorms q_norm and k_norm.
func (c Config) QKNorm() bool { return c.Arch().QKNorm }

// ReadConfig reads and checks dir/config.json.
func ReadConfig(dir string) (Config, error) { return ReadConfigContext(context.Background(), dir) }

// ReadConfigContext is ReadConfig with reads that ctx cancels.
func ReadConfigContext(ctx context.Context, dir string) (Config, error) {
	name := filepath.Join(dir, ConfigFile)
	data, err := readBounded(ctx, name, maxConfigBytes)
	if err != nil {
		return Config{}, fmt.Errorf("read model config: %w", err)
	}
	return ParseConfig(data, name)
}

// ParseConfig parses the bytes of a config.json; name is used in errors.
func ParseConfig(data []byte, name string) (Config, error) {
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return Config{}, formatErr(name, "not a JSON object: "+err.Error())
	}
	if raw == nil {
		return Config{}, formatErr(name, "not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return Config{}, formatErr(name, "data after the JSON object")
	}
	p := cfgParser{raw: raw, name: name}
	c := p.parse()
	if p.err != nil {
		return Config{}, p.err
	}
	return c, nil
}

// cfgParser reads fields of a decoded config, keeping the first error.
type cfgParser struct {
	raw  map[string]any
	name string
	err  error
}

func (p *cfgParser) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

func (p *cfgParser) parse() Config {
	c := Config{Raw: p.raw}
	c.ModelType = p.str("model_type", "")
	arch, known := model.LookupArch(c.ModelType)
	if p.err == nil && !known {
		p.fail(unsupported(p.name, fmt.Sprintf("model_type %s is not supported (supported: %s)", excerpt.Quote(c.ModelType), strings.Join(model.ArchNames(), ", "))))
		return c
	}
	c.Hidden = p.size("hidden_size", -1)
	c.Layers = p.size("num_hidden_layers", -1)
	if c.Layers > maxLayers {
		p.fail(formatErr(p.name, fmt.Sprintf("num_hidden_layers is %d, more than %d", c.Layers, maxLayers)))
	}
	c.Heads = p.size("num_attention_heads", -1)
	c.KVHeads = p.size("num_key_value_heads", c.Heads)
	c.Intermediate = p.size("intermediate_size", -1)
	c.Vocab = p.size("vocab_size", -1)
	c.MaxPositions = p.size("max_position_embeddings", 0)
	if p.err == nil && c.Hidden%c.Heads != 0 && p.raw["head_dim"] == nil {
		p.fail(formatErr(p.name, fmt.Sprintf("hidden_size %d is not a multiple of num_attention_heads %d, and no head_dim is given", c.Hidden, c.Heads)))
	}
	if p.err == nil {
		c.HeadDim = p.size("head_dim", c.Hidden/c.Heads)
	}
	if p.err == nil && c.Heads%c.KVHeads != 0 {
		p.fail(formatErr(p.name, fmt.Sprintf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.Heads, c.KVHeads)))
	}
	c.RMSNormEps = p.positive("rms_norm_eps", 1e-6)
	c.RopeTheta, c.RopeScaling = p.rope()
	c.TieWordEmbeddings = p.boolean("tie_word_embeddings", false)
	if arch.AttentionBias {
		c.AttentionBias = p.boolean("attention_bias", false)
	}
	c.TorchDtype = p.str("torch_dtype", p.str("dtype", ""))
	c.BOS = p.ids("bos_token_id")
	c.EOS = p.ids("eos_token_id")
	p.refuseUnsupported()
	if arch.Refuse != nil && p.err == nil {
		if why := arch.Refuse(p.raw); why != "" {
			p.fail(unsupported(p.name, why))
		}
	}
	return c
}

// refuseUnsupported refuses settings that change the computation in ways drmas does not
// implement, by name, instead of computing something else.
func (p *cfgParser) refuseUnsupported() {
	if act := p.str("hidden_act", "silu"); act != "silu" {
		p.fail(unsupported(p.name, fmt.Sprintf("hidden_act %s is not supported (only silu)", excerpt.Quote(act))))
	}
	if p.boolean("use_sliding_window", false) {
		p.fail(unsupported(p.name, "use_sliding_window true is not supported"))
	}
	if p.boolean("mlp_bias", false) {
		p.fail(unsupported(p.name, "mlp_bias true is not supported"))
	}
}

func (p *cfgParser) str(key, def string) string {
	v, ok := p.raw[key]
	if !ok || v == nil {
		return def
	}
	s, ok := v.(string)
	if !ok {
		p.fail(formatErr(p.name, fmt.Sprintf("%s is %s, want a string", key, jsonKind(v))))
	}
	return s
}

func (p *cfgParser) boolean(key string, def bool) bool {
	v, ok := p.raw[key]
	if !ok || v == nil {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		p.fail(formatErr(p.name, fmt.Sprintf("%s is %s, want true or false", key, jsonKind(v))))
	}
	return b
}

// size reads a positive integer at most maxDim; def < 0 makes the key required, def 0 allows
// it absent (0).
func (p *cfgParser) size(key string, def int) int {
	v, ok := p.raw[key]
	if !ok || v == nil {
		if def < 0 {
			p.fail(formatErr(p.name, key+" is missing"))
			return 1
		}
		return def
	}
	n, err := intOf(v)
	if err != nil || n < 1 || n > maxDim {
		p.fail(formatErr(p.name, fmt.Sprintf("%s is %s, want an integer from 1 to %d", key, jsonText(v), maxDim)))
		return 1
	}
	return int(n)
}

func (p *cfgParser) positive(key string, def float64) float64 {
	v, ok := p.raw[key]
	if !ok || v == nil {
		return def
	}
	return p.positiveValue(key, v)
}

func (p *cfgParser) positiveValue(key string, v any) float64 {
	num, ok := v.(json.Number)
	f, err := num.Float64()
	if !ok || err != nil || !(f > 0) || math.IsInf(f, 0) {
		p.fail(formatErr(p.name, fmt.Sprintf("%s is %s, want a positive number", key, jsonText(v))))
		return 1
	}
	return f
}

// rope returns rope_theta from the top level or from rope_parameters (newer transformers), and
// the RoPE scaling of rope_scaling or rope_parameters (ropeScaling), refusing the types the
// engines do not compute.
func (p *cfgParser) rope() (float64, model.RopeScaling) {
	theta := 10000.0 // transformers' default for qwen2, qwen3 and llama
	if v, ok := p.raw["rope_theta"]; ok && v != nil {
		theta = p.positiveValue("rope_theta", v)
	}
	var scaling model.RopeScaling
	for _, key := range []string{"rope_scaling", "rope_parameters"} {
		v, ok := p.raw[key]
		if !ok || v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			p.fail(formatErr(p.name, fmt.Sprintf("%s is %s, want an object or null", key, jsonKind(v))))
			return theta, scaling
		}
		s, ok := p.ropeScaling(key, m)
		if !ok {
			return theta, scaling
		}
		if s.Type != "" && scaling.Type != "" && s != scaling {
			p.fail(formatErr(p.name, "rope_scaling and rope_parameters give different RoPE scalings"))
			return theta, scaling
		}
		if s.Type != "" {
			scaling = s
		}
		if t, ok := m["rope_theta"]; ok && t != nil {
			theta = p.positiveValue(key+".rope_theta", t)
		}
	}
	return theta, scaling
}

// ids reads a token id field: an integer, a list of integers, or null.
func (p *cfgParser) ids(key string) []int {
	v, ok := p.raw[key]
	if !ok || v == nil {
		return nil
	}
	list, isList := v.([]any)
	if !isList {
		list = []any{v}
	}
	out := make([]int, 0, len(list))
	for _, e := range list {
		n, err := intOf(e)
		if err != nil || n < 0 || n > math.MaxInt32 {
			p.fail(formatErr(p.name, fmt.Sprintf("%s holds %s, want token ids", key, jsonText(e))))
			return nil
		}
		out = append(out, int(n))
	}
	return out
}

func intOf(v any) (int64, error) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("not a number")
	}
	return strconv.ParseInt(string(num), 10, 64)
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}

// jsonText is v for an error message, cut short.
func jsonText(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// TensorSpec is one tensor an architecture has: its Hugging Face name and shape.
type TensorSpec struct {
	Name  string
	Shape []int
}

// Elements is the number of values of the tensor.
func (t TensorSpec) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// Tensors lists every tensor of the architecture with its shape, sorted by name; linear
// weights are [out, in]. The head's own weight is listed only when the embeddings are untied.
func (c Config) Tensors() []TensorSpec {
	specs := c.ArchConfig().TensorSpecs()
	out := make([]TensorSpec, len(specs))
	for i, s := range specs {
		out[i] = TensorSpec{s.Name, s.Shape}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Params is the number of parameters of the architecture (tied embeddings counted once).
func (c Config) Params() int64 {
	var n int64
	for _, t := range c.Tensors() {
		n += t.Elements()
	}
	return n
}

// JSON is config.json for c: Raw with the fields of c written over it (so a field changed in c
// wins), encoded with sorted keys and two-space indents.
func (c Config) JSON() ([]byte, error) {
	m := make(map[string]any, len(c.Raw)+20)
	for k, v := range c.Raw {
		m[k] = v
	}
	m["model_type"] = c.ModelType
	m["hidden_size"] = c.Hidden
	m["num_hidden_layers"] = c.Layers
	m["num_attention_heads"] = c.Heads
	m["num_key_value_heads"] = c.KVHeads
	m["intermediate_size"] = c.Intermediate
	m["vocab_size"] = c.Vocab
	if c.Arch().HeadDimFree || c.HeadDim != c.Hidden/c.Heads || m["head_dim"] != nil {
		m["head_dim"] = c.HeadDim
	}
	if c.MaxPositions > 0 {
		m["max_position_embeddings"] = c.MaxPositions
	}
	m["rms_norm_eps"] = c.RMSNormEps
	if old, ok := m["rope_parameters"].(map[string]any); ok {
		rp := make(map[string]any, len(old)+1)
		for k, v := range old {
			rp[k] = v
		}
		rp["rope_theta"] = c.RopeTheta
		m["rope_parameters"] = rp
	}
	if m["rope_parameters"] == nil || m["rope_theta"] != nil {
		m["rope_theta"] = c.RopeTheta
	}
	putRope(m, c.Raw, c.RopeScaling)
	m["tie_word_embeddings"] = c.TieWordEmbeddings
	if c.Arch().AttentionBias {
		m["attention_bias"] = c.AttentionBias
	}
	if c.TorchDtype != "" {
		m["torch_dtype"] = c.TorchDtype
	}
	putIDs(m, "bos_token_id", c.BOS)
	putIDs(m, "eos_token_id", c.EOS)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode config.json: %w", err)
	}
	return append(b, '\n'), nil
}

func putIDs(m map[string]any, key string, ids []int) {
	switch len(ids) {
	case 0:
		m[key] = nil
	case 1:
		m[key] = ids[0]
	default:
		m[key] = ids
	}
}
