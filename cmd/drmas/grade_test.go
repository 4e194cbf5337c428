package main

import (
	"strings"
	"testing"
)

func TestGradeCommands(t *testing.T) {
	for _, c := range []struct {
		args             []string
		stdout, inStderr string
	}{
		{[]string{"grade", "math", "--response", `so \boxed{\frac12}.`, "--truth", "0.5"}, "1\n", `normalized answer "\frac{1}{2}"`},
		{[]string{"grade", "math", "--response", `\boxed{2/4}`, "--truth", `\frac{1}{2}`}, "0\n", `normalized answer "\frac{2}{4}"`},
		{[]string{"grade", "math", "--response", "42", "--truth", "42"}, "0\n", "format error"},
		{[]string{"grade", "search", "--response", "<answer>The Beatles</answer>", "--truth", `["Beatles"]`}, "1\n", `normalized answer "beatles"`},
		{[]string{"grade", "search", "--response", "<answer>New York City</answer>", "--truth", `["new york"]`}, "0\n", "F1 0.8"},
	} {
		out, errOut, err := execute(t, c.args...)
		if err != nil || out != c.stdout || !strings.Contains(errOut, c.inStderr) {
			t.Errorf("drmas %q: stdout %q stderr %q err %v; want stdout %q, stderr with %q", c.args, out, errOut, err, c.stdout, c.inStderr)
		}
	}
	for _, args := range [][]string{
		{"grade", "search", "--response", "x", "--truth", "Paris"},
		{"grade", "math", "--truth", "1"},
		{"grade", "algebra"},
	} {
		if out, _, err := execute(t, args...); err == nil || out != "" || strings.Contains(err.Error(), "\n") {
			t.Errorf("drmas %q: stdout %q, err %v; want a one-line error and no reward", args, out, err)
		}
	}
}
