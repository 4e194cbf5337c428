// Package funclen measures the length of Go functions, so that a test can hold a tree's
// functions short enough to read at a glance.
package funclen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
)

// Func is one function (or method) declaration: its file, name and length in lines, from the
// line of func to the line of the closing brace.
type Func struct {
	File  string
	Name  string
	Lines int
}

func (f Func) String() string { return fmt.Sprintf("%s: %s is %d lines", f.File, f.Name, f.Lines) }

// Over returns the functions declared in the non-test Go files under root that are longer
// than max lines, in file order.
func Over(root string, max int) ([]Func, error) {
	var out []Func
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > max {
				out = append(out, Func{File: p, Name: name(fd), Lines: n})
			}
		}
		return nil
	})
	return out, err
}

// name is fd's name, with its receiver's type for a method.
func name(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if g, ok := t.(*ast.IndexExpr); ok {
		t = g.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
