package nomad_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler/nomad"
)

// TestCopyVolume runs the volume copy cases against the fake Nomad with
// each driver (exec mounts the volume into the copy task; raw_exec is
// told its directory).
func TestCopyVolume(t *testing.T) {
	for _, driver := range []string{nomad.DriverExec, nomad.DriverRawExec} {
		t.Run(driver, func(t *testing.T) {
			runCopyCases(t, func(t *testing.T) *env {
				return newEnv(t, options{runtime: func(c *nomad.Config) { c.Driver = driver }})
			}, func(e *env) string { return filepath.Join(e.fakeData, "volumes") })
		})
	}
	for _, driver := range []string{nomad.DriverExec, nomad.DriverRawExec} {
		t.Run("agent "+driver, func(t *testing.T) {
			addr, dir := startAgentWith(t, nil)
			runCopyCases(t, func(t *testing.T) *env {
				return newEnv(t, options{address: addr, runtime: func(c *nomad.Config) {
					c.Driver, c.ServiceProvider = driver, jobtemplates.ProviderNomad
				}})
			}, func(*env) string { return filepath.Join(dir, "host_volumes") })
		})
	}
}

// runCopyCases: an app's volume (made by a deploy, written to on the
// node) is copied out whole into a directory of the server; another tree
// copied in replaces its contents (the old entries gone, no staging left
// behind); a volume holding a link out of itself is refused on the way
// out and nothing of it is written; a volume no deploy made is NOT_FOUND.
// volumesDir is where the node keeps dynamic host volumes.
func runCopyCases(t *testing.T, newEnv func(t *testing.T) *env, volumesDir func(*env) string) {
	e := newEnv(t)
	ctx := context.Background()
	runVolumeJob(ctx, t, e, "job-copy", "app-copy", 0)
	vol := onlyDir(t, volumesDir(e))
	write(t, vol, map[string]string{"a.txt": "alpha\n", "sub/b.txt": "beta\n", ".hidden": "h\n"})

	t.Run("out", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "out")
		if err := e.rt.CopyVolumeOut(ctx, "app-copy", "data", dst); err != nil {
			t.Fatalf("CopyVolumeOut: %v", err)
		}
		if got, want := tree(t, dst), []string{".hidden=h\n", "a.txt=alpha\n", "sub/", "sub/b.txt=beta\n"}; !slices.Equal(got, want) {
			t.Errorf("copied out %q, want %q", got, want)
		}
	})
	t.Run("in", func(t *testing.T) {
		src := t.TempDir()
		write(t, src, map[string]string{"c.txt": "gamma\n", "d/e.txt": "epsilon\n"})
		if err := os.Symlink("c.txt", filepath.Join(src, "link")); err != nil {
			t.Fatal(err)
		}
		if err := e.rt.CopyVolumeIn(ctx, "app-copy", "data", src); err != nil {
			t.Fatalf("CopyVolumeIn: %v", err)
		}
		if got, want := tree(t, vol), []string{"c.txt=gamma\n", "d/", "d/e.txt=epsilon\n", "link->c.txt"}; !slices.Equal(got, want) {
			t.Errorf("the volume holds %q after the copy in, want %q", got, want)
		}
		if e.fake == nil {
			return
		}
		var jobs []struct{ ID string }
		if err := getJSON(ctx, e.fake.URL()+"/v1/jobs", &jobs); err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if strings.HasPrefix(j.ID, "svc-vol") {
				t.Errorf("copy job %s is still in Nomad", j.ID)
			}
		}
	})
	t.Run("a link out is refused", func(t *testing.T) {
		if err := os.Symlink("/etc/passwd", filepath.Join(vol, "evil")); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(filepath.Join(vol, "evil"))
		dst := filepath.Join(t.TempDir(), "out")
		err := e.rt.CopyVolumeOut(ctx, "app-copy", "data", dst)
		if !errcode.Has(err, errcode.AdapterFailed) || !strings.Contains(errcode.MessageOf(err), "links out") {
			t.Fatalf("CopyVolumeOut of a volume with a link out = %v, want ADAPTER_FAILED saying it links out", err)
		}
		if _, err := os.Lstat(filepath.Join(dst, "evil")); err == nil {
			t.Errorf("the link out was written into %s", dst)
		}
	})
	t.Run("a volume no deploy made", func(t *testing.T) {
		err := e.rt.CopyVolumeOut(ctx, "app-none", "data", t.TempDir())
		if !errcode.Has(err, errcode.NotFound) {
			t.Fatalf("CopyVolumeOut = %v, want NOT_FOUND", err)
		}
	})
}

// TestUnpackTree: what a copy out unpacks is refused when an entry would
// leave the destination (an escaping name, a link out, an entry under a
// link, a device) or the tree is past the cap, and nothing is written
// outside it; a good tree is unpacked whole.
func TestUnpackTree(t *testing.T) {
	for name, body := range map[string][]byte{
		"escaping name":        tarGz(t, [2]string{"../evil", "x"}),
		"nested escaping name": tarGz(t, [2]string{"a/../../evil", "x"}),
		"absolute link":        tarGz(t, [2]string{"l", "->/etc"}),
		"escaping link":        tarGz(t, [2]string{"a/", ""}, [2]string{"a/l", "->../../etc"}),
		"under a link":         tarGz(t, [2]string{"l", "->."}, [2]string{"l/x", "x"}),
		"a device":             tarGz(t, [2]string{"dev", "dev:"}),
		"past the cap":         tarGz(t, [2]string{"a", "12345"}, [2]string{"b", "67890"}),
		"a file twice":         tarGz(t, [2]string{"a", "1"}, [2]string{"a", "2"}),
	} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "dst")
			if err := nomad.UnpackTreeForTest(bytes.NewReader(body), dst, 8); err == nil {
				t.Fatalf("unpacked")
			}
			if _, err := os.Lstat(filepath.Join(parent, "evil")); err == nil {
				t.Errorf("an entry was written outside the destination")
			}
		})
	}
	dst := filepath.Join(t.TempDir(), "dst")
	good := tarGz(t, [2]string{"./", ""}, [2]string{"d/", ""}, [2]string{"d/f", "x"}, [2]string{"d/l", "->f"}, [2]string{"top", "y"})
	if err := nomad.UnpackTreeForTest(bytes.NewReader(good), dst, 8); err != nil {
		t.Fatal(err)
	}
	if got, want := tree(t, dst), []string{"d/", "d/f=x", "d/l->f", "top=y"}; !slices.Equal(got, want) {
		t.Errorf("unpacked %q, want %q", got, want)
	}
}

// FuzzUnpackTree: unpacking never panics and never writes outside the
// destination.
func FuzzUnpackTree(f *testing.F) {
	f.Add(tarGz(f, [2]string{"a", "x"}))
	f.Add(tarGz(f, [2]string{"l", "->.."}, [2]string{"l/x", "x"}))
	f.Add(tarGz(f, [2]string{"../a", "x"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		parent := t.TempDir()
		_ = nomad.UnpackTreeForTest(bytes.NewReader(b), filepath.Join(parent, "dst"), 1<<20)
		entries, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Name() != "dst" {
			t.Fatalf("the unpacking wrote beside its destination: %v", entries)
		}
	})
}

// onlyDir is the one directory in dir.
func onlyDir(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("%s holds %v (%v), want one volume", dir, entries, err)
	}
	return filepath.Join(dir, entries[0].Name())
}

// write writes files (slash path -> content) under dir.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tree lists dir: "name/" for a directory, "name=content" for a file,
// "name->target" for a symlink, sorted.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out = append(out, rel+"->"+target)
		case d.IsDir():
			out = append(out, rel+"/")
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, rel+"="+string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
