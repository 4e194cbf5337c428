// Package mathgrade grades a model's math answer against a ground truth the way the paper's
// grader (DrMAS's math_reward.py, after Hendrycks et al.'s MATH grader) does: the answer is the
// last \boxed{…} of the response, both sides are normalized as MATH does, and they are equal
// when the normalized strings are, or when both read as the same number or simple expression.
// The reward is 1 or 0; a response with no boxed answer (a format error) gets 0.
//
// Everything here runs in time linear in the input (or, for the expression reader, bounded by
// MaxExprBytes and MaxDepth), so a hostile response cannot stall a rollout.
package mathgrade

import "strings"

// thinkEnd ends a reasoning block: as the reference does, only the text after the first one
// (up to a second one) is searched for the answer.
const thinkEnd = "</think>"

// Extract returns the answer of a response: the content of its last \boxed{…} (braces
// balanced), or of \boxed followed by a space (the rest up to a "$"), or of the last \fbox{…}
// when there is no \boxed. ok is false when there is none or its braces do not close: a
// format error.
func Extract(response string) (answer string, ok bool) {
	if _, after, found := strings.Cut(response, thinkEnd); found {
		response, _, _ = strings.Cut(after, thinkEnd)
	}
	cmd := `\boxed`
	i := strings.LastIndex(response, cmd)
	if i < 0 {
		cmd = `\fbox`
		if i = strings.LastIndex(response, cmd); i < 0 {
			return "", false
		}
	}
	rest := response[i+len(cmd):]
	if cmd == `\boxed` && strings.HasPrefix(rest, " ") {
		a, _, _ := strings.Cut(rest[1:], "$")
		a = strings.TrimSpace(a)
		return a, a != ""
	}
	return braced(rest)
}

// braced returns the content of the brace group that s starts with.
func braced(s string) (string, bool) {
	if !strings.HasPrefix(s, "{") {
		return "", false
	}
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return s[1:i], true
			}
		}
	}
	return "", false
}
