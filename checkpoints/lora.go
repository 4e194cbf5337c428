package checkpoints

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/model"
)

// A LoRA model's step folder is the PEFT adapter alone (hf.WriteAdapter): adapter_config.json
// naming HFModel.Base as base_model_name_or_path, and adapter_model.safetensors (F32, so a
// reload is exact). Its optimizer lives under OptimDir as a full fine-tune's does, and the
// two numbers that make the next training pass draw the same dropout masks as an unbroken run
// (the dropout seed and the count of training passes) are manifest parameters. Loading it
// loads the base from its folder, resolved by a BaseResolver, and reads the adapter onto it.

// BaseResolver returns a local folder holding base, a Hugging Face base model as a config names
// it (models.<id>.hf: a local path, or a store folder s3://…, file://…).
type BaseResolver func(ctx context.Context, base string) (string, error)

type baseResolverKey struct{}

// WithBaseResolver returns ctx carrying r: Load and LoadStep resolve the base of every LoRA
// step they load with it (a stage passes one that fetches store folders with the run's
// credentials). Without one, DefaultBaseResolver applies.
func WithBaseResolver(ctx context.Context, r BaseResolver) context.Context {
	return context.WithValue(ctx, baseResolverKey{}, r)
}

type frozenKey struct{}

// WithFrozenWeights returns ctx under which Load and LoadStep load full Hugging Face models as
// frozen (hf.LoadFrozenLLM: BF16 matrices stay BF16), for a model that will not train, such as
// the KL reference. A LoRA step's base is always loaded so.
func WithFrozenWeights(ctx context.Context) context.Context {
	return context.WithValue(ctx, frozenKey{}, true)
}

func frozenWeights(ctx context.Context) bool { v, _ := ctx.Value(frozenKey{}).(bool); return v }

// ErrBaseNotLocal says a LoRA step's base is a store folder that is not in the local cache and
// no BaseResolver was given to fetch it.
var ErrBaseNotLocal = errors.New("the base model is not on this machine")

// DefaultBaseResolver resolves a local path as itself, and a store folder as its copy in
// BaseCacheDir, which the warm-up and `drmas model` commands fill: a folder holding config.json.
func DefaultBaseResolver(_ context.Context, base string) (string, error) {
	if !strings.Contains(base, "://") {
		return base, nil
	}
	dir, err := BaseCacheDir(base)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, hf.ConfigFile)); err != nil {
		return "", fmt.Errorf("base %s (expected in %s): %w: fetch it first (`drmas model inspect --model %s` does)", base, dir, ErrBaseNotLocal, base)
	}
	return dir, nil
}

// BaseCacheDir is the local folder a base model in a store (a URL) is fetched into:
// <user cache>/drmas/models/<16 hex digits of the sha256 of the URL without trailing />.
func BaseCacheDir(url string) (string, error) {
	root, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache folder for %s (set XDG_CACHE_HOME): %w", url, err)
	}
	sum := sha256.Sum256([]byte(strings.TrimRight(url, "/")))
	return filepath.Join(root, "drmas", "models", hex.EncodeToString(sum[:8])), nil
}

func resolveBase(ctx context.Context, base string) (string, error) {
	if r, ok := ctx.Value(baseResolverKey{}).(BaseResolver); ok && r != nil {
		return r(ctx, base)
	}
	return DefaultBaseResolver(ctx, base)
}

// Manifest parameters of a LoRA model's training state.
func loraSeedParam(name string) string   { return "lora_dropout_seed." + name }
func loraPassesParam(name string) string { return "lora_training_passes." + name }

// hfParams are the manifest parameters of Hugging Face model name: its base, and for a LoRA
// the state its dropout masks continue from.
func hfParams(name string, h *HFModel) map[string]string {
	p := map[string]string{baseParam(name): h.Base}
	if l, ok := h.Model.(*model.LoRA); ok {
		p[loraSeedParam(name)] = strconv.FormatUint(h.DropoutSeed, 10)
		p[loraPassesParam(name)] = strconv.FormatUint(l.TrainingPasses(), 10)
	}
	return p
}

// loadLoRA reads the PEFT adapter in dir (a LoRA step folder) onto its base, resolved through
// ctx, and restores its dropout state from the manifest parameters params.
func loadLoRA(ctx context.Context, dir, name, base string, params map[string]string) (*HFModel, error) {
	if base == "" {
		return nil, fmt.Errorf("a LoRA adapter step whose manifest names no base (%s)", baseParam(name))
	}
	baseDir, err := resolveBase(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("base of LoRA model %s: %w", name, err)
	}
	llm, cfg, err := hf.LoadFrozenLLM(ctx, baseDir) // the adapter trains, not the base
	if err != nil {
		return nil, fmt.Errorf("base of LoRA model %s: %w", name, err)
	}
	l, err := hf.ReadAdapter(dir, llm)
	if err != nil {
		return nil, err
	}
	seed, err := uintParam(params, loraSeedParam(name))
	if err != nil {
		return nil, err
	}
	passes, err := uintParam(params, loraPassesParam(name))
	if err != nil {
		return nil, err
	}
	l.SetDropoutSeed(seed)
	l.SetTrainingPasses(passes)
	return &HFModel{Base: base, Dir: baseDir, Config: cfg, Model: l, DropoutSeed: seed}, nil
}

// uintParam is manifest parameter key as a uint64; 0 when absent.
func uintParam(params map[string]string, key string) (uint64, error) {
	s, ok := params[key]
	if !ok {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("manifest parameter %s is %q, not an unsigned integer", key, s)
	}
	return v, nil
}
