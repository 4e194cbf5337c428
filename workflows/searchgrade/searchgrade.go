// Package searchgrade grades a search agent's answer as Search-R1 (and the paper's search
// runs) do: the answer is the last <answer>…</answer> of the response, and it is correct when,
// after SQuAD normalization (lowercase; ASCII punctuation, the articles a, an and the, and
// extra white space removed), it equals any golden answer. Token F1 (SQuAD's, the best over
// the golden answers) is reported beside it as an evaluation metric.
package searchgrade

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Result is a graded response.
type Result struct {
	Reward    float64  // exact match: 1 or 0 (0 also when no answer was found)
	F1        float64  // best token F1 over the golden answers
	Extracted string   // the answer as written ("" when none)
	Answer    string   // Extracted after Normalize
	Golden    []string // the golden answers after Normalize
	Reason    string   // one line
}

// Grade grades a response against golden answers.
func Grade(response string, golden []string) Result {
	r := Result{Golden: make([]string, len(golden))}
	for i, g := range golden {
		r.Golden[i] = Normalize(g)
	}
	a, ok := Extract(response)
	if !ok {
		r.Reason = "format error: no <answer>…</answer> (or drmas's \"a <answer>\" action)"
		return r
	}
	r.Extracted, r.Answer = a, Normalize(a)
	r.F1 = F1(a, golden)
	if EM(a, golden) {
		r.Reward, r.Reason = 1, "correct: exact match after normalization"
	} else {
		r.Reason = "incorrect: no golden answer matches after normalization"
	}
	return r
}

// Extract returns the content of the last <answer>…</answer> (matched left to right, each
// ending at the first </answer> after its start), trimmed; with no such tag, the argument of
// drmas's answerer action "a <answer>".
func Extract(response string) (string, bool) {
	const open, close = "<answer>", "</answer>"
	found, last := false, ""
	for s := response; ; {
		i := strings.Index(s, open)
		if i < 0 {
			break
		}
		j := strings.Index(s[i+len(open):], close)
		if j < 0 {
			break
		}
		found, last = true, strings.TrimSpace(s[i+len(open):i+len(open)+j])
		s = s[i+len(open)+j+len(close):]
	}
	if found {
		return last, true
	}
	if a, ok := strings.CutPrefix(strings.Trim(response, " \t\r\n"), "a "); ok && strings.TrimSpace(a) != "" {
		return strings.TrimSpace(a), true
	}
	return "", false
}

// Normalize is SQuAD's answer normalization: lowercase, drop ASCII punctuation, replace the
// words a, an and the by a space, and join the remaining words with single spaces.
func Normalize(s string) string {
	s = strings.ToLower(s)
	s = strings.Map(func(r rune) rune {
		if r < 0x80 && strings.ContainsRune("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", r) {
			return -1
		}
		return r
	}, s)
	var b strings.Builder
	// Python's \w, which bounds the articles in the reference's regular expression.
	word := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) || r == '_' }
	for i := 0; i < len(s); {
		j := i
		for j < len(s) {
			r, n := utf8.DecodeRuneInString(s[j:])
			if !word(r) {
				break
			}
			j += n
		}
		if j > i {
			if w := s[i:j]; w == "a" || w == "an" || w == "the" {
				b.WriteByte(' ')
			} else {
				b.WriteString(w)
			}
			i = j
			continue
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		b.WriteString(s[i : i+n])
		i += n
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// EM reports whether the normalized prediction equals any normalized golden answer.
func EM(pred string, golden []string) bool {
	p := Normalize(pred)
	for _, g := range golden {
		if Normalize(g) == p {
			return true
		}
	}
	return false
}

// F1 is SQuAD's token F1 of the prediction, the best over the golden answers: with c the
// tokens in common (counted with multiplicity), 2·c / (|pred| + |golden|), 0 when c is 0.
func F1(pred string, golden []string) float64 {
	pt := strings.Fields(Normalize(pred))
	best := 0.0
	for _, g := range golden {
		gt := strings.Fields(Normalize(g))
		count := map[string]int{}
		for _, t := range gt {
			count[t]++
		}
		common := 0
		for _, t := range pt {
			if count[t] > 0 {
				count[t]--
				common++
			}
		}
		if common > 0 {
			best = max(best, 2*float64(common)/float64(len(pt)+len(gt)))
		}
	}
	return best
}

// ErrGolden is returned by ParseGolden for a truth that is not a list of answers.
var ErrGolden = errors.New(`want a JSON list of golden answers such as ["Paris", "paris, france"]`)

// ParseGolden reads golden answers written as a JSON list of strings (or of numbers), or as
// Search-R1's {"target": [...]}.
func ParseGolden(s string) ([]string, error) {
	var raw json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGolden, err)
	}
	var obj struct {
		Target json.RawMessage `json:"target"`
	}
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &obj); err != nil || obj.Target == nil {
			return nil, fmt.Errorf("%w: an object needs a \"target\" list", ErrGolden)
		}
		raw = obj.Target
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGolden, err)
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		var str string
		if err := json.Unmarshal(it, &str); err == nil {
			out = append(out, str)
			continue
		}
		var num json.Number
		if err := json.Unmarshal(it, &num); err != nil {
			return nil, fmt.Errorf("%w: element %d is %s", ErrGolden, i, it)
		}
		out = append(out, num.String())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: the list is empty", ErrGolden)
	}
	return out, nil
}
