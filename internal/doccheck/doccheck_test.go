package doccheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository's top folder, from this package's folder.
var root = filepath.Join("..", "..")

// pages are README.md, the packages' README.md files and every Markdown file under docs/.
func pages(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "*", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	err = filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestLinksResolve fails on a relative link or image of a README.md or docs/ whose file does not
// exist, or whose #anchor names no heading of its page.
func TestLinksResolve(t *testing.T) {
	for _, page := range pages(t) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range Links(string(text)) {
			if External(l.Target) {
				continue
			}
			if problem := resolve(page, l.Target); problem != "" {
				t.Errorf("%s:%d: %s: %s", page, l.Line, l.Target, problem)
			}
		}
	}
}

// resolve returns what is wrong with a relative target of page, or "".
func resolve(page, target string) string {
	path, anchor, _ := strings.Cut(target, "#")
	file := page
	if path != "" {
		file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
		if _, err := os.Stat(file); err != nil {
			return "no such file"
		}
	}
	if anchor == "" || !strings.HasSuffix(file, ".md") {
		return ""
	}
	text, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	if !Anchors(string(text))[anchor] {
		return "no heading with that anchor in " + filepath.Base(file)
	}
	return ""
}

// TestNoHistoryInDocs fails when a README.md or docs/ cites an issue number or tells work history.
func TestNoHistoryInDocs(t *testing.T) {
	for _, page := range pages(t) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(text), "\n") {
			for _, m := range History(line) {
				t.Errorf("%s:%d: %q: documentation describes the code as it is; git keeps the history", page, i+1, m)
			}
		}
	}
}

func TestLinksParse(t *testing.T) {
	text := "see [a](docs/a.md#x) and ![p](img/p.png \"t\") `[no](code.md)`\n```\n[no](fence.md)\n```\n<img src=\"i.png\"> [u](https://x.org)\n"
	got := Links(text)
	want := []Link{{1, "docs/a.md#x", false}, {1, "img/p.png", true}, {5, "https://x.org", false}, {5, "i.png", true}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("link %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

func TestAnchors(t *testing.T) {
	a := Anchors("# Top\n## The `drmas run` job\n```\n# not a heading\n```\n## Top\n#nospace\n")
	for _, want := range []string{"top", "the-drmas-run-job", "top-1"} {
		if !a[want] {
			t.Errorf("missing anchor %q in %v", want, a)
		}
	}
	if a["not-a-heading"] || a["nospace"] {
		t.Errorf("anchors from a code block or a non-heading: %v", a)
	}
}

func TestHistory(t *testing.T) {
	for _, s := range []string{"fixed in #24", "see issue 11", "Issue #3, briefly", "on the previous VM"} {
		if len(History(s)) == 0 {
			t.Errorf("History(%q) found nothing", s)
		}
	}
	for _, s := range []string{"C# code", "color #fff", "avg@16 on 128 prompts", "step=000007", "the commands at a glance"} {
		if h := History(s); len(h) != 0 {
			t.Errorf("History(%q) = %v, want nothing", s, h)
		}
	}
}
