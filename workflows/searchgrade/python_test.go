package searchgrade

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/internal/oracles"
)

// TestNormalizeAgainstPython compares Normalize with the SQuAD rules run by Python's own re and
// str (the semantics the reference grader has: \b around the articles, string.punctuation,
// str.lower and str.split), on generated strings with articles, punctuation and non-ASCII text.
func TestNormalizeAgainstPython(t *testing.T) {
	py := oracles.Python3(t)
	r := rand.New(rand.NewPCG(29, 2))
	parts := []string{"a", "an", "the", "The", "A", "AN", " ", "  ", "\t", ".", ",", "'", "-", "_", "!", "?", "(", ")",
		"paris", "Müller", "é", "北京", "–", "½", "٣", "x", "theatre", "anna", "s", "1,000", "U.S.A.", "\u00a0", "\u2003"}
	var in []string
	for i := 0; i < 500; i++ {
		var b strings.Builder
		for j := r.IntN(12); j >= 0; j-- {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		in = append(in, b.String())
	}
	payload, _ := json.Marshal(in)
	script := `
import json, re, string, sys
def norm(s):
    s = s.lower()
    s = "".join(c for c in s if c not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())
print(json.dumps([norm(s) for s in json.load(sys.stdin)]))
`
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = bytes.NewReader(payload)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var want []string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	for i, s := range in {
		if got := Normalize(s); got != want[i] {
			t.Errorf("Normalize(%q) = %q, Python %q", s, got, want[i])
		}
	}
}
