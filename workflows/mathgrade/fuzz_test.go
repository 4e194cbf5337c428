package mathgrade

import (
	"strings"
	"testing"
	"time"
)

// FuzzExtract: Extract never panics, returns a substring of the response, and ok=false only
// with an empty answer. Run with: go test ./workflows/mathgrade -run '^$' -fuzz '^FuzzExtract$' -fuzztime 30s
func FuzzExtract(f *testing.F) {
	for _, s := range []string{`\boxed{5}`, `\boxed{{{{`, `\boxed 5$`, `\fbox{}`, `<think>\boxed{1}</think>\boxed{2`, `}}}\boxed{}}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := Extract(s)
		if !ok && a != "" {
			t.Fatalf("Extract(%q) = %q with ok=false", s, a)
		}
		if ok && !strings.Contains(s, a) {
			t.Fatalf("Extract(%q) = %q, not part of the response", s, a)
		}
	})
}

// FuzzEquivalent: Normalize stays within a constant factor of its input, Equivalent is
// reflexive and symmetric, Grade gives 0 or 1, and none of them panic. Run with:
// go test ./workflows/mathgrade -run '^$' -fuzz '^FuzzEquivalent$' -fuzztime 30s
func FuzzEquivalent(f *testing.F) {
	for _, p := range [][2]string{{`\frac12`, "0.5"}, {"(1,2)", "(1, 2)"}, {`\sqrt[3]{-8}`, "-2"}, {"2^{64}^{64}", "1"},
		{`\text{`, `\frac`}, {"1,000", "1000"}, {`((((`, `\sqrt`}, {`x = .5`, "{.5}"}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if n := len(Normalize(a)); n > 3*len(a)+16 {
			t.Fatalf("Normalize(%q) grew to %d bytes", a, n)
		}
		if _, eq := Equivalent(a, a); !eq && Normalize(a) != "" {
			t.Fatalf("Equivalent(%q, itself) = false", a)
		}
		_, ab := Equivalent(a, b)
		_, ba := Equivalent(b, a)
		if ab != ba {
			t.Fatalf("Equivalent(%q, %q) = %v but reversed %v", a, b, ab, ba)
		}
		if r := Grade(`\boxed{`+a+"}", []string{b}); r.Reward != 0 && r.Reward != 1 {
			t.Fatalf("reward %v", r.Reward)
		}
	})
}

// TestNestedBracesLinear: a megabyte of nested braces is graded in linear time.
func TestNestedBracesLinear(t *testing.T) {
	const n = 1 << 19
	for _, s := range []string{
		`\boxed` + strings.Repeat("{", n) + "1" + strings.Repeat("}", n),
		`\boxed` + strings.Repeat("{", n),
		strings.Repeat(`\boxed{\sqrt{\frac{`, n/16),
		strings.Repeat("(", n) + strings.Repeat(")", n),
	} {
		start := time.Now()
		Grade(s, []string{s})
		Equivalent(s, s[:len(s)/2])
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%d bytes took %v", len(s), d)
		}
	}
}
