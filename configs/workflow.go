package configs

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/workflows"
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
	o := workflows.Options{MaxLoop: w.MaxLoop, MaxSteps: w.MaxSteps, TopK: w.TopK, HardFrac: w.HardFrac,
		CorpusSeed: w.CorpusSeed, CorpusPeople: w.CorpusPeople, Retriever: workflows.RetrieverOptions{
			URL: w.RetrieverURL, Timeout: w.RetrieverTimeout, Retries: w.RetrieverRetries, PassageBytes: w.PassageBytes},
		Rewards: workflows.Rewards{VerifierReward: w.VerifierReward, VerdictShare: w.VerdictShare,
			FormatPenalty: w.FormatPenalty, StepCost: w.StepCost}}
	var errs []error
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
