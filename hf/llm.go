package hf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/drmas-dev/drmas/model"
)

// maxEngineContext is the longest context model.ArchConfig.Validate accepts. A config that
// allows longer sequences still runs, on sequences up to this length.
const maxEngineContext = 1 << 20

// ArchConfig is the engine's description of the architecture c reads: model.ArchConfig with
// the sizes, RMSNorm ε, RoPE θ and scaling, tying, biases and q/k norms of config.json.
// max_position_embeddings becomes the context (32768 when absent, at most maxEngineContext).
func (c Config) ArchConfig() model.ArchConfig {
	return model.ArchConfig{
		Arch: c.ModelType, Hidden: c.Hidden, Layers: c.Layers, Heads: c.Heads, KVHeads: c.KVHeads,
		HeadDim: c.HeadDim, Intermediate: c.Intermediate, Vocab: c.Vocab, Context: min(c.MaxPositions, maxEngineContext),
		RMSNormEps: c.RMSNormEps, RopeTheta: c.RopeTheta, Tie: c.TieWordEmbeddings,
		QKVBias: c.QKVBias(), OBias: c.OBias(), QKNorm: c.QKNorm(), RopeScaling: c.RopeScaling,
	}.WithDefaults()
}

// checkArch validates ac, as one line: model.ArchConfig.Validate joins its problems with
// newlines.
func checkArch(ac model.ArchConfig, where string) error {
	err := ac.Validate()
	if err == nil {
		return nil
	}
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	return &Error{File: where, Msg: "the engine cannot run this model: " + msg, Err: ErrUnsupported}
}

// EngineCheck reports, in one line, why the CPU engine cannot run c's architecture (an odd
// head_dim, sizes past its limits), or nil.
func (c Config) EngineCheck() error { return checkArch(c.ArchConfig(), ConfigFile) }

// NewLLM builds the engine's model from open weights, converting each tensor to float32 once
// (the model holds the only full copy; the mapped file is read tensor by tensor).
func (w *Weights) NewLLM() (*model.LLM, error) { return w.newLLM(context.Background(), false) }

// newLLM is NewLLM stopping between tensors when ctx is cancelled; with frozen, a folder
// whose matrices are all BF16 keeps them in BF16 (model.NewLLMBF16).
func (w *Weights) newLLM(ctx context.Context, frozen bool) (*model.LLM, error) {
	if err := w.Config.EngineCheck(); err != nil {
		return nil, err
	}
	get := func(name string, dst []float32) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return w.finiteFloat32(name, dst)
	}
	var m *model.LLM
	var err error
	if frozen && w.MatricesBF16() {
		m, err = model.NewLLMBF16(w.Config.ArchConfig(), get, func(name string, dst []uint16) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return w.finiteBF16(name, dst)
		})
	} else {
		m, err = model.NewLLM(w.Config.ArchConfig(), get)
	}
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	return m, nil
}

// finiteFloat32 is Float32 refusing a tensor with a NaN or an infinity: the engine would
// sample from it without an error, every log-probability NaN.
func (w *Weights) finiteFloat32(name string, dst []float32) error {
	if err := w.Float32(name, dst); err != nil {
		return err
	}
	if i := nonFinite(dst); i >= 0 {
		return formatErr(w.tensors[name].Source, fmt.Sprintf("tensor %s has %v at index %d: weights must be finite", name, dst[i], i))
	}
	return nil
}

// MatricesBF16 reports whether every matrix of the model (the block projections, the
// embedding, an untied head) is stored in BF16: a frozen model then keeps their bits.
func (w *Weights) MatricesBF16() bool {
	for _, s := range w.Config.ArchConfig().TensorSpecs() {
		if len(s.Shape) == 2 && w.Dtype(s.Name) != BF16 {
			return false
		}
	}
	return true
}

// finiteBF16 copies a BF16 tensor's bits into dst, refusing a NaN or an infinity.
func (w *Weights) finiteBF16(name string, dst []uint16) error {
	t, ok := w.tensors[name]
	if !ok || t.Dtype != BF16 {
		return fmt.Errorf("tensor %s: no BF16 tensor of that name in the model: %w", name, ErrFormat)
	}
	if n := (t.End - t.Begin) / 2; int64(len(dst)) != n {
		return fmt.Errorf("tensor %s: shape %v has %d values, the buffer %d", name, t.Shape, n, len(dst))
	}
	raw := w.maps[filepath.Base(t.Source)][t.Begin:t.End]
	for i := range dst {
		h := binary.LittleEndian.Uint16(raw[2*i:])
		if h&0x7f80 == 0x7f80 { // exponent all ones: an infinity or a NaN
			return formatErr(t.Source, fmt.Sprintf("tensor %s has %v at index %d: weights must be finite", name, Float32FromBF16(h), i))
		}
		dst[i] = h
	}
	return nil
}

// nonFinite is the index of v's first NaN or infinity, or -1.
func nonFinite(v []float32) int {
	for i, x := range v {
		if x-x != 0 { // NaN - NaN and Inf - Inf are NaN; finite x - x is 0
			return i
		}
	}
	return -1
}

// LoadLLM reads the model folder dir into the engine: its config.json and weights (checked as
// OpenWeights checks them) as a model.LLM, and the config, whose TorchDtype is the dtype
// WriteLLM writes back by default.
func LoadLLM(dir string) (*model.LLM, Config, error) {
	return LoadLLMContext(context.Background(), dir)
}

// LoadLLMContext is LoadLLM with reads that ctx cancels.
func LoadLLMContext(ctx context.Context, dir string) (*model.LLM, Config, error) {
	return loadLLM(ctx, dir, false)
}

// LoadFrozenLLM is LoadLLMContext for a model that will not train (a LoRA adapter's base, a
// KL reference): when every matrix of the folder is BF16 they stay BF16 in memory (half the
// bytes; model.LLM.StoredBF16), computing the same bits as their float32 values would.
func LoadFrozenLLM(ctx context.Context, dir string) (*model.LLM, Config, error) {
	return loadLLM(ctx, dir, true)
}

func loadLLM(ctx context.Context, dir string, frozen bool) (*model.LLM, Config, error) {
	w, err := OpenWeightsContext(ctx, dir)
	if err != nil {
		return nil, Config{}, err
	}
	m, err := w.newLLM(ctx, frozen)
	if cerr := w.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("load model: %w", cerr)
	}
	if err != nil {
		return nil, Config{}, err
	}
	cfg := w.Config
	if cfg.TorchDtype == "" {
		cfg.TorchDtype = sourceDtype(w.Dtypes())
	}
	return m, cfg, nil
}

// sourceDtype is the torch_dtype of a folder that does not name one: its stored dtype when it
// has only one.
func sourceDtype(dtypes []string) string {
	if len(dtypes) == 1 {
		return torchDtypes[dtypes[0]]
	}
	return ""
}

// ErrMismatch is matched by WriteLLM's error when the model is not the architecture the config
// describes.
var ErrMismatch = errors.New("model and config disagree")

// WriteLLM writes m as a model folder (WriteFolder): cfg's config.json (the one LoadLLM
// returned, so every field drmas does not interpret survives), the weights in dtype ("" means
// cfg.TorchDtype, the source's; F32 when that is unset too) and the tokenizer files of
// tokenizerFrom. The weights are read from the model's own tensors, one at a time, without a
// second float32 copy.
func WriteLLM(dir string, cfg Config, m *model.LLM, dtype, tokenizerFrom string) error {
	if want, got := cfg.ArchConfig(), m.Config(); want != got {
		return fmt.Errorf("write model folder %s: the model is %+v, config.json says %+v: %w", dir, got, want, ErrMismatch)
	}
	if dtype == "" {
		dtype = cfg.TorchDtype
	}
	if dtype == "" {
		dtype = F32
	}
	byName := make(map[string]model.Param, len(m.Params()))
	for _, p := range m.Params() {
		byName[p.Name] = p
	}
	// A model stored in BF16 widens one tensor at a time.
	return WriteFolder(dir, cfg, dtype, func(name string) []float32 { return byName[name].Float32() }, tokenizerFrom)
}
