// Package actors holds the actor backends that generate agents' responses: an interface, and
// the in-process backend running the built-in policy or a Hugging Face model. Agents mapped to the same model id share
// one backend, and all their pending requests of a workflow step go to it as one batch.
//
// Token ids are the unit of exchange: prompts are encoded once here (PromptIDs) and the ids a
// backend returns are stored as they come, never re-tokenised.
// Each model has a tokenizer (TokenizerOf): the built-in policy's bytes (Bytes), or a Hugging
// Face model's BPE and chat template (Chat).
package actors

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/drmas-dev/drmas/model"
)

// Request is one generation: an agent's prompt ids and the seed of its sampling RNG.
type Request struct {
	Agent  string
	Prompt []int32
	Seed   uint64
}

// Response is a generated continuation: token ids (including a final EOS if sampled), the
// behaviour-policy log-prob of each, and why generation stopped ("stop" or "length").
type Response struct {
	Tokens       []int32
	LogProbs     []float32
	FinishReason string
	// ReEncoded marks Tokens that were re-encoded from the response text because the backend
	// returned no token ids (an openai backend in chat mode). LogProbs is then nil: such rows
	// cannot be trained with PPO (the learner refuses them).
	ReEncoded bool
}

// Sampling configures generation.
type Sampling struct {
	Temperature float64 // 0 = greedy
	TopP        float64 // 1 = off
	TopK        int     // 0 = off
	MaxTokens   int
}

// Backend generates responses for one model.
type Backend interface {
	// Model is the model id recorded in trajectory rows.
	Model() string
	// Version is the checkpoint step the backend serves (the rows' policy_version).
	Version() int64
	// Generate returns one response per request, in order. Results do not depend on how
	// requests are batched: each request's sampling is seeded by its Seed alone.
	Generate(ctx context.Context, reqs []Request, s Sampling) ([]Response, error)
}

// Readier is implemented by backends that may have to wait before they generate: an openai
// backend waits for `drmas serve` to load the checkpoint step the stage records. Generate
// waits by itself; a stage that calls Ready first keeps the wait out of its progress bar and
// its throughput.
type Readier interface {
	Ready(ctx context.Context) error
}

// Ready calls Ready on every distinct backend of backends (keyed by agent) that implements
// Readier, in model-id order, and returns the first error.
func Ready(ctx context.Context, backends map[string]Backend) error {
	byModel := map[string]Readier{}
	var ids []string
	for _, b := range backends {
		if r, ok := b.(Readier); ok {
			if _, seen := byModel[b.Model()]; !seen {
				ids = append(ids, b.Model())
			}
			byModel[b.Model()] = r
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		if err := byModel[id].Ready(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Releaser is implemented by backends that keep state across Generate calls (an in-process
// model's cached prompt prefixes) which the caller can drop once the episodes that used it
// have ended.
type Releaser interface {
	Release()
}

// Release calls Release on every backend of backends that implements Releaser.
func Release(backends map[string]Backend) {
	for _, b := range backends {
		if r, ok := b.(Releaser); ok {
			r.Release()
		}
	}
}

// Describer is implemented by backends that can say what serves them, for the model → agents
// mapping printed at the start of a stage ("local, step 3", "openai http://…, concurrency 8").
type Describer interface {
	Describe() string
}

// Describe returns b's description, or its type when it has none.
func Describe(b Backend) string {
	if d, ok := b.(Describer); ok {
		return d.Describe()
	}
	return fmt.Sprintf("%T", b)
}

// PromptIDs is the token sequence an agent sees: BOS, the agent's name, SEP, the prompt text,
// SEP. Naming the agent lets agents that share a model tell their roles apart.
func PromptIDs(agent, prompt string) []int32 {
	ids := make([]int32, 0, len(agent)+len(prompt)+3)
	ids = append(ids, model.BOS)
	ids = append(ids, model.Encode(agent)...)
	ids = append(ids, model.SEP)
	ids = append(ids, model.Encode(prompt)...)
	return append(ids, model.SEP)
}

// TargetIDs is the token sequence of an expert response (for supervised warm-up): its bytes
// and EOS.
func TargetIDs(response string) []int32 {
	return append(model.Encode(response), model.EOS)
}

// ResponseText decodes generated ids to the text a workflow parses: special tokens dropped.
func ResponseText(tokens []int32) string { return model.DecodeText(tokens) }

// Local serves a model in process: the built-in policy (NewLocal) or a Hugging Face model
// with its own tokenizer (NewLocalHF).
type Local struct {
	id      string
	version int64
	p       model.Policy
	tok     Tokenizer
	context int     // the longest sequence the model reads
	stop    []int32 // tokens that end a turn besides the model's own EOS
	raise   string  // what to change when a prompt does not fit the context
	// prefixes keeps the KV blocks of the prompts this backend has prefilled, so that a later
	// turn with the same token prefix skips their prefill; the backend serves one checkpoint,
	// so its weights never change under the cache.
	prefixes *model.PrefixCache
}

var (
	_ Backend   = (*Local)(nil)
	_ Tokenized = (*Local)(nil)
)

// NewLocal serves the built-in policy m as model id at checkpoint step version.
func NewLocal(id string, version int64, m *model.Model) *Local {
	l := &Local{id: id, version: version, p: m, tok: Bytes{}, raise: fmt.Sprintf("raise models.%s.context", id),
		prefixes: model.NewPrefixCache(model.DefaultPrefixCacheBytes)}
	if m != nil { // a backend only asked for its tokenizer (tests) has no model
		l.context = m.Config().Context
	}
	return l
}

// NewLocalHF serves the Hugging Face model p (an LLM, or one with an adapter) as model id at
// checkpoint step version, with its tokenizer: a prompt must be shorter than context tokens; a
// turn ends at one of stop (the tokenizer's end-of-turn token, Qwen's <|im_end|>, and the
// config's eos_token_id) or at max_tokens. dir names the model's folder in errors.
func NewLocalHF(id string, version int64, p model.Policy, context int, tok Tokenizer, stop []int32, dir string) *Local {
	return &Local{id: id, version: version, p: p, tok: tok, context: context, stop: stop, prefixes: model.NewPrefixCache(model.DefaultPrefixCacheBytes),
		raise: fmt.Sprintf("shorten the workflow's prompts or use a model with a longer context (max_position_embeddings in %s/config.json)", dir)}
}

// Model implements Backend.
func (l *Local) Model() string { return l.id }

// Version implements Backend.
func (l *Local) Version() int64 { return l.version }

// Describe implements Describer.
func (l *Local) Describe() string { return fmt.Sprintf("local, step %d", l.version) }

// Tokenizer implements Tokenized.
func (l *Local) Tokenizer() Tokenizer { return l.tok }

// TopP32 converts a top_p for model.SampleOptions: a positive one below float32's range keeps
// the most likely token only, as it asks, instead of rounding to 0, which model.Sample reads
// as no nucleus at all. drmas serve converts its requests' top_p the same way.
func TopP32(p float64) float32 {
	if f := float32(p); f > 0 || !(p > 0) {
		return f
	}
	return math.SmallestNonzeroFloat32
}

// Policy returns the served built-in model, or nil when it serves a Hugging Face model.
func (l *Local) Policy() *model.Model {
	m, _ := l.p.(*model.Model)
	return m
}

// Release implements Releaser: it drops the cached prompt prefixes.
func (l *Local) Release() { l.prefixes.Release() }

// PrefixStats are the counters of the backend's prefix cache.
func (l *Local) PrefixStats() model.PrefixStats { return l.prefixes.Stats() }

// Generate implements Backend with one batched, KV-cached sampling call.
func (l *Local) Generate(ctx context.Context, reqs []Request, s Sampling) ([]Response, error) {
	sr := make([]model.SampleRequest, len(reqs))
	for i, r := range reqs {
		if len(r.Prompt) >= l.context {
			return nil, fmt.Errorf("model %s: agent %s prompt of %d tokens does not fit the context of %d: %s",
				l.id, r.Agent, len(r.Prompt), l.context, l.raise)
		}
		sr[i] = model.SampleRequest{Prompt: r.Prompt, Seed: r.Seed}
	}
	opts := model.SampleOptions{Temperature: float32(s.Temperature), TopP: TopP32(s.TopP), TopK: s.TopK, MaxTokens: s.MaxTokens, Stop: l.stop}
	var res []model.SampleResult
	var err error
	if ps, ok := l.p.(model.PrefixSampler); ok {
		res, err = ps.SampleCached(ctx, sr, opts, l.prefixes)
	} else {
		res, err = l.p.Sample(ctx, sr, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("model %s: sample: %w", l.id, err)
	}
	out := make([]Response, len(res))
	for i, r := range res {
		out[i] = Response{Tokens: r.Tokens, LogProbs: r.LogProbs, FinishReason: r.FinishReason}
	}
	return out, nil
}
