package tokenizer

import (
	"slices"
	"sync"
	"testing"

	"github.com/drmas-dev/drmas/internal/oracles"
)

var realLlama3 struct {
	once sync.Once
	tok  *BPE
	err  error
}

// llama3 loads the real Llama 3 tokenizer (once per test binary) or skips (fails on CI).
func llama3(t testing.TB) (*BPE, string) {
	t.Helper()
	dir := oracles.Llama3TokenizerDir(t)
	realLlama3.once.Do(func() { realLlama3.tok, realLlama3.err = LoadDir(dir) })
	if realLlama3.err != nil {
		t.Fatal(realLlama3.err)
	}
	return realLlama3.tok, dir
}

// TestEncodeMatchesHFLlama3 compares ids, id for id, with Hugging Face's JS tokenizer on the
// real Llama 3 files for 12,000 generated strings (digit runs, contractions in mixed case,
// whitespace runs, Llama's added tokens written in the text, many scripts), and checks that
// Decode gives HF's decode and the input itself (Llama 3 has no normalizer).
func TestEncodeMatchesHFLlama3(t *testing.T) {
	tok, dir := llama3(t)
	if tok.digits != 3 || tok.nfc {
		t.Fatalf("Llama 3's tokenizer.json read as digits %d, NFC %v; want 3, false", tok.digits, tok.nfc)
	}
	corpus := corpusOf(3, 12000, llamaFragments)
	var want []struct {
		IDs  []int32 `json:"ids"`
		Text string  `json:"text"`
	}
	runOracle(t, dir, "encode", corpus, &want)
	if len(want) != len(corpus) {
		t.Fatalf("oracle returned %d results for %d strings", len(want), len(corpus))
	}
	bad, added := 0, 0
	for i, s := range corpus {
		got := tok.Encode(s)
		if !slices.Equal(got, want[i].IDs) {
			bad++
			if bad <= 5 {
				t.Errorf("string %d %q:\n got  %v\n want %v", i, s, got, want[i].IDs)
			}
			continue
		}
		if slices.ContainsFunc(got, tok.IsSpecial) {
			added++
		}
		if d := tok.Decode(got); d != s || d != want[i].Text {
			bad++
			if bad <= 5 {
				t.Errorf("string %d %q: decode %q, HF decode %q", i, s, d, want[i].Text)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d strings differ from HF", bad, len(corpus))
	}
	if added < len(corpus)/10 {
		t.Fatalf("only %d strings hold a special token: the corpus does not exercise them", added)
	}
	t.Logf("%d strings (%d with special tokens): identical ids to HF's tokenizer; decode(encode(s)) = HF's decode = s", len(corpus), added)
}
