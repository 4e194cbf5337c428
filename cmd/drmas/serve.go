package main

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/hfmodel"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/serve"
	"github.com/drmas-dev/drmas/stages"
)

func newServeCmd() *cobra.Command {
	var o serve.Options
	var addr, cache, adapterRoot string
	var prefixCache int64
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the run's LATEST checkpoint over the OpenAI completions API (as vLLM does)",
		Long: `Serves one model of the built-in policy — the checkpoint LATEST names in the run's store — on
an OpenAI-compatible API, as vLLM serves it:

  GET  /v1/models         the served model (max_model_len, drmas_policy_version)
  POST /v1/completions    prompt: token ids, a list of token-id lists, text or texts;
                          max_tokens, temperature, top_p, top_k (vLLM's: 0 or -1 off),
                          seed, logprobs,
                          return_tokens_as_token_ids, skip_special_tokens, drmas_seeds
  GET  /health

Every admitted prompt is decoded in one batch, one token a step (continuous batching): a
request joins the batch at the next step and leaves it when done, up to --max-batch prompts at
once (the others wait in arrival order); a request arriving while nothing decodes waits
--window for others to share its first step; a long prompt is fed --max-prefill tokens a step.
Sampling is seeded per prompt, so results do not depend on batching and equal the in-process
backend's for the same seed. A prefix cache (vLLM's automatic prefix caching) keeps the keys and
values of the whole 16-token blocks of what was decoded, up to --prefix-cache-bytes per model
and adapter: a request whose prompt starts with them (a chat's later turn) prefills only the
rest, with the same results, and its usage.prompt_tokens_details.cached_tokens counts them. A
cache is dropped when its weights change (a new checkpoint, a weight reload, an adapter
unloaded). "stream": true answers with Server-Sent Events as OpenAI does.
LATEST is polled every --poll and a new checkpoint is swapped in atomically. As vLLM, a
request whose prompt and max_tokens together exceed the model's context gets a 400; one request takes at most --max-prompts prompts (400 over it) and
--max-prompt-tokens prompt tokens in all (413 over it). Point a model's backend at it with backend: openai and
openai.endpoint: http://ADDR (see configs/vllm-shared.yaml). Ctrl-C or SIGTERM shuts down gracefully, with one log line.

With --hf DIR it serves a Hugging Face model folder instead (a local folder, or a store folder
s3://… or file://… downloaded into --cache first), as 'vllm serve DIR' does: named by
--served-model-name (default the folder's base name), text prompts encoded with its tokenizer,
sampling stopped at its end of turn (<|im_end|>) and config.json's eos_token_id. It also
implements vLLM's dynamic LoRA API:

  POST /v1/load_lora_adapter    {"lora_name", "lora_path"}: a PEFT adapter folder (local or
                                store), merged into a copy of the weights, served as lora_name
  POST /v1/unload_lora_adapter  {"lora_name"}

An adapter is read only from under --adapter-root (default: a run's checkpoint folder in the
store, <store>/runs/<run>/checkpoints/…; a folder or a store URL prefix when given): a local folder in
place, a store folder by fetching its adapter_config.json and adapter_model.safetensors, and
nothing else, into a temporary folder removed once the adapter is merged or refused.

Bounds (hostile clients): a request's text prompts have at most --max-prompt-bytes bytes (413,
checked before tokenizing); a completion is answered within --request-timeout (504 past it, its
sampling stopped); a client that disconnects leaves the batch at the next step; a streaming
client with more than --stream-backlog tokens unread, or a write blocked for --write-timeout, is
dropped, so a client that stops reading never holds the others.

A request whose "model" is an adapter's name samples with it; GET /v1/models lists the base and
the adapters (with "parent"). At most --max-loras adapters are loaded at a time. It also
implements SGLang's weight reload, which a run with models.<id>.openai.reload: sglang drives:

  POST /update_weights_from_disk {"model_path"}: serve that HF folder's weights (same sizes)
  GET  /get_model_info           {"model_path"}: the folder the served weights come from`,
		Example: `  drmas --run demo serve --addr 127.0.0.1:8000
  drmas --config configs/vllm-shared.yaml run-stage warmup
  drmas --config configs/vllm-shared.yaml serve --model m1 --addr 127.0.0.1:8000 &
  drmas --config configs/vllm-shared.yaml run   # rollout and evaluate sample from the server
  drmas serve --hf ~/models/Qwen2.5-0.5B-Instruct --addr 127.0.0.1:8000`,
		Args: cobra.NoArgs,
		// serve.New would silently replace these by their defaults.
		PreRunE: func(*cobra.Command, []string) error {
			switch {
			case o.MaxBatch < 1:
				return fmt.Errorf("--max-batch %d: must be ≥ 1", o.MaxBatch)
			case o.Window <= 0:
				return fmt.Errorf("--window %s: must be > 0", o.Window)
			case o.Poll == 0:
				return fmt.Errorf("--poll 0: must be > 0, or negative for never")
			case o.MaxPrompts < 1:
				return fmt.Errorf("--max-prompts %d: must be ≥ 1", o.MaxPrompts)
			case o.MaxPromptTokens < 1:
				return fmt.Errorf("--max-prompt-tokens %d: must be ≥ 1", o.MaxPromptTokens)
			case o.MaxPromptBytes < 0:
				return fmt.Errorf("--max-prompt-bytes %d: must be ≥ 1, or 0 for %d × --max-prompt-tokens", o.MaxPromptBytes, serve.PromptBytesPerToken)
			case o.MaxPrefill == 0:
				return fmt.Errorf("--max-prefill 0: must be ≥ 1, or negative for no cap")
			case o.StreamBacklog < 1:
				return fmt.Errorf("--stream-backlog %d: must be ≥ 1", o.StreamBacklog)
			case o.WriteTimeout <= 0:
				return fmt.Errorf("--write-timeout %s: must be > 0", o.WriteTimeout)
			case o.RequestTimeout == 0:
				return fmt.Errorf("--request-timeout 0: must be > 0, or negative for none")
			case o.MaxLoRAs < 1:
				return fmt.Errorf("--max-loras %d: must be ≥ 1", o.MaxLoRAs)
			case prefixCache < 0:
				return fmt.Errorf("--prefix-cache-bytes %d: must be ≥ 0 (0: no prefix cache)", prefixCache)
			case o.HF != "" && o.Model != "":
				return fmt.Errorf("--hf %s and --model %s: --model chooses a model of the run's checkpoint; --hf serves a folder: give one", o.HF, o.Model)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.PrefixCacheBytes = prefixCache
			if prefixCache == 0 {
				o.PrefixCacheBytes = -1 // serve.Options' off
			}
			if o.HF != "" {
				return serveHF(cmd, o, addr, cache, adapterRoot)
			}
			return serveRun(cmd, args, o, addr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.HF, "hf", "", "serve this Hugging Face model folder (local, or s3://… / file://… fetched into --cache) instead of the run's checkpoint")
	f.StringVar(&cache, "cache", "", "with --hf: local cache of a store folder (default: ~/.cache/drmas/models/<hash of the URL>)")
	f.IntVar(&o.MaxLoRAs, "max-loras", serve.DefaultMaxLoRAs, "with --hf: most LoRA adapters loaded at a time (each is a merged copy of the weights); a load over it gets a 400")
	f.StringVar(&o.Model, "model", "", "model id of the checkpoint to serve (default: its only model)")
	f.StringVar(&o.Name, "served-model-name", "", "model name clients send (default: --model, or with --hf the folder's base name)")
	f.StringVar(&addr, "addr", "127.0.0.1:8000", "listen address host:port")
	f.DurationVar(&o.Window, "window", serve.DefaultWindow, "how long a request arriving while nothing decodes waits for others to share its first step")
	f.IntVar(&o.MaxBatch, "max-batch", serve.DefaultMaxBatch, "most prompts decoded together (continuous batching); the others wait in arrival order")
	f.IntVar(&o.MaxPrefill, "max-prefill", serve.DefaultMaxPrefill, "most prompt tokens one decode step feeds (a longer prompt is fed over several steps); negative: no cap")
	f.IntVar(&o.StreamBacklog, "stream-backlog", serve.DefaultStreamBacklog, "most sampled tokens a streaming request may have unread before its client is dropped")
	f.DurationVar(&o.WriteTimeout, "write-timeout", serve.DefaultWriteTimeout, "longest one write of a completion to its client may block before the client is dropped")
	f.IntVar(&o.MaxPrompts, "max-prompts", serve.DefaultMaxPrompts, "most prompts in one request (400 over it); a rollout sends at most openai.max_batch")
	f.IntVar(&o.MaxPromptTokens, "max-prompt-tokens", serve.DefaultMaxPromptTokens, "most prompt tokens in one request, all its prompts together (413 over it)")
	f.IntVar(&o.MaxPromptBytes, "max-prompt-bytes", 0, fmt.Sprintf("most bytes of text prompts in one request, checked before tokenizing (413 over it); 0: %d × --max-prompt-tokens", serve.PromptBytesPerToken))
	f.Int64Var(&prefixCache, "prefix-cache-bytes", model.DefaultPrefixCacheBytes, "most bytes of keys and values each served model (the base, each adapter) keeps for prompts that repeat what it decoded before (a chat's later turn); 0: no prefix cache")
	f.DurationVar(&o.RequestTimeout, "request-timeout", serve.DefaultRequestTimeout, "longest a completion request may take (504 past it, its sampling stopped); negative: none")
	var maxConcurrent int
	f.IntVar(&maxConcurrent, "max-concurrent", 4, "no effect: every request is decoded in one continuous batch (see --max-batch)")
	_ = f.MarkDeprecated("max-concurrent", "every request is decoded in one continuous batch; use --max-batch")
	f.StringVar(&adapterRoot, "adapter-root", "", "with --hf: load LoRA adapters only from under this folder or store URL prefix (default: a run's checkpoints in the store, <store>/runs/<run>/checkpoints/…)")
	f.DurationVar(&o.Poll, "poll", serve.DefaultPoll, "how often LATEST is checked for a new checkpoint (negative: never); rollout and evaluate wait for the reload, so each iteration waits up to this long (keep it under the models' openai.version_wait, default 2m)")
	return cmd
}

// serveRun serves the run's LATEST checkpoint.
func serveRun(cmd *cobra.Command, args []string, o serve.Options, addr string) error {
	return withEnv(func(cmd *cobra.Command, env *stages.Env) error {
		o.Bucket, o.Run, o.Logf = env.Bucket, env.Config.Run, env.Logf
		s, err := serve.New(cmd.Context(), o)
		if err != nil {
			return err
		}
		return s.ListenAndServe(cmd.Context(), addr)
	})(cmd, args)
}

// serveHF serves the --hf folder, fetching a store folder first; adapters given as store paths
// are fetched the same way.
func serveHF(cmd *cobra.Command, o serve.Options, addr, cache, adapterRoot string) error {
	if err := noTilde(cmd, "hf", "cache"); err != nil {
		return err
	}
	if o.Name == "" {
		o.Name = path.Base(strings.TrimRight(o.HF, "/"))
	}
	dir, err := localModel(cmd, o.HF, cache)
	if err != nil {
		return err
	}
	o.HF = dir
	o.Logf = func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
	o.Resolve = func(_ context.Context, p string) (string, error) { return localModel(cmd, p, "") }
	cfg, err := loadConfig(cmd) // the store, and its S3 endpoint and credentials
	if err != nil {
		return err
	}
	o.AdapterRoot = adapterRoot
	if adapterRoot == "" {
		o.AdapterRoot, o.AdapterCheckpoints = cfg.Store, true
	}
	o.FetchAdapter = func(ctx context.Context, url, dst string) error {
		c := *cfg
		c.Store = url
		b, err := stages.OpenStore(ctx, &c)
		if err != nil {
			return err
		}
		defer b.Close()
		return hfmodel.FetchFiles(ctx, b, dst, hf.AdapterConfigFile, hf.AdapterWeightsFile)
	}
	s, err := serve.New(cmd.Context(), o)
	if err != nil {
		return err
	}
	return s.ListenAndServe(cmd.Context(), addr)
}
