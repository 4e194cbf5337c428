package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Rune classes of the pre-tokenizer patterns: \p{L}, \p{N}, \s, and the rest.
const (
	clsOther = iota
	clsLetter
	clsNumber
	clsSpace
)

var asciiClass [utf8.RuneSelf]uint8

func init() {
	for r := range rune(utf8.RuneSelf) {
		asciiClass[r] = classSlow(r)
	}
}

func classSlow(r rune) uint8 {
	switch {
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	case unicode.IsSpace(r): // Unicode White_Space, Oniguruma's \s
		return clsSpace
	}
	return clsOther
}

// at decodes the rune at s[i:] and its class.
func at(s string, i int) (r rune, n int, cls uint8) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, n = utf8.DecodeRuneInString(s[i:])
	return r, n, classSlow(r)
}

// nextPiece returns the end of the pre-token that starts at s[i], i < len(s): the match of
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// at i, each alternative tried in order as the regex engine does: Qwen's pattern with digits
// 1 (written \p{N}), Llama 3's with digits 3. Every rune is a letter, a number, a space or
// other, so some alternative always matches and pieces tile the text.
func nextPiece(s string, i, digits int) int {
	r0, n0, c0 := at(s, i)
	if r0 == '\'' {
		if k := contraction(s[i+1:]); k > 0 {
			return i + 1 + k
		}
	}
	if c0 == clsLetter {
		return runOf(s, i+n0, clsLetter)
	}
	if r0 != '\r' && r0 != '\n' && c0 != clsNumber && i+n0 < len(s) {
		if _, n1, c1 := at(s, i+n0); c1 == clsLetter {
			return runOf(s, i+n0+n1, clsLetter)
		}
	}
	if c0 == clsNumber {
		return numbers(s, i+n0, digits-1)
	}
	j := i
	if r0 == ' ' {
		j++
	}
	if j < len(s) {
		if _, n, c := at(s, j); c == clsOther {
			return newlines(s, runOf(s, j+n, clsOther))
		}
	}
	return spaces(s, i)
}

// spaces matches \s*[\r\n]+|\s+(?!\S)|\s+ at the space s[i].
func spaces(s string, i int) int {
	k, lastNL, lastStart := i, -1, i
	for k < len(s) {
		r, n, c := at(s, k)
		if c != clsSpace {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = k + n
		}
		lastStart = k
		k += n
	}
	switch {
	case lastNL > 0: // \s*[\r\n]+ backtracks to the last line break of the run
		return lastNL
	case k == len(s) || lastStart == i: // \s+(?!\S) at the end, or \s+ for a single space
		return k
	}
	return lastStart // \s+(?!\S) leaves the run's last space to the next piece
}

// contraction returns the length after the apostrophe of 's 't 're 've 'm 'll 'd in any case
// (Unicode simple case folding: ſ U+017F folds to s), or 0.
func contraction(s string) int {
	if len(s) >= 2 && s[0] == 0xC5 && s[1] == 0xBF {
		return 2
	}
	if len(s) == 0 {
		return 0
	}
	switch s[0] | 0x20 {
	case 's', 't', 'm', 'd':
		return 1
	}
	if len(s) < 2 {
		return 0
	}
	switch string([]byte{s[0] | 0x20, s[1] | 0x20}) {
	case "re", "ve", "ll":
		return 2
	}
	return 0
}

// numbers extends a run of numbers ending at s[i] by at most k more.
func numbers(s string, i, k int) int {
	for ; k > 0 && i < len(s); k-- {
		_, n, c := at(s, i)
		if c != clsNumber {
			break
		}
		i += n
	}
	return i
}

func runOf(s string, i int, cls uint8) int {
	for i < len(s) {
		_, n, c := at(s, i)
		if c != cls {
			break
		}
		i += n
	}
	return i
}

func newlines(s string, i int) int {
	for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}
