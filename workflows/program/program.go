// Package program is the "program" workflow: the user's own agent program, run once per
// episode against drmas's OpenAI-compatible gateway (package gateway), whose agents are the
// config's. The workflow itself only names the agents, generates tasks and grades answers;
// the rollout stage runs the episodes (gateway.Run), since they are processes, not a text
// state machine. Import it for its side effect: it registers "program".
package program

import (
	"math/rand/v2"

	"github.com/drmas-dev/drmas/workflows"
	"github.com/drmas-dev/drmas/workflows/mathgrade"
	"github.com/drmas-dev/drmas/workflows/searchgrade"
)

// Name is the workflow's registered name.
const Name = "program"

func init() {
	workflows.Register(Name, func(o workflows.Options) (workflows.Workflow, error) { return New(o) })
}

// Workflow is an agent program's workflow. Safe for concurrent use.
type Workflow struct {
	opts workflows.ProgramOptions
	// tasks generates tasks when tasks.source is generator: the math workflow's, or the search
	// workflow's with reward search.
	tasks workflows.Workflow
}

// New builds the workflow from validated options.
func New(o workflows.Options) (*Workflow, error) {
	w := &Workflow{opts: o.Program.WithDefaults()}
	gen := workflows.RewardMath
	if w.opts.Reward == workflows.RewardSearch {
		gen = workflows.RewardSearch
	}
	o.Program = workflows.ProgramOptions{}
	o.PaperAgents = nil
	var err error
	if w.tasks, err = workflows.New(gen, o); err != nil {
		return nil, err
	}
	return w, nil
}

// Options are the program settings with their defaults filled.
func (w *Workflow) Options() workflows.ProgramOptions { return w.opts }

// Name implements workflows.Workflow.
func (w *Workflow) Name() string { return Name }

// Agents implements workflows.Workflow: the config's agents, sorted.
func (w *Workflow) Agents() []string { return w.opts.Agents }

// InvalidPenalty implements workflows.Workflow: 0, the program reports its own per call.
func (w *Workflow) InvalidPenalty() float64 { return 0 }

// NewEpisode implements workflows.Workflow with an episode that is over at once: a program's
// episodes are processes, played by gateway.Run, not by a workflow state machine.
func (w *Workflow) NewEpisode(workflows.Task) workflows.Episode { return over{} }

// Demonstrations implements workflows.Workflow: a program has none.
func (w *Workflow) Demonstrations(workflows.Task, *rand.Rand, float64) []workflows.Demo { return nil }

// Tasks implements workflows.Workflow with the math workflow's generator (the search
// workflow's with reward search).
func (w *Workflow) Tasks(seed uint64, split workflows.Split, n int) []workflows.Task {
	return w.tasks.Tasks(seed, split, n)
}

// Grade grades an episode's final answer (the last call's response) by the configured reward
// (math or search); ok is false with reward program, where the program reports it.
func (w *Workflow) Grade(t workflows.Task, final string) (reward float64, why string, ok bool) {
	switch w.opts.Reward {
	case workflows.RewardMath:
		r := mathgrade.Grade(final, []string{t.Answer})
		return r.Reward, r.Reason, true
	case workflows.RewardSearch:
		golden, err := searchgrade.ParseGolden(t.Answer)
		if err != nil {
			golden = []string{t.Answer}
		}
		r := searchgrade.Grade(final, golden)
		return r.Reward, r.Reason, true
	}
	return 0, "", false
}

type over struct{}

func (over) Next() (workflows.Turn, bool) { return workflows.Turn{}, false }
func (over) Act(string) bool              { return false }
func (over) Reward() float64              { return 0 }
