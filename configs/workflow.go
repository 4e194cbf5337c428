package configs

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/workflows"
	"github.com/drmas-dev/drmas/workflows/program"
)

// NewWorkflow builds the configured workflow from workflow.* as given (default.yaml gives
// every key, so a 0 is a value, not "unset") and checks that the config maps exactly its
// agents to models: an agent it runs without an agents entry would have no model, and an agent
// it never runs (a typo, or a leftover of another workflow) would be trained on nothing.
// Validate reports its errors with the others, by key, so every command refuses such a config
// before any work. Agents whose model is a Hugging Face model (models.<id>.hf) get the paper's
// prompt format (workflows.Options.PaperAgents).
func (c *Config) NewWorkflow() (workflows.Workflow, error) {
	w := c.Workflow
	var errs []error
	o := workflows.Options{MaxLoop: w.MaxLoop, MaxSteps: w.MaxSteps, TopK: w.TopK, HardFrac: w.HardFrac,
		CorpusSeed: w.CorpusSeed, CorpusPeople: w.CorpusPeople, VerifierCheck: w.VerifierCheck, Retriever: workflows.RetrieverOptions{
			URL: w.RetrieverURL, Timeout: w.RetrieverTimeout, Retries: w.RetrieverRetries, PassageBytes: w.PassageBytes},
		Rewards: workflows.Rewards{VerifierReward: w.VerifierReward, VerdictShare: w.VerdictShare,
			FormatPenalty: w.FormatPenalty, StepCost: w.StepCost, RouterReward: w.RouterReward, SearcherReward: w.SearcherReward,
			CriticReward: w.CriticReward},
		Program: workflows.ProgramOptions{Command: w.Command, Dir: c.Dir, Timeout: w.Timeout, Concurrency: w.Concurrency,
			MaxCalls: w.MaxCalls, FailureReward: w.FailureReward, RevealAnswer: w.RevealAnswer, Reward: w.Reward}}
	if w.Name == program.Name {
		o.Program.Agents = c.AgentNames()
		errs = append(errs, c.programProblems()...)
	} else if !o.Program.IsZero() {
		errs = append(errs, fmt.Errorf("workflow.command, timeout, concurrency, max_calls, failure_reward, reveal_answer and reward are for workflow.name: program, not %s", excerpt.Quote(w.Name)))
	}
	if !slices.Contains(workflows.Names(), w.Name) {
		errs = append(errs, fmt.Errorf("workflow.name: %s, want one of %s", excerpt.Quote(w.Name), strings.Join(workflows.Names(), ", ")))
	}
	for _, p := range o.Problems() {
		errs = append(errs, fmt.Errorf("workflow.%w", p))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	wf, err := workflows.New(w.Name, o)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", w.Name, err)
	}
	var missing []string
	for _, a := range wf.Agents() {
		if _, ok := c.Agents[a]; !ok {
			missing = append(missing, a)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("workflow %s needs agents %s, but the config has no agents.%s entry (it has %s)",
			wf.Name(), strings.Join(wf.Agents(), ", "), strings.Join(missing, ", agents."), strings.Join(c.AgentNames(), ", "))
	}
	var extra []string
	for _, a := range c.AgentNames() {
		if !slices.Contains(wf.Agents(), a) {
			extra = append(extra, a)
		}
	}
	if len(extra) > 0 {
		return nil, fmt.Errorf("agents.%s: workflow %s has no such agent (its agents: %s)",
			strings.Join(extra, ", agents."), wf.Name(), strings.Join(wf.Agents(), ", "))
	}
	if w.Name == program.Name { // the program writes its own prompts
		return wf, nil
	}
	// Agents served by a Hugging Face model get the paper's prompt format, the others the
	// built-in model's compact one; the agents are known to match the workflow's by now.
	for _, a := range c.AgentNames() {
		if c.Models[c.Agents[a].Model].IsHF() {
			o.PaperAgents = append(o.PaperAgents, a)
		}
	}
	if len(o.PaperAgents) > 0 {
		if wf, err = workflows.New(w.Name, o); err != nil {
			return nil, fmt.Errorf("workflow %s: %w", w.Name, err)
		}
	}
	return wf, nil
}

// programProblems are the program workflow's needs beyond its own keys: a command, and no
// stage that plays the workflow's episodes as a state machine (warm-up demonstrations,
// evaluation).
func (c *Config) programProblems() []error {
	var errs []error
	if len(c.Workflow.Command) == 0 {
		errs = append(errs, errors.New("workflow.command: empty, want the agent program's argv, e.g. [node, team.mjs]"))
	}
	if c.Warmup.Steps != 0 {
		errs = append(errs, fmt.Errorf("warmup.steps: %d, want 0 with workflow program (a program has no demonstrations)", c.Warmup.Steps))
	}
	if c.Evaluate.Every != 0 && c.Tasks.EvalSize != 0 {
		errs = append(errs, fmt.Errorf("evaluate.every: %d, want 0 with workflow program (evaluation plays the built-in workflows only)", c.Evaluate.Every))
	}
	return errs
}
