package stages

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/tokenizer"
)

// ChatTokenizer loads the tokenizer of the Hugging Face model folder dir with its chat
// template, and the ids that end a turn: the tokenizer's end-of-turn token (Qwen's <|im_end|>)
// and the eos_token_id of cfg, once each.
func ChatTokenizer(dir string, cfg hf.Config) (actors.Chat, []int32, error) {
	bpe, err := loadTokenizer(dir)
	if err != nil {
		return actors.Chat{}, nil, fmt.Errorf("tokenizer of %s: %w", dir, err)
	}
	var stop []int32
	if eos := bpe.EOS(); eos >= 0 {
		stop = append(stop, eos)
	}
	for _, id := range cfg.EOS {
		if !slices.Contains(stop, int32(id)) {
			stop = append(stop, int32(id))
		}
	}
	return actors.Chat{BPE: bpe}, stop, nil
}

// tokenizers are the tokenizers this process loaded, by the sha256 of their files: every step
// folder of a run holds the same ones, and parsing Qwen's tokenizer.json costs a second.
var tokenizers struct {
	sync.Mutex
	byDigest map[string]*tokenizer.BPE
}

// maxTokenizers bounds the tokenizers kept: a run has one per base model.
const maxTokenizers = 8

// loadTokenizer is tokenizer.LoadDir, cached by the content of the tokenizer files.
func loadTokenizer(dir string) (*tokenizer.BPE, error) {
	h := sha256.New()
	for _, name := range hf.TokenizerFiles {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
	}
	key := hex.EncodeToString(h.Sum(nil))
	tokenizers.Lock()
	defer tokenizers.Unlock()
	if t := tokenizers.byDigest[key]; t != nil {
		return t, nil
	}
	t, err := tokenizer.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	if tokenizers.byDigest == nil || len(tokenizers.byDigest) >= maxTokenizers {
		tokenizers.byDigest = map[string]*tokenizer.BPE{}
	}
	tokenizers.byDigest[key] = t
	return t, nil
}

// hfBackend serves Hugging Face model id of set in process.
func hfBackend(id string, set *checkpoints.Set) (actors.Backend, error) {
	h := set.HF[id]
	if h == nil {
		return nil, fmt.Errorf("checkpoint step %d has no Hugging Face model %q (it has %s): the config's models changed since it was written",
			set.Step, id, strings.Join(set.ModelNames(), ", "))
	}
	tok, stop, err := ChatTokenizer(h.Dir, h.Config)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", id, err)
	}
	return actors.NewLocalHF(id, set.Step, h.Model, h.Config.ArchConfig().Context, tok, stop, h.Dir), nil
}

// BaseFolder returns a local folder holding model id's base (models.<id>.hf): the folder
// itself, or a store folder (s3://…, file://…) fetched and verified into
// checkpoints.BaseCacheDir, as `drmas model` commands fetch it.
func BaseFolder(ctx context.Context, env *Env, id string) (string, error) {
	dir, err := fetchBase(ctx, env, env.Config.Models[id].HF)
	if err != nil {
		return "", fmt.Errorf("models.%s.hf %w", id, err)
	}
	return dir, nil
}

// BaseResolver resolves the base a LoRA checkpoint names as BaseFolder does, with env's store
// credentials: LoadPolicy's callers pass it to checkpoints.WithBaseResolver so that a stage on
// a machine without the base in its cache fetches it.
func BaseResolver(env *Env) checkpoints.BaseResolver {
	return func(ctx context.Context, base string) (string, error) {
		dir, err := fetchBase(ctx, env, base)
		if err != nil {
			return "", fmt.Errorf("base %w", err)
		}
		return dir, nil
	}
}

// fetchBase is BaseFolder of the base folder src; its errors start with src.
func fetchBase(ctx context.Context, env *Env, src string) (string, error) {
	if !strings.Contains(src, "://") {
		return src, nil
	}
	cache, err := checkpoints.BaseCacheDir(src)
	if err != nil {
		return "", fmt.Errorf("%s: %w", src, err)
	}
	cfg := *env.Config // the S3 endpoint and credentials
	cfg.Store = src
	b, err := OpenStore(ctx, &cfg)
	if err != nil {
		return "", fmt.Errorf("%s: %w", src, err)
	}
	defer b.Close()
	st, err := hf.Fetch(ctx, b, cache)
	if err != nil {
		return "", fmt.Errorf("%s: %w", src, err)
	}
	env.Logf("base model %s: %d files in %s (%d downloaded, %d cached)", src, st.Files, cache, st.Downloaded, st.Cached)
	return cache, nil
}

// promptAllowance is the prompt length the memory estimate assumes beside rollout.max_tokens.
const promptAllowance = 512

// CheckHFMemory refuses, before its weights are loaded, an HF model whose training step needs
// more memory than this process may use (GOMEMLIMIT, else the memory the machine has
// available) even on a micro-batch of one sequence of rollout.max_tokens and a prompt
// (hf.StepOf: float32 weights, gradients and AdamW moments, activations, the head's chunk, the
// attention blocks). A larger micro_batch that does not fit is no refusal: the learner splits
// it into accumulation chunks that fit (MicroBatchFit). The error gives the figure and what to
// change. Nothing is checked when the limit is unknown.
func CheckHFMemory(cfg *configs.Config, id string, hc hf.Config) error {
	limit, by := memoryLimit()
	if limit <= 0 {
		return nil
	}
	need := HFStep(cfg, id, hc, 1).Total()
	if float64(need) <= limit {
		return nil
	}
	what, change := "in full (float32 weights, gradients and AdamW moments", fmt.Sprintf("train a LoRA adapter (models.%s.lora)", id)
	if l := cfg.Models[id].LoRA; l != nil {
		what, change = fmt.Sprintf("with a LoRA adapter of rank %d (float32 weights, the adapter's gradients and moments", l.R), fmt.Sprintf("lower models.%s.lora.r", id)
	}
	return fmt.Errorf("model %s (%s parameters) needs about %s to train %s, and a micro-batch of 1 sequence of %d tokens), more than %s (%s): %s, lower rollout.max_tokens, or use a smaller model",
		id, strconv.FormatInt(hc.Params(), 10), configs.Bytes(float64(need)), what, hfStepTokens(cfg, hc), configs.Bytes(limit), by, change)
}

// HFStepMemory is the memory of one training step of model id at its micro_batch.
func HFStepMemory(cfg *configs.Config, id string, hc hf.Config) int64 {
	return HFStep(cfg, id, hc, cfg.OptimOf(cfg.AgentsOf(id)[0]).MicroBatch).Total()
}

// HFStep is hf.StepOf for model id on a micro-batch of micro sequences of rollout.max_tokens
// and a prompt (at most the model's context), with its LoRA rank.
func HFStep(cfg *configs.Config, id string, hc hf.Config, micro int) hf.Step {
	r := 0
	if l := cfg.Models[id].LoRA; l != nil {
		r = l.R
	}
	return hf.StepOf(hc, r, micro, hfStepTokens(cfg, hc))
}

func hfStepTokens(cfg *configs.Config, hc hf.Config) int {
	return min(cfg.Rollout.MaxTokens+promptAllowance, hc.ArchConfig().Context)
}

// MicroBatchFit is the largest micro-batch of at most micro sequences whose step (step(n)
// bytes) fits the memory this process may use, at least 1; micro when the limit is unknown.
func MicroBatchFit(micro int, step func(n int) int64) int {
	limit, by := memoryLimit()
	if limit <= 0 {
		return micro
	}
	if by != "GOMEMLIMIT" {
		// The available memory excludes what this process already holds (the model's
		// weights, which the step counts).
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		limit += float64(ms.HeapInuse)
	}
	n := micro
	for n > 1 && float64(step(n)) > limit {
		n--
	}
	return n
}

// memoryLimit is GOMEMLIMIT when set, else MemAvailable of /proc/meminfo; 0 when unknown.
func memoryLimit() (float64, string) {
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
		return float64(l), "GOMEMLIMIT"
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "MemAvailable:"); ok {
			if kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64); err == nil {
				return kb * 1024, "the memory available on this machine"
			}
		}
	}
	return 0, ""
}

// TrainableStep is hf.StepOfArch for a loaded Hugging Face model (or a LoRA adapter over one)
// on micro sequences of rollout.max_tokens and a prompt; ok is false for any other model.
func TrainableStep(cfg *configs.Config, m model.Trainable, micro int) (s hf.Step, ok bool) {
	var a model.ArchConfig
	var params int64
	rank := 0
	switch t := m.(type) {
	case *model.LLM:
		a, params = t.Config(), int64(t.NumParams())
	case *model.LoRA:
		a, params, rank = t.Base().Config(), int64(t.Base().NumParams()), t.Config().R
	default:
		return s, false
	}
	return hf.StepOfArch(a, params, rank, micro, min(cfg.Rollout.MaxTokens+promptAllowance, a.Context)), true
}
