package mathgrade

import (
	"fmt"
	"math/big"
	"strings"
)

// Result is a graded response, with what a person needs to see why.
type Result struct {
	Reward    float64 // 1 correct, 0 incorrect or format error
	Extracted string  // the boxed answer ("" on a format error)
	Answer    string  // Extracted after Normalize
	Truth     string  // the ground truth that matched (or the first one) after Normalize
	Reason    string  // one line
}

// Grade grades a response against one or more ground truths (any of them may match). A
// ground truth that itself holds a \boxed{…} is its boxed content.
func Grade(response string, truths []string) Result {
	var r Result
	if len(truths) > 0 {
		r.Truth = Normalize(unboxed(truths[0]))
	}
	ans, ok := Extract(response)
	if !ok {
		r.Reason = `format error: no \boxed{…} answer`
		return r
	}
	r.Extracted, r.Answer = ans, Normalize(ans)
	for _, t := range truths {
		t = unboxed(t)
		if why, eq := Equivalent(ans, t); eq {
			r.Reward, r.Truth, r.Reason = 1, Normalize(t), "correct: "+why
			return r
		}
	}
	r.Reason = "incorrect: no ground truth is equivalent"
	return r
}

// unboxed is a ground truth's boxed content, when it has one.
func unboxed(t string) string {
	if strings.Contains(t, `\boxed`) {
		if b, ok := Extract(t); ok {
			return b
		}
	}
	return t
}

// Equivalent reports whether a given answer equals the ground truth, and by which rule:
//
//  1. the normalized strings are equal;
//  2. they are equal ignoring case and braces (x^{2} and x^2; \text{(A)} and (a));
//  3. both are tuples or intervals with the same brackets and as many elements (or both bare
//     comma lists), each pair equal by rules 1, 2 and 4;
//  4. both read as numbers (Eval) and are equal, exactly or within a relative 1e-9 — except,
//     as the reference grader does, that an integer written plainly (2, 2.0, 1,000) equals
//     only an integer written plainly (not \sqrt{4} or 4/2, and 2 is not \frac{4}{2}), and two
//     integer fractions must be the same fraction (2/4 is not 1/2).
func Equivalent(given, truth string) (string, bool) {
	g, t := Normalize(given), Normalize(truth)
	if g == "" || t == "" {
		return "", false
	}
	if why, ok := scalarEqual(g, t, false); ok {
		return why, true
	}
	ge, gOpen, gClose, gList := splitTuple(g)
	te, tOpen, tClose, tList := splitTuple(t)
	if !gList || !tList || gOpen != tOpen || gClose != tClose || len(ge) != len(te) {
		return "", false
	}
	for i := range te {
		if _, ok := scalarEqual(ge[i], te[i], true); !ok {
			return "", false
		}
	}
	return fmt.Sprintf("%d elements equal pairwise", len(te)), true
}

func scalarEqual(g, t string, normalize bool) (string, bool) {
	if normalize {
		g, t = Normalize(g), Normalize(t)
	}
	if g == t {
		return "equal after normalization", true
	}
	if loose(g) == loose(t) && loose(t) != "" {
		return "equal ignoring case and braces", true
	}
	gs, ts := stripThousands(g), stripThousands(t)
	if isIntLiteral(ts) != isIntLiteral(gs) {
		return "", false // an integer truth wants a plain integer answer, and only it
	}
	if gn, gd, ok := intFraction(gs); ok {
		if tn, td, ok := intFraction(ts); ok {
			return "the same fraction", gn.Cmp(tn) == 0 && gd.Cmp(td) == 0
		}
	}
	gv, ok1 := Eval(g)
	tv, ok2 := Eval(t)
	if ok1 && ok2 && gv.Equal(tv) {
		if gv.Rat != nil && tv.Rat != nil {
			return "the same number", true
		}
		return "numerically equal (relative 1e-9)", true
	}
	return "", false
}

func loose(s string) string {
	s = strings.ReplaceAll(s, "{", "")
	s = strings.ReplaceAll(s, "}", "")
	return strings.ToLower(s)
}

// isIntLiteral: a number literal (isNumberLiteral) whose value is an integer (2, 2.0, -7.).
func isIntLiteral(s string) bool {
	if !isNumberLiteral(s) {
		return false
	}
	_, frac, _ := strings.Cut(s, ".")
	return strings.Trim(frac, "0") == ""
}

// isNumberLiteral: an optional sign, digits, and an optional decimal part.
func isNumberLiteral(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	digits, dots := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case isDigit(s[i]):
			digits++
		case s[i] == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// intFraction reads a fraction of two integers, \frac{a}{b} or a/b, with an optional leading
// minus sign on the whole or on a, as (numerator with the sign, denominator).
func intFraction(s string) (*big.Int, *big.Int, bool) {
	neg := false
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		neg, s = true, rest
	}
	var a, b string
	if rest, ok := strings.CutPrefix(s, `\frac{`); ok {
		var found bool
		if a, rest, found = strings.Cut(rest, "}{"); !found || !strings.HasSuffix(rest, "}") {
			return nil, nil, false
		}
		b = strings.TrimSuffix(rest, "}")
	} else if x, y, ok := strings.Cut(s, "/"); ok {
		a, b = x, y
	} else {
		return nil, nil, false
	}
	if rest, ok := strings.CutPrefix(a, "-"); ok && !neg {
		neg, a = true, rest
	}
	n, ok1 := new(big.Int).SetString(a, 10)
	d, ok2 := new(big.Int).SetString(b, 10)
	if !ok1 || !ok2 || d.Sign() <= 0 || !allDigits(a) || !allDigits(b) {
		return nil, nil, false
	}
	if neg {
		n.Neg(n)
	}
	return n, d, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// splitTuple splits "(a,b)", "[a,b)", "\{a,b\}"-free forms at their top-level commas after
// removing thousands separators. list is false for a single value.
func splitTuple(s string) (elems []string, open, close byte, list bool) {
	s = stripThousands(s)
	if len(s) >= 2 && strings.IndexByte("([", s[0]) >= 0 && strings.IndexByte(")]", s[len(s)-1]) >= 0 {
		if parts, ok := topLevelSplit(s[1 : len(s)-1]); ok && len(parts) > 1 {
			return parts, s[0], s[len(s)-1], true
		}
	}
	if parts, ok := topLevelSplit(s); ok && len(parts) > 1 {
		return parts, 0, 0, true
	}
	return nil, 0, 0, false
}

// topLevelSplit splits at commas outside (), [] and {}; ok is false when they do not balance.
func topLevelSplit(s string) ([]string, bool) {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth--; depth < 0 {
				return nil, false
			}
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, false
	}
	return append(parts, s[start:]), true
}
