package configs

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/model"
)

// MemoryStages are the stages Memory estimates, in the order `drmas run` runs them.
var MemoryStages = []string{"warmup", "rollout", "normalize", "learn", "evaluate"}

// MemoryTerm is one part of a stage's memory estimate.
type MemoryTerm struct {
	What  string   // what is held, with the sizes it is counted from
	Bytes float64  // at most
	Keys  []string // the keys that size it: what to lower
}

// MemoryEstimate is what one stage holds at most at once, by the config's sizes: an upper
// estimate, to refuse a config before any work when it cannot fit, not a measurement.
type MemoryEstimate struct {
	Stage string
	Bytes float64
	Terms []MemoryTerm // largest first
}

// The per-item sizes the estimate counts (bytes), each at least what the stages hold.
const (
	bytesPerToken   = 16  // a token id and its log-probability, and its text
	bytesPerTurn    = 512 // a row's ids, names, rewards and the Go headers around them
	bytesPerRow     = 256 // a normalize row: keys, rewards, one advantage per estimator
	optimizerCopies = 5   // learn: weights, gradients, two AdamW moments, the reference
	activationMult  = 12  // learn: float32 activations kept per token per layer, in units of dim
	// gcHeadroom: Go's collector (GOGC=100) lets the heap grow to twice what is live.
	gcHeadroom = 2
)

// turns is how many model turns an episode takes at most: every agent in each of the
// workflow's rounds or steps.
func (c *Config) turns() float64 {
	return float64(max(len(c.Agents), 1) * max(c.Workflow.MaxLoop, c.Workflow.MaxSteps, 1))
}

// turnTokens is how many tokens one turn holds at most, and the key that sizes it: a local
// model's context, or for a model behind a server the new tokens and a prompt of up to 4,096.
func (c *Config) turnTokens() (float64, string) {
	var n float64
	var key string
	for _, name := range c.ModelNames() {
		m, t, k := c.Models[name], float64(c.Rollout.MaxTokens+4096), "rollout.max_tokens"
		if !m.External() {
			t, k = float64(m.Context), "models."+name+".context"
		}
		if t > n {
			n, key = t, k
		}
	}
	return n, key
}

// HFConfigs are the Hugging Face models' configs by model id (read from their folders), for
// the estimates to size them with; an HF model missing here (its folder in a store, not yet
// fetched) counts nothing: the warm-up checks it once fetched (hfmodel.CheckMemory).
type HFConfigs map[string]hf.Config

// weights is what the local models' parameters take, times copies, and the keys sizing them:
// for an HF model with copies > 1 (learning), its float32 weights, gradients, moments and a
// reference in full, or its frozen weights (a BF16 folder's matrices at 2 bytes) and a LoRA
// adapter's weights, gradients and moments.
func (c *Config) weights(copies float64, hfs HFConfigs) MemoryTerm {
	var b float64
	var names []string
	for _, name := range c.ModelNames() {
		m := c.Models[name]
		switch {
		case m.External():
			continue
		case m.IsHF():
			hc, ok := hfs[name]
			if !ok {
				continue
			}
			p := float64(hc.Params())
			l := m.LoRA
			if l == nil {
				b += 4 * p * copies
				break
			}
			b += 4 * p
			if hc.BaseBF16() { // a LoRA's base from a BF16 folder keeps its matrices in BF16
				b -= 2 * float64(hf.MatrixParams(hc.ArchConfig()))
			}
			if copies > 1 {
				b += 16 * float64(hf.LoRAParams(hc, l.R))
			}
		default:
			b += float64(m.Engine().NumParams()) * 4 * copies
		}
		names = append(names, name)
	}
	what := "model weights"
	if copies > 1 {
		what = fmt.Sprintf("model weights, gradients and optimizer state (%g copies)", copies)
	}
	keys := []string{}
	for _, n := range names {
		if c.Models[n].IsHF() {
			keys = append(keys, "models."+n+".hf", "models."+n+".lora")
			continue
		}
		keys = append(keys, "models."+n+".dim", "models."+n+".layers")
	}
	return MemoryTerm{What: fmt.Sprintf("%s of %s", what, strings.Join(names, ", ")), Bytes: b, Keys: keys}
}

// episodes is what n episodes (tasks × samples) hold until they are written.
func (c *Config) episodes(what string, tasks, samples float64, keys ...string) MemoryTerm {
	tok, tokKey := c.turnTokens()
	t := c.turns()
	return MemoryTerm{
		What:  fmt.Sprintf("%s: %.0f tasks × %.0f samples × %.0f turns × %.0f tokens", what, tasks, samples, t, tok),
		Bytes: tasks * samples * t * (tok*bytesPerToken + bytesPerTurn),
		Keys:  append(keys, tokKey),
	}
}

// activations is what learning holds per micro-batch of batch sequences. An HF model's step
// is hf.StepOf's on one sequence of rollout.max_tokens and a 512-token prompt, with
// activation checkpointing unless learn.activation_checkpointing is off: its learner
// checkpoints or splits a micro-batch that does not fit into accumulation chunks.
func (c *Config) activations(batch float64, key string, hfs HFConfigs) MemoryTerm {
	var b float64
	for name, m := range c.Models {
		switch {
		case m.External():
		case m.IsHF():
			if hc, ok := hfs[name]; ok {
				r := 0
				if m.LoRA != nil {
					r = m.LoRA.R
				}
				s := hf.StepOfMode(hc, r, 1, min(c.Rollout.MaxTokens+512, hc.ArchConfig().Context), c.Learn.Checkpointing() != "off")
				b = max(b, float64(s.Total()-s.Weights-s.Optimizer))
			}
		default:
			perToken := float64(m.Layers)*float64(m.Dim)*float64(activationMult+2*m.FFMult) + 2*float64(model.DefaultConfig().Vocab)
			b = max(b, batch*float64(m.Context)*perToken*4)
		}
	}
	return MemoryTerm{What: fmt.Sprintf("activations of a batch of %.0f sequences", batch), Bytes: b, Keys: []string{key}}
}

// Memory estimates what stage (one of MemoryStages) holds at most at once, sizing no HF model.
func (c *Config) Memory(stage string) MemoryEstimate { return c.MemoryOf(stage, nil) }

// MemoryOf is Memory sizing the HF models of hfs.
func (c *Config) MemoryOf(stage string, hfs HFConfigs) MemoryEstimate {
	tasks, group := float64(c.Tasks.PerIteration), float64(c.Rollout.GroupSize)
	var terms []MemoryTerm
	switch stage {
	case "warmup":
		terms = []MemoryTerm{
			c.weights(optimizerCopies, hfs),
			c.activations(float64(c.Warmup.Batch), "warmup.batch", hfs),
			c.episodes("demonstrations", float64(c.Warmup.Demos), 1, "warmup.demos"),
		}
	case "rollout":
		terms = []MemoryTerm{
			c.weights(1, hfs),
			c.episodes("episodes held until written", tasks, group, "tasks.per_iteration", "rollout.group_size"),
			c.kvCache(tasks*group, hfs, "tasks.per_iteration", "rollout.group_size"), // one batch: every episode's turn at once
		}
	case "normalize":
		rows := tasks * group * c.turns()
		terms = []MemoryTerm{{
			What:  fmt.Sprintf("rows: %.0f tasks × %.0f samples × %.0f turns", tasks, group, c.turns()),
			Bytes: rows * (bytesPerRow + 8*float64(len(c.Normalize.Estimators))),
			Keys:  []string{"tasks.per_iteration", "rollout.group_size"},
		}}
	case "learn":
		terms = []MemoryTerm{
			c.weights(optimizerCopies, hfs),
			c.episodes("rows of the iteration", tasks, group, "tasks.per_iteration", "rollout.group_size"),
			c.activations(float64(c.maxMicroBatch()), "learn.micro_batch", hfs),
		}
	case "evaluate":
		terms = []MemoryTerm{
			c.weights(1, hfs),
			c.episodes("evaluation episodes", float64(c.Tasks.EvalSize), float64(c.Evaluate.K), "tasks.eval_size", "evaluate.k"),
			c.kvCache(min(float64(c.Tasks.EvalSize)*float64(c.Evaluate.K), EvalBatchSequences), hfs, "tasks.eval_size", "evaluate.k"),
		}
	}
	terms = slices.DeleteFunc(terms, func(t MemoryTerm) bool { return t.Bytes == 0 })
	slices.SortStableFunc(terms, func(a, b MemoryTerm) int {
		switch {
		case a.Bytes > b.Bytes:
			return -1
		case a.Bytes < b.Bytes:
			return 1
		}
		return 0
	})
	e := MemoryEstimate{Stage: stage, Terms: terms}
	for i := range terms {
		terms[i].Bytes *= gcHeadroom
		e.Bytes += terms[i].Bytes
	}
	return e
}

// EvalBatchSequences is the most episodes the evaluate stage plays at once (it evaluates its
// prompts a chunk at a time), which bounds its attention caches.
const EvalBatchSequences = 1024

// kvCache is what the local models' attention caches take for seqs sequences at once (a local
// model generates the turns of all live episodes as one batch).
func (c *Config) kvCache(seqs float64, hfs HFConfigs, keys ...string) MemoryTerm {
	var b float64
	for name, m := range c.Models {
		switch {
		case m.External():
		case m.IsHF():
			if hc, ok := hfs[name]; ok {
				t := min(c.Rollout.MaxTokens+4096, hc.ArchConfig().Context)
				b = max(b, 2*float64(hc.Layers)*float64(t)*float64(hc.KVHeads*hc.HeadDim)*4*seqs)
			}
		default:
			b = max(b, 2*float64(m.Layers)*float64(m.Context)*float64(m.Dim)*4*seqs)
		}
	}
	return MemoryTerm{What: fmt.Sprintf("attention caches of %.0f sequences", seqs), Bytes: b, Keys: keys}
}

func (c *Config) maxMicroBatch() int {
	n := c.Learn.MicroBatch
	for _, a := range c.Agents {
		n = max(n, a.MicroBatch)
	}
	return n
}

// FitError is a stage whose estimate is over the memory it may use.
type FitError struct {
	Estimate MemoryEstimate
	Limit    float64 // bytes
	LimitBy  string  // what sets the limit: "this machine's memory", "--memory-limit", "GOMEMLIMIT"
}

func (e *FitError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s would need about %s, more than the %s of %s: ", e.Estimate.Stage, Bytes(e.Estimate.Bytes), Bytes(e.Limit), e.LimitBy)
	top := e.Estimate.Terms[0]
	fmt.Fprintf(&sb, "%s take %s; lower %s", top.What, Bytes(top.Bytes), orList(top.Keys))
	if e.LimitBy != "this machine's memory" {
		fmt.Fprintf(&sb, ", or raise %s", e.LimitBy)
	}
	return sb.String()
}

// CheckMemory returns a *FitError for the first of stages whose estimate is over limit bytes
// (set by limitBy), or nil, sizing no HF model.
func (c *Config) CheckMemory(stages []string, limit float64, limitBy string) error {
	return c.CheckMemoryOf(stages, limit, limitBy, nil)
}

// CheckMemoryOf is CheckMemory sizing the HF models of hfs.
func (c *Config) CheckMemoryOf(stages []string, limit float64, limitBy string, hfs HFConfigs) error {
	for _, s := range stages {
		if e := c.MemoryOf(s, hfs); e.Bytes > limit && len(e.Terms) > 0 {
			return &FitError{Estimate: e, Limit: limit, LimitBy: limitBy}
		}
	}
	return nil
}

// Bytes writes n bytes in binary units, e.g. "1.5 GiB".
func Bytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for ; n >= 1024 && i < len(units)-1; i++ {
		n /= 1024
	}
	if i == 0 || n >= 100 {
		return fmt.Sprintf("%.0f %s", math.Round(n), units[i])
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

// orList writes "a", "a or b", "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
