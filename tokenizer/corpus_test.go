package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"unicode"
)

// The test corpus: strings made of fragments of many scripts and odd text, drawn from a seeded
// RNG so that every run (and the JS oracle) sees the same strings.

// runeRanges are code point ranges of scripts; they avoid code points assigned after Unicode 15
// so that Go's and node's Unicode tables agree on letter/number/space classes. anyRunes draws
// from all assigned code points up to U+2FFFF too.
var runeRanges = [][2]rune{
	{'a', 'z'}, {'A', 'Z'}, {0xC0, 0xFF}, {0x100, 0x17F}, // Latin
	{0x391, 0x3C9}, {0x410, 0x44F}, // Greek, Cyrillic
	{0x5D0, 0x5EA}, {0x620, 0x64A}, {0x660, 0x669}, // Hebrew, Arabic, Arabic-Indic digits
	{0x905, 0x939}, {0x93E, 0x94D}, {0x966, 0x96F}, // Devanagari letters, signs, digits
	{0xE01, 0xE30}, {0xE31, 0xE3A}, {0xE50, 0xE59}, // Thai
	{0x3041, 0x3096}, {0x30A1, 0x30FA}, {0x4E00, 0x9FA5}, // kana, CJK
	{0xAC00, 0xD7A3}, {0x1100, 0x1112}, {0x1161, 0x1175}, // Hangul syllables and jamo
	{0x300, 0x36F},                                       // combining marks
	{0x2000, 0x206F}, {0x2190, 0x21FF}, {0x2200, 0x22FF}, // punctuation, arrows, math
	{0xFF01, 0xFF5E}, {0x2160, 0x2188}, {0xBC, 0xBE}, // fullwidth, Roman numerals, fractions
	{0x1F600, 0x1F64F}, {0x1F300, 0x1F5FF}, // emoji
}

var fragments = []string{
	" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", "\r\n\r\n", " \n ", "\n \n", "\u00a0", "\u3000",
	"\u2028", "\u0085", "\u200b", "\ufeff", "\u000b", "\f",
	"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>", "<think>", "</think>",
	"<|im_start|>user\n", "<|im_", "|>", "<|im_end|", "<<|im_end|>>", "<|fim_prefix|>", "<|vision_pad|>",
	"'s", "'S", "'t", "'re", "'RE", "'ve", "'m", "'ll", "'LL", "'d", "'D", "'ſ", "''", "'x", "don't", "I'M",
	"0", "7", "42", "3.14159", "1,000,000", "-12", "1e-9", "0x1F", "٣٤٥", "१२३", "½", "Ⅻ", "²", "①",
	"👨\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "🇯🇵", "🇺🇸🇫🇷", "👍🏽", "❤️", "🧑🏿\u200d💻", "#️⃣", "😀😀😀",
	"func main() {\n\tfmt.Println(\"hi\")\n}\n", "x += y**2; // note", "if (a && b) { return; }", "<div class=\"a\">",
	"def f(x):\n    return x\n", "SELECT * FROM t WHERE id = 3;", "    indented", "a\\nb", "{\"k\": [1, 2]}",
	"\u1100" + strings.Repeat("\u1161", 40), "A" + strings.Repeat("\u0307\u0323", 20),
	"\u0301", "e\u0301", "A\u030a", "\u1100\u1161\u11a8", "\ufffd", "\ue000", "\uffff", "\U0010fffd", "ﬁ", "Ǆ",
	"\u2019s", "'S'S", "\r\r\n", "\n\r", "\t\n", " \t\r\n ", "a\u200db", "\u00ad", "\u2066x\u2069",
	"\U0001F3F4\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F", "\U0001F9D1\u200d\U0001F91D\u200d\U0001F9D1",
	"\u0661\u0662", "\U0001D7D8\U0001D7D9", "x\u20dd", "\u0e01\u0e33", "\u0915\u094d\u0937",
	"Hello", "world", "The quick brown fox", "naïve café", "Straße", "İstanbul", "ǅ", "ΣΑΣ", "東京", "한국어",
	"مرحبا", "नमस्ते", "สวัสดี", "Привет", "שלום", "...", "!!!", "?!", "---", "***", "$$", "@@", "~~",
}

// randomRunes returns n runes from one script range.
func randomRunes(r *rand.Rand, n int) string {
	rg := runeRanges[r.IntN(len(runeRanges))]
	var b strings.Builder
	for range n {
		b.WriteRune(rg[0] + rune(r.IntN(int(rg[1]-rg[0]+1))))
	}
	return b.String()
}

// anyRunes returns code points below U+30000 that Go's tables (unicode.Version) assign,
// filling at least n bytes. Code points assigned later are left out: Go classes them as
// unassigned where node's newer tables may say letter, and the split follows the class.
func anyRunes(r *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		if c := rune(r.IntN(0x30000)); unicode.IsOneOf(assigned, c) {
			b.WriteRune(c)
		}
	}
	return b.String()
}

var assigned = []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc, unicode.Cf, unicode.Co}

// longWord returns one very long run of one kind.
func longWord(r *rand.Rand) string {
	switch r.IntN(5) {
	case 0:
		return strings.Repeat("a", 1000+r.IntN(1000))
	case 1:
		return randomRunes(r, 300+r.IntN(500))
	case 2:
		return strings.Repeat(" ", 200+r.IntN(400)) + "x"
	case 3:
		return strings.Repeat("9", 500)
	}
	return strings.Repeat("😀", 150)
}

// llamaFragments add Llama 3's added tokens, runs of digits (split in groups of three),
// contractions in mixed case and runs of whitespace to fragments.
var llamaFragments = append(slices.Clip(fragments),
	"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",
	"<|start_header_id|>assistant<|end_header_id|>\n\n", "<|reserved_special_token_0|>",
	"<|reserved_special_token_250|>", "<|reserved_special_token_25", "<|eot_id", "<|eot_id|>>", "<<|eot_id|>",
	"<|python_tag|>", "<|eom_id|>", "<|finetune_right_pad_id|>",
	"1234", "12345", "123456", "1234567890", "00000", "3.141592653", "1,234,567", "2024-07-23",
	"١٢٣٤٥٦٧", "१२३४५", "¼½¾⅓", "ⅠⅡⅢⅣⅤ", "x2y33z444w5555", "v1.2.34567",
	"'Re", "'rE", "'Ve", "'vE", "'Ll", "'lL", "'lL'", "'M", "'D", "'T", "SHE'S", "They'Ve", "WE'rE", "i'D",
	"     ", "        ", "\t \t", "\n\n\n   \n", "  \r\n  ", "\u00a0\u00a0 ", "\n \n \n",
)

// testCorpus returns n strings drawn from seed over fragments.
func testCorpus(seed uint64, n int) []string { return corpusOf(seed, n, fragments) }

// corpusOf returns n strings drawn from seed over frags.
func corpusOf(seed uint64, n int, frags []string) []string {
	r := rand.New(rand.NewPCG(seed, 0x70c))
	out := make([]string, 0, n)
	for len(out) < n {
		if r.IntN(100) == 0 {
			out = append(out, longWord(r))
			continue
		}
		var b strings.Builder
		for range 1 + r.IntN(12) {
			switch k := r.IntN(10); {
			case k < 5:
				b.WriteString(frags[r.IntN(len(frags))])
			case k < 9:
				b.WriteString(randomRunes(r, 1+r.IntN(8)))
			default:
				b.WriteString(anyRunes(r, 1+r.IntN(4)))
			}
		}
		out = append(out, b.String())
	}
	return out
}
