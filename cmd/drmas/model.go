package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/hfmodel"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/tokenizer"
)

func newModelCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "model",
		Short: "Hugging Face model folders: inspect, init, score token ids, tokenize",
		Long: `Works with Hugging Face model folders (config.json, model.safetensors or a sharded
model.safetensors.index.json, tokenizer.json), as 'huggingface-cli download' fetches them:
Qwen2 and Qwen2.5 (model_type qwen2), Qwen3 (qwen3), Llama (llama) and Mistral (mistral), in
BF16, F16 or F32.

--model takes a local folder, or a folder in the store (s3://bucket/prefix/…, file:///abs/…),
which is downloaded into a local cache first and verified (against its _MANIFEST.json's sha256
when it has one; else against the store's size and ETag).`,
	})
	cmd.AddCommand(newModelInspectCmd(), newModelInitCmd(), newModelScoreCmd(), newModelTokenizeCmd())
	return cmd
}

func newModelInspectCmd() *cobra.Command {
	var model, cache string
	var rank, tokens int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect --model DIR",
		Short: "Show a model folder's architecture, sizes, parameters, dtype, tokenizer and training memory",
		Long: `Reads a model folder's config.json, every safetensors header and the tokenizer files, checks
that the weights are exactly the tensors the architecture has (names and shapes), and prints:
the architecture and its sizes, the parameter count, the stored dtype, the tokenizer (its files,
and its token count from tokenizer.json without building it), and an estimate of the memory one
training step needs on a micro-batch of --tokens tokens: full fine-tuning (float32 weights,
gradients and AdamW moments, 16 bytes a parameter, plus activations) and LoRA of rank
--lora-rank on every linear layer (frozen float32 weights, 16 bytes per adapter parameter, plus
activations). A missing or misshapen tensor, an unknown model_type or a header that lies is an
error naming it.`,
		Example: `  drmas model inspect --model ~/models/Qwen2.5-0.5B-Instruct
  drmas model inspect --model s3://models/qwen3-0.6b --json`,
		Args: cobra.NoArgs,
		RunE: interruptibleRunE(func(cmd *cobra.Command, _ []string) error {
			if err := noTilde(cmd, "model", "cache"); err != nil {
				return err
			}
			dir, err := localModel(cmd, model, cache)
			if err != nil {
				return err
			}
			r, err := inspectModel(cmd.Context(), dir, rank, tokens)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			printInspect(cmd.OutOrStdout(), r)
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&model, "model", "", "model folder: a local path, or s3://… / file://… in the store (required)")
	f.IntVar(&rank, "lora-rank", 16, "LoRA rank for the LoRA memory estimate")
	f.IntVar(&tokens, "tokens", 1024, "tokens of one micro-batch (one sequence) for the memory estimates")
	f.StringVar(&cache, "cache", "", "local cache for a store folder (default: ~/.cache/drmas/models/<hash of the URL>)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}

// noTilde refuses a path flag starting with ~, which no shell expanded (--out=~/m): it would
// name a folder "~" in the working folder.
func noTilde(cmd *cobra.Command, flags ...string) error {
	for _, name := range flags {
		if v, _ := cmd.Flags().GetString(name); strings.HasPrefix(v, "~") {
			return fmt.Errorf("--%s %s: ~ is not expanded here (the shell expands it only at the start of a word): write the absolute path; a folder named ~ is ./%s", name, v, v)
		}
	}
	return nil
}

// localModel returns a local folder holding the model: model itself, or a store folder
// downloaded into the cache.
func localModel(cmd *cobra.Command, model, cache string) (string, error) {
	if !strings.Contains(model, "://") {
		return model, nil
	}
	if cache == "" {
		var err error
		if cache, err = checkpoints.BaseCacheDir(model); err != nil { // where the stages fetch bases too
			return "", fmt.Errorf("%w (or set --cache)", err)
		}
	}
	cfg, err := loadConfig(cmd) // the S3 endpoint and credentials
	if err != nil {
		return "", err
	}
	cfg.Store = model
	b, err := stages.OpenStore(cmd.Context(), cfg)
	if err != nil {
		return "", err
	}
	defer b.Close()
	st, err := hfmodel.Fetch(cmd.Context(), b, cache)
	if err != nil {
		return "", fmt.Errorf("--model %s: %w", model, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "model %s: %d files (%s) in %s: %d downloaded, %d cached\n",
		model, st.Files, humanBytes(st.Bytes), cache, st.Downloaded, st.Cached)
	return cache, nil
}

// inspectReport is what 'model inspect' prints.
type inspectReport struct {
	Dir               string   `json:"dir"`
	ModelType         string   `json:"model_type"`
	Architectures     []string `json:"architectures,omitempty"`
	Hidden            int      `json:"hidden_size"`
	Layers            int      `json:"num_hidden_layers"`
	Heads             int      `json:"num_attention_heads"`
	KVHeads           int      `json:"num_key_value_heads"`
	HeadDim           int      `json:"head_dim"`
	Intermediate      int      `json:"intermediate_size"`
	Vocab             int      `json:"vocab_size"`
	MaxPositions      int      `json:"max_position_embeddings,omitempty"`
	QKVBias           bool     `json:"qkv_bias"`
	OBias             bool     `json:"o_bias"`
	QKNorm            bool     `json:"qk_norm"`
	Tied              bool     `json:"tie_word_embeddings"`
	RopeTheta         float64  `json:"rope_theta"`
	RMSNormEps        float64  `json:"rms_norm_eps"`
	Params            int64    `json:"parameters"`
	Dtypes            []string `json:"dtypes"`
	WeightFiles       []string `json:"weight_files"`
	WeightBytes       int64    `json:"weight_bytes"`
	TokenizerFiles    []string `json:"tokenizer_files"`
	TokenizerModel    string   `json:"tokenizer_model,omitempty"`
	TokenizerVocab    int      `json:"tokenizer_vocab"`
	TokenizerAdded    int      `json:"tokenizer_added"`
	Tokens            int      `json:"micro_batch_tokens"`
	LoRARank          int      `json:"lora_rank"`
	FullStepBytes     int64    `json:"full_step_bytes"`
	LoRAStepBytes     int64    `json:"lora_step_bytes"`
	LoRAAdapterParams int64    `json:"lora_adapter_parameters"`
	// LoRABaseBF16: the LoRA steps count the frozen base's matrices in BF16 (2 bytes each).
	LoRABaseBF16 bool `json:"lora_base_bf16"`

	RopeScaling model.RopeScaling `json:"rope_scaling,omitzero"`

	// The steps' memory with activation checkpointing (learn.activation_checkpointing).
	FullStepBytesCheckpointed int64 `json:"full_step_bytes_checkpointed"`
	LoRAStepBytesCheckpointed int64 `json:"lora_step_bytes_checkpointed"`
}

func inspectModel(ctx context.Context, dir string, rank, tokens int) (*inspectReport, error) {
	if rank < 1 || tokens < 1 {
		return nil, fmt.Errorf("--lora-rank and --tokens must be at least 1")
	}
	w, err := openModel(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	tok, err := hf.ReadTokenizerInfoContext(ctx, dir)
	if err != nil {
		return nil, err
	}
	if slices.Contains(tok.Files, "tokenizer.json") { // refused as tokenize and serve refuse it
		if _, err := tokenizer.LoadDirContext(ctx, dir); err != nil {
			return nil, err
		}
	}
	c := w.Config
	if w.MatricesBF16() {
		c.TorchDtype = "bfloat16" // the base a LoRA trains over stays BF16 (hf.LoadFrozenLLM)
	}
	full, lora := hf.StepMemory(c, rank, tokens)
	fullC, loraC := hf.CheckpointedStepOf(c, 0, 1, tokens).Total(), hf.CheckpointedStepOf(c, rank, 1, tokens).Total()
	r := &inspectReport{Dir: dir, ModelType: c.ModelType, Hidden: c.Hidden, Layers: c.Layers, Heads: c.Heads,
		KVHeads: c.KVHeads, HeadDim: c.HeadDim, Intermediate: c.Intermediate, Vocab: c.Vocab, MaxPositions: c.MaxPositions,
		QKVBias: c.QKVBias(), OBias: c.OBias(), QKNorm: c.QKNorm(), Tied: c.TieWordEmbeddings, RopeTheta: c.RopeTheta, RopeScaling: c.RopeScaling,
		RMSNormEps: c.RMSNormEps, Params: c.Params(), Dtypes: w.Dtypes(), WeightFiles: w.Files,
		TokenizerFiles: tok.Files, TokenizerModel: tok.Model, TokenizerVocab: tok.Vocab, TokenizerAdded: tok.Added,
		Tokens: tokens, LoRARank: rank, FullStepBytes: full, LoRAStepBytes: lora, LoRAAdapterParams: hf.LoRAParams(c, rank),
		FullStepBytesCheckpointed: fullC, LoRAStepBytesCheckpointed: loraC, LoRABaseBF16: c.BaseBF16()}
	if a, ok := c.Raw["architectures"].([]any); ok {
		for _, s := range a {
			if s, ok := s.(string); ok {
				r.Architectures = append(r.Architectures, s)
			}
		}
	}
	for _, f := range w.Files {
		if fi, err := os.Stat(filepath.Join(dir, f)); err == nil {
			r.WeightBytes += fi.Size()
		}
	}
	return r, nil
}

func printInspect(out io.Writer, r *inspectReport) {
	yes := map[bool]string{true: "yes", false: "no"}
	arch := r.ModelType
	if len(r.Architectures) > 0 {
		arch += " (" + strings.Join(r.Architectures, ", ") + ")"
	}
	fmt.Fprintf(out, "model         %s\n", r.Dir)
	fmt.Fprintf(out, "architecture  %s\n", arch)
	fmt.Fprintf(out, "sizes         hidden %d, layers %d, heads %d, kv heads %d, head dim %d, intermediate %d, vocab %d, max positions %d\n",
		r.Hidden, r.Layers, r.Heads, r.KVHeads, r.HeadDim, r.Intermediate, r.Vocab, r.MaxPositions)
	fmt.Fprintf(out, "attention     q/k/v bias %s, o bias %s, q/k norm %s, RoPE theta %g, RMSNorm eps %g, tied embeddings %s\n",
		yes[r.QKVBias], yes[r.OBias], yes[r.QKNorm], r.RopeTheta, r.RMSNormEps, yes[r.Tied])
	if s := r.RopeScaling; s.Type != "" {
		fmt.Fprintf(out, "RoPE scaling  %s: factor %g, low/high frequency factors %g/%g, original context %d\n",
			s.Type, s.Factor, s.LowFreqFactor, s.HighFreqFactor, s.OriginalContext)
	}
	fmt.Fprintf(out, "parameters    %s (%s)\n", thousands(r.Params), shortCount(r.Params))
	fmt.Fprintf(out, "weights       %s, %s in %s\n", strings.Join(r.Dtypes, "+"), humanBytes(r.WeightBytes), strings.Join(r.WeightFiles, ", "))
	tok := "none (no tokenizer files)"
	if len(r.TokenizerFiles) > 0 {
		tok = strings.Join(r.TokenizerFiles, ", ")
		if r.TokenizerModel != "" || r.TokenizerVocab > 0 {
			tok += fmt.Sprintf(": %s, %s tokens + %d added = %s ids", r.TokenizerModel, thousands(int64(r.TokenizerVocab)), r.TokenizerAdded, thousands(int64(r.TokenizerVocab+r.TokenizerAdded)))
		}
	}
	fmt.Fprintf(out, "tokenizer     %s\n", tok)
	base := "float32"
	if r.LoRABaseBF16 {
		base = "BF16"
	}
	fmt.Fprintf(out, "train memory  full fine-tuning %s; LoRA r=%d %s (%s adapter parameters, the base's matrices in %s); estimates for a %d-token micro-batch\n",
		humanBytes(r.FullStepBytes), r.LoRARank, humanBytes(r.LoRAStepBytes), thousands(r.LoRAAdapterParams), base, r.Tokens)
	fmt.Fprintf(out, "              with activation checkpointing: full fine-tuning %s; LoRA r=%d %s\n",
		humanBytes(r.FullStepBytesCheckpointed), r.LoRARank, humanBytes(r.LoRAStepBytesCheckpointed))
}

// shortCount is a parameter count as model cards write it: 0.49B, 119K.
func shortCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.3gB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.3gM", float64(n)/1e6)
	}
	return fmt.Sprintf("%.3gK", float64(n)/1e3)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func newModelInitCmd() *cobra.Command {
	var s hf.InitSpec
	var tokenizer, out, dtype string
	var seed uint64
	cmd := &cobra.Command{
		Use:   "init --arch NAME --hidden N --layers N --heads N --kv-heads N --intermediate N --tokenizer DIR --seed S --out DIR",
		Short: "Make a model folder with random weights, for tests and smoke runs",
		Long: `Writes a Hugging Face model folder (config.json, model.safetensors, the tokenizer files of
--tokenizer) that transformers and vLLM load, with seeded random weights: normal(0, 0.02) for
matrices and embeddings, ones for RMSNorm weights, zeros for biases. The same flags and seed give
the same bytes. --arch is a registered model_type (qwen2, qwen3, llama, mistral …); the config
follows that family's released configs (Qwen2.5 and Qwen3: RoPE theta 1e6, RMSNorm eps 1e-6;
Llama 3: theta 5e5, eps 1e-5, no RoPE scaling; Mistral: theta 1e6, eps 1e-5, no sliding window),
silu, tied embeddings unless --untied; qwen2 has q/k/v biases, qwen3 q/k norms, and none of them
other biases. vocab_size is the tokenizer's largest id + 1 rounded up to a multiple of 64;
bos_token_id is <|endoftext|> and eos_token_id <|im_end|> when the tokenizer has them (Qwen),
else <|begin_of_text|> and <|eot_id|> or <|end_of_text|> (Llama 3).
--out must not exist (or be empty); the folder is written beside it and renamed into place.`,
		Example: `  drmas model init --arch qwen3 --hidden 64 --layers 2 --heads 4 --kv-heads 2 --intermediate 128 \
    --head-dim 32 --tokenizer ~/models/Qwen3-0.6B --seed 1 --out /tmp/tiny-qwen3
  drmas model inspect --model /tmp/tiny-qwen3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := noTilde(cmd, "tokenizer", "out"); err != nil {
				return err
			}
			return initModel(cmd.Context(), cmd.OutOrStdout(), s, tokenizer, out, dtype, seed)
		},
	}
	f := cmd.Flags()
	f.StringVar(&s.Arch, "arch", "", "architecture, a registered config.json model_type such as qwen3 or llama; another lists them (required)")
	f.IntVar(&s.Hidden, "hidden", 0, "hidden size (required)")
	f.IntVar(&s.Layers, "layers", 0, "number of blocks (required)")
	f.IntVar(&s.Heads, "heads", 0, "attention heads (required)")
	f.IntVar(&s.KVHeads, "kv-heads", 0, "key/value heads, a divisor of --heads (required)")
	f.IntVar(&s.Intermediate, "intermediate", 0, "MLP intermediate size (required)")
	f.IntVar(&s.HeadDim, "head-dim", 0, "head dimension (default hidden/heads; qwen2 must use that)")
	f.IntVar(&s.MaxPositions, "max-positions", 32768, "max_position_embeddings")
	f.BoolVar(&s.Untied, "untied", false, "a separate lm_head.weight instead of tied embeddings")
	f.StringVar(&tokenizer, "tokenizer", "", "folder with tokenizer.json (and tokenizer_config.json …) to copy (required)")
	f.Uint64Var(&seed, "seed", 0, "random seed of the weights (required)")
	f.StringVar(&out, "out", "", "the model folder to write; must not exist or be empty (required)")
	f.StringVar(&dtype, "dtype", "bf16", "stored dtype: bf16, f16 or f32")
	for _, name := range []string{"arch", "hidden", "layers", "heads", "kv-heads", "intermediate", "tokenizer", "seed", "out"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func initModel(ctx context.Context, out io.Writer, s hf.InitSpec, tokenizer, dir, dtype string, seed uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tok, err := hf.ReadTokenizerInfo(tokenizer)
	if err != nil {
		return err
	}
	if tok.MaxID < 0 {
		return fmt.Errorf("--tokenizer %s: no tokenizer.json with tokens there", tokenizer)
	}
	s.Vocab = hf.VocabFor(tok)
	s.BOS, s.EOS = hf.SpecialIDs(tok)
	cfg, err := hf.NewConfig(s)
	if err != nil {
		return err
	}
	if err := cfg.EngineCheck(); err != nil { // a folder drmas itself could not score
		return err
	}
	if err := hf.WriteFolder(dir, cfg, dtype, hf.RandomTensors(cfg, seed), tokenizer); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s: %s, %s parameters, vocab %d, %s\n", dir, cfg.ModelType, thousands(cfg.Params()), cfg.Vocab, strings.ToLower(dtype))
	return nil
}
