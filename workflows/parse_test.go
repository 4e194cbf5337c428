package workflows

import (
	"strings"
	"testing"
)

func TestParseSolver(t *testing.T) {
	valid := map[string]int{
		"ans 19": 19, "ans -3": -3, "ans +3": 3, "ans 0": 0, "ans 007": 7,
		"ans 19\n": 19, "  ans 19 \r\n": 19, "ans 19 ": 19, "ans 999999999": 999999999, "ans -999999999": -999999999,
	}
	for in, want := range valid {
		if v, ok := ParseSolver(in); !ok || v != want {
			t.Errorf("ParseSolver(%q) = %d,%v want %d,true", in, v, ok, want)
		}
	}
	invalid := []string{
		"", " ", "ans", "ans ", "ans  19", "ans 1 2", "ans +-3", "ans -+3", "ans --3", "ans -", "ans +",
		"ans 19x", "ans 19.", "ans 1.5", "ans 19\nans 20", "Ans 19", "ANS 19", "ans\t19",
		"answer 19", "19", "ans 1e3", "ans 0x10", "ans ١٩", "ans １９", "ans 19é", "ans 1234567890",
		"ans " + strings.Repeat("9", 1000), strings.Repeat("ans 1", 1000), "\x00ans 1", "ans 1\x00",
	}
	for _, in := range invalid {
		if v, ok := ParseSolver(in); ok {
			t.Errorf("ParseSolver(%q) = %d,true want invalid", in, v)
		}
	}
	for _, v := range []int{0, 5, -5, 123456789, -123456789} {
		if got, ok := ParseSolver(FormatSolver(v)); !ok || got != v {
			t.Errorf("round trip %d: %d,%v", v, got, ok)
		}
	}
}

func TestParseVerifierRouter(t *testing.T) {
	for in, want := range map[string]bool{"yes": true, "no": false, " yes\n": true, "no\r\n": false,
		"231 yes": true, "0231 no": false, "123456789 yes\n": true} {
		if a, ok := ParseVerifier(in); !ok || a != want {
			t.Errorf("ParseVerifier(%q) = %v,%v", in, a, ok)
		}
	}
	for _, in := range []string{"", "Yes", "YES", "yes.", "yes no", "y", "nope", "no!", "ye s", "yés", strings.Repeat("yes", 100),
		"231  yes", "23a yes", "1234567890 yes", "231 maybe", "231 yes no", "-5 yes", " yes 231"} {
		if _, ok := ParseVerifier(in); ok {
			t.Errorf("ParseVerifier(%q) valid", in)
		}
	}
	for in, want := range map[string]bool{"enough": true, "more": false, "more\n": false} {
		if e, ok := ParseRouter(in); !ok || e != want {
			t.Errorf("ParseRouter(%q) = %v,%v", in, e, ok)
		}
	}
	for _, in := range []string{"", "Enough", "enough more", "mor", "more more", "yes", "moré", strings.Repeat("more", 100)} {
		if _, ok := ParseRouter(in); ok {
			t.Errorf("ParseRouter(%q) valid", in)
		}
	}
}

func TestParseSearcher(t *testing.T) {
	valid := map[string]string{
		"q kamo lives": "kamo lives", "q oslo is\n": "oslo is", "q a": "a", "q a b c d e f": "a b c d e f", "q 1984": "1984",
	}
	for in, want := range valid {
		if q, ok := ParseSearcher(in); !ok || q != want {
			t.Errorf("ParseSearcher(%q) = %q,%v want %q", in, q, ok, want)
		}
	}
	invalid := []string{
		"", "q", "q ", "q  kamo", "q kamo  lives", "Q kamo", "q Kamo", "q kamo,lives", "q kamo-lives",
		"q a b c d e f g", "query kamo", "kamo lives", "q kamö", "q kamo\tlives", "q kamo\nlives",
		"q " + strings.Repeat("a", 60), "q-kamo",
	}
	for _, in := range invalid {
		if q, ok := ParseSearcher(in); ok {
			t.Errorf("ParseSearcher(%q) = %q valid", in, q)
		}
	}
}

func TestParseAnswerer(t *testing.T) {
	valid := map[string]string{
		"a oslo": "oslo", "a Oslo\n": "oslo", "a new  york": "new york", "a 42": "42", "a it's x": "it's x",
	}
	for in, want := range valid {
		if a, ok := ParseAnswerer(in); !ok || a != want {
			t.Errorf("ParseAnswerer(%q) = %q,%v want %q", in, a, ok, want)
		}
	}
	invalid := []string{
		"", "a", "a ", "a  oslo", "A oslo", "answer oslo", "oslo", "a oslö", "a os\tlo", "a os\nlo", "a\toslo",
		"a " + strings.Repeat("x", 41), "a \x00",
	}
	for _, in := range invalid {
		if a, ok := ParseAnswerer(in); ok {
			t.Errorf("ParseAnswerer(%q) = %q valid", in, a)
		}
	}
	if got := NormalizeAnswer("  New\tYORK "); got != "new york" {
		t.Errorf("NormalizeAnswer = %q", got)
	}
}
