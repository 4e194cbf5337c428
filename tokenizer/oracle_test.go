package tokenizer

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/drmas-dev/drmas/internal/oracles"
)

// runOracle runs testdata/oracle.mjs in MODE on in (JSON) and decodes its output into out.
func runOracle(t testing.TB, modelDir, mode string, in, out any) {
	t.Helper()
	nm := oracles.NodeModules(t)
	dir := t.TempDir()
	inPath, outPath := filepath.Join(dir, "in.json"), filepath.Join(dir, "out.json")
	writeJSON(t, inPath, in)
	script, _ := filepath.Abs(filepath.Join("testdata", "oracle.mjs"))
	cmd := exec.Command("node", script, nm, modelDir, mode, inPath, outPath)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node oracle %s: %v\n%s", mode, err, msg)
	}
	b, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("node oracle %s output: %v", mode, err)
	}
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// realTokenizer is a real tokenizer folder's *BPE, loaded once per test binary.
type realTokenizer struct {
	once sync.Once
	tok  *BPE
	err  error
}

var realQwen3, realLlama3 realTokenizer

func (r *realTokenizer) load(t testing.TB, dir string) *BPE {
	t.Helper()
	r.once.Do(func() { r.tok, r.err = LoadDir(dir) })
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.tok
}

// qwen3 loads the real Qwen3 tokenizer (once per test binary) or skips (fails on CI).
func qwen3(t testing.TB) (*BPE, string) {
	t.Helper()
	dir := oracles.Qwen3TokenizerDir(t)
	return realQwen3.load(t, dir), dir
}

// matchHF compares tok's ids, id for id, with Hugging Face's JS tokenizer on the folder dir
// for every string of corpus, and Decode with HF's decode and with the input (its stretches
// between added tokens in NFC when nfc, as JS's normalize computes them). It returns how many
// strings hold a special token.
func matchHF(t *testing.T, tok *BPE, dir string, corpus []string, nfc bool) (special int) {
	t.Helper()
	var want []struct {
		IDs  []int32 `json:"ids"`
		Text string  `json:"text"`
		NFC  string  `json:"nfc"`
	}
	runOracle(t, dir, "encode", corpus, &want)
	if len(want) != len(corpus) {
		t.Fatalf("oracle returned %d results for %d strings", len(want), len(corpus))
	}
	bad := 0
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
			special++
		}
		input := s
		if nfc {
			input = want[i].NFC
		}
		if d := tok.Decode(got); d != input || d != want[i].Text {
			bad++
			if bad <= 5 {
				t.Errorf("string %d %q: decode %q, input %q, HF decode %q", i, s, d, input, want[i].Text)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d strings differ from HF", bad, len(corpus))
	}
	return special
}

// TestEncodeMatchesHF compares ids, id for id, with Hugging Face's JS tokenizer on the real
// Qwen3 files for 10,000 generated strings, and checks that Decode gives HF's decode and the
// input with its stretches between added tokens in NFC (JS's normalize).
func TestEncodeMatchesHF(t *testing.T) {
	tok, dir := qwen3(t)
	corpus := testCorpus(1, 10000)
	matchHF(t, tok, dir, corpus, true)
	t.Logf("%d strings: identical ids to HF's tokenizer; decode(encode(s)) = HF's decode = s in NFC between added tokens", len(corpus))
}
