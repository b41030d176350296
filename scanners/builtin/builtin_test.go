package builtin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
)

// copyFixture copies internal/scan's fixture OSV records, all but skip,
// into a new directory.
func copyFixture(t *testing.T, skip string) string {
	t.Helper()
	src := filepath.Join("..", "..", "internal", "scan", "testdata", "osv")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || e.Name() == skip {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDatabase: without osv_db there is no database and no error; with
// it, the export is loaded once and again when it changes (a record
// added); a path holding nothing is ADAPTER_FAILED, never "no advisories".
func TestDatabase(t *testing.T) {
	ctx := context.Background()
	if db, err := New("").Database(ctx); db != nil || err != nil {
		t.Fatalf("no osv_db: %v %v", db, err)
	}
	dir := copyFixture(t, "GO-2022-1059.json")
	s := New(dir)
	first, err := s.Database(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := s.Database(ctx); again != first {
		t.Fatal("an unchanged export was loaded again")
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "scan", "testdata", "osv", "GO-2022-1059.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "GO-2022-1059.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute) // a coarse file system clock still shows the change
	if err := os.Chtimes(dir, later, later); err != nil {
		t.Fatal(err)
	}
	next, err := s.Database(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == first || next.Describe() == first.Describe() {
		t.Fatalf("the changed export was not loaded again: %q after %q", next.Describe(), first.Describe())
	}
	if _, err := New(filepath.Join(t.TempDir(), "none")).Database(ctx); errcode.CodeOf(err) != errcode.AdapterFailed {
		t.Fatalf("a missing export: %v", err)
	}
	if err := New(t.TempDir()).Check(ctx); errcode.CodeOf(err) != errcode.AdapterFailed {
		t.Fatalf("an empty export: %v", err)
	}
}

func TestKind(t *testing.T) {
	k := Kind()
	if k.Category != adapters.CategoryScanner || !k.Default || k.DefaultID != DefaultID {
		t.Fatalf("kind %+v", k)
	}
	for _, bad := range []string{"relative/osv", "osv.zip"} {
		if err := k.Validate(map[string]string{"osv_db": bad}, nil); errcode.CodeOf(err) != errcode.ValidInvalid {
			t.Errorf("osv_db %q: %v", bad, err)
		}
	}
	if err := k.Validate(map[string]string{}, nil); err != nil {
		t.Errorf("no osv_db: %v", err)
	}
}
