package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is one entry of tokenizer.json's added_tokens as matching needs it.
type addedToken struct {
	id                         int32
	content                    string
	singleWord, lstrip, rstrip bool
}

// matcher finds added tokens in text, leftmost first and longest first among those starting
// at the same place (Hugging Face's aho-corasick LeftmostLongest), with a byte trie: the cost
// per text byte is bounded by the longest token. The trie's edges are one map keyed by (node,
// byte), a few tens of bytes per byte of token content (a map per node would cost hundreds).
type matcher struct {
	first [256]bool
	edges map[uint64]int32 // node<<8 | byte → child node
	tok   []int32          // per node: index in toks, -1 when no token ends here
	toks  []addedToken
}

func newMatcher(toks []addedToken) *matcher {
	if len(toks) == 0 {
		return nil
	}
	m := &matcher{edges: map[uint64]int32{}, tok: []int32{-1}, toks: toks}
	for i, a := range toks {
		m.first[a.content[0]] = true
		n := int32(0)
		for j := 0; j < len(a.content); j++ {
			key := uint64(n)<<8 | uint64(a.content[j])
			nx, ok := m.edges[key]
			if !ok {
				nx = int32(len(m.tok))
				m.edges[key] = nx
				m.tok = append(m.tok, -1)
			}
			n = nx
		}
		m.tok[n] = int32(i) // a content listed twice keeps its last entry
	}
	return m
}

// longest returns the index of the longest token that starts text[i:], or -1.
func (m *matcher) longest(text string, i int) (tok, end int) {
	tok, n := -1, int32(0)
	for j := i; j < len(text); j++ {
		nx, ok := m.edges[uint64(n)<<8|uint64(text[j])]
		if !ok {
			break
		}
		n = nx
		if t := m.tok[n]; t >= 0 {
			tok, end = int(t), j+1
		}
	}
	return tok, end
}

// segment is a piece of text: an added token's id, or -1 for text to tokenize.
type segment struct {
	start, end int
	id         int32
}

// split cuts text into added tokens and the text between them, appending to segs. A nil matcher yields text as one segment (none when empty).
func (m *matcher) split(segs []segment, text string) []segment {
	from := 0
	for i := 0; m != nil && i < len(text); {
		if !m.first[text[i]] {
			i++
			continue
		}
		k, end := m.longest(text, i)
		if k < 0 {
			i++
			continue
		}
		a := &m.toks[k]
		if a.singleWord && !isWordAlone(text, i, end) {
			i = end
			continue
		}
		start := i
		if a.lstrip {
			start = from + len(strings.TrimRightFunc(text[from:start], unicode.IsSpace))
		}
		if a.rstrip {
			end = len(text) - len(strings.TrimLeftFunc(text[end:], unicode.IsSpace))
		}
		if from < start {
			segs = append(segs, segment{from, start, -1})
		}
		segs = append(segs, segment{start, end, a.id})
		from, i = end, end
	}
	if from < len(text) {
		segs = append(segs, segment{from, len(text), -1})
	}
	return segs
}

// isWordAlone reports whether text[i:end] has no word character right before or after it.
func isWordAlone(text string, i, end int) bool {
	before, _ := utf8.DecodeLastRuneInString(text[:i])
	after, _ := utf8.DecodeRuneInString(text[end:])
	return (i == 0 || !isWordRune(before)) && (end == len(text) || !isWordRune(after))
}

// isWordRune approximates Rust's char::is_alphanumeric, which single_word uses.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r)
}
