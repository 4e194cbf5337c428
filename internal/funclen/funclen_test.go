package funclen_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/internal/funclen"
)

// maxStageLines is the longest a function of a stage may be: a stage's top function reads as
// its protocol, each step a call.
const maxStageLines = 120

// TestStagesShort: no function under stages/ is longer than maxStageLines.
func TestStagesShort(t *testing.T) {
	over, err := funclen.Over(filepath.Join("..", "..", "stages"), maxStageLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range over {
		t.Errorf("%v (at most %d: split it into named steps)", f, maxStageLines)
	}
}

// TestOver measures a file written here: a function of 3 lines, a method of 6 on a pointer
// receiver, and a test file's long function that does not count.
func TestOver(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\nfunc short() {\n\t_ = 1\n}\n\ntype T struct{}\n\nfunc (t *T) long() {\n\t_ = 1\n\t_ = 2\n\t_ = 3\n\t_ = 4\n}\n"
	test := "package p\n\nfunc x() {\n" + strings.Repeat("\t_ = 1\n", 50) + "}\n"
	for name, data := range map[string]string{"p.go": src, "p_test.go": test} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	over, err := funclen.Over(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(over) != 1 || over[0].Name != "T.long" || over[0].Lines != 6 {
		t.Fatalf("got %v, want only T.long of 6 lines", over)
	}
	if over, _ := funclen.Over(dir, 2); len(over) != 2 || over[0].Name != "short" || over[0].Lines != 3 {
		t.Fatalf("max 2: got %v, want short (3 lines) and T.long", over)
	}
}
