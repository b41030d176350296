package scan

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// token is a GitHub-token-shaped string made at run time.
func token(t testing.TB) string {
	t.Helper()
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 36)
	rand.Read(b)
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return "gh" + "p_" + string(b)
}

// TestHostileTree: a tree built to make the scanner read outside it, hang
// or fall over. Symbolic links (to files, directories and a manifest
// outside, and to an absolute path) are never followed; a FIFO is not
// opened; a file over the size cap, a binary blob and lock files are not
// searched; a tree deeper than MaxDepth is scanned in part and says so.
// The one secret inside the tree proper is the only one found.
func TestHostileTree(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret.env"), "GITHUB="+token(t)+"\n")
	writeFile(t, filepath.Join(outside, "go.mod"), "module x\nrequire golang.org/x/text v0.3.7\n")
	writeFile(t, filepath.Join(outside, "sub", "more.env"), "GITHUB="+token(t)+"\n")

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ok.txt"), "GITHUB="+token(t)+"\n")
	for link, target := range map[string]string{
		"leak.env": filepath.Join(outside, "secret.env"),
		"go.mod":   filepath.Join(outside, "go.mod"),
		"linked":   outside,
		"up":       "..",
		"passwd":   "/etc/passwd",
		"loop":     "loop",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.env"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "big.log"), strings.Repeat("x", MaxFileBytes)+"\nGITHUB="+token(t)+"\n")
	blob := make([]byte, 64<<10)
	rand.Read(blob)
	blob[10] = 0
	writeFile(t, filepath.Join(dir, "blob.bin"), string(blob)+"\nGITHUB="+token(t)+"\n")
	deep := dir
	for range MaxDepth + 3 {
		deep = filepath.Join(deep, "d")
	}
	writeFile(t, filepath.Join(deep, "deep.env"), "GITHUB="+token(t)+"\n")

	res, err := Scan(context.Background(), Input{Dir: dir, Spec: goodSpec(), DB: fixtureDB(t)})
	if err != nil {
		t.Fatal(err)
	}
	want := []found{
		{"secret:github-token:ok.txt:1", High, true},
		{"scan:incomplete", Medium, true},
	}
	if d := cmp.Diff(want, summary(res.Findings)); d != "" {
		t.Errorf("findings (-want +got):\n%s", d)
	}
}

// TestReadRefusesASwappedFile: a file walked as regular and replaced by a
// link (out of the tree, or within it) or a FIFO before it is read is not
// read.
func TestReadRefusesASwappedFile(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret"), "s3cret\n")
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c", "d"} {
		writeFile(t, filepath.Join(dir, n), "fine\n")
	}
	tr, err := walk(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.root.Close()
	walked := map[string]file{}
	for _, f := range tr.files {
		walked[f.path] = f
	}
	os.Remove(filepath.Join(dir, "a"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "a"))
	os.Remove(filepath.Join(dir, "b"))
	os.Symlink("d", filepath.Join(dir, "b"))
	os.Remove(filepath.Join(dir, "c"))
	syscall.Mkfifo(filepath.Join(dir, "c"), 0o600)
	for _, n := range []string{"a", "b", "c"} {
		if b, err := tr.read(walked[n], MaxFileBytes); err == nil {
			t.Errorf("read(%s) = %q, want an error", n, b)
		}
	}
	if b, err := tr.read(walked["d"], MaxFileBytes); err != nil || string(b) != "fine\n" {
		t.Errorf("read(d) = %q, %v", b, err)
	}
	writeFile(t, filepath.Join(dir, "d"), "grown\n") // the same file, rewritten
	if _, err := tr.read(walked["d"], 3); !errors.Is(err, errTooLarge) {
		t.Errorf("read over the limit: %v, want errTooLarge", err)
	}
}

// TestTooManyFiles: past the file cap the rest is counted, not read, and
// the scan says it is incomplete.
func TestTooManyFiles(t *testing.T) {
	defer func(n int) { maxFiles = n }(maxFiles)
	maxFiles = 5
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		writeFile(t, filepath.Join(dir, n), "x\n")
	}
	writeFile(t, filepath.Join(dir, "z.env"), "GITHUB="+token(t)+"\n")
	res, err := Scan(context.Background(), Input{Dir: dir, Spec: goodSpec()})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]found{{"scan:incomplete", Medium, true}}, summary(res.Findings)); d != "" {
		t.Errorf("findings (-want +got):\n%s", d)
	}
	if want := "(3 skipped)"; !strings.HasSuffix(res.Basis[0].What, want) {
		t.Errorf("basis %q, want it to end %q", res.Basis[0].What, want)
	}
}

// TestScanFails: no tree, a file for a tree and an ended context are
// errors, not a clean score.
func TestScanFails(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	writeFile(t, f, "x")
	for _, d := range []string{filepath.Join(t.TempDir(), "missing"), f} {
		if res, err := Scan(context.Background(), Input{Dir: d}); err == nil {
			t.Errorf("Scan(%s) = score %d, want an error", d, res.Score)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Scan(ctx, Input{Dir: t.TempDir()}); !errors.Is(err, context.Canceled) {
		t.Errorf("Scan with an ended context: %v", err)
	}
}
