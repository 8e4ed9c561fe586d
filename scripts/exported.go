//go:build ignore

// Exported counts the public surface of the library module, per package.
// It counts exported functions and types, exported methods of exported
// types (interface methods included), and exported constants and variables.
// It skips internal/, examples/, other modules and _test.go files.
//
// Usage: go run scripts/exported.go [dir]   (default: the current directory)
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type count struct{ funcsTypes, methods, constsVars int }

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	counts := map[string]*count{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(root, path) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		return countFile(path, rel, counts)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dirs := make([]string, 0, len(counts))
	for d := range counts {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	var total count
	fmt.Printf("%-16s %11s %8s %11s %6s\n", "package", "funcs+types", "methods", "consts+vars", "all")
	for _, d := range dirs {
		c := counts[d]
		fmt.Printf("%-16s %11d %8d %11d %6d\n", d, c.funcsTypes, c.methods, c.constsVars, c.funcsTypes+c.methods+c.constsVars)
		total.funcsTypes += c.funcsTypes
		total.methods += c.methods
		total.constsVars += c.constsVars
	}
	fmt.Printf("%-16s %11d %8d %11d %6d\n", "total", total.funcsTypes, total.methods, total.constsVars, total.funcsTypes+total.methods+total.constsVars)
}

// skipDir reports whether a directory is outside the library's public packages.
func skipDir(root, path string) bool {
	name := filepath.Base(path)
	if name == "internal" || name == "examples" || name == "testdata" || strings.HasPrefix(name, ".") {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil // another module
}

// countFile adds a file's exported declarations to its package's count.
// Commands (package main) have no importable surface.
func countFile(path, pkg string, counts map[string]*count) error {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	if f.Name.Name == "main" {
		return nil
	}
	c := counts[pkg]
	if c == nil {
		c = &count{}
		counts[pkg] = c
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				c.funcsTypes++
			} else if recvExported(d.Recv.List[0].Type) {
				c.methods++
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					c.funcsTypes++
					if it, ok := s.Type.(*ast.InterfaceType); ok {
						for _, m := range it.Methods.List {
							for _, n := range m.Names {
								if n.IsExported() {
									c.methods++
								}
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							c.constsVars++
						}
					}
				}
			}
		}
	}
	return nil
}

// recvExported reports whether a method's receiver type is exported.
func recvExported(t ast.Expr) bool {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}
