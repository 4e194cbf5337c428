package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReferenceDocsCurrent fails when docs/cli.md or docs/configuration.md differ from what this
// binary's command tree and config print: a renamed, added or removed flag or key must come with
// the regenerated pages (`make docs`).
func TestReferenceDocsCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := referencePages(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(root, "docs", name))
		if err != nil {
			t.Fatalf("%v: run `make docs`", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("docs/%s is not what the binary prints: run `make docs` and commit it\n%s", name, firstDiff(string(got), string(want)))
		}
	}
}

// firstDiff shows the first line where the committed page and the generated one differ.
func firstDiff(committed, generated string) string {
	a, b := strings.Split(committed, "\n"), strings.Split(generated, "\n")
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  committed: %s\n  generated: %s", i+1, x, y)
		}
	}
	return ""
}
