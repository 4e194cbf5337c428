package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/model"
)

func newModelScoreCmd() *cobra.Command {
	var modelDir, cache, adapter, baseDir, promptIDs, responseIDs string
	cmd := &cobra.Command{
		Use:   "score --model DIR [--adapter DIR] --prompt-ids 1,2,3 --response-ids 4,5",
		Short: "Print the log-probability of each response token given every token before it",
		Long: `Loads the model folder into the CPU engine (float32, whatever the stored dtype) and prints, for
each token of --response-ids, the natural-log probability the model gives it after the prompt and
the response tokens before it: log p(token | every token before it), at temperature 1. One number
a line, in the order of --response-ids.

Each number is the float32 the engine computes, written as the shortest decimal that reads back to
that float32 (no exponent): e.g. -7.0213594. Reading it as float64 is within half a float32 ulp of
the engine's value.

Ids are comma-separated decimal integers (spaces allowed), each below the model's vocab_size;
the prompt must have at least one token (the first response token is predicted from it), the
response too, and both together at most max_position_embeddings. Use 'drmas model tokenize' to get
ids for a text.

--adapter scores the model with a PEFT LoRA adapter (adapter_config.json and
adapter_model.safetensors, as PEFT's save_pretrained writes them) merged into its weights:
W' = W + (lora_alpha/r)·B·A for each module the adapter holds (lora_alpha/sqrt(r) with
use_rslora). DoRA, bias training, modules_to_save, per-module ranks and LoRA on the embeddings are
refused by name.

--model may also be a PEFT LoRA adapter folder itself (a folder with adapter_config.json, as
drmas publishes the checkpoint steps of a LoRA model: checkpoints/step=N/<model>/): its base is
loaded from the adapter's base_model_name_or_path (a local path or a store folder, as the run's
config named it; --base overrides it) and scored with the adapter unmerged, as the learner and
the in-process rollout compute it (bit for bit), rather than merged as --adapter does.`,
		Example: `  drmas model score --model ~/models/Qwen2.5-0.5B-Instruct --prompt-ids 9707,11 --response-ids 1879,0
  drmas model score --model s3://models/qwen3-0.6b --prompt-ids "$(drmas model tokenize --model DIR --text Hi | tr -d '[]')" --response-ids 0
  drmas model score --model s3://bucket/runs/r1/checkpoints/step=000002/solver_m --prompt-ids 9707,11 --response-ids 1879,0`,
		Args: cobra.NoArgs,
		RunE: interruptibleRunE(func(cmd *cobra.Command, _ []string) error {
			if err := noTilde(cmd, "model", "cache", "adapter", "base"); err != nil {
				return err
			}
			prompt, err := parseIDs("prompt-ids", promptIDs)
			if err != nil {
				return err
			}
			resp, err := parseIDs("response-ids", responseIDs)
			if err != nil {
				return err
			}
			dir, err := localModel(cmd, modelDir, cache)
			if err != nil {
				return err
			}
			var lora string
			if dir, lora, err = loraStepFolder(cmd, dir, baseDir, adapter); err != nil {
				return err
			}
			if adapter != "" {
				if adapter, err = localModel(cmd, adapter, ""); err != nil {
					return err
				}
			}
			lp, err := scoreIDs(cmd.Context(), dir, adapter, lora, prompt, resp)
			if err != nil {
				return err
			}
			return printLogProbs(cmd.OutOrStdout(), lp)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&modelDir, "model", "", "model folder: a local path, or s3://… / file://… in the store (required)")
	f.StringVar(&promptIDs, "prompt-ids", "", "the prompt's token ids, comma-separated, at least one (required)")
	f.StringVar(&responseIDs, "response-ids", "", "the response's token ids to score, comma-separated, at least one (required)")
	f.StringVar(&adapter, "adapter", "", "a PEFT LoRA adapter folder to merge into the weights first: a local path, or s3://… / file://… in the store")
	f.StringVar(&cache, "cache", "", "local cache for a store folder (default: ~/.cache/drmas/models/<hash of the URL>)")
	f.StringVar(&baseDir, "base", "", "with a LoRA adapter folder as --model: its base model folder (local path, or s3://… / file://…), instead of the adapter's base_model_name_or_path")
	for _, name := range []string{"model", "prompt-ids", "response-ids"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// maxIDs bounds an id list: far past any model's context, and cheap to hold.
const maxIDs = 1 << 20

// parseIDs reads a comma-separated list of token ids for the flag named flag.
func parseIDs(flag, s string) ([]int32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("--%s is empty: give at least one token id (comma-separated, e.g. 1,2,3)", flag)
	}
	if n := strings.Count(s, ",") + 1; n > maxIDs {
		return nil, fmt.Errorf("--%s has %d ids, more than %d", flag, n, maxIDs)
	}
	parts := strings.Split(s, ",")
	ids := make([]int32, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("--%s: item %d %s is not a token id (want comma-separated integers ≥ 0, e.g. 1,2,3)", flag, i+1, excerpt.Quote(strings.TrimSpace(p)))
		}
		ids[i] = int32(v)
	}
	return ids, nil
}

// scoreIDs loads dir (with the adapter merged, unless "", and with the LoRA adapter folder
// lora unmerged, unless "") and returns log p of each response token at temperature 1.
func scoreIDs(ctx context.Context, dir, adapter, lora string, prompt, resp []int32) ([]float32, error) {
	w, err := openModel(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	ac := w.Config.ArchConfig()
	// Checked before the weights are converted: a typo should not cost loading the model.
	for _, l := range []struct {
		flag string
		ids  []int32
	}{{"prompt-ids", prompt}, {"response-ids", resp}} {
		for _, id := range l.ids {
			if int(id) >= ac.Vocab {
				return nil, fmt.Errorf("--%s: token %d is out of the vocabulary: %s has vocab_size %d (ids 0 to %d)", l.flag, id, dir, ac.Vocab, ac.Vocab-1)
			}
		}
	}
	if n := len(prompt) + len(resp); n > ac.Context {
		return nil, fmt.Errorf("%d prompt and response tokens are more than the model's context of %d (max_position_embeddings)", n, ac.Context)
	}
	m, err := w.NewLLM()
	if err != nil {
		return nil, err
	}
	if adapter != "" {
		if err := hf.ApplyAdapterContext(ctx, m, adapter); err != nil {
			return nil, fmt.Errorf("--adapter: %w", err)
		}
	}
	var p interface {
		Score([]model.Sequence, float32) ([][]float32, [][]float32, error)
	} = m
	if lora != "" {
		if p, err = hf.ReadAdapter(lora, m); err != nil {
			return nil, fmt.Errorf("--model: %w", err)
		}
	}
	lp, _, err := p.Score([]model.Sequence{{Prompt: prompt, Response: resp}}, 1)
	if err != nil {
		return nil, fmt.Errorf("score: %w", err)
	}
	return lp[0], nil
}

// openModel opens a model folder's weights and checks that the engine runs its architecture:
// what every model subcommand validates, so that inspect accepts only what score runs.
func openModel(ctx context.Context, dir string) (*hf.Weights, error) {
	w, err := hf.OpenWeightsContext(ctx, dir)
	if err != nil {
		return nil, err
	}
	if err := w.Config.EngineCheck(); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// printLogProbs writes one log-probability a line: the shortest decimal that reads back to
// the float32.
func printLogProbs(out io.Writer, lp []float32) error {
	var b strings.Builder
	for _, v := range lp {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("the model gives a log-probability of %v: its weights hold NaN or infinite values", v)
		}
		b.WriteString(strconv.FormatFloat(float64(v), 'f', -1, 32))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// loraStepFolder returns the model folder to load and the LoRA adapter folder to score it
// with: for a dir holding adapter_config.json (a LoRA checkpoint step), its base (base, or the
// adapter's base_model_name_or_path, fetched when in a store) and dir; otherwise dir and "".
func loraStepFolder(cmd *cobra.Command, dir, base, adapter string) (string, string, error) {
	if _, err := os.Stat(filepath.Join(dir, hf.AdapterConfigFile)); err != nil {
		if base != "" {
			return "", "", fmt.Errorf("--base is for a LoRA adapter folder as --model, and %s has no %s", dir, hf.AdapterConfigFile)
		}
		return dir, "", nil
	}
	if adapter != "" {
		return "", "", fmt.Errorf("--model %s is a LoRA adapter folder (it has %s): give its base as --model and it as --adapter, or leave --adapter out", dir, hf.AdapterConfigFile)
	}
	if base == "" {
		data, err := os.ReadFile(filepath.Join(dir, hf.AdapterConfigFile))
		if err != nil {
			return "", "", err
		}
		var c struct {
			Base string `json:"base_model_name_or_path"`
		}
		if err := json.Unmarshal(data, &c); err != nil || c.Base == "" {
			return "", "", fmt.Errorf("%s: no base_model_name_or_path: give the base model folder as --base", filepath.Join(dir, hf.AdapterConfigFile))
		}
		base = c.Base
	}
	local, err := localModel(cmd, base, "")
	if err != nil {
		return "", "", fmt.Errorf("base of the LoRA adapter %s: %w", dir, err)
	}
	if _, err := os.Stat(filepath.Join(local, hf.ConfigFile)); err != nil {
		return "", "", fmt.Errorf("base %s of the LoRA adapter %s is not a model folder on this machine (%w): give it as --base", base, dir, err)
	}
	return local, dir, nil
}
