package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"sync"

	"github.com/drmas-dev/drmas/internal/excerpt"
)

// PromptBudget is the largest prompt, in bytes, that any workflow emits.
const PromptBudget = 180

// ResponseBudget is the largest expert response, in bytes, in Demonstrations.
// Policies should be sampled with at most this many response bytes.
const ResponseBudget = 24

// Task is one dataset item.
type Task struct {
	ID         string `json:"id"`
	Question   string `json:"question"`
	Answer     string `json:"answer"`
	DataSource string `json:"data_source"`
}

// TasksDigest identifies a list of tasks (ids, questions, answers and data sources, in order):
// what a rollout or an evaluation ran on, whichever file or generator gave them.
func TasksDigest(tasks []Task) string {
	h := sha256.New()
	for _, t := range tasks {
		for _, f := range []string{t.ID, t.Question, t.Answer, t.DataSource} {
			fmt.Fprintf(h, "%d:%s", len(f), f)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Turn is one agent invocation requested by an episode.
type Turn struct {
	Agent  string
	Step   int // environment step / loop index, from 0
	Prompt string
}

// Episode is the state machine of one trajectory. Not safe for concurrent use.
type Episode interface {
	// Next returns the next agent to act and its prompt, or false when the
	// episode is over. Calling it again before Act returns the same turn.
	Next() (Turn, bool)
	// Act feeds the response of the agent returned by Next. valid reports
	// whether the response parsed as a legal action. On a finished episode
	// it does nothing and returns false.
	Act(response string) (valid bool)
	// Reward is the episode's outcome reward (1 success, 0 failure); 0 until
	// the episode is over.
	Reward() float64
}

// Demo is one expert turn for supervised warm-up.
type Demo struct {
	Agent, Prompt, Response string
	Step                    int
}

// Split selects train or eval items.
type Split int

// The two splits; see SplitOf for how an item's split is decided.
const (
	Train Split = iota
	Eval
)

func (s Split) String() string {
	switch s {
	case Train:
		return "train"
	case Eval:
		return "eval"
	}
	return fmt.Sprintf("Split(%d)", int(s))
}

// ParseSplit parses "train" or "eval".
func ParseSplit(s string) (Split, error) {
	switch s {
	case "train":
		return Train, nil
	case "eval":
		return Eval, nil
	}
	return 0, fmt.Errorf("workflows: unknown split %q (want train or eval)", s)
}

const evalModulus = 10 // one item in evalModulus is eval

// SplitOf is the split an item belongs to: a fixed function of a key (the
// workflow name and the question text), FNV-1a 64 modulo 10, so about 10% of
// items are eval. Generators only emit items whose SplitOf equals the
// requested split, which makes train ∩ eval = ∅ by construction.
func SplitOf(workflow, question string) Split {
	h := fnv.New64a()
	h.Write([]byte(workflow))
	h.Write([]byte{0})
	h.Write([]byte(question))
	if h.Sum64()%evalModulus == 0 {
		return Eval
	}
	return Train
}

// Workflow is a multi-agent workflow. Safe for concurrent use.
type Workflow interface {
	Name() string
	// Agents is the fixed agent order; rows of one step are sorted by it.
	Agents() []string
	// InvalidPenalty is subtracted from a row's score when its action is invalid.
	InvalidPenalty() float64
	NewEpisode(t Task) Episode
	// Demonstrations plays the expert through an episode of t. With
	// probability noise per turn the expert makes a plausible mistake and
	// the episode continues consistently with it.
	Demonstrations(t Task, rng *rand.Rand, noise float64) []Demo
	// Tasks generates n tasks of the split, deterministically from seed.
	Tasks(seed uint64, split Split, n int) []Task
}

// RowScore is a row's score: the episode reward minus the invalid-action
// penalty when the row's action was invalid.
func RowScore(reward float64, valid bool, penalty float64) float64 {
	if valid {
		return reward
	}
	return reward - penalty
}

// Options are the workflow settings. Start from DefaultOptions and override;
// the zero value is not valid. JSON names match the config keys.
type Options struct {
	// MaxLoop (math) is the number of solver/verifier loops. Default 2.
	MaxLoop int `json:"max_loop"`
	// MaxSteps (search) is the number of environment steps; the router may
	// ask for a search in all but the last one. Default 4.
	MaxSteps int `json:"max_steps"`
	// TopK (search) is the number of passages the retriever returns per
	// query. Default 1 (1..2 keep prompts within PromptBudget).
	TopK int `json:"top_k"`
	// HardFrac is the share of generated tasks that are hard
	// (math_hard / search_2hop), in [0,1]. Default 0.5.
	HardFrac float64 `json:"hard_frac"`
	// CorpusSeed (search) seeds the synthetic fact corpus. Default 1.
	CorpusSeed uint64 `json:"corpus_seed"`
	// CorpusPeople (search) is the number of people in the corpus, 13..2000.
	// Default 200. (With fewer, the word "is" of the 24 city facts is in more
	// than half of the documents and gets a negative BM25 weight, so the query
	// "q <city> is" ranks a resident's "lives in <city>" above the city fact.)
	CorpusPeople int `json:"corpus_people"`
	// Retriever (search): a retrieval server instead of the synthetic corpus (searchremote.go).
	Retriever RetrieverOptions `json:"retriever,omitempty"`
	// Rewards are per-agent reward designs (rewards.go); the zero value scores every row by
	// the episode outcome.
	Rewards
	// VerifierCheck (math, the compact format) is how the verifier shows its check:
	// VerifierCheckAnswer ("" too) its answer and a verdict ("231 yes"), VerifierCheckDigits its
	// answer and a mark per digit ("231 yyn", ParseVerifierMarks), VerifierCheckRecompute its
	// answer alone ("231"), which approves exactly a candidate equal to it (ParseVerifierWork).
	VerifierCheck string `json:"verifier_check,omitempty"`
	// PaperAgents are the agents that get prompts and parse responses in the paper format
	// (paper.go), the format for Hugging Face models; the others keep the compact format of the
	// built-in model. Empty: every agent is compact.
	PaperAgents []string `json:"paper_agents,omitempty"`
	// Program configures the "program" workflow (program.go); unset for the others.
	Program ProgramOptions `json:"program,omitzero"`
}

// Verifier check formats (Options.VerifierCheck).
const (
	VerifierCheckAnswer = "answer"
	VerifierCheckDigits = "digits"
	// VerifierCheckRecompute: the verifier recomputes the answer and the workflow compares.
	VerifierCheckRecompute = "recompute"
)

// minCorpusPeople is the smallest corpus whose expert queries rank their fact
// first: the 24 "<city> is in <country>" facts must be fewer than half of the
// 24 + 2·people documents, so that "is" has a positive IDF.
const minCorpusPeople = 13

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{MaxLoop: 2, MaxSteps: 4, TopK: 1, HardFrac: 0.5, CorpusSeed: 1, CorpusPeople: 200}
}

// Validate reports every setting out of range.
func (o Options) Validate() error {
	if errs := o.Problems(); len(errs) > 0 {
		return fmt.Errorf("workflows: invalid options: %w", errors.Join(errs...))
	}
	return nil
}

// Problems lists every setting out of range, one error each, as "max_loop: 9, want 1..8"
// (configs prefixes the keys with "workflow.").
func (o Options) Problems() []error {
	var errs []error
	if o.MaxLoop < 1 || o.MaxLoop > 8 {
		errs = append(errs, fmt.Errorf("max_loop: %d, want 1..8", o.MaxLoop))
	}
	if o.MaxSteps < 1 || o.MaxSteps > 8 {
		errs = append(errs, fmt.Errorf("max_steps: %d, want 1..8", o.MaxSteps))
	}
	if o.TopK < 1 || o.TopK > 2 {
		errs = append(errs, fmt.Errorf("top_k: %d, want 1..2 to fit the prompt budget", o.TopK))
	}
	if !(o.HardFrac >= 0 && o.HardFrac <= 1) {
		errs = append(errs, fmt.Errorf("hard_frac: %v, want 0..1", o.HardFrac))
	}
	if o.CorpusPeople < minCorpusPeople || o.CorpusPeople > 2000 {
		errs = append(errs, fmt.Errorf("corpus_people: %d, want %d..2000", o.CorpusPeople, minCorpusPeople))
	}
	switch o.VerifierCheck {
	case "", VerifierCheckAnswer, VerifierCheckDigits, VerifierCheckRecompute:
	default:
		errs = append(errs, fmt.Errorf("verifier_check: %s, want %s, %s or %s", excerpt.Quote(o.VerifierCheck), VerifierCheckAnswer, VerifierCheckDigits, VerifierCheckRecompute))
	}
	errs = append(errs, o.Retriever.problems()...)
	errs = append(errs, o.paperProblems()...)
	errs = append(errs, o.Program.problems()...)
	return append(errs, o.Rewards.problems()...)
}

// Factory builds a workflow from validated options.
type Factory func(Options) (Workflow, error)

var (
	regMu    sync.RWMutex
	registry = map[string]Factory{}
)

// Register makes a workflow available by name. It panics if the name is
// empty, already registered, or f is nil (like database/sql.Register); call
// it from init.
func Register(name string, f Factory) {
	regMu.Lock()
	defer regMu.Unlock()
	if name == "" || f == nil {
		panic("workflows: Register with empty name or nil factory")
	}
	if _, dup := registry[name]; dup {
		panic("workflows: Register called twice for " + name)
	}
	registry[name] = f
}

// New validates opts and builds the named workflow.
func New(name string, opts Options) (Workflow, error) {
	regMu.RLock()
	f, ok := registry[name]
	regMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("workflows: unknown workflow %q (have %v)", name, Names())
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return f(opts)
}

// Names lists the registered workflows, sorted.
func Names() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// newRand returns a PCG generator for (seed, stream).
func newRand(seed uint64, stream string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(stream))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// drawItems draws n items of the split, preferring items not drawn before in
// this call; when the split's item space is exhausted, items repeat. gen(rng,
// hard) returns a candidate's key (its question) and the item.
func drawItems[T any](rng *rand.Rand, workflow string, split Split, n int, hardFrac float64,
	gen func(rng *rand.Rand, hard bool) (string, T)) []T {
	out := make([]T, 0, n)
	seen := map[string]bool{}
	exhausted := map[bool]bool{} // no unseen item found lately for this difficulty
	draw := func(hard bool) (T, bool) {
		var (
			last  T
			key   string
			found bool
		)
		for try := 0; try < 20000; try++ {
			k, item := gen(rng, hard)
			if SplitOf(workflow, k) != split {
				continue
			}
			last, key, found = item, k, true
			if exhausted[hard] || !seen[k] {
				seen[k] = true
				return item, true
			}
		}
		if found {
			exhausted[hard] = true // the space is (nearly) used up: repeat from now on
			seen[key] = true
		}
		return last, found
	}
	for len(out) < n {
		hard := rng.Float64() < hardFrac
		item, ok := draw(hard)
		if !ok {
			if item, ok = draw(!hard); !ok {
				panic(fmt.Sprintf("workflows: %s: no %s items", workflow, split))
			}
		}
		out = append(out, item)
	}
	return out
}
