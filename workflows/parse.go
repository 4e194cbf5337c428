package workflows

import (
	"strconv"
	"strings"
)

// Action formats. Every parser first trims ASCII whitespace (space, \t, \n,
// \r) at both ends of the response; everything else is strict: keywords are
// lowercase, separated from their argument by exactly one space, and
// anything after the argument makes the action invalid.
//
//	solver    ans <int>       <int> = optional + or -, then 1..9 ASCII digits
//	verifier  [<work> ]yes | no   <work> = 1..9 ASCII digits: the verifier's own answer
//	          yes | no | <work> <marks>   (verifier_check: digits) <marks> = one y or n per
//	                                      digit of <work>; approves when every mark is y
//	          yes | no | <work>           (verifier_check: recompute) approves when <work>
//	                                      equals the candidate as an integer
//	router    enough | more
//	searcher  q <words>       1..6 words of [a-z0-9], single spaces, ≤ 48 bytes
//	answerer  a <answer>      printable ASCII (0x20..0x7e), ≤ 40 bytes, not starting
//	                          with a space; compared after NormalizeAnswer

const (
	maxQueryWords  = 6
	maxQueryBytes  = 48
	maxAnswerBytes = 40
)

func trimASCII(s string) string {
	return strings.Trim(s, " \t\n\r")
}

// ParseSolver parses a solver action "ans <int>".
func ParseSolver(resp string) (int, bool) {
	s, ok := strings.CutPrefix(trimASCII(resp), "ans ")
	if !ok {
		return 0, false
	}
	digits := s
	if len(digits) > 0 && (digits[0] == '+' || digits[0] == '-') {
		digits = digits[1:]
	}
	if len(digits) < 1 || len(digits) > 9 {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.Atoi(s) // accepts a leading + or -; ≤ 9 digits cannot overflow
	if err != nil {
		return 0, false
	}
	return v, true
}

// FormatSolver is the canonical solver action for v.
func FormatSolver(v int) string { return "ans " + strconv.Itoa(v) }

// ParseVerifier parses a verifier action: "yes" approves, "no" rejects; either may follow the
// verifier's work, its own answer as 1..9 digits, and one space ("231 yes").
func ParseVerifier(resp string) (approve, ok bool) {
	s := trimASCII(resp)
	if work, verdict, found := strings.Cut(s, " "); found {
		if digitAnswer(work) != work {
			return false, false
		}
		s = verdict
	}
	switch s {
	case "yes":
		return true, true
	case "no":
		return false, true
	}
	return false, false
}

// ParseVerifierMarks parses a verifier action in the digit-checking format: its work (its own
// answer, 1..9 digits), one space, and one mark per digit of the work, "y" where the candidate's
// digit is the same and "n" where it is not ("231 yyn"). It approves exactly when every mark
// is "y". A bare "yes" or "no" stays valid (the verdict on a task whose answer is no digit
// string).
func ParseVerifierMarks(resp string) (approve, ok bool) {
	s := trimASCII(resp)
	switch s {
	case "yes":
		return true, true
	case "no":
		return false, true
	}
	work, marks, found := strings.Cut(s, " ")
	if !found || digitAnswer(work) != work || len(marks) != len(work) {
		return false, false
	}
	approve = true
	for i := 0; i < len(marks); i++ {
		switch marks[i] {
		case 'y':
		case 'n':
			approve = false
		default:
			return false, false
		}
	}
	return approve, true
}

// ParseVerifierWork parses a verifier action in the recomputing format: its own answer, 1..9
// digits ("231"), which the workflow compares with the candidate; a bare "yes" or "no" stays
// valid (the verdict on a task whose answer is no digit string). isWork tells which it was.
func ParseVerifierWork(resp string) (work int, isWork, approve, ok bool) {
	s := trimASCII(resp)
	switch s {
	case "yes":
		return 0, false, true, true
	case "no":
		return 0, false, false, true
	}
	if s == "" || digitAnswer(s) != s {
		return 0, false, false, false
	}
	v, _ := strconv.Atoi(s) // ≤ 9 digits
	return v, true, false, true
}

// digitMarks are the marks of the digit-checking format for work against candidate: "y" where
// their digits agree; all "n" when their lengths differ (no digit lines up).
func digitMarks(work, candidate string) string {
	b := []byte(strings.Repeat("n", len(work)))
	if len(work) == len(candidate) {
		for i := range b {
			if work[i] == candidate[i] {
				b[i] = 'y'
			}
		}
	}
	return string(b)
}

// ParseRouter parses a router action: "enough" or "more".
func ParseRouter(resp string) (enough, ok bool) {
	switch trimASCII(resp) {
	case "enough":
		return true, true
	case "more":
		return false, true
	}
	return false, false
}

// ParseSearcher parses a searcher action "q <words>" and returns the words.
func ParseSearcher(resp string) (string, bool) {
	s := trimASCII(resp)
	if len(s) > maxQueryBytes {
		return "", false
	}
	q, ok := strings.CutPrefix(s, "q ")
	if !ok || q == "" {
		return "", false
	}
	words := 1
	prevSpace := true // no leading space
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == ' ':
			if prevSpace {
				return "", false // leading or double space
			}
			prevSpace = true
			words++
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			prevSpace = false
		default:
			return "", false
		}
	}
	if prevSpace || words > maxQueryWords {
		return "", false // trailing space cannot happen after trim, but be explicit
	}
	return q, true
}

// ParseAnswerer parses an answerer action "a <answer>" and returns the
// normalized answer (see NormalizeAnswer).
func ParseAnswerer(resp string) (string, bool) {
	s := trimASCII(resp)
	if len(s) > maxAnswerBytes+2 {
		return "", false
	}
	a, ok := strings.CutPrefix(s, "a ")
	if !ok || a == "" || a[0] == ' ' {
		return "", false
	}
	for i := 0; i < len(a); i++ {
		if a[i] < 0x20 || a[i] > 0x7e {
			return "", false
		}
	}
	a = NormalizeAnswer(a)
	if a == "" {
		return "", false
	}
	return a, true
}

// NormalizeAnswer lowercases s, trims it and collapses runs of whitespace to
// one space: the form compared for exact match.
func NormalizeAnswer(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}
