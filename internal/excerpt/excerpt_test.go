package excerpt

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	if got := Quote("run-1"); got != `"run-1"` {
		t.Errorf("short: %s", got)
	}
	long := strings.Repeat("é", 1<<20) // 2 MiB, two bytes a rune: the cut must not split one
	got := Quote(long)
	want := `"` + strings.Repeat("é", 32) + `"… (2097152 bytes)`
	if got != want {
		t.Errorf("long: %s, want %s", got, want)
	}
	if got := Cut(strings.Repeat("a", 100)); got != strings.Repeat("a", 64)+"… (100 bytes)" {
		t.Errorf("Cut: %s", got)
	}
}

func TestLines(t *testing.T) {
	var errs []error
	for i := range 25 {
		errs = append(errs, fmt.Errorf("problem %d", i))
	}
	errs = append(errs, io.EOF)
	err := Lines(errors.Join(errs...), 20)
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 21 || lines[19] != "problem 19" || lines[20] != "and 6 more problems" {
		t.Errorf("got %d lines, last %q", len(lines), lines[len(lines)-1])
	}
	if !errors.Is(err, io.EOF) {
		t.Error("the cut error no longer matches what it wraps")
	}
	if got := Lines(errors.Join(errs[:21]...), 20).Error(); !strings.HasSuffix(got, "\nand 1 more problem") {
		t.Errorf("one more: %q", got[len(got)-30:])
	}
	short := errors.Join(errs[:20]...)
	if Lines(short, 20) != short || Lines(nil, 20) != nil {
		t.Error("a short list or nil must come back as it is")
	}
}

func TestMessage(t *testing.T) {
	if Message(nil) != nil {
		t.Fatal("nil error became non-nil")
	}
	short := errors.New("syntax error at or near \"SELEC\"")
	if Message(short) != short {
		t.Fatal("a short message was changed")
	}
	long := fmt.Errorf("wrapped: %w", errors.New("Parser Error: LINE 1: SELECT '"+strings.Repeat("é", 3000)+"'"))
	got := Message(long)
	if len(got.Error()) > MaxMessageBytes+64 || !strings.HasPrefix(got.Error(), "wrapped: Parser Error: LINE 1:") ||
		!strings.Contains(got.Error(), fmt.Sprintf("(message of %d bytes cut)", len(long.Error()))) || !utf8.ValidString(got.Error()) {
		t.Fatalf("cut message: %d bytes, %q…", len(got.Error()), got.Error()[:80])
	}
	if !errors.Is(got, errors.Unwrap(long)) {
		t.Fatal("the cut error no longer matches what it wraps")
	}
}

func TestName(t *testing.T) {
	for in, want := range map[string]string{
		"model.layers.0.q_proj":  "model.layers.0.q_proj",
		"a\x1b[31mred\n\tb\xffc": `a\x1b[31mred\n\tb\xffc`,
		"é\u0085":                `é\u0085`,
	} {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat("\n", 1<<20)
	if got := Name(long); len(got) > 4*MaxBytes || !strings.HasSuffix(got, "… (1048576 bytes)") || strings.Contains(got, "\n") {
		t.Errorf("Name of 1 MiB of newlines: %d bytes, %q", len(got), got)
	}
}
