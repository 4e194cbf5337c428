package workflows

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// MathDigits is the width of the built-in tasks' operands; their sums have MathDigits+1 digits.
const MathDigits = 2

// Tasks generates the built-in addition tasks; IDs are "math-<split>-<seed>-<i>".
//
// A task adds two MathDigits-digit numbers written least-significant digit first, zero-padded
// (47 is "74", 5 is "50"), and its answer is the sum written the same way in MathDigits+1
// digits (47+85 = 132: question "74+58", answer "231"). In that order a left-to-right model
// meets the carry before the digit that needs it, so one algorithm solves every task: held-out
// questions are new operand pairs for the skill the training split teaches. math_easy tasks
// carry at most once, math_hard ones at least twice. Questions are split by SplitOf, so the
// eval split shares no question with training; its tenth of the 10^(2·MathDigits) questions
// is drawn without repeats.
func (m *Math) Tasks(seed uint64, split Split, n int) []Task {
	rng := newRand(seed, "math/"+split.String())
	tasks := drawItems(rng, m.Name(), split, n, m.opts.HardFrac, genMath)
	for i := range tasks {
		tasks[i].ID = fmt.Sprintf("math-%s-%d-%05d", split, seed, i)
	}
	return tasks
}

func genMath(rng *rand.Rand, hard bool) (string, Task) {
	limit := 1
	for range MathDigits {
		limit *= 10
	}
	for {
		x, y := rng.IntN(limit), rng.IntN(limit)
		if (carries(x, y) >= 2) != hard {
			continue
		}
		q := reversedDigits(x, MathDigits) + "+" + reversedDigits(y, MathDigits)
		src := SourceMathEasy
		if hard {
			src = SourceMathHard
		}
		return q, Task{Question: q, Answer: reversedDigits(x+y, MathDigits+1), DataSource: src}
	}
}

// carries counts the carries of the column addition x+y.
func carries(x, y int) int {
	n, c := 0, 0
	for ; x > 0 || y > 0; x, y = x/10, y/10 {
		c = (x%10 + y%10 + c) / 10
		n += c
	}
	return n
}

// reversedDigits writes v ≥ 0 in width digits, least significant first (zero-padded).
func reversedDigits(v, width int) string {
	b := make([]byte, width)
	for i := range b {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b)
}

// digitAnswer is the task's answer when it is a plain digit string ("0231"): the form the
// expert writes, leading zeros kept. Else "".
func digitAnswer(a string) string {
	a = strings.TrimSpace(a)
	if len(a) == 0 || len(a) > 9 {
		return ""
	}
	for i := 0; i < len(a); i++ {
		if a[i] < '0' || a[i] > '9' {
			return ""
		}
	}
	return a
}

// slipDigit changes one digit of the digit string s by ±1 (mod 10): a dropped or extra carry.
func slipDigit(s string, rng *rand.Rand) string {
	b := []byte(s)
	i := rng.IntN(len(b))
	d := 1 + 8*rng.IntN(2) // +1 or −1 mod 10
	b[i] = byte('0' + (int(b[i]-'0')+d)%10)
	return string(b)
}

// expertAnswer is what the expert computes for the task: its digit-string answer (one digit
// slipped when mistaken), else the integer answer off by ±1, ±2 or ±10 when mistaken.
func (e *mathEpisode) expertAnswer(rng *rand.Rand, mistake bool) (string, int) {
	if d := digitAnswer(e.answer); d != "" {
		if mistake {
			d = slipDigit(d, rng)
		}
		v, _ := strconv.Atoi(d)
		return d, v
	}
	v := e.want
	if mistake {
		d := []int{1, 2, 10}[rng.IntN(3)]
		if rng.IntN(2) == 0 {
			d = -d
		}
		v += d
	}
	return strconv.Itoa(v), v
}

// solverDemo is the expert solver's response.
func (e *mathEpisode) solverDemo(rng *rand.Rand, mistake bool) string {
	text, v := e.expertAnswer(rng, mistake)
	if e.paper[AgentSolver] {
		return paperSolverDemo(e.expertBoxed(v, mistake))
	}
	if e.wantOK {
		return "ans " + text
	}
	return e.expertSolver(v, mistake)
}

// verifierDemo is the expert verifier's response: for an integer task in the compact format,
// its work (the answer as the expert computes it, one digit slipped when mistaken) and the
// verdict it implies, approving exactly a candidate equal to the work ("231 yes"); else a bare
// verdict (a mistake flips it).
func (e *mathEpisode) verifierDemo(rng *rand.Rand, mistake bool) string {
	if e.wantOK && !e.paper[AgentVerifier] {
		work, _ := e.expertAnswer(rng, mistake)
		switch e.check {
		case VerifierCheckRecompute:
			return work
		case VerifierCheckDigits:
			cand := e.lastText
			if !e.lastOK {
				cand = ""
			}
			return work + " " + digitMarks(work, cand)
		}
		return work + " " + map[bool]string{true: "yes", false: "no"}[e.lastOK && work == e.lastText]
	}
	approve := e.correct()
	if mistake {
		approve = !approve
	}
	if e.paper[AgentVerifier] {
		return paperKeywordDemo(approve, "approve", "reject")
	}
	return map[bool]string{true: "yes", false: "no"}[approve]
}

// checkingDemos is one more verifier demonstration for a task with a digit-string answer in
// the compact format: the expert verifier judging a wrong candidate (the answer with one digit
// slipped). Episodes alone show the verifier mostly correct candidates, which it could approve
// by copying them as its work; beside these, half of its demonstrations need the check done.
func (m *Math) checkingDemos(t Task, rng *rand.Rand, noise float64) []Demo {
	e := m.newEpisode(t)
	d := digitAnswer(e.answer)
	if d == "" || m.opts.MaxLoop < 2 || e.paper[AgentSolver] || e.paper[AgentVerifier] {
		return nil
	}
	e.Act("ans " + slipDigit(d, rng))
	turn, _ := e.Next()
	mistake := noise > 0 && rng.Float64() < noise
	return []Demo{{Agent: turn.Agent, Prompt: turn.Prompt, Response: e.verifierDemo(rng, mistake), Step: turn.Step}}
}
