package workflows

import (
	"fmt"
	"time"

	"github.com/drmas-dev/drmas/internal/excerpt"
)

// Program rewards (ProgramOptions.Reward): who grades an agent program's episode.
const (
	// RewardProgram: the program prints its reward as the last line of its stdout.
	RewardProgram = "program"
	// RewardMath: drmas grades the last call's response with the math grader.
	RewardMath = "math"
	// RewardSearch: drmas grades the last call's response with the search grader.
	RewardSearch = "search"
)

// Program defaults, used where a ProgramOptions field is zero.
const (
	DefaultProgramTimeout     = 5 * time.Minute
	DefaultProgramConcurrency = 4
	DefaultProgramMaxCalls    = 32
)

// ProgramOptions configure the "program" workflow (workflows/program): an agent program the
// rollout stage runs once per episode against the gateway. The zero value is unset (every other
// workflow); JSON names match the config keys.
type ProgramOptions struct {
	// Command is the program's argv, run in Dir.
	Command []string `json:"command,omitempty"`
	// Dir is the folder the program runs in (the config file's).
	Dir string `json:"-"`
	// Timeout bounds an episode; 0: DefaultProgramTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Concurrency is the number of episodes run at once; 0: DefaultProgramConcurrency.
	Concurrency int `json:"concurrency,omitempty"`
	// MaxCalls bounds an episode's model calls; 0: DefaultProgramMaxCalls.
	MaxCalls int `json:"max_calls,omitempty"`
	// FailureReward, when set, is the reward of a failed episode; nil drops it (counted).
	FailureReward *float64 `json:"failure_reward,omitempty"`
	// RevealAnswer puts the task's answer in DRMAS_TASK.
	RevealAnswer bool `json:"reveal_answer,omitempty"`
	// Reward is RewardProgram (default, ""), RewardMath or RewardSearch.
	Reward string `json:"reward,omitempty"`
	// Agents are the agents the program may call (the config's agents), sorted.
	Agents []string `json:"agents,omitempty"`
}

// IsZero reports whether no program setting is given.
func (p ProgramOptions) IsZero() bool {
	return len(p.Command) == 0 && p.Timeout == 0 && p.Concurrency == 0 && p.MaxCalls == 0 &&
		p.FailureReward == nil && !p.RevealAnswer && p.Reward == ""
}

// WithDefaults fills the zero settings with their defaults.
func (p ProgramOptions) WithDefaults() ProgramOptions {
	if p.Timeout == 0 {
		p.Timeout = DefaultProgramTimeout
	}
	if p.Concurrency == 0 {
		p.Concurrency = DefaultProgramConcurrency
	}
	if p.MaxCalls == 0 {
		p.MaxCalls = DefaultProgramMaxCalls
	}
	if p.Reward == "" {
		p.Reward = RewardProgram
	}
	return p
}

// problems lists the settings out of range, by key, as Options.Problems does.
func (p ProgramOptions) problems() []error {
	var errs []error
	if p.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout: %v, want > 0 (0: %v)", p.Timeout, DefaultProgramTimeout))
	}
	if p.Concurrency < 0 || p.Concurrency > 256 {
		errs = append(errs, fmt.Errorf("concurrency: %d, want 1..256 (0: %d)", p.Concurrency, DefaultProgramConcurrency))
	}
	if p.MaxCalls < 0 || p.MaxCalls > 4096 {
		errs = append(errs, fmt.Errorf("max_calls: %d, want 1..4096 (0: %d)", p.MaxCalls, DefaultProgramMaxCalls))
	}
	switch p.Reward {
	case "", RewardProgram, RewardMath, RewardSearch:
	default:
		errs = append(errs, fmt.Errorf("reward: %s, want program, math or search", excerpt.Quote(p.Reward)))
	}
	for i, a := range p.Command {
		if a == "" && i == 0 {
			errs = append(errs, fmt.Errorf("command: the program name (its first element) is empty"))
		}
	}
	return errs
}
