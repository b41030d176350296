package config

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsAndDoc keeps the package away from storage, HTTP and starting
// processes (it reads only the named config file), and checks that a package
// doc comment says what it owns.
func TestImportsAndDoc(t *testing.T) {
	forbidden := []string{"os/exec", "net/http", "database/sql", "syscall", "github.com/hashicorp/", "github.com/labstack/"}
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
		for _, call := range []string{"os.Getenv", "os.LookupEnv", "os.Environ", "os.Hostname", "os.WriteFile", "os.Create", "os.OpenFile", "os.Mkdir", "os.Remove", "os.Rename"} {
			if strings.Contains(string(src), call+"(") {
				t.Errorf("%s calls %s; Load reads only its arguments and the named file", name, call)
			}
		}
		if f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package config ") {
			doc = true
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if path == bad || strings.HasSuffix(bad, "/") && strings.HasPrefix(path, bad) {
					t.Errorf("%s imports %s, which package config must not use", name, path)
				}
			}
		}
	}
	if !doc {
		t.Error("no file has a package doc comment starting with \"Package config \"")
	}
}
