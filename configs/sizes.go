package configs

import (
	"github.com/drmas-dev/drmas/model"
)

// The upper bounds of the size keys. Each is far above what a run asks for, and low enough
// that the products the stages allocate (episodes = tasks × group, tokens = episodes × turns ×
// context) stay within int64 and are judged by the memory estimate (memory.go) rather than by
// the allocator's "out of memory" crash.
const (
	MaxIterations = 1_000_000
	MaxTasks      = 1_000_000 // tasks.per_iteration, tasks.eval_size, warmup.demos / 10
	MaxGroupSize  = 1024      // rollout.group_size, evaluate.k: GRPO groups are 4 to 64
	MaxParts      = 100_000
	MaxNewTokens  = 1 << 20 // rollout.max_tokens
	MaxBatch      = 1_000_000
	MaxEpochs     = 1000
	MaxSteps      = 10_000_000 // warmup.steps
	MaxKeep       = 10_000     // learn.keep_checkpoints
	MaxRetries    = 1000
	MaxFFMult     = 64
	MaxConcurrent = 10_000 // models.<m>.openai.concurrency
)

// sizeBound is one size key's value and its upper bound.
type sizeBound struct {
	key      string
	val, max int64
}

// sizeBounds lists every size key of c with its upper bound.
func (c *Config) sizeBounds() []sizeBound {
	l, w, e, r := c.Learn, c.Warmup, c.Evaluate, c.Rollout
	b := []sizeBound{
		{"iterations", int64(c.Iterations), MaxIterations},
		{"tasks.per_iteration", int64(c.Tasks.PerIteration), MaxTasks},
		{"tasks.eval_size", int64(c.Tasks.EvalSize), MaxTasks},
		{"rollout.group_size", int64(r.GroupSize), MaxGroupSize},
		{"rollout.parts", int64(r.Parts), MaxParts},
		{"rollout.max_tokens", int64(r.MaxTokens), MaxNewTokens},
		{"learn.epochs", int64(l.Epochs), MaxEpochs},
		{"learn.mini_batches", int64(l.MiniBatches), MaxBatch},
		{"learn.micro_batch", int64(l.MicroBatch), MaxBatch},
		{"learn.keep_checkpoints", int64(l.KeepCheckpoints), MaxKeep},
		{"warmup.steps", int64(w.Steps), MaxSteps},
		{"warmup.batch", int64(w.Batch), MaxBatch},
		{"warmup.demos", int64(w.Demos), 10 * MaxTasks},
		{"evaluate.every", int64(e.Every), MaxIterations},
		{"evaluate.k", int64(e.K), MaxGroupSize},
		{"s3.max_retries", int64(c.S3.MaxRetries), MaxRetries},
	}
	for _, name := range c.ModelNames() {
		m, p := c.Models[name], "models."+name+"."
		b = append(b,
			sizeBound{p + "dim", int64(m.Dim), model.MaxDim},
			sizeBound{p + "layers", int64(m.Layers), model.MaxLayers},
			sizeBound{p + "heads", int64(m.Heads), model.MaxDim},
			sizeBound{p + "context", int64(m.Context), model.MaxContext},
			sizeBound{p + "ff_mult", int64(m.FFMult), MaxFFMult},
			sizeBound{p + "openai.max_batch", int64(m.OpenAI.MaxBatch), MaxBatch},
			sizeBound{p + "openai.concurrency", int64(m.OpenAI.Concurrency), MaxConcurrent},
			sizeBound{p + "openai.retries", int64(m.OpenAI.Retries), MaxRetries},
		)
	}
	for _, name := range c.AgentNames() {
		b = append(b, sizeBound{"agents." + name + ".micro_batch", int64(c.Agents[name].MicroBatch), MaxBatch})
	}
	return b
}

// checkSizes reports every size key over its upper bound, and a local model too large to
// build.
func (c *Config) checkSizes(bad func(string, ...any)) {
	for _, s := range c.sizeBounds() {
		if s.val > s.max {
			bad("%s: %d, want at most %d", s.key, s.val, s.max)
		}
	}
	for _, name := range c.ModelNames() {
		m := c.Models[name]
		if m.External() || m.Dim <= 0 || m.Layers <= 0 || m.FFMult <= 0 || m.Dim > model.MaxDim || m.Layers > model.MaxLayers || m.FFMult > MaxFFMult || m.Context > model.MaxContext {
			continue // reported by key
		}
		if n := m.Engine().NumParams(); n > model.MaxParams {
			bad("models.%s: %d parameters, want at most %d: lower dim, layers or ff_mult", name, n, int64(model.MaxParams))
		}
	}
}
