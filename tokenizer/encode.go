package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// Encode returns the ids of text. No special tokens are added; added-token text in the input
// (such as "<|im_end|>") becomes the token's id, as Hugging Face's tokenizer does.
func (t *BPE) Encode(text string) []int32 {
	if !utf8.ValidString(text) {
		text = replaceInvalid(text)
	}
	ids := make([]int32, 0, len(text)/3+1)
	var segs, inner []segment
	segs = t.rawMatch.split(segs[:0], text) // a nil matcher yields the whole text
	for _, sg := range segs {
		if sg.id >= 0 {
			ids = append(ids, sg.id)
			continue
		}
		piece := text[sg.start:sg.end]
		if t.nfc {
			piece = nfc(piece)
		}
		inner = t.normMatch.split(inner[:0], piece)
		for _, in := range inner {
			if in.id >= 0 {
				ids = append(ids, in.id)
			} else {
				ids = t.encodeText(ids, piece[in.start:in.end])
			}
		}
	}
	return ids
}

// replaceInvalid replaces every byte of s that is not part of valid UTF-8 with U+FFFD.
func replaceInvalid(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

// encodeText pre-tokenizes normalized text without added tokens and appends the BPE ids.
func (t *BPE) encodeText(ids []int32, s string) []int32 {
	var w mergeWork
	for i := 0; i < len(s); {
		end := nextPiece(s, i, t.digits)
		ids = t.encodeWord(ids, s[i:end], &w)
		i = end
	}
	return ids
}

func (t *BPE) encodeWord(ids []int32, word string, w *mergeWork) []int32 {
	if len(word) == 1 {
		if id := t.byteID[word[0]]; id >= 0 {
			ids = append(ids, id)
		}
		return ids
	}
	if t.ignoreMerges {
		if id, ok := t.vocab[byteLevelSpelling(word)]; ok {
			return append(ids, id)
		}
	}
	if len(word) <= cacheWordLen {
		if got, ok := t.cache.get(word); ok {
			return append(ids, got...)
		}
	}
	start := len(ids)
	ids = t.merge(ids, word, w)
	if len(word) <= cacheWordLen {
		t.cache.put(word, append([]int32(nil), ids[start:]...))
	}
	return ids
}

func byteLevelSpelling(word string) string {
	var b strings.Builder
	for i := 0; i < len(word); i++ {
		b.WriteRune(byteToRune[word[i]])
	}
	return b.String()
}

// mergeWork is the scratch space of one word's merges: a linked list of symbols and a heap of
// candidate pairs, reused across the words of one Encode call.
type mergeWork struct {
	id         []int32
	prev, next []int32
	heap       []pairEntry // smallest key first
}

// pairEntry is a candidate merge: key = rank<<32 | position of the left symbol (so equal ranks
// pop leftmost first), with the pair's ids when pushed and the merged id.
type pairEntry struct {
	key                uint64
	left, right, newID int32
}

// merge applies the merges to the bytes of word, lowest rank first and leftmost first among
// equal ranks (the order of Hugging Face's BPE), and appends the resulting ids.
func (t *BPE) merge(ids []int32, word string, w *mergeWork) []int32 {
	w.id, w.prev, w.next, w.heap = w.id[:0], w.prev[:0], w.next[:0], w.heap[:0]
	for i := 0; i < len(word); i++ {
		if id := t.byteID[word[i]]; id >= 0 { // a byte missing from the vocabulary is dropped
			n := int32(len(w.id))
			w.id, w.prev, w.next = append(w.id, id), append(w.prev, n-1), append(w.next, n+1)
		}
	}
	if len(w.id) == 0 {
		return ids
	}
	w.next[len(w.next)-1] = -1
	for p := range int32(len(w.id) - 1) {
		t.pushPair(w, p)
	}
	for len(w.heap) > 0 {
		top := w.pop()
		p := int32(uint32(top.key))
		q := w.next[p]
		if q < 0 || w.id[p] != top.left || w.id[q] != top.right {
			continue // the pair changed since it was pushed
		}
		w.id[p], w.id[q] = top.newID, -1
		w.next[p] = w.next[q]
		if nq := w.next[q]; nq >= 0 {
			w.prev[nq] = p
		}
		if pp := w.prev[p]; pp >= 0 {
			t.pushPair(w, pp)
		}
		t.pushPair(w, p)
	}
	for p := int32(0); p >= 0; p = w.next[p] {
		ids = append(ids, w.id[p])
	}
	return ids
}

func (t *BPE) pushPair(w *mergeWork, p int32) {
	q := w.next[p]
	if q < 0 {
		return
	}
	m, ok := t.merges[pairKey(w.id[p], w.id[q])]
	if !ok {
		return
	}
	w.heap = append(w.heap, pairEntry{m>>32<<32 | uint64(p), w.id[p], w.id[q], int32(uint32(m))})
	h := w.heap
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if h[parent].key <= h[i].key {
			break
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

func (w *mergeWork) pop() pairEntry {
	h := w.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < len(h) && h[l].key < h[small].key {
			small = l
		}
		if r := l + 1; r < len(h) && h[r].key < h[small].key {
			small = r
		}
		if small == i {
			break
		}
		h[i], h[small] = h[small], h[i]
		i = small
	}
	w.heap = h
	return top
}
