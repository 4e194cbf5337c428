package workflows

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// The math_critic workflow's name and the agents it adds to math's.
const (
	MathCriticName = "math_critic"
	AgentCritic    = "critic"
	AgentRefiner   = "refiner"
)

// maxCriticQuestion bounds the question bytes in a math_critic prompt so that the longest one,
// the refiner's ("refiner\nQ …\nans …\ncrit …\n": 22 bytes of labels, a shown answer of up to
// maxShownBoxed and up to 9 marks), stays within PromptBudget.
const maxCriticQuestion = PromptBudget - 22 - maxShownBoxed - 9

func init() {
	Register(MathCriticName, func(o Options) (Workflow, error) { return NewMathCritic(o) })
}

// MathCritic is the Solver → Critic → Refiner → Verifier workflow on math's tasks: a team with
// a third agent whose job, and so whose reward under workflow.critic_reward: verdict, differs
// from the others'.
//
// Loop l = 0..max_loop-1 (Turn.Step = l): in loop 0 the solver answers; in every loop the critic
// judges the current answer, the refiner revises it given the critique, and, except in the last
// loop, the verifier judges the refined answer. "yes" (approve) ends the episode; a reject or an
// invalid verdict starts loop l+1 on the refined answer. The refiner's last answer is final.
// Max turns: 3·max_loop.
//
// Reward: 1 if the final answer equals the task's answer, graded as math grades the solver's.
// An invalid solver or refiner action is no answer ("?" in later prompts), graded incorrect.
//
// Prompts (every line ends in "\n"; the question is cut to maxCriticQuestion bytes):
//
//	solver:    "solver\nQ 74+58\n"
//	critic:    "critic\nQ 74+58\nans 221\n"            ("ans ?" after an invalid answer)
//	refiner:   "refiner\nQ 74+58\nans 221\ncrit yny\n"
//	verifier:  "verifier\nQ 74+58\nans 231\n"
//
// Responses: solver and refiner "ans 231" (ParseSolver; a \boxed answer as in math); critic its
// own answer, "231" (ParseVerifierWork), which approves exactly a candidate equal to it as an
// integer, or a bare "yes"/"no" (tasks whose answer is no digit string); verifier in the format
// of Options.VerifierCheck, as in math. The critique the refiner sees is "yes" when the critic
// approved, else one mark per digit of the critic's answer, "y" where the candidate's digit
// agrees and "n" where it does not (all "n" when their lengths differ: digitMarks), or "no" for a
// bare reject and "?" for an invalid critic: the workflow points at the digits the critic
// disputes, a comparison the built-in model does not learn itself (docs/testbed.md).
//
// Rewards (rewards.go): every row scores the outcome unless Options.Rewards says otherwise;
// CriticReward "verdict" scores a critic row by whether its verdict was right (approve a correct
// candidate, reject a wrong one), and VerifierReward "verdict" a verifier row likewise.
//
// Tasks are math's (the same generator, split and task ids), so held-out figures compare with
// math's. Only the compact format: Options.PaperAgents is refused.
type MathCritic struct{ math *Math }

// NewMathCritic builds the math_critic workflow.
func NewMathCritic(o Options) (*MathCritic, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	w := &MathCritic{math: &Math{opts: o}}
	if err := o.Rewards.checkAgents(w.Name(), w.Agents()); err != nil {
		return nil, err
	}
	if len(o.PaperAgents) > 0 {
		return nil, fmt.Errorf("paper_agents: workflow %s has the compact prompt format only, so its agents need built-in models (paper format asked for %s)",
			w.Name(), strings.Join(o.PaperAgents, ", "))
	}
	return w, nil
}

func (w *MathCritic) Name() string { return MathCriticName }
func (w *MathCritic) Agents() []string {
	return []string{AgentSolver, AgentCritic, AgentRefiner, AgentVerifier}
}
func (w *MathCritic) InvalidPenalty() float64 { return MathInvalidPenalty }

// Tasks are the math workflow's tasks (Math.Tasks).
func (w *MathCritic) Tasks(seed uint64, split Split, n int) []Task {
	return w.math.Tasks(seed, split, n)
}

// NewEpisode starts an episode.
func (w *MathCritic) NewEpisode(t Task) Episode {
	return withRewards(w.newEpisode(t), w.math.opts.Rewards, w.InvalidPenalty(), t)
}

func (w *MathCritic) newEpisode(t Task) *criticEpisode {
	m := w.math.newEpisode(t)
	m.question = promptText(t.Question, maxCriticQuestion)
	return &criticEpisode{m: m}
}

type criticPhase int

const (
	phaseSolver criticPhase = iota
	phaseCritic
	phaseRefiner
	phaseVerifier
)

// criticEpisode drives a math episode's state (the question, the current answer, its grading,
// the verifier's format and verdicts) through the four agents' turns.
type criticEpisode struct {
	m        *mathEpisode
	phase    criticPhase
	critique string    // the refiner's "crit" line
	critics  []Verdict // the critic's verdicts, in order
	right    bool      // the last turn was a verdict, and it was right
}

func (e *criticEpisode) Next() (Turn, bool) {
	m := e.m
	if m.done {
		return Turn{}, false
	}
	q := "Q " + m.question + "\n"
	switch e.phase {
	case phaseSolver:
		return Turn{AgentSolver, m.loop, "solver\n" + q}, true
	case phaseCritic:
		return Turn{AgentCritic, m.loop, "critic\n" + q + "ans " + m.shown() + "\n"}, true
	case phaseRefiner:
		return Turn{AgentRefiner, m.loop, "refiner\n" + q + "ans " + m.shown() + "\ncrit " + e.critique + "\n"}, true
	}
	return Turn{AgentVerifier, m.loop, "verifier\n" + q + "ans " + m.shown() + "\n"}, true
}

func (e *criticEpisode) Act(resp string) bool {
	m := e.m
	if m.done {
		return false
	}
	e.right = false
	switch e.phase {
	case phaseSolver:
		e.phase = phaseCritic
		return m.parseSolver(resp)
	case phaseCritic:
		return e.actCritic(resp)
	case phaseRefiner:
		valid := m.parseSolver(resp)
		if m.loop == m.maxLoop-1 {
			m.finish()
		} else {
			e.phase = phaseVerifier
		}
		return valid
	}
	approve, ok := m.parseVerdict(resp)
	e.judge(&m.verdicts, approve, ok)
	if approve { // invalid → reject
		m.finish()
	} else {
		m.loop++
		e.phase = phaseCritic
	}
	return ok
}

// actCritic reads the critic's verdict on the current answer and writes the critique.
func (e *criticEpisode) actCritic(resp string) bool {
	m := e.m
	work, isWork, approve, ok := ParseVerifierWork(resp)
	switch {
	case !ok:
		e.critique = "?"
	case isWork:
		approve = m.lastOK && work == m.last
		cand := ""
		if m.lastOK {
			cand = m.lastText
		}
		e.critique = digitMarks(trimASCII(resp), cand)
	case !approve:
		e.critique = "no"
	}
	if approve {
		e.critique = "yes"
	}
	e.judge(&e.critics, approve, ok)
	e.phase = phaseRefiner
	return ok
}

// judge records a verdict on the current answer (an invalid one is no approval, and never right).
func (e *criticEpisode) judge(to *[]Verdict, approve, ok bool) {
	correct := e.m.correct()
	*to = append(*to, Verdict{CandidateCorrect: correct, Approved: approve && ok})
	e.right = ok && approve == correct
}

func (e *criticEpisode) Reward() float64 { return e.m.reward }

// Verdicts implements Verdicter: the verifier's verdicts, as math's.
func (e *criticEpisode) Verdicts() []Verdict { return e.m.verdicts }

// CriticVerdicts are the critic's verdicts so far, in order.
func (e *criticEpisode) CriticVerdicts() []Verdict { return e.critics }

// lastVerdictRight implements verdictGrader.
func (e *criticEpisode) lastVerdictRight() bool { return e.right }

// Demonstrations: the experts play an episode (the solver and the refiner answer as math's
// expert solver does; the critic writes the answer it computes, one digit slipped when
// mistaken; the verifier as math's expert verifier in its format), then, for a digit-string
// answer, the checking demonstrations (checkingDemos).
func (w *MathCritic) Demonstrations(t Task, rng *rand.Rand, noise float64) []Demo {
	if rng == nil {
		rng = rand.New(rand.NewPCG(0, 0))
	}
	demos := w.play(w.newEpisode(t), rng, noise)
	return append(demos, w.checkingDemos(t, rng, noise)...)
}

// play lets the experts finish e.
func (w *MathCritic) play(e *criticEpisode, rng *rand.Rand, noise float64) []Demo {
	var demos []Demo
	for {
		turn, ok := e.Next()
		if !ok {
			return demos
		}
		mistake := noise > 0 && rng.Float64() < noise
		resp := e.expert(turn.Agent, rng, mistake)
		demos = append(demos, Demo{Agent: turn.Agent, Prompt: turn.Prompt, Response: resp, Step: turn.Step})
		e.Act(resp)
	}
}

// expert is the expert response of agent to the episode's current turn.
func (e *criticEpisode) expert(agent string, rng *rand.Rand, mistake bool) string {
	switch agent {
	case AgentSolver, AgentRefiner:
		return e.m.solverDemo(rng, mistake)
	case AgentCritic:
		if digitAnswer(e.m.answer) != "" {
			work, _ := e.m.expertAnswer(rng, mistake)
			return work
		}
		return map[bool]string{true: "yes", false: "no"}[e.m.correct() != mistake]
	}
	return e.m.verifierDemo(rng, mistake)
}

// checkingDemos, for a task with a digit-string answer: the experts finishing an episode whose
// solver slipped a digit (the critic judging, and the refiner fixing, a wrong answer), and, with
// a verifier turn (max_loop ≥ 2), the verifier judging a refined answer with a digit slipped.
// The episodes alone show the critic and the verifier mostly right answers, which they could
// approve by copying them as their work.
func (w *MathCritic) checkingDemos(t Task, rng *rand.Rand, noise float64) []Demo {
	d := digitAnswer(t.Answer)
	if d == "" {
		return nil
	}
	e := w.newEpisode(t)
	e.Act("ans " + slipDigit(d, rng))
	demos := w.play(e, rng, noise)
	if w.math.opts.MaxLoop < 2 {
		return demos
	}
	v := w.newEpisode(t)
	v.Act("ans " + d)
	v.Act(d)
	v.Act("ans " + slipDigit(d, rng))
	turn, _ := v.Next()
	mistake := noise > 0 && rng.Float64() < noise
	return append(demos, Demo{Agent: turn.Agent, Prompt: turn.Prompt, Response: v.m.verifierDemo(rng, mistake), Step: turn.Step})
}
