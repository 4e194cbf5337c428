// Package excerpt bounds what an error message carries of user input: a quoted value is cut to
// a short excerpt with its length, and a list of problems to its first few with a count of the
// rest. A message that copied its input whole would be as large as the input (a 10 MB value, a
// file with 40,000 unknown keys), which no reader, log line or terminal wants.
package excerpt

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxBytes is how many bytes of an input value Quote keeps.
const MaxBytes = 64

// MaxProblems is how many problems Lines lists before it only counts them.
const MaxProblems = 20

// Quote quotes s for an error message, cut to MaxBytes (at a rune boundary) with its length.
func Quote(s string) string {
	if len(s) <= MaxBytes {
		return strconv.Quote(s)
	}
	n := MaxBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:n]), len(s))
}

// Cut is s cut to MaxBytes (at a rune boundary) with "…" and its length, unquoted: for a key
// path or a name inside a message.
func Cut(s string) string {
	if len(s) <= MaxBytes {
		return s
	}
	n := MaxBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:n], len(s))
}

// Lines returns err with its message cut to its first max lines (one problem a line, as
// errors.Join writes them), then "and N more problems"; it still matches what err matches. A
// nil err stays nil, and a message of max lines or fewer is unchanged.
func Lines(err error, max int) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	i, shown := 0, 0
	for ; shown < max; shown++ {
		j := strings.IndexByte(msg[i:], '\n')
		if j < 0 {
			return err
		}
		i += j + 1
	}
	rest := strings.Count(msg[i:], "\n") + 1
	s := "s"
	if rest == 1 {
		s = ""
	}
	return &linesError{err: err, msg: fmt.Sprintf("%s\nand %d more problem%s", msg[:i-1], rest, s)}
}

type linesError struct {
	err error
	msg string
}

func (e *linesError) Error() string { return e.msg }
func (e *linesError) Unwrap() error { return e.err }

// MaxMessageBytes is how much of a message that another library wrote (and that may quote the
// input whole, as DuckDB quotes a query's line) Message keeps.
const MaxMessageBytes = 1024

// Message returns err with its message cut to MaxMessageBytes (at a rune boundary) with "…"
// and its length; it still matches what err matches. A nil err stays nil, and a shorter
// message is unchanged.
func Message(err error) error {
	if err == nil || len(err.Error()) <= MaxMessageBytes {
		return err
	}
	msg := err.Error()
	n := MaxMessageBytes
	for n > 0 && !utf8.RuneStart(msg[n]) {
		n--
	}
	return &linesError{err: err, msg: fmt.Sprintf("%s… (message of %d bytes cut)", msg[:n], len(msg))}
}

// Name is s for a log line or message where it is not quoted (a tensor name, a path, a model
// name): cut as Cut cuts it, with control characters (ANSI escapes, newlines, tabs) and
// invalid UTF-8 written as Go escapes (\x1b, \n, \xff), so that a name cannot forge a line or
// drive a terminal.
func Name(s string) string { return Escape(Cut(s)) }

// Escape is s with control characters and invalid UTF-8 written as Go escapes, not cut: for a
// path, which the system bounds.
func Escape(cut string) string {
	if !needsEscape(cut) {
		return cut
	}
	var b strings.Builder
	for i := 0; i < len(cut); {
		r, size := utf8.DecodeRuneInString(cut[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, cut[i])
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(cut[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}
