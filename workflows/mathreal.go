package workflows

import (
	"strings"

	"github.com/drmas-dev/drmas/workflows/mathgrade"
)

// maxShownBoxed bounds a boxed answer shown in later prompts ("ans …", "rejected …"), so that
// prompts stay within PromptBudget: 180 − len("solver\nQ \nrejected \n") − maxMathQuestion.
const maxShownBoxed = 40

// parseSolver reads a solver response: the action "ans <int>" (ParseSolver), else a real
// model's answer, its last \boxed{…} (mathgrade.Extract). It reports whether it found either.
func (e *mathEpisode) parseSolver(resp string) bool {
	e.last, e.lastOK = ParseSolver(resp)
	e.lastText = ""
	if e.lastOK {
		e.lastText = strings.TrimPrefix(strings.TrimPrefix(trimASCII(resp), "ans "), "+")
	}
	e.boxed = ""
	if !e.lastOK {
		if b, ok := mathgrade.Extract(resp); ok && b != "" {
			e.boxed = b
		}
	}
	return e.lastOK || e.boxed != ""
}

// shown is the last solver answer as later prompts show it ("?" for none).
func (e *mathEpisode) shown() string {
	if e.boxed != "" {
		return promptText(e.boxed, maxShownBoxed)
	}
	if e.lastOK {
		return e.lastText
	}
	return "?"
}

// correct grades the last solver answer: an "ans <int>" action equals an integer task answer
// (the arithmetic rule, unchanged), and a boxed answer is graded as the paper's grader does
// (mathgrade) against the task's answer, or any of them when it is a JSON list.
func (e *mathEpisode) correct() bool {
	if e.lastOK {
		return e.wantOK && e.last == e.want
	}
	if e.boxed == "" {
		return false
	}
	return mathgrade.Grade(`\boxed{`+e.boxed+"}", GoldenAnswers(e.answer)).Reward == 1
}

// expertSolver is the expert's answer: the canonical action for an integer task answer (v,
// already off when mistaken), else the task's (first) answer boxed, as a real model would
// write it, with "+1" appended when mistaken.
func (e *mathEpisode) expertSolver(v int, mistake bool) string {
	if e.wantOK {
		return FormatSolver(v)
	}
	a := GoldenAnswers(e.answer)[0]
	if mistake {
		a += "+1"
	}
	return `\boxed{` + a + "}"
}
