package analysis

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// analysis only reads stored files, so it may depend on the storage layer and the persisted
// schemas, never on the stages that write them (and through them the GPU engine).
var allowedDeps = map[string]bool{
	"commit": true, "layout": true, "storage": true, "shards": true, "internal/hugemem": true, "internal/excerpt": true,
}

// TestDepsStayOnTheReadSide walks the drmas imports of analysis, transitively, over every
// non-test Go file whatever its build tags (a superset of `go list -deps`), and fails on any
// drmas package outside allowedDeps.
func TestDepsStayOnTheReadSide(t *testing.T) {
	const module = "github.com/drmas-dev/drmas/"
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	seen := map[string][]string{"analysis": nil} // package -> import chain that reached it
	queue := []string{"analysis"}
	var bad []string
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		for _, imp := range drmasImports(t, filepath.Join(root, filepath.FromSlash(pkg)), module) {
			if _, ok := seen[imp]; ok {
				continue
			}
			chain := append(append([]string(nil), seen[pkg]...), pkg)
			seen[imp] = chain
			if !allowedDeps[imp] {
				bad = append(bad, strings.Join(append(chain, imp), " -> "))
				continue
			}
			queue = append(queue, imp)
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("analysis reaches a writer-side package: %s", b)
	}
	if _, ok := seen["shards"]; !ok {
		t.Fatalf("walked %v: shards not found, so the walk itself is broken", seen)
	}
}

func drmasImports(t *testing.T, dir, module string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no Go files in %s (%v)", dir, err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, is := range f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			if rel, ok := strings.CutPrefix(p, module); ok {
				out = append(out, rel)
			}
		}
	}
	return out
}
