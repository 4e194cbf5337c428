package configs

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/drmas-dev/drmas/estimators"
	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/tokenizer"
)

// Validate reports every problem of c at once. Every number must be finite: NaN and ±Inf
// are rejected wherever they appear, by key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	// need reports key's value v when fail holds, a string value cut to an excerpt. The
	// conditions name what fails (x <= 0, not !(x > 0)), so a NaN, reported once by
	// checkFinite, fails none of them.
	need := func(fail bool, key string, v any, want string) {
		if !fail {
			return
		}
		if s, ok := v.(string); ok {
			v = excerpt.Name(s)
		}
		bad("%s: %v, want %s", key, v, want)
	}
	checkFinite(reflect.ValueOf(*c), "", bad)
	c.checkSizes(bad)
	if err := layout.ValidateRunName(c.Run); err != nil {
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
		if err := layout.ValidateRunName(name); err != nil {
			bad("models.%s: bad model name: %v", name, err)
		}
		switch m.Backend {
		case "", BackendLocal:
			if m.OpenAI != (OpenAI{}) {
				bad("models.%s.openai is set but backend is %s: set backend: openai", name, excerpt.Quote(m.Backend))
			}
		case BackendOpenAI:
			validateOpenAI(name, m.OpenAI, bad)
			if m.OpenAI.Reload != "" && (!m.IsHF() || m.LoRA != nil) {
				bad("models.%s.openai.reload is for a Hugging Face model trained in full (hf set, lora not): a LoRA model's server loads each step's adapter instead", name)
			}
			if m.IsHF() && m.OpenAI.Mode == "chat" {
				bad("models.%s.openai.mode chat: a Hugging Face model is sampled with its own token ids, in mode completions", name)
			}
			if m.IsHF() && m.LoRA == nil && m.OpenAI.Reload == "" {
				bad("models.%s is a Hugging Face model trained in full on backend openai: its server would not sample with each step's weights; set models.%s.openai.reload: sglang (SGLang, drmas serve --hf), train a LoRA adapter (models.%s.lora), or use backend: local", name, name, name)
			}
		default:
			bad("models.%s.backend: %s is not local or openai", name, excerpt.Quote(m.Backend))
		}
		validateChatDate(name, m, bad)
		if m.External() {
			continue
		}
		p := "models." + name + "."
		if m.IsHF() || m.LoRA != nil {
			validateHF(name, m, bad)
			continue
		}
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
			bad("agents.%s.model: %s is not in models (have %s)", name, excerpt.Quote(a.Model), strings.Join(c.ModelNames(), ", "))
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
	need(r.TopK < 0, "rollout.top_k", r.TopK, "≥ 0 (0: off)")
	need(r.FilterGroups && r.MaxOversample < 1, "rollout.max_oversample", r.MaxOversample, "≥ 1 with rollout.filter_groups (1: no extra prompts)")
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
	need(c.Normalize.Eps < estimators.MinEps, "normalize.eps", c.Normalize.Eps, fmt.Sprintf("≥ %g (%s)", estimators.MinEps, estimators.WhyMinEps))
	l := c.Learn
	need(l.Epochs < 1, "learn.epochs", l.Epochs, "≥ 1")
	need(l.MiniBatches < 1, "learn.mini_batches", l.MiniBatches, "≥ 1")
	need(l.KeepCheckpoints < 1, "learn.keep_checkpoints", l.KeepCheckpoints, "≥ 1")
	need(l.KLCoef < 0, "learn.kl_coef", l.KLCoef, "≥ 0")
	need(l.WeightDecay < 0, "learn.weight_decay", l.WeightDecay, "≥ 0")
	need(!oneOf(l.LRSchedule, LRSchedules), "learn.lr_schedule", excerpt.Quote(l.LRSchedule), strings.Join(LRSchedules, " or "))
	need(l.LRWarmupSteps < 0, "learn.lr_warmup_steps", l.LRWarmupSteps, "≥ 0")
	need(l.MinLRRatio < 0 || l.MinLRRatio > 1, "learn.min_lr_ratio", l.MinLRRatio, "in [0, 1]")
	validateObjective(l, c.Models, need)
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
	need(e.TopK < 0, "evaluate.top_k", e.TopK, "≥ 0 (0: off)")
	need(c.S3.MaxRetries < 0, "s3.max_retries", c.S3.MaxRetries, "≥ 0")
	if _, err := c.NewWorkflow(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
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
		bad("%sendpoint %s must start with http:// or https://", p, excerpt.Quote(o.Endpoint))
	}
	if o.Mode != "" && o.Mode != "completions" && o.Mode != "chat" {
		bad("%smode: %s is not completions or chat", p, excerpt.Quote(o.Mode))
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
	if o.Reload != "" && o.Reload != ReloadSGLang {
		bad("%sreload: %s is not sglang (the only reload API drmas speaks; leave it empty for LoRA adapters)", p, excerpt.Quote(o.Reload))
	}
	if strings.HasPrefix(o.StorePath, "~") {
		bad("%sstore_path %s starts with ~, which is not expanded: give the folder's full path", p, excerpt.Quote(o.StorePath))
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

// validateChatDate checks models.<id>.chat_date: only an HF model's chat template writes it.
func validateChatDate(name string, m Model, bad func(string, ...any)) {
	if m.ChatDate == "" {
		return
	}
	if !m.IsHF() {
		bad("models.%s.chat_date is set but models.%s.hf is not: only a Hugging Face model's Llama 3.1+ chat template writes a date; remove it", name, name)
	} else if err := tokenizer.CheckChatDate(m.ChatDate); err != nil {
		bad("models.%s.chat_date: %v", name, err)
	}
}

// validateHF checks a Hugging Face model's keys: the folder, no built-in sizes beside it, and
// the LoRA settings.
func validateHF(name string, m Model, bad func(string, ...any)) {
	p := "models." + name + "."
	if !m.IsHF() {
		bad("%slora is set but %shf is not: LoRA trains adapters of Hugging Face models; give the model folder in %shf", p, p, p)
	}
	if m.IsHF() && m.hasSizes() {
		bad("%shf is set and so are built-in size keys (dim, layers, heads, context, ff_mult, tied_head): an HF model's sizes come from its config.json; remove them", p)
	}
	if m.LoRA == nil {
		return
	}
	l := m.LoRA.WithDefaults()
	if l.R < 1 || l.R > 1<<12 {
		bad("%slora.r is %d; want 1..4096 (8 to 64 is usual)", p, l.R)
	}
	if !(l.Alpha > 0) || math.IsInf(l.Alpha, 0) {
		bad("%slora.alpha is %v; want a finite number > 0 (default 2·r)", p, l.Alpha)
	}
	if !(l.Dropout >= 0 && l.Dropout < 1) {
		bad("%slora.dropout is %v; want 0 ≤ dropout < 1", p, l.Dropout)
	}
	seen := map[string]bool{}
	for _, t := range l.TargetModules {
		if !slices.Contains(LoRATargets, t) {
			bad("%slora.target_modules: %s is not a linear layer of the block (have %s)", p, excerpt.Quote(t), strings.Join(LoRATargets, ", "))
		}
		if seen[t] {
			bad("%slora.target_modules names %s twice", p, excerpt.Quote(t))
		}
		seen[t] = true
	}
}
