package local

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/backuprepo"
	"github.com/svchost/svc/internal/backuprepo/storagetest"
	"github.com/svchost/svc/internal/errcode"
)

func open(t *testing.T, dir string) *Local {
	t.Helper()
	k := Kind("/unused")
	settings := map[string]string{"path": dir}
	if err := k.Validate(settings, nil); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	inst, err := k.Open(context.Background(), adapters.Config{ID: "adp_local", Settings: settings})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return inst.(*Local)
}

func TestContract(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) backuprepo.Storage {
		return open(t, filepath.Join(t.TempDir(), "backups"))
	})
}

func TestKindDefaultsToTheWorkDir(t *testing.T) {
	work := t.TempDir()
	k := Kind(work)
	if k.Category != adapters.CategoryBackup || !k.Default || k.DefaultID != DefaultID {
		t.Fatalf("kind %s/%s default %t %s", k.Category, k.Name, k.Default, k.DefaultID)
	}
	if len(k.Settings) != 1 || k.Settings[0].Default != filepath.Join(work, "backups") {
		t.Fatalf("settings %+v; want path defaulting to %s", k.Settings, filepath.Join(work, "backups"))
	}
	// The adapters service opens the default with its defaults applied.
	inst, err := k.Open(context.Background(), adapters.Config{ID: DefaultID, Settings: map[string]string{"path": k.Settings[0].Default}})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(work, "backups"))
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the backups directory: %v, %v; want a directory 0700", fi, err)
	}
	if err := inst.Check(context.Background()); err != nil {
		t.Errorf("Check: %v", err)
	}
	c := inst.Capabilities()
	if c["path"] != filepath.Join(work, "backups") || c["free_bytes"].(int64) <= 0 {
		t.Errorf("capabilities %v", c)
	}
	// Without a work dir (or with a relative path), path is required.
	for _, s := range []map[string]string{{}, {"path": ""}, {"path": "backups"}, {"path": "./x"}} {
		if err := Kind("").Validate(s, nil); !errcode.Has(err, errcode.ValidInvalid) {
			t.Errorf("Validate(%v) = %v; want VALID_INVALID", s, err)
		}
	}
}

func TestFilesAreOwnersOnly(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "b")
	l := open(t, dir)
	if err := l.Put(context.Background(), "chunks/ab/cd", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{dir: 0o700 | fs.ModeDir, dir + "/chunks": 0o700 | fs.ModeDir,
		dir + "/chunks/ab": 0o700 | fs.ModeDir, dir + "/chunks/ab/cd": 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v, %v; want %v", p, fi.Mode(), err, want)
		}
	}
}

// TestKeysStayInside: a symbolic link in the directory does not lead a key
// outside it, and nothing is written outside.
func TestKeysStayInside(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	l := open(t, dir)
	if err := os.Symlink(outside, filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	if rc, err := l.Get(ctx, "escape/secret"); err == nil {
		b, _ := io.ReadAll(rc)
		rc.Close()
		t.Errorf("Get through a link out of the directory read %q", b)
	}
	if err := l.Put(ctx, "escape/planted", strings.NewReader("x"), 1); err == nil {
		t.Error("Put through a link out of the directory succeeded")
	}
	if err := l.Delete(ctx, "escape/secret"); err == nil {
		if _, serr := os.Stat(filepath.Join(outside, "secret")); serr != nil {
			t.Error("Delete through a link removed a file outside the directory")
		}
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("outside the directory: %v", entries)
	}
	if objs, err := l.List(ctx, ""); err != nil || len(objs) != 0 {
		t.Errorf("List = %v, %v; want nothing (a link is not an object)", objs, err)
	}
}

// TestKeyClashes: an object cannot also be the directory of others.
func TestKeyClashes(t *testing.T) {
	ctx := context.Background()
	l := open(t, t.TempDir())
	if err := l.Put(ctx, "a/b", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Put(ctx, "c", strings.NewReader("y"), 1); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "c/d", "c/d/e"} {
		err := l.Put(ctx, k, strings.NewReader("z"), 1)
		if e, ok := errcode.As(err); !ok || e.Code != errcode.ValidInvalid || !strings.Contains(e.Message, "clashes") {
			t.Errorf("Put(%s): %v; want VALID_INVALID, a clash", k, err)
		}
	}
	if objs, err := l.List(ctx, ""); err != nil || len(objs) != 2 {
		t.Errorf("List = %v, %v; want a/b and c", objs, err)
	}
}

// TestLeftoversAreNotObjects: the temporary file of a Put that never
// finished (a crash) and files whose names are not keys are not listed.
func TestLeftoversAreNotObjects(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := open(t, dir)
	if err := l.Put(ctx, "k/obj", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"k/obj~0123456789abcdef", "k/README.md", "Other"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("junk"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := l.List(ctx, "")
	if err != nil || len(objs) != 1 || objs[0] != (backuprepo.Object{Key: "k/obj", Size: 1}) {
		t.Errorf("List = %v, %v; want only k/obj", objs, err)
	}
}

// TestDirectoryRemoved: a directory removed while svc runs is not written
// into (its files would be lost): operations and Check answer
// ADAPTER_UNAVAILABLE with a remedy.
func TestDirectoryRemoved(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "backups")
	l := open(t, dir)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Put":   l.Put(ctx, "k", strings.NewReader("x"), 1),
		"Check": l.Check(ctx),
	} {
		if e, ok := errcode.As(err); !ok || e.Code != errcode.AdapterUnavailable || !strings.Contains(e.Remedy, "create "+dir) {
			t.Errorf("%s: %v; want ADAPTER_UNAVAILABLE saying to create %s", name, err, dir)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s was made again", dir)
	}
}

// TestKilledPutLeavesNoObject: a process killed (SIGKILL) in the middle of
// a Put leaves the object as it was: absent, or the one before.
func TestKilledPutLeavesNoObject(t *testing.T) {
	if dir := os.Getenv("SVC_LOCAL_KILL_DIR"); dir != "" {
		putForever(dir)
		return
	}
	ctx := context.Background()
	dir := t.TempDir()
	l := open(t, dir)
	if err := l.Put(ctx, "k/existing", strings.NewReader("old"), 3); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"k/new", "k/existing"} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestKilledPutLeavesNoObject$")
		cmd.Env = append(os.Environ(), "SVC_LOCAL_KILL_DIR="+dir, "SVC_LOCAL_KILL_KEY="+key)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The child says when it has written part of the object.
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "writing\n" {
			t.Fatalf("child said %q, %v", line, err)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	wantGet := func(key, want string) {
		t.Helper()
		rc, err := l.Get(ctx, key)
		if want == "" {
			if !errcode.Has(err, errcode.NotFound) {
				t.Errorf("Get(%s): %v; want NOT_FOUND", key, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Get(%s): %v", key, err)
		}
		defer rc.Close()
		if b, _ := io.ReadAll(rc); string(b) != want {
			t.Errorf("Get(%s) = %d bytes; want %q", key, len(b), want)
		}
	}
	wantGet("k/new", "")
	wantGet("k/existing", "old")
	if objs, err := l.List(ctx, ""); err != nil || len(objs) != 1 {
		t.Errorf("List = %v, %v; want only k/existing", objs, err)
	}
}

// putForever puts 1 GiB whose reader says "writing" after a MiB and then
// waits to be killed.
func putForever(dir string) {
	l, err := New(dir)
	if err != nil {
		panic(err)
	}
	r := io.MultiReader(bytes.NewReader(make([]byte, 1<<20)), signalThenBlock{})
	_ = l.Put(context.Background(), os.Getenv("SVC_LOCAL_KILL_KEY"), r, 1<<30)
	panic("the put ended")
}

type signalThenBlock struct{}

func (signalThenBlock) Read([]byte) (int, error) {
	fmt.Println("writing")
	select {}
}

// BenchmarkStorageLocal: put and get of a 64 MiB object, in SVC_BENCH_DIR
// when set (the disk to measure), else in the temporary directory.
func BenchmarkStorageLocal(b *testing.B) {
	dir := b.TempDir()
	if d := os.Getenv("SVC_BENCH_DIR"); d != "" {
		var err error
		if dir, err = os.MkdirTemp(d, "backupstore-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	l, err := New(filepath.Join(dir, "backups"))
	if err != nil {
		b.Fatal(err)
	}
	storagetest.Bench(b, l)
}
