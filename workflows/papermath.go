package workflows

import "strconv"

// parsePaperSolver reads a paper-format solver response: only its last \boxed{…} counts (an
// "ans" action is no paper action). It reports whether it found a non-empty one.
func (e *mathEpisode) parsePaperSolver(resp string) bool {
	e.last, e.lastOK = 0, false
	e.boxed, _ = ParsePaperSolver(resp) // "" when there is none
	return e.boxed != ""
}

// parseVerdict reads a verifier response in the verifier's format.
func (e *mathEpisode) parseVerdict(resp string) (approve, ok bool) {
	if e.paper[AgentVerifier] {
		return ParsePaperVerifier(resp)
	}
	switch e.check {
	case VerifierCheckDigits:
		return ParseVerifierMarks(resp)
	case VerifierCheckRecompute:
		work, isWork, approve, ok := ParseVerifierWork(resp)
		if isWork {
			approve = e.lastOK && work == e.last
		}
		return approve, ok
	}
	return ParseVerifier(resp)
}

// expertBoxed is what the paper-format expert solver boxes: v (already off when mistaken) for
// an integer task answer, else the task's (first) answer, with "+1" appended when mistaken.
func (e *mathEpisode) expertBoxed(v int, mistake bool) string {
	if e.wantOK {
		return strconv.Itoa(v)
	}
	a := GoldenAnswers(e.answer)[0]
	if mistake {
		a += "+1"
	}
	return a
}
