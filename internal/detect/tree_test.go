package detect

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestTreeSkipsDependencyDirs(t *testing.T) {
	fsys := fstest.MapFS{
		"package.json":                   {Data: []byte("{}")},
		"node_modules/x/package.json":    {Data: []byte("{}")},
		".git/HEAD":                      {Data: []byte("ref")},
		"vendor/a/go.mod":                {Data: []byte("module a")},
		"venv/bin/python":                {Data: []byte("")},
		".venv/lib/site.py":              {Data: []byte("")},
		"pkg/__pycache__/a.pyc":          {Data: []byte("")},
		"dist/index.html":                {Data: []byte("<html>")},
		"web/node_modules/y/index.js":    {Data: []byte("")},
		"web/src/index.js":               {Data: []byte("")},
		"docs/node_modules.md":           {Data: []byte("")},
		"deeply/nested/dist/bundle.js":   {Data: []byte("")},
		"deeply/nested/distribution/a.c": {Data: []byte("")},
	}
	tr := newTree(fsys, nil)
	want := []string{"deeply/nested/distribution/a.c", "docs/node_modules.md", "package.json", "web/src/index.js"}
	if diff := cmp.Diff(want, tr.Files()); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if !tr.probe("dist/index.html") || tr.probe("dist/missing.html") || tr.probe("../etc/passwd") {
		t.Error("probe does not find dist/index.html, or finds what is not there")
	}
}

func TestTreeLimits(t *testing.T) {
	fsys := fstest.MapFS{}
	for i := range MaxWalk + 10 {
		fsys[fmt.Sprintf("f%05d.txt", i)] = &fstest.MapFile{Data: []byte("x")}
	}
	fsys["big.txt"] = &fstest.MapFile{Data: []byte(strings.Repeat("a", MaxFileBytes+100))}
	tr := newTree(fsys, nil)
	if !tr.Truncated() || len(tr.Files()) > MaxWalk {
		t.Errorf("walked %d files, truncated %t; want at most %d and truncated", len(tr.Files()), tr.Truncated(), MaxWalk)
	}
	b, ok := tr.Read("big.txt")
	if !ok || len(b) != MaxFileBytes {
		t.Errorf("read %d bytes (%t); want the first %d", len(b), ok, MaxFileBytes)
	}
	if _, ok := tr.Read("nope.txt"); ok {
		t.Error("read a file that is not in the tree")
	}
	n := 0
	for _, f := range tr.Files() {
		if _, ok := tr.Read(f); ok {
			n++
		}
	}
	if n > MaxReads {
		t.Errorf("%d files read; want at most %d", n, MaxReads)
	}
}

func TestTreeDoesNotFollowSymlinks(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("<html>"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "Procfile")); err != nil {
		t.Skipf("symlinks: %v", err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	tr := newTree(os.DirFS(dir), nil)
	if diff := cmp.Diff([]string{"index.html"}, tr.Files()); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if _, ok := tr.Read("Procfile"); ok {
		t.Error("read through a symbolic link")
	}
}

func TestTreeNil(t *testing.T) {
	r := Detect(nil, nil, Runtime{})
	if r.Winner != nil || r.RunnersUp == nil || r.Questions == nil {
		t.Errorf("Detect(nil) = %+v; want no winner and empty lists", r)
	}
}
