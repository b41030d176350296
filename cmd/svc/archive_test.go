package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// readTarGz lists a tar.gz: each entry's name, with its content for a file
// and "-> target" for a link.
func readTarGz(t *testing.T, b []byte) map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		switch h.Typeflag {
		case tar.TypeSymlink:
			out[h.Name] = "-> " + h.Linkname
		default:
			out[h.Name] = string(body)
		}
	}
}

// TestTarDirKeepsToTheDirectory archives a hostile tree: links to a secret
// outside it (absolute, climbing with .., through a linked directory), a
// FIFO and .git. Nothing outside the directory is read or linked to, links
// inside it stay links, and what is left out is said.
func TestTarDirKeepsToTheDirectory(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("outside-secret-9c1"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "app")
	write := func(rel, body string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.go", "package main\n")
	write("sub/data.txt", "data")
	write(".git/config", "[core]")
	for link, target := range map[string]string{
		"abs":         secret,
		"climb":       "../../" + filepath.Base(outside) + "/secret",
		"sub/climb2":  "../../x",
		"outdir":      outside,
		"inside":      "sub/data.txt",
		"sub/sibling": "../main.go",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	left, err := tarDir(dir, &buf)
	if err != nil {
		t.Fatal(err)
	}
	got := readTarGz(t, buf.Bytes())
	want := map[string]string{
		"main.go": "package main\n", "sub/": "", "sub/data.txt": "data",
		"inside": "-> sub/data.txt", "sub/sibling": "-> ../main.go",
	}
	if len(got) != len(want) {
		t.Errorf("archive holds %v; want %v", got, want)
	}
	for name, body := range want {
		if got[name] != body {
			t.Errorf("entry %s = %q; want %q (archive %v)", name, got[name], body, got)
		}
	}
	if strings.Contains(strings.Join(slices.Collect(maps.Values(got)), ""), "outside-secret") {
		t.Error("the archive holds the file outside the directory")
	}
	var names []string
	for _, s := range left {
		names = append(names, s.path)
	}
	for _, n := range []string{".git", "abs", "climb", "sub/climb2", "outdir", "fifo"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+n+" ") {
			t.Errorf("left out %v; want %s named", names, n)
		}
	}
}

// TestTarDirOfAFileOrNothing: a path that is no directory is an error,
// not an empty archive.
func TestTarDirOfAFileOrNothing(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{f, filepath.Join(t.TempDir(), "missing")} {
		if _, err := tarDir(p, io.Discard); err == nil {
			t.Errorf("tarDir(%s) = nil error", p)
		}
	}
}

func TestLinkStaysIn(t *testing.T) {
	for _, tc := range []struct {
		p, target string
		in        bool
	}{
		{"a", "b", true},
		{"d/a", "../b", true},
		{"d/a", "../../b", false},
		{"a", "../b", false},
		{"a", "..", false},
		{"a", ".", true},
		{"a", "/etc/passwd", false},
		{"a", "", false},
		{"d/e/a", "../../x/../y", true},
		{"d/a", "x/../../../y", false},
	} {
		if got := linkStaysIn(tc.p, tc.target); got != tc.in {
			t.Errorf("linkStaysIn(%q, %q) = %v; want %v", tc.p, tc.target, got, tc.in)
		}
	}
}
