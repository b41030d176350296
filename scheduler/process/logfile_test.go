package process

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestLogFileRotatesWithinCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "web.log")
	const capBytes = 1000
	l, err := openLogFile(path, capBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 5000 {
		l.Add(fmt.Sprintf("line %05d %s", i, strings.Repeat("x", i%40)))
		if total := fileSize(t, path) + fileSize(t, path+".1"); total > capBytes {
			t.Fatalf("after line %d the files hold %d bytes, over the cap %d", i, total, capBytes)
		}
	}
	if fileSize(t, path+".1") == 0 {
		t.Fatal("no rotated file after writing far more than the cap")
	}
	lines := l.Lines()
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], "line 04999") {
		t.Fatalf("last line = %q, want line 04999", lines[len(lines)-1:])
	}
	for i := 1; i < len(lines); i++ {
		if lines[i-1] >= lines[i] {
			t.Fatalf("lines out of order at %d: %q then %q", i, lines[i-1], lines[i])
		}
	}
	// At least the newest half of the cap is kept.
	kept := 0
	for _, line := range lines {
		kept += len(line) + 1
	}
	if kept < capBytes/2 {
		t.Errorf("kept %d bytes, want at least half the cap", kept)
	}
}

func TestLogFileCutsLongLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "web.log")
	l, err := openLogFile(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Add(strings.Repeat("a", 500))
	l.Add("short")
	got := l.Lines()
	if len(got) != 2 || len(got[0]) != 49 || got[1] != "short" {
		t.Fatalf("lines = %q, want the long one cut to 49 bytes, then short", got)
	}
	if total := fileSize(t, path) + fileSize(t, path+".1"); total > 100 {
		t.Errorf("files hold %d bytes, over the cap", total)
	}
}

func TestLogFileReopensAndTrims(t *testing.T) {
	path := filepath.Join(t.TempDir(), "web.log")
	l, err := openLogFile(path, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		l.Add(fmt.Sprintf("first run %03d", i))
	}
	l.Close()
	// A later run appends, under a smaller cap: the files are trimmed to
	// it, keeping the newest lines.
	l, err = openLogFile(path, 200)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Add("second run")
	if total := fileSize(t, path) + fileSize(t, path+".1"); total > 200 {
		t.Errorf("files hold %d bytes, over the new cap", total)
	}
	lines := l.Lines()
	if lines[len(lines)-1] != "second run" || !strings.HasPrefix(lines[len(lines)-2], "first run 399") {
		t.Errorf("lines = %q, want the newest of the first run, then the second", lines)
	}
}

func TestReadLogLinesMissing(t *testing.T) {
	if _, err := readLogLines(filepath.Join(t.TempDir(), "none.log")); !os.IsNotExist(err) {
		t.Errorf("read a missing log: %v, want not exist", err)
	}
	path := filepath.Join(t.TempDir(), "partial.log")
	if err := os.WriteFile(path, []byte("a\nb\ncut"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := readLogLines(path); !reflect.DeepEqual(got, []string{"a", "b", "cut"}) {
		t.Errorf("lines = %q", got)
	}
}
