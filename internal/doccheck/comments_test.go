package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoIssueNumbersInComments fails on a Go comment that cites an issue by number: a comment
// says why the code is as it is; the tracker's history stays in git.
func TestNoIssueNumbersInComments(t *testing.T) {
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found, err := GoCommentIssues(path, src)
		if err != nil {
			return err
		}
		files++
		for _, f := range found {
			t.Errorf("%s: %q in a comment: say why, not which issue", f.Pos, f.Match)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("checked %d Go files: is root the repository?", files)
	}
}

func TestIssues(t *testing.T) {
	for _, s := range []string{"see issue 11", "Issue #24's figures", "fixed in #3.", "(#12)", "issues 4 and 5"} {
		if len(Issues(s)) == 0 {
			t.Errorf("Issues(%q) found nothing", s)
		}
	}
	for _, s := range []string{"Stream-Safe Text Format (UAX #15)", "RFC #7231", "C#5", "a tissue 3", "step #", "x[#]"} {
		if got := Issues(s); len(got) != 0 {
			t.Errorf("Issues(%q) = %v, want nothing", s, got)
		}
	}
}

func TestGoCommentIssues(t *testing.T) {
	src := "package p\n\n// A is fine.\n// B fixes issue 7.\nvar A = \"#12 in a string is not a comment\"\n\n/* one\n   see #9 */\nvar B int\n"
	got, err := GoCommentIssues("p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Pos.Line != 4 || got[0].Match != "issue 7" || got[1].Pos.Line != 8 || got[1].Match != "#9" {
		t.Fatalf("got %+v", got)
	}
}
