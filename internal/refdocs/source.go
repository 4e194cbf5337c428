package refdocs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/drmas-dev/drmas/configs"
)

// Module is the module path of drmas's packages.
const Module = "github.com/drmas-dev/drmas"

// FieldDocs reads, from the source tree at root (the repository's top folder), the Go doc
// comment of every struct field of the packages the config types live in, keyed
// "pkgpath.Type.Field", each joined into one line.
func FieldDocs(root string) (map[string]string, error) {
	docs := map[string]string{}
	for _, pkg := range configPackages() {
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(pkg, Module), "/")))
		if err := packageDocs(dir, pkg, docs); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// configPackages are the import paths of the struct types reachable from configs.Config.
func configPackages() []string {
	seen := map[string]bool{}
	var pkgs []string
	var visit func(t reflect.Type)
	visit = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Map || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t.PkgPath()+"."+t.Name()] {
			return
		}
		seen[t.PkgPath()+"."+t.Name()] = true
		if !seen[t.PkgPath()] && strings.HasPrefix(t.PkgPath(), Module) {
			seen[t.PkgPath()] = true
			pkgs = append(pkgs, t.PkgPath())
		}
		for i := range t.NumField() {
			visit(t.Field(i).Type)
		}
	}
	visit(reflect.TypeOf(configs.Config{}))
	return pkgs
}

// packageDocs adds the field comments of the package in dir (test files excluded).
func packageDocs(dir, pkg string, docs map[string]string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("config sources: %w (run from the repository's top folder)", err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return fmt.Errorf("config sources: %w", err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if st, ok := spec.Type.(*ast.StructType); ok {
				structDocs(pkg+"."+spec.Name.Name, st, docs)
			}
			return false
		})
	}
	return nil
}

// structDocs adds the doc (or end-of-line) comment of each named field of st.
func structDocs(prefix string, st *ast.StructType, docs map[string]string) {
	for _, field := range st.Fields.List {
		text := field.Doc.Text()
		if text == "" {
			text = field.Comment.Text()
		}
		text = strings.Join(strings.Fields(text), " ")
		if text == "" {
			continue
		}
		for _, name := range field.Names {
			docs[prefix+"."+name.Name] = text
		}
	}
}
