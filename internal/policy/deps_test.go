package policy

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsAndDoc keeps the package pure: no storage, HTTP, process
// environment or file system, and a package doc comment saying what it owns.
func TestImportsAndDoc(t *testing.T) {
	forbidden := []string{"os", "os/exec", "net/http", "database/sql", "io/fs", "syscall", "github.com/hashicorp/", "github.com/labstack/"}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatalf("glob: %v", err)
	}
	fset := token.NewFileSet()
	doc := false
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		if f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package policy ") {
			doc = true
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if path == bad || strings.HasSuffix(bad, "/") && strings.HasPrefix(path, bad) {
					t.Errorf("%s imports %s, which package policy must not use", name, path)
				}
			}
		}
	}
	if !doc {
		t.Error("no file has a package doc comment starting with \"Package policy \"")
	}
}
