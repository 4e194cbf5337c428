// Package configs holds drmas's configuration: the typed Config, the embedded default, example
// files, and the loader.
//
// Precedence, highest first: command-line flags, DRMAS_* environment variables (fixed keys
// only, e.g. DRMAS_LEARN_LR for learn.lr; not keys inside the models/agents maps), the config
// file, the defaults. A config file is complete for the maps it names: giving `agents:` or
// `models:` replaces the default ones rather than merging into them. Unknown keys are errors
// naming the key path and the file, and so is what the reading would otherwise change without
// a word: keys are not case-sensitive, so two that differ only in case are refused; so are a
// key with no value, a JSON key given twice, a second YAML document, and a value of the wrong
// type (1.5 or true for an integer, -3 for the seed, a bare number for a duration). Secrets
// (S3 keys) never appear in Show output or errors.
//
// A config is refused at once, naming the cap, when it is over one of the caps of limits.go
// (size, keys, depth, key and value length); sizes.go bounds every size key, and memory.go
// estimates each stage's memory from the sizes. The files by concern: config.go the types,
// load.go loading (file, DRMAS_* variables, flags), strict.go the checks of what a file's
// parser would silently change, validate.go the checks of the resolved values, document.go
// the forms Show prints and Digest hashes.
package configs

import (
	"bytes"
	_ "embed"
	"sort"
	"time"

	"github.com/drmas-dev/drmas/estimators"
	"github.com/drmas-dev/drmas/model"
)

//go:embed default.yaml
var defaultYAML []byte

// DefaultYAML is the embedded default configuration file.
func DefaultYAML() []byte { return bytes.Clone(defaultYAML) }

// Config is the resolved configuration of drmas.
type Config struct {
	Run        string           `mapstructure:"run" json:"run"`
	Store      string           `mapstructure:"store" json:"store"`
	Seed       uint64           `mapstructure:"seed" json:"seed"`
	Iterations int              `mapstructure:"iterations" json:"iterations"`
	S3         S3               `mapstructure:"s3" json:"s3"`
	Workflow   Workflow         `mapstructure:"workflow" json:"workflow"`
	Tasks      Tasks            `mapstructure:"tasks" json:"tasks"`
	Models     map[string]Model `mapstructure:"models" json:"models"`
	Agents     map[string]Agent `mapstructure:"agents" json:"agents"`
	Rollout    Rollout          `mapstructure:"rollout" json:"rollout"`
	Normalize  Normalize        `mapstructure:"normalize" json:"normalize"`
	Learn      Learn            `mapstructure:"learn" json:"learn"`
	Warmup     Warmup           `mapstructure:"warmup" json:"warmup"`
	Evaluate   Evaluate         `mapstructure:"evaluate" json:"evaluate"`
	Analyze    Analyze          `mapstructure:"analyze" json:"analyze"`
	// Dir is the config file's folder (absolute; the working folder without a file), where an
	// agent program (workflow.command) runs. Not a key: set by Load.
	Dir string `mapstructure:"-" json:"-"`
}

// S3 configures s3:// stores.
type S3 struct {
	Endpoint   string `mapstructure:"endpoint" json:"endpoint"`
	Region     string `mapstructure:"region" json:"region"`
	AccessKey  string `mapstructure:"access_key" json:"access_key" secret:"true"`
	SecretKey  string `mapstructure:"secret_key" json:"secret_key" secret:"true"`
	Insecure   bool   `mapstructure:"insecure" json:"insecure"`
	PathStyle  bool   `mapstructure:"path_style" json:"path_style"`
	MaxRetries int    `mapstructure:"max_retries" json:"max_retries"`
}

// Workflow selects and configures the multi-agent workflow.
type Workflow struct {
	Name     string `mapstructure:"name" json:"name"`
	MaxLoop  int    `mapstructure:"max_loop" json:"max_loop"`
	MaxSteps int    `mapstructure:"max_steps" json:"max_steps"`
	TopK     int    `mapstructure:"top_k" json:"top_k"`
	// HardFrac is the share of generated tasks that are hard (math_hard, search_2hop).
	HardFrac float64 `mapstructure:"hard_frac" json:"hard_frac"`
	// CorpusSeed and CorpusPeople shape the search workflow's synthetic fact corpus.
	CorpusSeed   uint64 `mapstructure:"corpus_seed" json:"corpus_seed"`
	CorpusPeople int    `mapstructure:"corpus_people" json:"corpus_people"`
	// Retriever* (search): a Search-R1 retrieval server instead of the synthetic corpus.
	RetrieverURL     string        `mapstructure:"retriever_url" json:"retriever_url,omitempty"`
	RetrieverTimeout time.Duration `mapstructure:"retriever_timeout" json:"retriever_timeout,omitempty"`
	RetrieverRetries int           `mapstructure:"retriever_retries" json:"retriever_retries,omitempty"`
	PassageBytes     int           `mapstructure:"passage_bytes" json:"passage_bytes,omitempty"`
	// VerifierCheck (math) is how the verifier shows its check: answer, its answer and a verdict
	// ("231 yes", also when unset); digits, its answer and a y/n mark per digit of the candidate
	// ("231 yyn"); or recompute, its answer alone ("231"), the workflow approving a candidate
	// equal to it (docs/testbed.md). Omitted from digests while unset.
	VerifierCheck string `mapstructure:"verifier_check" json:"verifier_check,omitempty"`
	// Per-agent reward designs (workflows.Rewards), unset by default: omitted from digests then,
	// so runs without them keep their digests.
	VerifierReward string             `mapstructure:"verifier_reward" json:"verifier_reward,omitempty"`
	VerdictShare   float64            `mapstructure:"verdict_share" json:"verdict_share,omitempty"`
	FormatPenalty  map[string]float64 `mapstructure:"format_penalty" json:"format_penalty,omitempty"`
	StepCost       float64            `mapstructure:"step_cost" json:"step_cost,omitempty"`
	// RouterReward (search): outcome (unset) or decision, a router row scoring 1 when it stopped
	// exactly when the visible passages answer the question (docs/testbed.md).
	RouterReward string `mapstructure:"router_reward" json:"router_reward,omitempty"`
	// SearcherReward (search): outcome (unset) or retrieval, a searcher row scoring 1 when its
	// query brought a fact the question needs into view (docs/testbed.md).
	SearcherReward string `mapstructure:"searcher_reward" json:"searcher_reward,omitempty"`
	// CriticReward (math_critic): outcome (unset) or verdict, a critic row scoring 1 when it
	// approved a right answer or rejected a wrong one (docs/testbed.md).
	CriticReward string `mapstructure:"critic_reward" json:"critic_reward,omitempty"`
	// The program workflow (workflows.ProgramOptions, docs/agent-programs.md): the agent
	// program's argv, run once per episode in the config file's folder, and its limits. Unset
	// (zero: the documented defaults) for the other workflows, and omitted from digests then.
	Command       []string      `mapstructure:"command" json:"command,omitempty"`
	Timeout       time.Duration `mapstructure:"timeout" json:"timeout,omitempty"`
	Concurrency   int           `mapstructure:"concurrency" json:"concurrency,omitempty"`
	MaxCalls      int           `mapstructure:"max_calls" json:"max_calls,omitempty"`
	FailureReward *float64      `mapstructure:"failure_reward" json:"failure_reward,omitempty"`
	RevealAnswer  bool          `mapstructure:"reveal_answer" json:"reveal_answer,omitempty"`
	Reward        string        `mapstructure:"reward" json:"reward,omitempty"`
}

// Tasks selects where prompts come from.
type Tasks struct {
	Source       string `mapstructure:"source" json:"source"`
	Format       string `mapstructure:"format" json:"format,omitempty"` // of the tasks.source and evaluate.source files: auto, drmas or verl
	PerIteration int    `mapstructure:"per_iteration" json:"per_iteration"`
	EvalSize     int    `mapstructure:"eval_size" json:"eval_size"`
}

// Model sizes one built-in policy model and selects the backend that serves its agents.
// Agents mapped to the same model share one backend (one in-process model or one server) and
// its concurrency budget.
type Model struct {
	Dim      int  `mapstructure:"dim" json:"dim"`
	Layers   int  `mapstructure:"layers" json:"layers"`
	Heads    int  `mapstructure:"heads" json:"heads"`
	Context  int  `mapstructure:"context" json:"context"`
	FFMult   int  `mapstructure:"ff_mult" json:"ff_mult"`
	TiedHead bool `mapstructure:"tied_head" json:"tied_head"`
	// Backend serves the model during rollout and evaluation: "local" (or empty: the built-in
	// policy in process, from the loaded checkpoint) or "openai" (an OpenAI-compatible HTTP
	// server — vLLM, SGLang, or `drmas serve` — configured under openai:). An openai model
	// without sizes is external: drmas has no checkpoint of it and cannot train it (no
	// weight sync); with sizes it is the built-in policy served over HTTP by `drmas serve`,
	// trained as usual.
	Backend string `mapstructure:"backend" json:"backend,omitempty"`
	OpenAI  OpenAI `mapstructure:"openai" json:"openai,omitzero"`
	// HF makes the model a Hugging Face model (Qwen2, Qwen2.5, Qwen3, Llama): a local folder
	// or a store folder (s3://…, file://…) holding config.json, the weights and the tokenizer
	// files. Architecture, sizes and tokenizer come from the folder, so the size keys above
	// must be left out. Empty: the built-in policy.
	HF string `mapstructure:"hf" json:"hf,omitempty"`
	// LoRA, for an HF model, trains a LoRA adapter over frozen weights instead of every
	// weight; its checkpoints are PEFT adapters. Nil: full fine-tune.
	LoRA *LoRA `mapstructure:"lora" json:"lora,omitempty"`
	// ChatDate, for an HF model whose chat template is Llama 3.1's or 3.2's, is the "Today
	// Date" its system preamble writes (e.g. "06 Dec 2026"). drmas never reads the clock, so a
	// run's prompts are the same every day. Empty: "26 Jul 2024", the templates' own fallback.
	// Other templates write no date.
	ChatDate string `mapstructure:"chat_date" json:"chat_date,omitempty"`
}

// LoRA configures a LoRA adapter (models.<id>.lora), with PEFT's meaning of each key.
type LoRA struct {
	// R is the rank of A [r, in] and B [out, r] (PEFT's r). Required, ≥ 1.
	R int `mapstructure:"r" json:"r"`
	// Alpha scales B·A by alpha/r (PEFT's lora_alpha); default 2·r.
	Alpha float64 `mapstructure:"alpha" json:"alpha,omitempty"`
	// Dropout is the probability of zeroing an input of A during training (PEFT's
	// lora_dropout), in [0, 1); default 0.
	Dropout float64 `mapstructure:"dropout" json:"dropout,omitempty"`
	// TargetModules are the linear layers that get an adapter, by their Hugging Face names;
	// default every linear layer of the block: LoRATargets.
	TargetModules []string `mapstructure:"target_modules" json:"target_modules,omitempty"`
}

// LoRATargets are the linear layers of a Llama-family block, the default target_modules.
var LoRATargets = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// WithDefaults fills alpha (2·r) and target_modules (LoRATargets).
func (l LoRA) WithDefaults() LoRA {
	if l.Alpha == 0 {
		l.Alpha = 2 * float64(l.R)
	}
	if len(l.TargetModules) == 0 {
		l.TargetModules = append([]string(nil), LoRATargets...)
	}
	return l
}

// IsHF reports whether the model is a Hugging Face model (models.<id>.hf).
func (m Model) IsHF() bool { return m.HF != "" }

// hasSizes reports whether any built-in size key is set.
func (m Model) hasSizes() bool {
	return m.Dim != 0 || m.Layers != 0 || m.Heads != 0 || m.Context != 0 || m.FFMult != 0 || m.TiedHead
}

// Backend names.
const (
	BackendLocal  = "local"
	BackendOpenAI = "openai"
)

// ReloadSGLang is models.<id>.openai.reload's one value: SGLang's /update_weights_from_disk.
const ReloadSGLang = "sglang"

// IsOpenAI reports whether the model is served by an OpenAI-compatible server.
func (m Model) IsOpenAI() bool { return m.Backend == BackendOpenAI }

// External reports whether the model is an openai model without sizes: served by a server
// drmas does not train, with no drmas checkpoint.
func (m Model) External() bool {
	return m.IsOpenAI() && !m.IsHF() && !m.hasSizes()
}

// OpenAI configures an OpenAI-compatible completions server (models.<id>.openai). Sampling
// (temperature, top_p, max_tokens) comes from the rollout and evaluate sections, as for the
// local backend, so the learner scores with the temperature that sampled; seeds are per
// request.
type OpenAI struct {
	// Endpoint is the server's base URL, e.g. http://127.0.0.1:8000 (a trailing /v1 is
	// accepted). Required.
	Endpoint string `mapstructure:"endpoint" json:"endpoint,omitempty"`
	// Model is the model name the server knows (the request's "model"); default the drmas
	// model id.
	Model string `mapstructure:"model" json:"model,omitempty"`
	// APIKeyEnv is the NAME of an environment variable holding the API key, sent as a Bearer
	// token. The key itself never goes in a config file, logs or errors.
	APIKeyEnv string `mapstructure:"api_key_env" json:"api_key_env,omitempty"`
	// Mode is "completions" (default: POST /v1/completions with token-id prompts, token ids
	// and log-probs back — vLLM's return_tokens_as_token_ids) or "chat" (POST
	// /v1/chat/completions with the prompt text; responses are re-encoded and have no
	// log-probs, so their rows cannot be trained with PPO — evaluation only).
	Mode string `mapstructure:"mode" json:"mode,omitempty"`
	// Batch sends up to max_batch prompts per request with per-prompt seeds (drmas_seeds).
	// Only `drmas serve` honours per-prompt seeds; vLLM and SGLang would reuse one seed for
	// every prompt of a request, so leave it off for them (one request per prompt).
	Batch    bool `mapstructure:"batch" json:"batch,omitempty"`
	MaxBatch int  `mapstructure:"max_batch" json:"max_batch,omitempty"`
	// Concurrency is the backend's budget of in-flight requests, shared by all agents of the
	// model (default 8).
	Concurrency int `mapstructure:"concurrency" json:"concurrency,omitempty"`
	// Timeout bounds one HTTP request (default 120s). Timeouts are not retried.
	Timeout time.Duration `mapstructure:"timeout" json:"timeout,omitempty"`
	// Retries is how many times a request is retried after a 429, a 5xx or a connection
	// error (default 3; -1 = none), with exponential backoff from Backoff (default 250ms)
	// plus deterministic jitter.
	Retries int           `mapstructure:"retries" json:"retries,omitempty"`
	Backoff time.Duration `mapstructure:"backoff" json:"backoff,omitempty"`
	// VersionWait bounds how long rollout and evaluation wait for `drmas serve` to load the
	// checkpoint step they sample from (default 2m; models drmas trains only): keep it above
	// the server's --poll.
	VersionWait time.Duration `mapstructure:"version_wait" json:"version_wait,omitempty"`
	// Reload makes a Hugging Face model trained in full (models.<id>.hf without lora) sample
	// on-policy: "sglang" POSTs SGLang's /update_weights_from_disk with the step's published
	// folder before a stage samples, and checks on /get_model_info that the server serves it
	// (drmas serve --hf implements both). Empty: such a model is refused on this backend.
	Reload string `mapstructure:"reload" json:"reload,omitempty"`
	// StorePath is the run's store as the server's machine reads it (a folder, e.g. a shared
	// file system's mount of the store), for the step folders an HF model's server loads
	// (a LoRA adapter, or a full step with reload); default the config's store, which drmas
	// serve reads as it is and vLLM or SGLang only when it is a local folder they share.
	StorePath string `mapstructure:"store_path" json:"store_path,omitempty"`
}

// Engine is the built-in policy engine's config for this model size.
func (m Model) Engine() model.Config {
	c := model.DefaultConfig()
	c.Context, c.Dim, c.Layers, c.Heads, c.FFMult, c.TiedHead = m.Context, m.Dim, m.Layers, m.Heads, m.FFMult, m.TiedHead
	return c
}

// Agent maps an agent role to a model and, optionally, its own optimizer settings. Zero
// settings inherit from the learn section. Agents sharing a model must agree on them.
type Agent struct {
	Model      string  `mapstructure:"model" json:"model"`
	LR         float64 `mapstructure:"lr" json:"lr,omitempty"`
	ClipLow    float64 `mapstructure:"clip_low" json:"clip_low,omitempty"`
	ClipHigh   float64 `mapstructure:"clip_high" json:"clip_high,omitempty"`
	GradClip   float64 `mapstructure:"grad_clip" json:"grad_clip,omitempty"`
	MicroBatch int     `mapstructure:"micro_batch" json:"micro_batch,omitempty"`
}

// Rollout configures sampling.
type Rollout struct {
	GroupSize   int     `mapstructure:"group_size" json:"group_size"`
	Parts       int     `mapstructure:"parts" json:"parts"`
	Temperature float64 `mapstructure:"temperature" json:"temperature"`
	TopP        float64 `mapstructure:"top_p" json:"top_p"`
	// TopK keeps the k most likely tokens before top_p (0: off, then in no digest).
	TopK      int `mapstructure:"top_k" json:"top_k,omitempty"`
	MaxTokens int `mapstructure:"max_tokens" json:"max_tokens"`
	// FilterGroups keeps only prompt groups whose rows carry a learning signal (scores not all
	// equal; per agent when learn.estimator normalizes per agent), refilling each part from
	// extra prompts until it has its share or has played MaxOversample times it (DAPO's
	// dynamic sampling). Off, neither enters any digest.
	FilterGroups  bool `mapstructure:"filter_groups" json:"filter_groups,omitempty"`
	MaxOversample int  `mapstructure:"max_oversample" json:"max_oversample,omitempty"`
}

// Canonical returns r with the keys that its options leave unused blanked (max_oversample
// without filter_groups), as digests take it.
func (r Rollout) Canonical() Rollout {
	if !r.FilterGroups {
		r.MaxOversample = 0
	}
	return r
}

// Normalize lists the advantage estimators to compute.
type Normalize struct {
	Estimators []string `mapstructure:"estimators" json:"estimators"`
	Eps        float64  `mapstructure:"eps" json:"eps"`
}

// Learn configures the PPO learner; per-agent overrides live in Agents.
type Learn struct {
	Estimator       string  `mapstructure:"estimator" json:"estimator"`
	Epochs          int     `mapstructure:"epochs" json:"epochs"`
	MiniBatches     int     `mapstructure:"mini_batches" json:"mini_batches"`
	MicroBatch      int     `mapstructure:"micro_batch" json:"micro_batch"`
	LR              float64 `mapstructure:"lr" json:"lr"`
	WeightDecay     float64 `mapstructure:"weight_decay" json:"weight_decay"`
	ClipLow         float64 `mapstructure:"clip_low" json:"clip_low"`
	ClipHigh        float64 `mapstructure:"clip_high" json:"clip_high"`
	GradClip        float64 `mapstructure:"grad_clip" json:"grad_clip"`
	KLCoef          float64 `mapstructure:"kl_coef" json:"kl_coef"`
	KeepCheckpoints int     `mapstructure:"keep_checkpoints" json:"keep_checkpoints"`
	// LRSchedule is constant or cosine; LRWarmupSteps ramps the rate linearly from 0 over
	// the first updates of a fresh optimizer; MinLRRatio is where cosine ends, × lr. The
	// position is the optimizer's step count, saved with its state, so a resume continues.
	// Empty or zero is the default (constant, no warm-up), which digests as before.
	LRSchedule    string  `mapstructure:"lr_schedule" json:"lr_schedule,omitempty"`
	LRWarmupSteps int     `mapstructure:"lr_warmup_steps" json:"lr_warmup_steps,omitempty"`
	MinLRRatio    float64 `mapstructure:"min_lr_ratio" json:"min_lr_ratio,omitempty"`
	// The policy loss's options (docs/objectives.md), each off at its default.
	LossAgg       string  `mapstructure:"loss_agg" json:"loss_agg,omitempty"`
	LossNormLen   int     `mapstructure:"loss_norm_len" json:"loss_norm_len,omitempty"`
	ClipC         float64 `mapstructure:"clip_c" json:"clip_c,omitempty"`
	RatioLevel    string  `mapstructure:"ratio_level" json:"ratio_level,omitempty"`
	SeqClipLow    float64 `mapstructure:"seq_clip_low" json:"seq_clip_low,omitempty"`
	SeqClipHigh   float64 `mapstructure:"seq_clip_high" json:"seq_clip_high,omitempty"`
	EntropyCoef   float64 `mapstructure:"entropy_coef" json:"entropy_coef,omitempty"`
	AgentBalance  string  `mapstructure:"agent_balance" json:"agent_balance,omitempty"`
	KLType        string  `mapstructure:"kl_type" json:"kl_type,omitempty"`
	KLRef         string  `mapstructure:"kl_ref" json:"kl_ref,omitempty"`
	RolloutIS     string  `mapstructure:"rollout_is" json:"rollout_is,omitempty"`
	RolloutISCap  float64 `mapstructure:"rollout_is_cap" json:"rollout_is_cap,omitempty"`
	RolloutISMode string  `mapstructure:"rollout_is_mode" json:"rollout_is_mode,omitempty"`
	// ActivationCheckpointing is auto, on or off (ActivationCheckpointings): whether the CPU
	// engine's training step keeps each block's input only and recomputes the block in the
	// backward. It changes memory and time, never a result, so digests leave it out.
	ActivationCheckpointing string `mapstructure:"activation_checkpointing" json:"activation_checkpointing,omitempty"`
}

// Warmup configures the supervised warm-up that publishes checkpoint step 0.
type Warmup struct {
	Steps int     `mapstructure:"steps" json:"steps"`
	Batch int     `mapstructure:"batch" json:"batch"`
	LR    float64 `mapstructure:"lr" json:"lr"`
	Noise float64 `mapstructure:"noise" json:"noise"`
	Demos int     `mapstructure:"demos" json:"demos"`
}

// Evaluate configures avg@k / pass@k evaluation.
type Evaluate struct {
	// Source is where the held-out prompts come from: "generator" (or empty) for the
	// workflow's held-out split, or a JSONL/Parquet tasks file (as tasks.source), whose first
	// tasks.eval_size tasks are evaluated. Not part of any stage's digest: changing it changes
	// only evaluations, and those refuse to be redone with other prompts.
	Source      string  `mapstructure:"source" json:"source,omitempty"`
	Every       int     `mapstructure:"every" json:"every"`
	K           int     `mapstructure:"k" json:"k"`
	Temperature float64 `mapstructure:"temperature" json:"temperature"`
	TopP        float64 `mapstructure:"top_p" json:"top_p"`
	TopK        int     `mapstructure:"top_k" json:"top_k,omitempty"` // as rollout.top_k
}

// Analyze configures `drmas analyze`.
type Analyze struct {
	// Sandbox confines --sql to reading the run's views (analyze --sandbox): for SQL that
	// someone else wrote.
	Sandbox bool `mapstructure:"sandbox" json:"sandbox"`
}

// AgentNames returns the configured agents, sorted.
func (c *Config) AgentNames() []string {
	names := make([]string, 0, len(c.Agents))
	for n := range c.Agents {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ModelNames returns the configured models, sorted.
func (c *Config) ModelNames() []string {
	names := make([]string, 0, len(c.Models))
	for n := range c.Models {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// AgentsOf returns the agents served by model, sorted.
func (c *Config) AgentsOf(model string) []string {
	var out []string
	for _, a := range c.AgentNames() {
		if c.Agents[a].Model == model {
			out = append(out, a)
		}
	}
	return out
}

// Optim is the resolved optimizer setting of one agent (or of the model it shares).
type Optim struct {
	LR, ClipLow, ClipHigh, GradClip float64
	MicroBatch                      int
}

// OptimOf resolves agent's optimizer settings: its own where set, else the learn section's.
func (c *Config) OptimOf(agent string) Optim {
	a := c.Agents[agent]
	o := Optim{LR: c.Learn.LR, ClipLow: c.Learn.ClipLow, ClipHigh: c.Learn.ClipHigh, GradClip: c.Learn.GradClip, MicroBatch: c.Learn.MicroBatch}
	if a.LR != 0 {
		o.LR = a.LR
	}
	if a.ClipLow != 0 {
		o.ClipLow = a.ClipLow
	}
	if a.ClipHigh != 0 {
		o.ClipHigh = a.ClipHigh
	}
	if a.GradClip != 0 {
		o.GradClip = a.GradClip
	}
	if a.MicroBatch != 0 {
		o.MicroBatch = a.MicroBatch
	}
	return o
}

// estimator returns the canonical name of an advantage estimator (estimators.ParseSpec) with the
// configured ε, as the normalize stage resolves it.
func estimator(name string, eps float64) (string, error) {
	s, err := estimators.Resolve(name, eps)
	if err != nil {
		return "", err
	}
	return s.Name(), nil
}
