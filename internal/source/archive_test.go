package source

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

// entry is one member of an archive built by a test.
type entry struct {
	name   string
	typ    byte // tar type; for zip, the mode says
	mode   int64
	body   string
	link   string      // link target
	zmode  fs.FileMode // zip: the mode's type bits
	dev    bool
	size   int64 // tar: declared size when body is not given in full (bombs)
	reader io.Reader
}

func file(name, body string) entry {
	return entry{name: name, typ: tar.TypeReg, mode: 0o644, body: body}
}
func dir(name string) entry { return entry{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeSymlink, mode: 0o777, link: target, zmode: fs.ModeSymlink}
}

func makeTar(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	writeTar(t, &buf, entries...)
	return buf.Bytes()
}

func writeTar(t testing.TB, w io.Writer, entries ...entry) {
	t.Helper()
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
			if e.reader != nil {
				h.Size = e.size
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar header %q: %v", e.name, err)
		}
		var err error
		if e.reader != nil {
			_, err = io.Copy(tw, e.reader)
		} else {
			_, err = io.WriteString(tw, e.body)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func makeZip(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		mode := fs.FileMode(e.mode) & fs.ModePerm
		switch {
		case e.zmode != 0:
			mode |= e.zmode
		case e.typ == tar.TypeDir:
			mode |= fs.ModeDir
			h.Method = zip.Store
		}
		h.SetMode(mode)
		if e.body == "" && e.reader == nil && e.link == "" {
			h.Method = zip.Store // cheap: tests make thousands of empty files
		}
		body := e.body
		if e.zmode&fs.ModeSymlink != 0 {
			body = e.link
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatalf("zip header %q: %v", e.name, err)
		}
		if e.reader != nil {
			_, err = io.Copy(w, e.reader)
		} else {
			_, err = io.WriteString(w, body)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sandbox is a directory holding a canary directory (with a file) and a
// place for the destination: whatever an extraction does, nothing in it but
// the destination may change.
type sandbox struct {
	parent, canary, dest string
	before               map[string]string
}

func newSandbox(t testing.TB) *sandbox {
	t.Helper()
	parent := t.TempDir()
	s := &sandbox{parent: parent, canary: filepath.Join(parent, "canary"), dest: filepath.Join(parent, "apps", "app", "source", "chk")}
	for _, d := range []string{s.canary, filepath.Dir(s.dest)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.canary, "keep.txt"), []byte("canary"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.before = snapshot(t, parent, "")
	return s
}

// snapshot maps every path under root (but skip and what is under it) to
// its type, mode, size and content or link target.
func snapshot(t testing.TB, root, skip string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if skip != "" && p == skip {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		desc := info.Mode().String()
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case info.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			sum := sha256.Sum256(b)
			desc += " " + hex.EncodeToString(sum[:8])
		}
		out[p] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// untouched fails unless everything outside dest is as it was. A symlink
// inside dest must not lead outside it either.
func (s *sandbox) untouched(t testing.TB) {
	t.Helper()
	after := snapshot(t, s.parent, s.dest)
	for p, d := range after {
		if s.before[p] != d {
			t.Errorf("outside the destination, %s is now %q (was %q)", p, d, s.before[p])
		}
	}
	for p := range s.before {
		if _, ok := after[p]; !ok {
			t.Errorf("outside the destination, %s is gone", p)
		}
	}
	if _, err := os.Lstat(s.dest); err == nil {
		linksStayInside(t, s.dest)
	}
}

// linksStayInside resolves every link under root on the real file system,
// one component at a time, and fails if any step leaves root.
func linksStayInside(t testing.TB, root string) {
	t.Helper()
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		if esc := escapes(root, p, 0); esc != "" {
			t.Errorf("link %s leads outside the checkout: %s", p, esc)
		}
		return nil
	})
}

func escapes(root, link string, depth int) string {
	if depth > 50 {
		return ""
	}
	target, err := os.Readlink(link)
	if err != nil {
		return ""
	}
	if filepath.IsAbs(target) {
		return "absolute target " + target
	}
	cur := filepath.Dir(link)
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			if cur == root {
				return "above the root via " + target
			}
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		if info, err := os.Lstat(next); err == nil && info.Mode()&fs.ModeSymlink != 0 {
			if esc := escapes(root, next, depth+1); esc != "" {
				return esc
			}
			t, _ := os.Readlink(next)
			resolved := filepath.Clean(filepath.Join(cur, t))
			if !strings.HasPrefix(resolved+"/", root+"/") {
				return "through " + next
			}
			cur = resolved
			continue
		}
		cur = next
	}
	return ""
}

func extract(t testing.TB, s *sandbox, data []byte, kind Kind, lim Limits) (Stats, error) {
	t.Helper()
	return Extract(context.Background(), bytes.NewReader(data), kind, s.dest, lim)
}

// listing is the tree under dir: path, mode and content or link target.
func listing(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, _ := d.Info()
		line := fmt.Sprintf("%s %s", rel, info.Mode())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case info.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			line += " " + string(b)
		}
		out = append(out, line)
		return nil
	})
	sort.Strings(out)
	return out
}

func TestExtractAcceptsAnApp(t *testing.T) {
	entries := []entry{
		dir("./"),
		dir("app/"),
		file("app/main.py", "print('hi')\n"),
		{name: "app/run.sh", typ: tar.TypeReg, mode: 0o4755, body: "#!/bin/sh\n"}, // setuid: dropped
		{name: "app/data/seed.txt", typ: tar.TypeReg, mode: 0o2640, body: "seed"}, // setgid, no parent entry
		dir("app/lib/v1"),
		file("app/lib/v1/mod.py", "x = 1\n"),
		symlink("app/lib/current", "v1"),
		symlink("app/lib/up", "../main.py"),
		symlink("app/dangling", "nowhere/inside"),
		{name: "app/copy.py", typ: tar.TypeLink, link: "app/main.py"},
		dir("app/lib"), // a directory named again
	}
	want := []string{
		"app drwxr-xr-x",
		"app/copy.py -rw-r--r-- print('hi')\n",
		"app/dangling Lrwxrwxrwx -> nowhere/inside",
		"app/data drwxr-xr-x",
		"app/data/seed.txt -rw-r--r-- seed",
		"app/lib drwxr-xr-x",
		"app/lib/current Lrwxrwxrwx -> v1",
		"app/lib/up Lrwxrwxrwx -> ../main.py",
		"app/lib/v1 drwxr-xr-x",
		"app/lib/v1/mod.py -rw-r--r-- x = 1\n",
		"app/main.py -rw-r--r-- print('hi')\n",
		"app/run.sh -rwxr-xr-x #!/bin/sh\n",
	}
	zipEntries := append([]entry(nil), entries[:len(entries)-2]...) // zip has no hard links
	zipWant := append([]string(nil), want[:1]...)
	zipWant = append(zipWant, want[2:]...)
	tarData := makeTar(t, entries...)
	cases := []struct {
		name string
		data []byte
		kind Kind
		want []string
	}{
		{"tar", tarData, Tar, want},
		{"tar.gz", gz(t, tarData), TarGz, want},
		{"tar.gz sent as a tar", gz(t, tarData), Tar, want},
		{"tar.gz sent as a zip", gz(t, tarData), Zip, want},
		{"tar sent as a tar.gz", tarData, TarGz, want},
		{"zip", makeZip(t, zipEntries...), Zip, zipWant},
		{"zip sent as a tar.gz", makeZip(t, zipEntries...), TarGz, zipWant},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t)
			st, err := extract(t, s, c.data, c.kind, Limits{})
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			got := listing(t, s.dest)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("tree:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if info, _ := os.Stat(s.dest); info.Mode().Perm() != 0o755 {
				t.Errorf("dest mode %v", info.Mode())
			}
			sum := sha256.Sum256(c.data)
			if st.SHA256 != hex.EncodeToString(sum[:]) || st.ArchiveBytes != int64(len(c.data)) || st.Symlinks != 3 {
				t.Errorf("stats = %+v, want the archive's digest, %d bytes, 3 links", st, len(c.data))
			}
			s.untouched(t)
			if left, _ := os.ReadDir(filepath.Dir(s.dest)); len(left) != 1 {
				t.Errorf("leftovers beside the destination: %v", left)
			}
		})
	}
}

func TestExtractRefusesAnExistingDestination(t *testing.T) {
	s := newSandbox(t)
	if err := os.Mkdir(s.dest, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := extract(t, s, makeTar(t, file("a", "b")), Tar, Limits{}); err == nil {
		t.Fatal("extracted over an existing directory")
	}
}

func TestKindOf(t *testing.T) {
	for ct, want := range map[string]Kind{
		"application/gzip": TarGz, "application/x-tar": Tar, "application/zip": Zip,
		"application/zip; charset=binary": Zip, "APPLICATION/GZIP": TarGz,
	} {
		if got, err := KindOf(ct); err != nil || got != want {
			t.Errorf("KindOf(%q) = %q, %v; want %q", ct, got, err, want)
		}
	}
	for _, ct := range []string{"", "application/json", "text/plain", "application/x-gzip;;", "application/octet-stream"} {
		_, err := KindOf(ct)
		e, ok := errcode.As(err)
		if !ok || e.Code != errcode.ValidInvalid || e.Status() != 415 {
			t.Errorf("KindOf(%q) = %v, want VALID_INVALID 415", ct, err)
		}
	}
}
