package tokenizer

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// tinyJSON is a hand-made tokenizer.json: the 256 byte symbols with id = byte value, five
// merges, and added tokens with each flag, so that goldens can be worked by hand.
func tinyJSON(mutate func(m map[string]any)) []byte {
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(byteToRune[b])] = b
	}
	merges := [][2]string{{"a", "b"}, {"b", "c"}, {"ab", "c"}, {"Ġ", "a"}, {"a", "a"}}
	for i, m := range merges {
		vocab[m[0]+m[1]] = 256 + i
	}
	tok := map[string]any{
		"version":       "1.0",
		"normalizer":    map[string]any{"type": "NFC"},
		"pre_tokenizer": splitWith(qwenPattern),
		"decoder":       map[string]any{"type": "ByteLevel"},
		"added_tokens": []any{
			map[string]any{"id": 300, "content": "<|im_start|>", "special": true},
			map[string]any{"id": 301, "content": "<|im_end|>", "special": true},
			map[string]any{"id": 302, "content": "Å", "normalized": true},
			map[string]any{"id": 303, "content": "[M]", "lstrip": true, "rstrip": true},
			map[string]any{"id": 304, "content": "<|im_end|>!", "special": true},
		},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
	}
	if mutate != nil {
		mutate(tok)
	}
	b, _ := json.Marshal(tok)
	return b
}

// splitWith is a pre_tokenizer of Split with regex, then ByteLevel.
func splitWith(regex string) map[string]any {
	return map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": regex}, "behavior": "Isolated", "invert": false},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
	}}
}

func tinyTokenizer(t testing.TB, cfg []byte) *BPE {
	t.Helper()
	tok, err := Load(tinyJSON(nil), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestMergeOrder: lowest rank first, leftmost first among equal ranks (worked by hand).
func TestMergeOrder(t *testing.T) {
	tok := tinyTokenizer(t, nil)
	for _, c := range []struct {
		in   string
		want []int32
	}{
		{"abc", []int32{258}},            // ab (rank 0), then ab+c (rank 2)
		{"bcab", []int32{257, 256}},      // ab before bc; bc+ab has no merge
		{"aaa", []int32{260, 'a'}},       // a+a leftmost
		{"aaaa", []int32{260, 260}},      // both pairs of a
		{" abc", []int32{' ', 258}},      // ab beats Ġa; Ġ+abc has no merge
		{" ac", []int32{259, 'c'}},       // Ġa
		{"x", []int32{'x'}},              // one byte
		{"é", []int32{0xC3, 0xA9}},       // two bytes, no merge
		{"e\u0301", []int32{0xC3, 0xA9}}, // NFC first
	} {
		if got := tok.Encode(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestSplit checks the pre-tokenizer against matches of Qwen's regex worked by hand (digits
// 1), and of Llama 3's (digits 3), which differs only in runs of numbers.
func TestSplit(t *testing.T) {
	for _, c := range []struct {
		in     string
		digits int
		want   []string
	}{
		{"Hello world", 1, []string{"Hello", " world"}},
		{"a   b", 1, []string{"a", "  ", " b"}},
		{"x\n\n y", 1, []string{"x", "\n\n", " y"}},
		{"don't I'M we'RE", 1, []string{"don", "'t", " I", "'M", " we", "'RE"}},
		{"123", 1, []string{"1", "2", "3"}},
		{"a  \n", 1, []string{"a", "  \n"}},
		{"a  ", 1, []string{"a", "  "}},
		{"!!!\n\nx", 1, []string{"!!!\n\n", "x"}},
		{" ?!", 1, []string{" ?!"}},
		{"\t\tx", 1, []string{"\t", "\tx"}},
		{"(hi)", 1, []string{"(hi", ")"}},
		{"''s", 1, []string{"''", "s"}},
		{"\u3000y", 1, []string{"\u3000y"}},
		{" \r\n\r\nz", 1, []string{" \r\n\r\n", "z"}},
		{"x \t 9", 1, []string{"x", " \t", " ", "9"}},
		{"1234567", 3, []string{"123", "456", "7"}},
		{"x 12345y", 3, []string{"x", " ", "123", "45", "y"}},
		{"٣٤٥٦ ½Ⅻ²①", 3, []string{"٣٤٥", "٦", " ", "½Ⅻ²", "①"}},
		{"I'M We'Ll x'ſ 'd", 3, []string{"I", "'M", " We", "'Ll", " x", "'ſ", " '", "d"}},
		{"3.14159", 3, []string{"3", ".", "141", "59"}},
		{"a1b22c333", 3, []string{"a", "1", "b", "22", "c", "333"}},
	} {
		var got []string
		for i := 0; i < len(c.in); {
			end := nextPiece(c.in, i, c.digits)
			got = append(got, c.in[i:end])
			i = end
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("split(%q, digits %d) = %q, want %q", c.in, c.digits, got, c.want)
		}
	}
}

// TestAddedTokens: longest match first, lstrip/rstrip swallow whitespace, normalized tokens
// match after NFC, and decoding writes added tokens verbatim.
func TestAddedTokens(t *testing.T) {
	tok := tinyTokenizer(t, nil)
	for _, c := range []struct {
		in   string
		want []int32
	}{
		{"<|im_end|>!x", []int32{304, 'x'}},
		{"<|im_end|>x", []int32{301, 'x'}},
		{"x<|im_start|><|im_end|", []int32{'x', 300, '<', '|', 'i', 'm', '_', 'e', 'n', 'd', '|'}},
		{"c  [M]  c", []int32{'c', 303, 'c'}},
		{"A\u030a", []int32{302}},
	} {
		if got := tok.Encode(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := tok.Decode([]int32{'x', 301, 258, 999, -1, 280}); got != "x<|im_end|>abc" {
		t.Errorf("Decode = %q", got)
	}
}

// TestDecodeLossy: one U+FFFD per maximal invalid subsequence (WHATWG), worked by hand.
func TestDecodeLossy(t *testing.T) {
	tok := tinyTokenizer(t, nil)
	for _, c := range []struct {
		in   []int32
		want string
	}{
		{[]int32{0xE2}, "\ufffd"},
		{[]int32{0xE2, 0x82}, "\ufffd"},
		{[]int32{0xE2, 'A'}, "\ufffdA"},
		{[]int32{0xF0, 0x9F, 0x98}, "\ufffd"},
		{[]int32{0xC0, 0xAF}, "\ufffd\ufffd"},
		{[]int32{0xED, 0xA0, 0x80}, "\ufffd\ufffd\ufffd"},
		{[]int32{0xE2, 301, 0x82, 0xAC}, "\ufffd<|im_end|>\ufffd\ufffd"},
		{[]int32{0xE2, 0x82, 0xAC}, "€"},
	} {
		if got := tok.Decode(c.in); got != c.want {
			t.Errorf("Decode(%x) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestAccessors(t *testing.T) {
	tok := tinyTokenizer(t, nil)
	if tok.VocabSize() != 305 {
		t.Errorf("VocabSize = %d, want 305", tok.VocabSize())
	}
	if id, ok := tok.TokenID("Ġa"); !ok || id != 259 {
		t.Errorf("TokenID(Ġa) = %d %v", id, ok)
	}
	if id, ok := tok.TokenID("<|im_start|>"); !ok || id != 300 {
		t.Errorf("TokenID(<|im_start|>) = %d %v", id, ok)
	}
	if _, ok := tok.TokenID("nope"); ok {
		t.Error("TokenID(nope) found")
	}
	if !tok.IsSpecial(301) || tok.IsSpecial(303) || tok.IsSpecial('a') || tok.IsSpecial(-1) || tok.IsSpecial(1<<20) {
		t.Error("IsSpecial: only 300, 301 and 304 are special")
	}
	if tok.EOS() != 301 {
		t.Errorf("EOS = %d, want 301 (<|im_end|>)", tok.EOS())
	}
	noIMEnd, err := Load(tinyJSON(func(m map[string]any) { m["added_tokens"] = []any{map[string]any{"id": 300, "content": "</s>"}} }),
		[]byte(`{"eos_token": {"content": "</s>"}}`))
	if err != nil || noIMEnd.EOS() != 300 {
		t.Errorf("EOS from config = %d, %v; want 300", noIMEnd.EOS(), err)
	}
}

// TestLoadRefuses: every unsupported shape is refused with the field named.
func TestLoadRefuses(t *testing.T) {
	set := func(path string, v any) func(map[string]any) {
		return func(m map[string]any) {
			keys := strings.Split(path, ".")
			for _, k := range keys[:len(keys)-1] {
				m = m[k].(map[string]any)
			}
			m[keys[len(keys)-1]] = v
		}
	}
	for _, c := range []struct {
		mutate      func(map[string]any)
		field       string
		unsupported bool
	}{
		{set("model.type", "WordPiece"), "model.type", true},
		{set("model.dropout", 0.1), "model.dropout", true},
		{set("model.byte_fallback", true), "model.byte_fallback", true},
		{set("model.continuing_subword_prefix", "##"), "continuing_subword_prefix", true},
		{set("normalizer", map[string]any{"type": "NFKC"}), "normalizer.type", true},
		{set("normalizer", map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "Lowercase"}}}), "normalizer.normalizers[0]", true},
		{set("pre_tokenizer", map[string]any{"type": "Whitespace"}), "pre_tokenizer.type", true},
		{set("pre_tokenizer", nil), "pre_tokenizer", true},
		{set("pre_tokenizer", splitWith(`\p{N}{1,4}|\p{L}+|\s+`)), "pretokenizers[0].pattern.Regex \"\\\\p{N}{1,4}", true},
		{set("pre_tokenizer", splitWith(llama3Pattern+"|x")), "is not one this package implements (only Qwen2/2.5/3's or Llama 3's)", true},
		{set("decoder", map[string]any{"type": "WordPiece"}), "decoder.type", true},
		{set("model.merges", []any{"a b c"}), "model.merges[0]", false},
		{set("model.merges", []any{[]string{"a", "zz"}}), "model.merges[0]", false},
		{set("model.vocab", map[string]any{"a": -1}), "model.vocab", false},
		{set("model.vocab", map[string]any{}), "model.vocab", false},
		{set("added_tokens", []any{map[string]any{"id": 1 << 40, "content": "x"}}), "added_tokens[0]", false},
		{set("added_tokens", []any{map[string]any{"id": 1 << 30, "content": "x"}}), "sparse", false},
		{set("added_tokens", []any{map[string]any{"id": 5, "content": ""}}), "added_tokens[0]", false},
	} {
		_, err := Load(tinyJSON(c.mutate), nil)
		if err == nil || !strings.Contains(err.Error(), c.field) || strings.Contains(err.Error(), "\n") {
			t.Errorf("want a one-line error naming %s, got %v", c.field, err)
			continue
		}
		if errors.Is(err, ErrUnsupported) != c.unsupported {
			t.Errorf("%s: errors.Is(ErrUnsupported) = %v", c.field, !c.unsupported)
		}
	}
	if _, err := Load([]byte("{"), nil); err == nil {
		t.Error("truncated JSON accepted")
	}
	if _, err := Load(tinyJSON(nil), []byte("[")); err == nil {
		t.Error("bad tokenizer_config.json accepted")
	}
}

// TestRoundTripTiny: decode(encode(s)) = s with its stretches between added tokens in NFC,
// on the generated corpus, no oracle needed ([M] strips whitespace: left out).
func TestRoundTripTiny(t *testing.T) {
	tok := tinyTokenizer(t, nil)
	for _, s := range testCorpus(2, 2000) {
		if got, want := tok.Decode(tok.Encode(s)), wantRoundTrip(tok, s); got != want && !strings.Contains(s, "[M]") {
			t.Fatalf("round trip of %q: %q", s, got)
		}
	}
}

// TestIgnoreMergesAndSingleWord: ignore_merges takes a whole word found in the vocabulary;
// a single_word token matches only between non-word characters (worked by hand).
func TestIgnoreMergesAndSingleWord(t *testing.T) {
	mutate := func(ignore bool) func(map[string]any) {
		return func(m map[string]any) {
			model := m["model"].(map[string]any)
			model["vocab"].(map[string]int)["xyz"] = 270
			model["ignore_merges"] = ignore
			m["added_tokens"] = []any{map[string]any{"id": 280, "content": "W", "single_word": true}}
		}
	}
	for _, c := range []struct {
		ignore bool
		in     string
		want   []int32
	}{
		{true, "xyz", []int32{270}},
		{false, "xyz", []int32{'x', 'y', 'z'}},
		{true, "abc", []int32{258}},
		{false, "aWb", []int32{'a', 'W', 'b'}},
		{false, "a W.", []int32{'a', ' ', 280, '.'}},
		{false, "W", []int32{280}},
	} {
		tok, err := Load(tinyJSON(mutate(c.ignore)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Encode(c.in); !slices.Equal(got, c.want) {
			t.Errorf("ignore_merges %v: Encode(%q) = %v, want %v", c.ignore, c.in, got, c.want)
		}
	}
}

// TestConcurrentEncode: goroutines sharing one tokenizer (and its word cache) get the ids a
// single goroutine gets.
func TestConcurrentEncode(t *testing.T) {
	corpus := testCorpus(4, 300)
	want := make([][]int32, len(corpus))
	for i, s := range corpus {
		want[i] = tinyTokenizer(t, nil).Encode(s)
	}
	tok := tinyTokenizer(t, nil)
	errs := make(chan string, 4)
	for g := range 4 {
		go func() {
			for i := range corpus {
				k := (i + g*77) % len(corpus)
				if got := tok.Encode(corpus[k]); !slices.Equal(got, want[k]) {
					errs <- corpus[k]
					return
				}
			}
			errs <- ""
		}()
	}
	for range 4 {
		if s := <-errs; s != "" {
			t.Errorf("concurrent Encode(%q) differs", s)
		}
	}
}

// TestNFCLongRuns: past 30 combining marks x/text inserts U+034F; nfc does not and still sorts
// by combining class and composes (worked by hand), and it agrees with x/text elsewhere.
func TestNFCLongRuns(t *testing.T) {
	in := "A" + strings.Repeat("\u0307\u0323", 20)
	// Dot below (class 220) sorts before dot above (230); A + dot below is U+1EA0; the other
	// dots below are blocked by the first; U+1EA0 has no composite with a dot above.
	want := "\u1EA0" + strings.Repeat("\u0323", 19) + strings.Repeat("\u0307", 20)
	if got := nfc(in); got != want {
		t.Errorf("nfc = %+q, want %+q", got, want)
	}
	if norm.NFC.String(in) == want {
		t.Error("x/text's NFC no longer inserts U+034F: the fallback may be unneeded")
	}
	jamo := "\u1100" + strings.Repeat("\u1161", 40)
	if got := nfc(jamo); got != "\uAC00"+strings.Repeat("\u1161", 39) {
		t.Errorf("nfc(jamo run) = %+q", got)
	}
	for _, s := range testCorpus(5, 2000) {
		if got, want := nfcLong(s), norm.NFC.String(s); got != want && !strings.Contains(want, cgj) {
			t.Fatalf("nfcLong(%+q) = %+q, x/text %+q", s, got, want)
		}
	}
}
