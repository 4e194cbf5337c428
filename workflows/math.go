package workflows

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Math agents and data sources.
const (
	AgentSolver    = "solver"
	AgentVerifier  = "verifier"
	SourceMathEasy = "math_easy"
	SourceMathHard = "math_hard"
	// MathInvalidPenalty is the math workflow's invalid-action penalty.
	MathInvalidPenalty = 0.1
)

// maxMathQuestion bounds the question bytes shown in a math prompt; longer
// (dataset) questions are cut, so prompts stay within PromptBudget.
const maxMathQuestion = 120

func init() {
	Register("math", func(o Options) (Workflow, error) { return NewMath(o) })
}

// Math is the Solver ↔ Verifier workflow.
//
// Loop l = 0..max_loop-1 (Turn.Step = l): the solver answers; then, except in
// the last loop, the verifier judges. "yes" (approve) ends the episode; "no"
// (reject) starts loop l+1, whose solver prompt shows the rejected answer. An
// invalid verdict counts as a reject: an answer nobody approved is not
// accepted, and the solver gets its retry. An invalid solver action counts as
// no answer ("?" in later prompts), which is graded incorrect.
//
// Reward: 1 if the last solver answer equals the task's answer as integers,
// else 0. The task's answer may carry surrounding space, a sign ("+" or "-",
// or U+2212 "−"), leading zeros and a fractional part of zeros ("42.", "42.0",
// as a JSON number 42.0 loads); "4.2", "1e3" or "1,000" are not integers, and
// like answers of more than 9 digits (see ParseSolver) can never be solved by an "ans" action.
// A solver response that is no "ans" action but holds a \boxed{…} answer (a real model's) is
// valid, shown in later prompts as its boxed text, and graded as the paper's grader does
// (package mathgrade, against the answer or any answer of a JSON list; see mathreal.go).
// Prompts (every line ends in "\n"):
//
//	solver:    "solver\nQ 74+58\n"                 first loop
//	           "solver\nQ 74+58\nrejected 221\n"    after a reject
//	verifier:  "verifier\nQ 74+58\nans 231\n"      ("ans ?" if the solver's action was invalid)
//
// Responses: solver "ans 231", verifier "yes" / "no", optionally after its work ("231 yes",
// see ParseSolver, ParseVerifier). Agents in Options.PaperAgents get the paper format instead
// (paper.go).
//
// Generated problems (mathtasks.go): additions of MathDigits-digit numbers written least
// significant digit first; math_easy carry at most once, math_hard at least twice.
type Math struct{ opts Options }

// NewMath builds the math workflow.
func NewMath(o Options) (*Math, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	m := &Math{opts: o}
	if err := o.Rewards.checkAgents(m.Name(), m.Agents()); err != nil {
		return nil, err
	}
	if err := o.checkPaperAgents(m.Name(), m.Agents()); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Math) Name() string            { return "math" }
func (m *Math) Agents() []string        { return []string{AgentSolver, AgentVerifier} }
func (m *Math) InvalidPenalty() float64 { return MathInvalidPenalty }

// NewEpisode starts an episode. A task whose answer is not an integer can
// never be solved (reward 0).
func (m *Math) NewEpisode(t Task) Episode {
	return withRewards(m.newEpisode(t), m.opts.Rewards, m.InvalidPenalty(), t)
}

func (m *Math) newEpisode(t Task) *mathEpisode {
	want, ok := parseTaskInt(t.Answer)
	e := &mathEpisode{maxLoop: m.opts.MaxLoop, question: promptText(t.Question, maxMathQuestion), want: want, wantOK: ok, answer: t.Answer}
	e.check = m.opts.VerifierCheck
	if e.paper = m.opts.paperSet(); e.paper != nil {
		e.full = paperQuestion(t.Question)
	}
	return e
}

// parseTaskInt parses a task's integer answer: surrounding white space is
// ignored, a sign may be "+", "-" or U+2212 ("−"), and a fractional part of
// only zeros is allowed ("42.", "42.0"). Anything else ("4.2", "1e3", "1,000",
// "", overflow) is not an integer.
func parseTaskInt(s string) (int, bool) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "\u2212"); ok {
		s = "-" + rest
	}
	if i := strings.IndexByte(s, '.'); i >= 0 {
		if strings.Trim(s[i+1:], "0") != "" {
			return 0, false
		}
		s = s[:i]
	}
	v, err := strconv.Atoi(s) // one optional sign, then decimal digits
	if err != nil {
		return 0, false
	}
	return v, true
}

type mathEpisode struct {
	maxLoop  int
	question string
	want     int
	wantOK   bool
	answer   string // the task's answer, for boxed answers (mathreal.go)

	loop     int
	verifier bool // the verifier is next
	done     bool
	prev     string // canonical previous (rejected) answer, "" in loop 0
	last     int
	lastOK   bool
	lastText string // the last "ans" action's number as written (leading zeros kept, no "+")
	boxed    string // the last solver response's \boxed answer, when it was no "ans" action
	reward   float64
	verdicts []Verdict

	// The paper format (paper.go): which agents use it, the question and the responses as its
	// prompts show them.
	check string // the verifier's compact format (Options.VerifierCheck)

	paper              paperAgents
	full               string
	solution           string // the solver's last response
	rejected, critique string // the rejected solution and the verifier's response
}

func (e *mathEpisode) Next() (Turn, bool) {
	if e.done {
		return Turn{}, false
	}
	if e.verifier && e.paper[AgentVerifier] {
		return Turn{AgentVerifier, e.loop, paperVerifierPrompt(e.full, e.solution)}, true
	}
	if !e.verifier && e.paper[AgentSolver] {
		return Turn{AgentSolver, e.loop, paperSolverPrompt(e.full, e.rejected, e.critique, e.loop > 0)}, true
	}
	if e.verifier {
		return Turn{AgentVerifier, e.loop, "verifier\nQ " + e.question + "\nans " + e.shown() + "\n"}, true
	}
	p := "solver\nQ " + e.question + "\n"
	if e.loop > 0 {
		p += "rejected " + e.prev + "\n"
	}
	return Turn{AgentSolver, e.loop, p}, true
}

func (e *mathEpisode) Act(resp string) bool {
	if e.done {
		return false
	}
	if !e.verifier {
		var valid bool
		if e.paper[AgentSolver] {
			valid = e.parsePaperSolver(resp)
		} else {
			valid = e.parseSolver(resp)
		}
		if e.paper != nil {
			e.solution = paperResponse(resp)
		}
		if e.loop == e.maxLoop-1 {
			e.finish()
		} else {
			e.verifier = true
		}
		return valid
	}
	approve, ok := e.parseVerdict(resp)
	e.verdicts = append(e.verdicts, Verdict{CandidateCorrect: e.correct(), Approved: approve && ok})
	if approve { // invalid → reject
		e.finish()
		return ok
	}
	e.verifier = false
	e.prev = e.shown()
	if e.paper != nil {
		e.rejected, e.critique = e.solution, paperResponse(resp)
	}
	e.loop++
	return ok
}

func (e *mathEpisode) finish() {
	e.done = true
	if e.correct() {
		e.reward = 1
	}
}

func (e *mathEpisode) Reward() float64 { return e.reward }

// Verdicts implements Verdicter.
func (e *mathEpisode) Verdicts() []Verdict { return e.verdicts }

// Demonstrations: the expert solver answers correctly; a mistake is one wrong digit of a
// digit-string answer (the built-in tasks', see mathtasks.go), else the right answer off by ±1,
// ±2 or ±10. The expert verifier shows its work: it writes the answer it computes itself, one
// digit wrong when it errs, then approves exactly when the candidate equals its work
// ("2341 yes"); where the answer is no integer it only says "yes" or "no" (a mistake flips it).
func (m *Math) Demonstrations(t Task, rng *rand.Rand, noise float64) []Demo {
	e := m.newEpisode(t)
	if rng == nil {
		rng = rand.New(rand.NewPCG(0, 0))
	}
	var demos []Demo
	for {
		turn, ok := e.Next()
		if !ok {
			return append(demos, m.checkingDemos(t, rng, noise)...)
		}
		mistake := noise > 0 && rng.Float64() < noise
		var resp string
		if turn.Agent == AgentSolver {
			resp = e.solverDemo(rng, mistake)
		} else {
			resp = e.verifierDemo(rng, mistake)
		}
		demos = append(demos, Demo{Agent: turn.Agent, Prompt: turn.Prompt, Response: resp, Step: turn.Step})
		e.Act(resp)
	}
}

// promptText makes a question safe for a prompt line: control characters
// become spaces, and it is cut to at most max bytes on a rune boundary.
// ShownQuestion is question q as an episode of the named workflow shows it in its prompts
// (control characters as spaces, trimmed, cut to the workflow's limit): questions with the
// same shown form are the same prompt. An unknown workflow's form is only cleaned, not cut.
func ShownQuestion(workflow, q string) string {
	switch workflow {
	case (&Math{}).Name():
		return promptText(q, maxMathQuestion)
	case MathCriticName:
		return promptText(q, maxCriticQuestion)
	case (&Search{}).Name():
		return promptText(q, maxSearchQuestion)
	}
	return promptText(q, len(q))
}

func promptText(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.TrimSpace(s))
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
