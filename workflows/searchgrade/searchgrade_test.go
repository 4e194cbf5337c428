package searchgrade

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestGolden grades the hand-worked pairs of testdata/golden.tsv (EM and F1).
func TestGolden(t *testing.T) {
	f, err := os.Open("testdata/golden.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if strings.HasPrefix(sc.Text(), "#") || sc.Text() == "" {
			continue
		}
		c := strings.Split(sc.Text(), "\t")
		if len(c) != 5 {
			t.Fatalf("golden.tsv:%d: want 5 columns, got %q", line, sc.Text())
		}
		golden, err := ParseGolden(c[1])
		if err != nil && c[1] != "[]" {
			t.Fatalf("golden.tsv:%d: %v", line, err)
		}
		em, _ := strconv.ParseFloat(c[2], 64)
		f1, _ := strconv.ParseFloat(c[3], 64)
		r := Grade(c[0], golden)
		if r.Reward != em || math.Abs(r.F1-f1) > 1e-12 {
			t.Errorf("golden.tsv:%d [%s] Grade(%q, %q) = EM %v F1 %v (%s; answer %q, golden %q), want EM %v F1 %v",
				line, c[4], c[0], golden, r.Reward, r.F1, r.Reason, r.Answer, r.Golden, em, f1)
		}
		n++
	}
	if n < 100 {
		t.Fatalf("%d golden pairs, want >= 100", n)
	}
}

func TestParseGolden(t *testing.T) {
	for in, want := range map[string]string{
		`["a", "b"]`:            "a|b",
		`[4, 2.5]`:              "4|2.5",
		`{"target": ["Paris"]}`: "Paris",
	} {
		got, err := ParseGolden(in)
		if err != nil || strings.Join(got, "|") != want {
			t.Errorf("ParseGolden(%s) = %q, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"Paris", `"Paris"`, `[]`, `[true]`, `{"x": 1}`, `[["a"]]`, ``} {
		if got, err := ParseGolden(in); err == nil {
			t.Errorf("ParseGolden(%q) = %q, want an error", in, got)
		}
	}
}

// FuzzNormalize: Normalize never panics, is idempotent, and its output has no ASCII
// punctuation, no article word and single spaces. Run with:
// go test ./workflows/searchgrade -run '^$' -fuzz '^FuzzNormalize$' -fuzztime 30s
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"The  U.S.A.!", "a an the", "Zürich–Bern", "\xff\xfe the", "<answer>x</answer>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := Normalize(s)
		if Normalize(n) != n {
			t.Fatalf("Normalize(%q) = %q is not a fixed point", s, n)
		}
		for _, w := range strings.Split(n, " ") {
			if w == "a" || w == "an" || w == "the" || (w == "" && n != "") {
				t.Fatalf("Normalize(%q) = %q", s, n)
			}
		}
		if strings.ContainsAny(n, "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\t\n") {
			t.Fatalf("Normalize(%q) = %q keeps punctuation", s, n)
		}
		Grade(s, []string{s})
	})
}
