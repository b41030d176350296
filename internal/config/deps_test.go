package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadReadsOnlyItsArguments keeps Load a function of LoadArgs and the
// named file: no file of the package reads the environment or the host, or
// writes to disk. (Imports and the package doc are checked for every
// package by internal/archtest.)
func TestLoadReadsOnlyItsArguments(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, call := range []string{"os.Getenv", "os.LookupEnv", "os.Environ", "os.Hostname", "os.WriteFile", "os.Create", "os.OpenFile", "os.Mkdir", "os.Remove", "os.Rename"} {
			if strings.Contains(string(src), call+"(") {
				t.Errorf("%s calls %s; Load reads only its arguments and the named file", name, call)
			}
		}
	}
}
