package mathgrade

import (
	"strconv"
	"strings"
)

// Normalize rewrites an answer the way the MATH grader does before comparing strings, in this
// order (docs/tasks.md, "Math grading", has an example of each):
//
//   - an answer that starts with \text{…} is that text;
//   - thousands separators as LaTeX writes them (1{,}000, 1\,000, 1\ 000, 1~000, 1\;000, 1\:000)
//     become commas, which numbers then drop (1,\!000 loses its \! below);
//   - line breaks, \! and the dollar signs ($, \$) go, \\ becomes \;
//   - \tfrac and \dfrac become \frac, \left and \right go;
//   - degrees (^\circ, ^{\circ}) and percent signs (\%, %) go;
//   - a trailing unit \text{…} or \mbox{…} after a value goes (5\text{ cm} is 5);
//   - " ." and "{." get their 0, and so does a leading ".";
//   - a leading "x =" (one "=", at most two characters before it) goes;
//   - \sqrt3 becomes \sqrt{3};
//   - spaces go;
//   - \frac12 becomes \frac{1}{2} (\frac1{72}: \frac{1}{72});
//   - 0.5 becomes \frac{1}{2}, and a/b of two integers \frac{a}{b}.
func Normalize(s string) string {
	s = strings.TrimSpace(s)
	if inner, ok := strings.CutPrefix(s, `\text{`); ok {
		if t, _, found := strings.Cut(inner, "}"); found && t != "" {
			s = strings.TrimSpace(t)
		}
	}
	s = strings.ReplaceAll(s, "\n", "")
	s = thousandsCommas(s)
	s = strings.ReplaceAll(s, `\!`, "")
	s = strings.ReplaceAll(s, `\\`, `\`)
	s = strings.ReplaceAll(s, "tfrac", "frac")
	s = strings.ReplaceAll(s, "dfrac", "frac")
	s = strings.ReplaceAll(s, `\left`, "")
	s = strings.ReplaceAll(s, `\right`, "")
	s = strings.ReplaceAll(s, `^{\circ}`, "")
	s = strings.ReplaceAll(s, `^\circ`, "")
	s = strings.ReplaceAll(s, `\$`, "")
	s = strings.ReplaceAll(s, "$", "")
	s = removeUnits(s)
	s = strings.ReplaceAll(s, `\%`, "")
	s = strings.ReplaceAll(s, "%", "")
	s = strings.ReplaceAll(s, " .", " 0.")
	s = strings.ReplaceAll(s, "{.", "{0.")
	if s == "" {
		return s
	}
	if s[0] == '.' {
		s = "0" + s
	}
	if lhs, rhs, ok := strings.Cut(s, "="); ok && !strings.Contains(rhs, "=") && len(lhs) <= 2 {
		s = rhs
	}
	s = fixSqrt(s)
	s = strings.ReplaceAll(s, " ", "")
	s = fixFracs(s)
	if s == "0.5" {
		s = `\frac{1}{2}`
	}
	return fixSlash(s)
}

// thousandsSeps are LaTeX's ways to separate thousands: MATH writes 1,\!000 and 10{,}000;
// thin, medium and ordinary spaces and ties appear too.
var thousandsSeps = []string{`{,}`, `\,`, `\;`, `\:`, `\ `, `~`}

// thousandsCommas writes a separator of thousandsSeps as "," where it stands between a digit
// and exactly three digits (1\,000 but not 1\,00 or x~y).
func thousandsCommas(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if i > 0 && isDigit(s[i-1]) {
			if n := sepAt(s, i); n > 0 {
				b.WriteByte(',')
				i += n
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// sepAt is the length of the thousands separator at s[i] followed by three digits and no
// fourth, 0 when there is none.
func sepAt(s string, i int) int {
	for _, sep := range thousandsSeps {
		j := i + len(sep)
		if strings.HasPrefix(s[i:], sep) && j+3 <= len(s) && isDigit(s[j]) && isDigit(s[j+1]) && isDigit(s[j+2]) &&
			(j+3 == len(s) || !isDigit(s[j+3])) {
			return len(sep)
		}
	}
	return 0
}

// removeUnits drops a unit written as text after a value: MATH's "\text{ " rule (a value,
// then one \text{ with a space}) and, more generally, a last \text{…} or \mbox{…} group that
// ends the answer and follows something.
func removeUnits(s string) string {
	if parts := strings.Split(s, `\text{ `); len(parts) == 2 {
		return parts[0]
	}
	for _, cmd := range []string{`\text{`, `\mbox{`} {
		i := strings.LastIndex(s, cmd)
		if i <= 0 {
			continue
		}
		if body, ok := braced(s[i+len(cmd)-1:]); ok && i+len(cmd)+len(body)+1 == len(s) && strings.TrimSpace(s[:i]) != "" {
			return strings.TrimSpace(s[:i])
		}
	}
	return s
}

// fixSqrt writes \sqrtX (one character X) as \sqrt{X}.
func fixSqrt(s string) string {
	parts := strings.Split(s, `\sqrt`)
	var b strings.Builder
	b.WriteString(parts[0])
	for _, p := range parts[1:] {
		b.WriteString(`\sqrt`)
		if p != "" && p[0] != '{' && p[0] != '[' && p[0] != '\\' {
			b.WriteString("{" + p[:1] + "}" + p[1:])
			continue
		}
		b.WriteString(p)
	}
	return b.String()
}

// fixFracs writes \fracAB as \frac{A}{B} and \fracA{B} as \frac{A}{B}, for one-character A
// and B. As in MATH, an argument-less \frac at the end leaves the whole string as it was.
func fixFracs(s string) string {
	parts := strings.Split(s, `\frac`)
	var b strings.Builder
	b.WriteString(parts[0])
	for _, p := range parts[1:] {
		b.WriteString(`\frac`)
		if p != "" && p[0] == '{' {
			b.WriteString(p)
			continue
		}
		if len(p) < 2 {
			return s
		}
		if p[1] != '{' {
			b.WriteString("{" + p[:1] + "}{" + p[1:2] + "}" + p[2:])
		} else {
			b.WriteString("{" + p[:1] + "}" + p[1:])
		}
	}
	return b.String()
}

// fixSlash writes a/b, for two integers written plainly, as \frac{a}{b}.
func fixSlash(s string) string {
	a, b, ok := strings.Cut(s, "/")
	if !ok || strings.Contains(b, "/") {
		return s
	}
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || strconv.Itoa(x) != a || strconv.Itoa(y) != b {
		return s
	}
	return `\frac{` + a + "}{" + b + "}"
}
