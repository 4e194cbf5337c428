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
package configs

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/kernels"
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
	// Per-agent reward designs (workflows.Rewards), unset by default: omitted from digests then,
	// so runs without them keep their digests.
	VerifierReward string             `mapstructure:"verifier_reward" json:"verifier_reward,omitempty"`
	VerdictShare   float64            `mapstructure:"verdict_share" json:"verdict_share,omitempty"`
	FormatPenalty  map[string]float64 `mapstructure:"format_penalty" json:"format_penalty,omitempty"`
	StepCost       float64            `mapstructure:"step_cost" json:"step_cost,omitempty"`
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
}

// Backend names.
const (
	BackendLocal  = "local"
	BackendOpenAI = "openai"
)

// IsOpenAI reports whether the model is served by an OpenAI-compatible server.
func (m Model) IsOpenAI() bool { return m.Backend == BackendOpenAI }

// External reports whether the model is an openai model without sizes: served by a server
// drmas does not train, with no drmas checkpoint.
func (m Model) External() bool {
	return m.IsOpenAI() && m.Dim == 0 && m.Layers == 0 && m.Heads == 0 && m.Context == 0 && m.FFMult == 0
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
	MaxTokens   int     `mapstructure:"max_tokens" json:"max_tokens"`
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
}

// FileFormats are the extensions (without the dot, any case) a config file may have.
var FileFormats = []string{"yaml", "yml", "json", "toml"}

// LoadOptions says where configuration comes from.
type LoadOptions struct {
	// File is a YAML, JSON or TOML config file, named by its extension (FileFormats); empty
	// means the embedded default.
	File string
	// Flags, if set, override keys: a changed flag named like a key ("store", "run", "seed",
	// "iterations", or "learn.lr") sets it.
	Flags *pflag.FlagSet
	// LookupEnv reads the environment; default os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// syntaxPosition is ", line L, column C" for a JSON or TOML syntax error (YAML's name their line
// themselves), or "".
func syntaxPosition(data []byte, err error) string {
	var js *json.SyntaxError
	var tm *toml.DecodeError
	switch {
	case errors.As(err, &js) && js.Offset > 0 && js.Offset <= int64(len(data)):
		// Offset is just past the byte that failed.
		before := data[:js.Offset-1]
		line := bytes.Count(before, []byte("\n")) + 1
		col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
		return fmt.Sprintf(", line %d, column %d", line, col)
	case errors.As(err, &tm):
		row, col := tm.Position()
		return fmt.Sprintf(", line %d, column %d", row, col)
	}
	return ""
}

// Load resolves the configuration and validates it, reporting every problem at once.
func Load(o LoadOptions) (*Config, error) {
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	v := viper.New()
	octals := map[string]bool{} // keys checkRaw reported as YAML octals: reported once
	source := "(the embedded default)"
	var rawErr error
	if o.File != "" {
		source = o.File
		if fi, err := os.Stat(o.File); err == nil && fi.IsDir() {
			return nil, fmt.Errorf("config %s is a folder: give a file in it (e.g. %s)", o.File, filepath.Join(o.File, "default.yaml"))
		}
		format := strings.ToLower(strings.TrimPrefix(filepath.Ext(o.File), "."))
		if !slices.Contains(FileFormats, format) {
			return nil, fmt.Errorf("config %s: unknown format: name the file .yaml, .yml, .json or .toml", o.File)
		}
		data, err := os.ReadFile(o.File)
		if err != nil {
			return nil, fmt.Errorf("read config %s: %w", o.File, err)
		}
		v.SetConfigType(format)
		if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("read config %s%s: %w", o.File, syntaxPosition(data, err), err)
		}
		// What viper's reading hides (keys folded together, keys with no value, a JSON key given
		// twice, a second YAML document) stops the load before decoding, with the other problems.
		rawErr = checkRaw(data, format, octals)
	} else {
		v.SetConfigType("yaml")
		if err := v.ReadConfig(bytes.NewReader(defaultYAML)); err != nil {
			return nil, fmt.Errorf("read embedded default config: %w", err)
		}
	}
	// Unknown keys are reported with every other problem, all at once; a value the decoder
	// would silently change (checkKeys) stops the load before decoding, with the other problems.
	var errs []error
	if rawErr != nil {
		errs = append(errs, fmt.Errorf("config %s: %w", source, rawErr))
	}
	badTypes := map[string]reflect.Type{} // keys whose values typeErr reports, and their fields' types
	for key := range octals {
		badTypes[key] = nil
	}
	keysErr, typeErr := checkKeys(v.AllSettings(), reflect.TypeOf(Config{}), "", badTypes)
	if keysErr != nil {
		errs = append(errs, fmt.Errorf("config %s: %w", source, keysErr))
	}
	if typeErr != nil {
		errs = append(errs, fmt.Errorf("config %s: %w", source, typeErr))
	}
	// A bad variable is named as such, not blamed on the file; the others are still applied so
	// that every problem is reported at once.
	var overrides []string
	for _, key := range FixedKeys() {
		if val, ok := o.LookupEnv(EnvVar(key)); ok {
			if err := checkValue(key, val); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %s: %w", EnvVar(key), val, key, err))
				continue
			}
			v.Set(key, val)
			overrides = append(overrides, EnvVar(key))
		}
	}
	if o.Flags != nil {
		o.Flags.VisitAll(func(f *pflag.Flag) {
			if f.Changed && isFixedKey(f.Name) {
				if err := checkValue(f.Name, f.Value.String()); err != nil {
					errs = append(errs, fmt.Errorf("--%s %q: %w", f.Name, f.Value.String(), err))
					return
				}
				v.Set(f.Name, f.Value.String())
				overrides = append(overrides, "--"+f.Name)
			}
		})
	}
	if rawErr != nil || typeErr != nil { // the decoder's own complaints, then stop: nothing to validate
		for key, t := range badTypes { // reported already: the decoder would repeat it
			if t != nil {
				v.Set(key, reflect.Zero(t).Interface())
			}
		}
		if cfg, err := defaults(); err == nil {
			if err := v.Unmarshal(cfg); err != nil {
				errs = append(errs, fmt.Errorf("config %s: %w", source, err))
			}
		}
		return nil, errors.Join(errs...)
	}
	// What the values come from: a problem with an overridden value is not the file's.
	if len(overrides) > 0 {
		source += " as overridden by " + strings.Join(overrides, ", ")
	}
	cfg, err := defaults()
	if err != nil {
		return nil, err
	}
	if o.File != "" && v.IsSet("models") {
		cfg.Models = nil
	}
	if o.File != "" && v.IsSet("agents") {
		cfg.Agents = nil
	}
	if err := v.Unmarshal(cfg); err != nil {
		return nil, errors.Join(append(errs, fmt.Errorf("config %s: %w", source, err))...)
	}
	// viper folds the keys of a file to lower case, so `models: {M1: …}` defines m1: fold the
	// agents' references to models the same way, or `model: M1` would name no model.
	for name, a := range cfg.Agents {
		if low := strings.ToLower(a.Model); low != a.Model {
			if _, ok := cfg.Models[low]; ok {
				a.Model = low
				cfg.Agents[name] = a
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("config %s: %w", source, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// checkValue reports whether val, a string from the environment or a flag, decodes into the
// fixed key as Load decodes it, and if not says in a few words what the key wants.
func checkValue(key, val string) error {
	if err := checkString(val, fixedFields()[key].Type); err != nil {
		return err
	}
	v := viper.New()
	v.Set(key, val)
	if err := v.Unmarshal(&Config{}); err == nil {
		return nil
	}
	t := fixedFields()[key].Type
	switch {
	case t == durationType:
		return errors.New("not a duration (e.g. 30s)")
	case t.Kind() == reflect.Bool:
		return errors.New("not true or false")
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return errors.New("not an integer")
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		return errors.New("not an integer ≥ 0")
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return errors.New("not a number")
	}
	return fmt.Errorf("not a valid %s", t)
}

// Default returns the embedded default configuration.
func Default() *Config {
	cfg, err := Load(LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		panic("embedded default config is invalid: " + err.Error()) // a build defect, not user input
	}
	return cfg
}

func defaults() (*Config, error) {
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(defaultYAML)); err != nil {
		return nil, fmt.Errorf("read embedded default config: %w", err)
	}
	var cfg Config
	if err := v.Unmarshal(&cfg); err != nil {
		return nil, fmt.Errorf("decode embedded default config: %w", err)
	}
	return &cfg, nil
}

// checkKeys reports every key of m that t has no field for, as a dotted path (keys), and every
// value that decoding would silently change (types, checkType): m holds what a config
// file set, as its parser typed it.
func checkKeys(m map[string]any, t reflect.Type, prefix string, bad map[string]reflect.Type) (keys, types error) {
	fields := map[string]reflect.Type{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag := f.Tag.Get("mapstructure"); tag != "" {
			fields[tag] = f.Type
			names = append(names, tag)
		}
	}
	keyNames := make([]string, 0, len(m))
	for k := range m {
		keyNames = append(keyNames, k)
	}
	sort.Strings(keyNames)
	var kerrs, terrs []error
	add := func(k, ty error) { kerrs, terrs = append(kerrs, k), append(terrs, ty) }
	for _, k := range keyNames {
		ft, ok := fields[k]
		if !ok {
			hint := ""
			if c := suggestKey(k, names); c != "" {
				hint = fmt.Sprintf(" (did you mean %s%s?)", prefix, c)
			}
			kerrs = append(kerrs, fmt.Errorf("unknown key %s%s%s", prefix, k, hint))
			continue
		}
		sub, isMap := m[k].(map[string]any)
		switch {
		case ft.Kind() == reflect.Struct && isMap:
			add(checkKeys(sub, ft, prefix+k+".", bad))
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct && isMap:
			names := make([]string, 0, len(sub))
			for name := range sub {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				if entry, ok := sub[name].(map[string]any); ok {
					add(checkKeys(entry, ft.Elem(), prefix+k+"."+name+".", bad))
				}
			}
		case ft.Kind() != reflect.Struct && ft.Kind() != reflect.Map:
			if _, reported := bad[prefix+k]; reported {
				bad[prefix+k] = ft
				continue
			}
			if err := checkType(prefix+k, m[k], ft); err != nil {
				terrs = append(terrs, err)
				bad[prefix+k] = ft
			}
		}
	}
	return errors.Join(kerrs...), errors.Join(terrs...)
}

// checkType reports a value of a config file that decoding into a field of type t would
// silently change or drop (mapstructure converts weakly, for the strings of DRMAS_* variables
// and flags): no value (the default would stay), a fraction, a negative number, a boolean or an
// out-of-range number for an integer, a boolean for a number or a string, a number for a
// boolean, and a bare number for a duration (it would be nanoseconds). Strings are checked by
// checkString.
func checkType(key string, val any, t reflect.Type) error {
	rv := reflect.ValueOf(val)
	isBool := rv.Kind() == reflect.Bool
	var num float64 // val as a number, when it is one
	isNum := true
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		num = float64(rv.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		num = float64(rv.Uint())
	case reflect.Float32, reflect.Float64:
		num = rv.Float()
	default:
		isNum = false
	}
	switch k := t.Kind(); {
	case t == durationType:
		if isBool || isNum && num != 0 {
			return fmt.Errorf("%s: %v, want a duration with its unit, e.g. 30s or 2m (a bare number would be nanoseconds)", key, val)
		}
	case k >= reflect.Int && k <= reflect.Uint64:
		unsigned := k >= reflect.Uint
		switch {
		case isBool:
			return fmt.Errorf("%s: %v, want an integer", key, val)
		case !isNum:
		case num != math.Trunc(num): // also NaN and ±Inf
			return fmt.Errorf("%s: %v is not an integer", key, val)
		case unsigned && num < 0:
			return fmt.Errorf("%s: %v, want an integer ≥ 0", key, val)
		case rv.CanUint() && !unsigned && rv.Uint() > math.MaxInt64,
			rv.CanFloat() && (!unsigned && (num < math.MinInt64 || num >= 1<<63) || unsigned && num >= 1<<64):
			return fmt.Errorf("%s: %v is out of range", key, val)
		case rv.CanFloat() && math.Abs(num) >= exactFloat: // JSON numbers are float64: the digits are lost
			return fmt.Errorf("%s: %v is not exact as a number: quote it (\"%.0f\" or your exact digits)", key, val, num)
		}
	case k == reflect.Float32 || k == reflect.Float64:
		if isBool {
			return fmt.Errorf("%s: %v, want a number", key, val)
		}
	case k == reflect.Bool:
		if isNum {
			return fmt.Errorf("%s: %v, want true or false", key, val)
		}
	case k == reflect.String:
		if isBool || isNum { // a number is read back in its shortest form: 1.50 would be "1.5", 0x1F "31"
			return fmt.Errorf("%s: %v, want a string: quote it", key, val)
		}
	}
	if s, ok := val.(string); ok {
		if err := checkString(s, t); err != nil {
			return fmt.Errorf("%s: %q: %w", key, s, err)
		}
	}
	return nil
}

// checkString reports a string (a DRMAS_* variable, a flag, a quoted value in a file) that the
// decoder would read as something else than a reader of the config means, for a field of type
// t. The decoder converts weakly: an empty string becomes 0 or false, an integer is parsed in
// Go syntax (010 is octal 8, 0x10 is 16, 1_0 is 10) and a number may be a hex float. So numbers
// must be plain decimal (an integer without leading zeros), and a string must not be empty
// where the field is not a string.
func checkString(s string, t reflect.Type) error {
	k := t.Kind()
	if k == reflect.String || k == reflect.Slice || k == reflect.Map || k == reflect.Struct {
		return nil
	}
	if s == "" {
		return errors.New("empty: give a value, or leave the key unset")
	}
	switch {
	case t == durationType:
		if _, err := time.ParseDuration(s); err != nil {
			return errors.New("not a duration (e.g. 30s or 2m)")
		}
	case k >= reflect.Int && k <= reflect.Uint64:
		digits := strings.TrimPrefix(s, "-")
		switch {
		case k >= reflect.Uint && digits != s:
			return errors.New("not an integer ≥ 0")
		case strings.HasPrefix(s, "+"):
			return errors.New("write it without the +")
		case digits == "" || strings.Trim(digits, "0123456789") != "":
			return errors.New("not an integer: write decimal digits, e.g. 42")
		}
		if len(digits) > 1 && digits[0] == '0' {
			return fmt.Errorf("a leading zero makes it octal: write %s", withoutLeadingZeros(s))
		}
		var err error
		if k >= reflect.Uint {
			_, err = strconv.ParseUint(s, 10, t.Bits())
		} else {
			_, err = strconv.ParseInt(s, 10, t.Bits())
		}
		if err != nil {
			return fmt.Errorf("out of range for a %d-bit integer", t.Bits())
		}
	case k == reflect.Float32 || k == reflect.Float64:
		low := strings.ToLower(s)
		_, err := strconv.ParseFloat(s, 64)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return errors.New("out of range for a float64")
		case err != nil || strings.Contains(low, "_") || strings.Contains(low, "0x"):
			return errors.New("not a decimal number (e.g. 0.001 or 1e-3)")
		}
	case k == reflect.Bool:
		if _, err := strconv.ParseBool(s); err != nil {
			return errors.New("not true or false")
		}
	}
	return nil
}

// withoutLeadingZeros returns the decimal integer s, which may have a sign, without its
// leading zeros.
func withoutLeadingZeros(s string) string {
	digits := strings.TrimLeft(s, "+-")
	if d := strings.TrimLeft(digits, "0"); d != "" {
		return s[:len(s)-len(digits)] + d
	}
	return "0"
}

// yamlOctals reports the plain integers of a YAML document written with a leading zero: the
// YAML parser reads 010 as octal 8 (YAML 1.1's rule), where YAML 1.2 and a reader mean 10.
func yamlOctals(n *yaml.Node, path string, seen map[string]bool) []error {
	var errs []error
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, c := range n.Content {
			p := path
			if n.Kind == yaml.SequenceNode {
				p = fmt.Sprintf("%s[%d]", path, i)
			}
			errs = append(errs, yamlOctals(c, p, seen)...)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			errs = append(errs, yamlOctals(n.Content[i+1], p, seen)...)
		}
	case yaml.ScalarNode:
		digits := strings.TrimLeft(n.Value, "+-")
		if n.Style == 0 && n.ShortTag() == "!!int" && len(n.Value)-len(digits) <= 1 &&
			len(digits) > 1 && digits[0] == '0' && strings.Trim(digits, "0123456789_") == "" {
			seen[strings.ToLower(path)] = true
			sign, octal := n.Value[:len(n.Value)-len(digits)], strings.TrimLeft(digits, "0_")
			if octal == "" {
				octal = "0"
			}
			decimal := withoutLeadingZeros(strings.ReplaceAll(n.Value, "_", ""))
			switch t := fieldAt(reflect.TypeOf(Config{}), path); {
			case t == durationType: // a bare number is refused for a duration: say what to write
				errs = append(errs, fmt.Errorf("%s: %s is read as an octal number in YAML: write a duration with its unit, e.g. %ss", path, n.Value, decimal))
			case t != nil && t.Kind() == reflect.String:
				errs = append(errs, fmt.Errorf("%s: %s is read as an octal number in YAML: quote it (\"%s\") for the text", path, n.Value, n.Value))
			case t != nil:
				errs = append(errs, fmt.Errorf("%s: %s is read as octal in YAML: write %s (or %s0o%s for octal)", path, n.Value, decimal, sign, octal))
			default: // not a known key (reported as such): say both
				errs = append(errs, fmt.Errorf("%s: %s is read as octal in YAML: write %s (or %s0o%s for octal; quote it for text)", path, n.Value, decimal, sign, octal))
			}
		}
	}
	return errs
}

// fieldAt is the type of the value at a config file's dotted path in t ("learn.lr",
// "models.big.lr", "normalize.estimators[0]"), matching keys as the loader does (not
// case-sensitive); nil where t has no such key.
func fieldAt(t reflect.Type, path string) reflect.Type {
	for _, part := range strings.Split(path, ".") {
		key, index, _ := strings.Cut(part, "[")
		switch t.Kind() {
		case reflect.Struct:
			var next reflect.Type
			for i := 0; i < t.NumField(); i++ {
				if f := t.Field(i); strings.EqualFold(f.Tag.Get("mapstructure"), key) && key != "" {
					next = f.Type
				}
			}
			if next == nil {
				return nil
			}
			t = next
		case reflect.Map: // models.<name>, agents.<name>: any name
			t = t.Elem()
		default:
			return nil
		}
		for ; index != ""; _, index, _ = strings.Cut(index, "[") {
			if t.Kind() != reflect.Slice {
				return nil
			}
			t = t.Elem()
		}
	}
	return t
}

// checkRaw reports what viper's reading of a config file hides: keys of one map that differ
// only in case (viper folds keys to lower case, so all but one would silently be dropped), keys
// with no value (dropped: the default would silently stay),
// a key given twice in a JSON object (encoding/json keeps the last), and YAML documents after
// the first (viper reads only the first), and YAML integers with a leading zero (read as octal).
// YAML and TOML themselves reject a repeated key.
func checkRaw(data []byte, format string, octals map[string]bool) error {
	dec, err := viper.NewCodecRegistry().Decoder(format)
	if err != nil {
		return err
	}
	raw := map[string]any{}
	if err := dec.Decode(data, raw); err != nil {
		return err
	}
	errs := caseCollisions(raw, "")
	switch format {
	case "json":
		errs = append(errs, jsonDuplicates(json.NewDecoder(bytes.NewReader(data)), "")...)
	case "yaml", "yml":
		d := yaml.NewDecoder(bytes.NewReader(data))
		var first, second yaml.Node
		if d.Decode(&first) == nil {
			errs = append(errs, yamlOctals(&first, "", octals)...)
			if err := d.Decode(&second); !errors.Is(err, io.EOF) {
				errs = append(errs, errors.New("more than one YAML document (a --- line): drmas reads one; merge them"))
			}
		}
	}
	return errors.Join(errs...)
}

// caseCollisions reports the keys of m, and of the maps in it, that differ only in case, and
// those with no value (`lr:` or `lr: null`), which viper drops: the default would silently stay.
func caseCollisions(m map[string]any, prefix string) []error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	seen := map[string]string{}
	for _, k := range keys {
		low := strings.ToLower(k)
		if prev, ok := seen[low]; ok {
			errs = append(errs, fmt.Errorf("keys %s%s and %s%s differ only in case: keys are not case-sensitive, keep one", prefix, prev, prefix, k))
		} else {
			seen[low] = k
		}
		switch sub := m[k].(type) {
		case map[string]any:
			errs = append(errs, caseCollisions(sub, prefix+k+".")...)
		case nil:
			errs = append(errs, fmt.Errorf("%s%s has no value: give one, or remove the key", prefix, k))
		}
	}
	return errs
}

// jsonDuplicates reports the keys given twice in a JSON object of the value dec reads next;
// it reports nothing on malformed JSON, which the parser reports.
func jsonDuplicates(dec *json.Decoder, prefix string) []error {
	tok, err := dec.Token()
	if err != nil {
		return nil
	}
	var errs []error
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			k, ok := kt.(string)
			if err != nil || !ok {
				return errs
			}
			if seen[k] {
				errs = append(errs, fmt.Errorf("key %s%s is given twice: keep one", prefix, k))
			}
			seen[k] = true
			errs = append(errs, jsonDuplicates(dec, prefix+k+".")...)
		}
		_, _ = dec.Token()
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			errs = append(errs, jsonDuplicates(dec, fmt.Sprintf("%s[%d].", strings.TrimSuffix(prefix, "."), i))...)
		}
		_, _ = dec.Token()
	}
	return errs
}

// suggestKey returns the key of names that k, an unknown key, most likely means: one that
// begins with k (kl: kl_coef), else the nearest within max(2, len(k)/4) edits that keeps
// something of k (not s3 for lr: two edits, but every letter changed); "" if none.
func suggestKey(k string, names []string) string {
	if len(k) >= 2 {
		for _, n := range names {
			if strings.HasPrefix(n, k) {
				return n
			}
		}
	}
	c := Closest(k, names, max(2, len(k)/4))
	if c != "" && EditDistance(k, c) >= min(len(k), len(c)) {
		return ""
	}
	return c
}

// Closest returns the word of words nearest to s by edit distance (the first of equals), if
// within maxDist; otherwise "".
func Closest(s string, words []string, maxDist int) string {
	best, bestDist := "", maxDist+1
	for _, w := range words {
		if d := EditDistance(s, w); d < bestDist {
			best, bestDist = w, d
		}
	}
	return best
}

// EditDistance is the Levenshtein distance between a and b (bytes), for did-you-mean hints.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// FixedKeys lists the dotted keys that environment variables and flags can set.
func FixedKeys() []string { return slices.Clone(fixedKeys()) }

// fixedKeys is the list FixedKeys copies, walked once.
var fixedKeys = sync.OnceValue(func() []string {
	var keys []string
	walkFixed(func(key string, _ reflect.StructField) { keys = append(keys, key) })
	return keys
})

// fixedFields maps each fixed key to its struct field (its type, its secret tag).
var fixedFields = sync.OnceValue(func() map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	walkFixed(func(key string, f reflect.StructField) { m[key] = f })
	return m
})

// walkFixed calls f for every fixed key, in field order, with its field.
func walkFixed(f func(key string, field reflect.StructField)) {
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			tag := sf.Tag.Get("mapstructure")
			switch sf.Type.Kind() {
			case reflect.Struct:
				walk(sf.Type, prefix+tag+".")
			case reflect.Map:
			default:
				f(prefix+tag, sf)
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
}

// EnvVar is the environment variable that sets the fixed key, e.g. DRMAS_LEARN_LR for learn.lr.
func EnvVar(key string) string {
	return "DRMAS_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Overrides returns what o's flags and DRMAS_* variables set, as the DRMAS_* variables that
// set it the same way (a changed flag wins over the variable, as in Load): a process that
// loads the same file with these variables resolves the same configuration. Secrets
// (s3.access_key, s3.secret_key) are left out: pass them by other means.
func Overrides(o LoadOptions) map[string]string {
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	out := map[string]string{}
	for _, key := range FixedKeys() {
		if isSecretKey(key) {
			continue
		}
		if o.Flags != nil {
			if f := o.Flags.Lookup(key); f != nil && f.Changed {
				out[EnvVar(key)] = f.Value.String()
				continue
			}
		}
		if val, ok := o.LookupEnv(EnvVar(key)); ok {
			out[EnvVar(key)] = val
		}
	}
	return out
}

// isSecretKey reports whether the fixed key's field is tagged secret:"true".
func isSecretKey(key string) bool { return fixedFields()[key].Tag.Get("secret") == "true" }

func isFixedKey(k string) bool {
	_, ok := fixedFields()[k]
	return ok
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

// Validate reports every problem of c at once. Every number must be finite: NaN and ±Inf
// are rejected wherever they appear, by key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	// need reports key's value v when fail holds. The conditions name what fails (x <= 0, not
	// !(x > 0)), so a NaN, reported once by checkFinite, fails none of them.
	need := func(fail bool, key string, v any, want string) {
		if fail {
			bad("%s: %v, want %s", key, v, want)
		}
	}
	checkFinite(reflect.ValueOf(*c), "", bad)
	if err := commit.ValidateRunName(c.Run); err != nil {
		bad("run: %v", err)
	}
	if c.Store == "" {
		bad("store is empty: give a folder, file:///abs/path or s3://bucket/prefix")
	}
	if c.Iterations < 0 {
		bad("iterations %d < 0", c.Iterations)
	}
	if len(c.Models) == 0 {
		bad("models: at least one model is needed")
	}
	for _, name := range c.ModelNames() {
		m := c.Models[name]
		if err := commit.ValidateRunName(name); err != nil {
			bad("models.%s: bad model name: %v", name, err)
		}
		switch m.Backend {
		case "", BackendLocal:
			if m.OpenAI != (OpenAI{}) {
				bad("models.%s.openai is set but backend is %q: set backend: openai", name, m.Backend)
			}
		case BackendOpenAI:
			validateOpenAI(name, m.OpenAI, bad)
		default:
			bad("models.%s.backend: %q is not local or openai", name, m.Backend)
		}
		if m.External() {
			continue
		}
		p := "models." + name + "."
		need(m.Dim <= 0, p+"dim", m.Dim, "> 0")
		need(m.Layers <= 0, p+"layers", m.Layers, "> 0")
		need(m.Heads <= 0, p+"heads", m.Heads, "> 0")
		need(m.Context <= 0, p+"context", m.Context, "> 0")
		need(m.FFMult <= 0, p+"ff_mult", m.FFMult, "> 0")
		if m.Dim > 0 && m.Heads > 0 && m.Dim%m.Heads != 0 {
			bad("models.%s: dim %d is not a multiple of heads %d", name, m.Dim, m.Heads)
		}
	}
	if len(c.Agents) == 0 {
		bad("agents: at least one agent is needed")
	}
	for _, name := range c.AgentNames() {
		a := c.Agents[name]
		if _, ok := c.Models[a.Model]; !ok {
			bad("agents.%s.model: %q is not in models (have %s)", name, a.Model, strings.Join(c.ModelNames(), ", "))
		}
		o := c.OptimOf(name)
		own := func(key string) string { return fmt.Sprintf("agents.%s.%s (own, or learn.%s)", name, key, key) }
		need(o.LR <= 0, own("lr"), o.LR, "> 0")
		need(o.GradClip <= 0, own("grad_clip"), o.GradClip, "> 0")
		need(o.ClipLow <= 0, own("clip_low"), o.ClipLow, "> 0")
		need(o.ClipHigh <= 0, own("clip_high"), o.ClipHigh, "> 0")
		need(o.MicroBatch <= 0, own("micro_batch"), o.MicroBatch, "> 0")
	}
	for _, model := range c.ModelNames() {
		agents := c.AgentsOf(model)
		if len(agents) == 0 { // warm-up would train the others, then refuse it
			bad("models.%s: no agent uses it: name it in an agent (agents.<agent>.model: %s) or remove it", model, model)
		}
		for _, a := range agents[min(1, len(agents)):] {
			o0, o := c.OptimOf(agents[0]), c.OptimOf(a)
			if d := optimDiff(o0, o); d != "" {
				bad("agents %s and %s share model %s but their optimizer settings differ (%s): agents that share a model are trained by one optimizer",
					agents[0], a, model, d)
			}
		}
	}
	r := c.Rollout
	need(r.GroupSize < 1, "rollout.group_size", r.GroupSize, "≥ 1")
	need(r.Parts < 1, "rollout.parts", r.Parts, "≥ 1")
	need(r.MaxTokens < 1, "rollout.max_tokens", r.MaxTokens, "≥ 1")
	// Sampling runs in float32: a temperature must not round to 0 (greedy) or overflow to +Inf.
	need(float32(r.Temperature) <= 0 || r.Temperature > math.MaxFloat32 && !math.IsInf(r.Temperature, 1), "rollout.temperature", r.Temperature, "> 0 and within float32 (1.4e-45 … 3.4e38), as sampling runs in float32")
	need(r.TopP <= 0 || r.TopP > 1, "rollout.top_p", r.TopP, "in (0, 1]")
	need(c.Tasks.PerIteration < 1, "tasks.per_iteration", c.Tasks.PerIteration, "≥ 1")
	need(c.Tasks.EvalSize < 0, "tasks.eval_size", c.Tasks.EvalSize, "≥ 0")
	need(badTaskFormat(c.Tasks.Format), "tasks.format", c.Tasks.Format, taskFormats())
	if len(c.Normalize.Estimators) == 0 {
		bad("normalize.estimators is empty")
	}
	seen := map[string]bool{}
	for i, name := range c.Normalize.Estimators {
		canonical, err := estimator(name, c.Normalize.Eps)
		switch {
		case err != nil:
			bad("normalize.estimators[%d]: %v", i, err)
		case seen[canonical]:
			bad("normalize.estimators[%d]: %s is listed twice", i, canonical)
		}
		seen[canonical] = true
	}
	if _, err := estimator(c.Learn.Estimator, c.Normalize.Eps); err != nil {
		bad("learn.estimator: %v", err)
	}
	need(c.Normalize.Eps < kernels.MinEps, "normalize.eps", c.Normalize.Eps, fmt.Sprintf("≥ %g (%s)", kernels.MinEps, kernels.WhyMinEps))
	l := c.Learn
	need(l.Epochs < 1, "learn.epochs", l.Epochs, "≥ 1")
	need(l.MiniBatches < 1, "learn.mini_batches", l.MiniBatches, "≥ 1")
	need(l.KeepCheckpoints < 1, "learn.keep_checkpoints", l.KeepCheckpoints, "≥ 1")
	need(l.KLCoef < 0, "learn.kl_coef", l.KLCoef, "≥ 0")
	need(l.WeightDecay < 0, "learn.weight_decay", l.WeightDecay, "≥ 0")
	w := c.Warmup
	need(w.Steps < 0, "warmup.steps", w.Steps, "≥ 0")
	need(w.Batch < 1, "warmup.batch", w.Batch, "≥ 1")
	need(w.LR <= 0, "warmup.lr", w.LR, "> 0")
	need(w.Noise < 0 || w.Noise > 1, "warmup.noise", w.Noise, "in [0, 1]")
	need(w.Demos < 1, "warmup.demos", w.Demos, "≥ 1")
	e := c.Evaluate
	need(e.Every < 0, "evaluate.every", e.Every, "≥ 0")
	need(e.K < 1, "evaluate.k", e.K, "≥ 1")
	need(e.Temperature < 0 || e.Temperature > math.MaxFloat32 && !math.IsInf(e.Temperature, 1), "evaluate.temperature", e.Temperature, "≥ 0 and at most 3.4e38, as sampling runs in float32")
	need(e.TopP <= 0 || e.TopP > 1, "evaluate.top_p", e.TopP, "in (0, 1]")
	need(c.S3.MaxRetries < 0, "s3.max_retries", c.S3.MaxRetries, "≥ 0")
	if _, err := c.NewWorkflow(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// estimator returns the canonical name of an advantage estimator (kernels.ParseSpec) with the
// configured ε, as the normalize stage resolves it.
func estimator(name string, eps float64) (string, error) {
	s, err := kernels.Resolve(name, eps)
	if err != nil {
		return "", err
	}
	return s.Name(), nil
}

// checkFinite reports every float of v (a config struct, with maps of structs) that is NaN or
// infinite, by its dotted key. The range checks of Validate are plain comparisons, false for
// NaN, so each NaN is reported once, here.
func checkFinite(v reflect.Value, prefix string, bad func(string, ...any)) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		key := prefix + t.Field(i).Tag.Get("mapstructure")
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Float32, reflect.Float64:
			if x := f.Float(); math.IsNaN(x) || math.IsInf(x, 0) {
				bad("%s: %v is not a finite number", key, x)
			}
		case reflect.Struct:
			checkFinite(f, key+".", bad)
		case reflect.Map:
			if f.Type().Elem().Kind() != reflect.Struct {
				continue
			}
			names := make([]string, 0, f.Len())
			for _, k := range f.MapKeys() {
				names = append(names, k.String())
			}
			sort.Strings(names)
			for _, name := range names {
				checkFinite(f.MapIndex(reflect.ValueOf(name)), key+"."+name+".", bad)
			}
		}
	}
}

func validateOpenAI(name string, o OpenAI, bad func(string, ...any)) {
	p := "models." + name + ".openai."
	if o.Endpoint == "" {
		bad("%sendpoint is empty: give the server's base URL, e.g. http://127.0.0.1:8000", p)
	} else if !strings.HasPrefix(o.Endpoint, "http://") && !strings.HasPrefix(o.Endpoint, "https://") {
		bad("%sendpoint %q must start with http:// or https://", p, o.Endpoint)
	}
	if o.Mode != "" && o.Mode != "completions" && o.Mode != "chat" {
		bad("%smode: %q is not completions or chat", p, o.Mode)
	}
	if o.Batch && o.Mode == "chat" {
		bad("%sbatch needs mode completions", p)
	}
	for _, f := range []struct {
		key  string
		fail bool
		v    any
		want string
	}{
		{"max_batch", o.MaxBatch < 0, o.MaxBatch, "≥ 0"},
		{"concurrency", o.Concurrency < 0, o.Concurrency, "≥ 0"},
		{"timeout", o.Timeout < 0, o.Timeout, "≥ 0"},
		{"retries", o.Retries < -1, o.Retries, "≥ -1 (-1: none)"},
		{"backoff", o.Backoff < 0, o.Backoff, "≥ 0"},
		{"version_wait", o.VersionWait < 0, o.VersionWait, "≥ 0"},
	} {
		if f.fail {
			bad("%s%s: %v, want %s", p, f.key, f.v, f.want)
		}
	}
	if strings.ContainsAny(o.APIKeyEnv, "= \t") || strings.HasPrefix(o.APIKeyEnv, "sk-") {
		bad("%sapi_key_env must be the NAME of an environment variable holding the key, not the key", p)
	}
}

// optimDiff lists the settings in which a and b differ ("" if none). Two NaNs are the same
// value here: a NaN is reported once, by key, not again as a difference.
func optimDiff(a, b Optim) string {
	var d []string
	differ := func(x, y float64) bool { return x != y && !(math.IsNaN(x) && math.IsNaN(y)) }
	if differ(a.LR, b.LR) {
		d = append(d, fmt.Sprintf("lr %g vs %g", a.LR, b.LR))
	}
	if differ(a.ClipLow, b.ClipLow) {
		d = append(d, fmt.Sprintf("clip_low %g vs %g", a.ClipLow, b.ClipLow))
	}
	if differ(a.ClipHigh, b.ClipHigh) {
		d = append(d, fmt.Sprintf("clip_high %g vs %g", a.ClipHigh, b.ClipHigh))
	}
	if differ(a.GradClip, b.GradClip) {
		d = append(d, fmt.Sprintf("grad_clip %g vs %g", a.GradClip, b.GradClip))
	}
	if a.MicroBatch != b.MicroBatch {
		d = append(d, fmt.Sprintf("micro_batch %d vs %d", a.MicroBatch, b.MicroBatch))
	}
	return strings.Join(d, ", ")
}

// Redacted returns a copy of c with secrets replaced by "<redacted>" (or left empty if unset).
func (c *Config) Redacted() *Config {
	r := *c
	if r.S3.AccessKey != "" {
		r.S3.AccessKey = "<redacted>"
	}
	if r.S3.SecretKey != "" {
		r.S3.SecretKey = "<redacted>"
	}
	return &r
}

// durationType is the type of the config's durations (timeouts, waits), which a file writes
// with a unit.
var durationType = reflect.TypeOf(time.Duration(0))

// exactFloat is where float64 stops holding every integer: a config file's integer from it on
// must be a quoted string in JSON, whose numbers are float64.
const exactFloat = 1 << 53

// Document returns c as a config file of format ("yaml" or "json") holds it: a tree of maps
// (keys as config files spell them), with every duration written with its unit ("2m0s"; JSON
// encoding gives nanoseconds, which Load refuses as a duration) and, in JSON, the integers a
// float64 cannot hold quoted (as Load asks), so that what `drmas config show` prints loads
// back as c.
func (c *Config) Document(format string) (map[string]any, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	doc := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // exact integers (a seed above 2^53)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	durationsAsText(doc, reflect.TypeOf(*c))
	return numbersAsValues(doc, format == "json").(map[string]any), nil
}

// numbersAsValues replaces the json.Numbers of v by int64, uint64 or float64 values, which YAML
// and JSON write as numbers, not as quoted strings; with quoteInexact, an integer a float64
// cannot hold stays a string of its digits.
func numbersAsValues(v any, quoteInexact bool) any {
	switch x := v.(type) {
	case json.Number:
		s := x.String()
		if quoteInexact && strings.Trim(strings.TrimPrefix(s, "-"), "0123456789") == "" {
			if f, err := x.Float64(); err == nil && math.Abs(f) >= exactFloat {
				return s
			}
		}
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return u
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
	case map[string]any:
		for k, e := range x {
			x[k] = numbersAsValues(e, quoteInexact)
		}
	case []any:
		for i, e := range x {
			x[i] = numbersAsValues(e, quoteInexact)
		}
	}
	return v
}

// durationsAsText rewrites the durations of m, the JSON form of a value of struct type t.
func durationsAsText(m map[string]any, t reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch v := m[key]; {
		case v == nil:
		case f.Type == durationType:
			if n, ok := v.(json.Number); ok {
				if ns, err := n.Int64(); err == nil {
					m[key] = time.Duration(ns).String()
				}
			}
		case f.Type.Kind() == reflect.Struct:
			if sub, ok := v.(map[string]any); ok {
				durationsAsText(sub, f.Type)
			}
		case f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct:
			if sub, ok := v.(map[string]any); ok {
				for _, e := range sub {
					if em, ok := e.(map[string]any); ok {
						durationsAsText(em, f.Type.Elem())
					}
				}
			}
		}
	}
}

// Digest is a stable sha256 of the JSON encoding of any config section (secrets are never
// part of what stages digest: pass sections, not the S3 settings). A section holding NaN or
// infinite floats, which JSON cannot encode (Validate rejects them, but a Config built in code
// may hold them), is digested from its %+v form instead: Digest never fails on values.
func Digest(section any) string {
	data, err := json.Marshal(section)
	var unsupported *json.UnsupportedValueError
	if errors.As(err, &unsupported) {
		data, err = fmt.Appendf(nil, "%T %+v", section, section), nil
	}
	if err != nil {
		panic(fmt.Sprintf("configs: digest of unencodable section %T: %v", section, err)) // programming error: a type JSON cannot encode
	}
	return commit.Digest(data)
}
