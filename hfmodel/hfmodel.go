// Package hfmodel wires a Hugging Face model folder (package hf reads and writes the format)
// into a run: its chat tokenizer and the ids that end a turn, the rollout backends that sample
// a checkpoint's model in process or on an OpenAI-compatible server, its base folder fetched
// from a store (Fetch syncs a store folder into a local cache), and the memory its training
// step needs on this machine.
package hfmodel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/tokenizer"
)

// ChatTokenizer loads the tokenizer of the Hugging Face model folder dir with its chat
// template, and the ids that end a turn: the tokenizer's end-of-turn token (Qwen's <|im_end|>)
// and the eos_token_id of cfg, once each. date is models.<id>.chat_date (Llama 3.1+ templates).
func ChatTokenizer(dir string, cfg hf.Config, date string) (actors.Chat, []int32, error) {
	bpe, err := loadTokenizer(dir)
	if err != nil {
		return actors.Chat{}, nil, fmt.Errorf("tokenizer of %s: %w", dir, err)
	}
	return actors.Chat{BPE: bpe, Date: date}, StopIDs(bpe, cfg), nil
}

// StopIDs are the ids that end an HF model's sample: the tokenizer's end of turn
// (<|im_end|>), then config.json's eos_token_id, once each.
func StopIDs(bpe *tokenizer.BPE, cfg hf.Config) []int32 {
	var stop []int32
	if eos := bpe.EOS(); eos >= 0 {
		stop = append(stop, eos)
	}
	for _, id := range cfg.EOS {
		if !slices.Contains(stop, int32(id)) {
			stop = append(stop, int32(id))
		}
	}
	return stop
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

// LocalBackend serves Hugging Face model id of set in process; date is models.<id>.chat_date.
func LocalBackend(id string, set *checkpoints.Set, date string) (actors.Backend, error) {
	h := set.HF[id]
	if h == nil {
		return nil, fmt.Errorf("checkpoint step %d has no Hugging Face model %q (it has %s): the config's models changed since it was written",
			set.Step, id, strings.Join(set.ModelNames(), ", "))
	}
	tok, stop, err := ChatTokenizer(h.Dir, h.Config, date)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", id, err)
	}
	return actors.NewLocalHF(id, set.Step, h.Model, h.Config.ArchConfig().Context, tok, stop, h.Dir), nil
}

// Env is what wiring a run's HF models needs: the run's configuration, a way to open another
// store folder with its credentials (a base folder on s3://…), and the log.
type Env struct {
	Config *configs.Config
	// Open opens the store folder src (s3://…, file://…) with the run's credentials.
	Open func(ctx context.Context, src string) (storage.Bucket, error)
	// Logf writes a one-line summary.
	Logf func(format string, args ...any)
}

// BaseFolder returns a local folder holding model id's base (models.<id>.hf): the folder
// itself, or a store folder (s3://…, file://…) fetched and verified into
// checkpoints.BaseCacheDir, as `drmas model` commands fetch it.
func (env *Env) BaseFolder(ctx context.Context, id string) (string, error) {
	dir, err := env.fetchBase(ctx, env.Config.Models[id].HF)
	if err != nil {
		return "", fmt.Errorf("models.%s.hf %w", id, err)
	}
	return dir, nil
}

// BaseResolver resolves the base a LoRA checkpoint names as BaseFolder does, with the run's
// store credentials: LoadPolicy's callers pass it to checkpoints.WithBaseResolver so that a
// stage on a machine without the base in its cache fetches it.
func (env *Env) BaseResolver() checkpoints.BaseResolver {
	return func(ctx context.Context, base string) (string, error) {
		dir, err := env.fetchBase(ctx, base)
		if err != nil {
			return "", fmt.Errorf("base %w", err)
		}
		return dir, nil
	}
}

// fetchBase is BaseFolder of the base folder src; its errors start with src.
func (env *Env) fetchBase(ctx context.Context, src string) (string, error) {
	if !strings.Contains(src, "://") {
		return src, nil
	}
	cache, err := checkpoints.BaseCacheDir(src)
	if err != nil {
		return "", fmt.Errorf("%s: %w", src, err)
	}
	b, err := env.Open(ctx, src)
	if err != nil {
		return "", fmt.Errorf("%s: %w", src, err)
	}
	defer b.Close()
	st, err := Fetch(ctx, b, cache)
	if err != nil {
		return "", fmt.Errorf("%s: %w", src, err)
	}
	env.Logf("base model %s: %d files in %s (%d downloaded, %d cached)", src, st.Files, cache, st.Downloaded, st.Cached)
	return cache, nil
}
