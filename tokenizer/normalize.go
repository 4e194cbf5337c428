package tokenizer

import (
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// cgj is the COMBINING GRAPHEME JOINER that x/text/unicode/norm inserts to keep text in the
// Stream-Safe Text Format (UAX #15) after 30 non-starters. Full NFC, which Hugging Face's
// tokenizers apply, does not insert it.
const cgj = "\u034f"

// nfc returns the NFC form of s. It uses x/text's normalizer and falls back to the textbook
// algorithm (decompose, reorder, compose) where that normalizer inserted a CGJ.
func nfc(s string) string {
	out := norm.NFC.String(s)
	if out != s && strings.Count(out, cgj) > strings.Count(s, cgj) {
		return nfcLong(s)
	}
	return out
}

func ccc(r rune) uint8 { return norm.NFD.PropertiesString(string(r)).CCC() }

// nfcLong is canonical decomposition, canonical ordering and canonical composition without a
// limit on the length of a run of combining marks.
func nfcLong(s string) string {
	var rs []rune
	for _, r := range s {
		for _, d := range norm.NFD.String(string(r)) {
			rs = append(rs, d)
		}
	}
	for i := 0; i < len(rs); {
		j := i
		for j < len(rs) && ccc(rs[j]) != 0 {
			j++
		}
		if j-i > 1 {
			slices.SortStableFunc(rs[i:j], func(a, b rune) int { return int(ccc(a)) - int(ccc(b)) })
		}
		i = j + 1
	}
	return string(compose(rs))
}

// compose applies canonical composition to decomposed, ordered runes in place.
func compose(rs []rune) []rune {
	if len(rs) == 0 {
		return rs
	}
	starter, last := 0, int(ccc(rs[0]))
	if last != 0 {
		last = 256 // a leading non-starter blocks composition until the first starter
	}
	n := 1
	for _, c := range rs[1:] {
		cc := int(ccc(c))
		if p, ok := primaryComposite(rs[starter], c); ok && (last < cc || last == 0) {
			rs[starter] = p
			continue
		}
		if cc == 0 {
			starter = n
		}
		last = cc
		rs[n] = c
		n++
	}
	return rs[:n]
}

// primaryComposite returns the rune a+b composes to under NFC, if any.
func primaryComposite(a, b rune) (rune, bool) {
	c := norm.NFC.String(string(a) + string(b))
	r, size := utf8.DecodeRuneInString(c)
	return r, size == len(c) && r != utf8.RuneError
}
