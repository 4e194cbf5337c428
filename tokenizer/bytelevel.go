package tokenizer

import "unicode/utf8"

// byteToRune is GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves,
// the other 68 bytes for U+0100 onwards in byte order, so that every byte is one visible rune.
var byteToRune [256]rune

// runeToByte inverts byteToRune for runes below 0x144; -1 marks a rune outside the alphabet.
var runeToByte [0x144]int16

func init() {
	next := rune(256)
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = next
			next++
		}
	}
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	for b, r := range byteToRune {
		runeToByte[r] = int16(b)
	}
}

// byteLevelDecode maps a token's spelling back to bytes. A spelling with a rune outside the
// alphabet decodes to its own UTF-8 bytes, as Hugging Face's ByteLevel decoder does.
func byteLevelDecode(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r >= rune(len(runeToByte)) || runeToByte[r] < 0 {
			return []byte(s)
		}
		out = append(out, byte(runeToByte[r]))
	}
	return out
}

// appendLossy appends b to dst as valid UTF-8, one U+FFFD per maximal invalid subsequence
// (the WHATWG rule that Rust's from_utf8_lossy and JS's TextDecoder follow).
func appendLossy(dst, b []byte) []byte {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r != utf8.RuneError || n > 1 {
			dst = append(dst, b[:n]...)
			b = b[n:]
			continue
		}
		dst = utf8.AppendRune(dst, utf8.RuneError)
		b = b[invalidPrefix(b):]
	}
	return dst
}

// invalidPrefix is the length of the maximal prefix of b that starts a well-formed UTF-8
// sequence without completing it (at least 1): the bytes one U+FFFD replaces.
func invalidPrefix(b []byte) int {
	need, lo, hi := 0, byte(0x80), byte(0xBF)
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}
