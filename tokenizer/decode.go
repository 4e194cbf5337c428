package tokenizer

// Decode returns the text of ids: added tokens verbatim, BPE tokens through the inverse
// byte-level map, invalid UTF-8 between added tokens replaced by U+FFFD per maximal invalid
// subsequence. Ids that name no token are skipped.
func (t *BPE) Decode(ids []int32) string {
	out := make([]byte, 0, 4*len(ids))
	var run []byte // bytes of consecutive BPE tokens, made valid at the next added token
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.pieces) || t.pieces[id] == nil {
			continue
		}
		if t.isAdded[id] {
			out = appendLossy(out, run)
			run = run[:0]
			out = append(out, t.pieces[id]...)
			continue
		}
		run = append(run, t.pieces[id]...)
	}
	return string(appendLossy(out, run))
}

// VocabSize is the highest id + 1 over the BPE vocabulary and the added tokens.
func (t *BPE) VocabSize() int { return len(t.pieces) }

// TokenID returns the id of the token spelled s as in tokenizer.json: an added token's
// content, or a BPE token in the byte-level alphabet (a leading space is "Ġ").
func (t *BPE) TokenID(s string) (int32, bool) {
	if id, ok := t.added[s]; ok {
		return id, true
	}
	id, ok := t.vocab[s]
	return id, ok
}

// IsSpecial reports whether id is an added token marked special in tokenizer.json (such as
// <|im_end|>), which a response's text leaves out.
func (t *BPE) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.isSpecial) && t.isSpecial[id]
}

// EOS is the id that ends a turn in chat: <|im_end|> when the tokenizer has it, else the
// config's eos_token, else -1.
func (t *BPE) EOS() int32 { return t.eos }
