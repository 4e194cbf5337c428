package workflows

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A task field given twice on a line (or in two spellings that differ only in case) is an
// error naming the line, not the last value silently.
func TestLoadTasksRefusesAFieldGivenTwice(t *testing.T) {
	for content, want := range map[string]string{
		`{"id":"a","question":"what is 1+1","answer":"2","answer":"3"}` + "\n":                                            `t.jsonl:1: field "answer" is given twice`,
		`{"id":"a","question":"q","answer":"1"}` + "\n" + `{"id":"b","question":"q","Question":"Q2","answer":"1"}` + "\n": `t.jsonl:2: fields "question" and "Question" both give "question"`,
	} {
		p := filepath.Join(t.TempDir(), "t.jsonl")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		ts, err := LoadTasks(p)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %+v, %v; want an error containing %q", content, ts, err, want)
		}
	}
}
