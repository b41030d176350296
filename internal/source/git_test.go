package source

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
)

// testRepo is a bare repository made with the git CLI: main (two commits,
// tag v1 on the first), a feature branch, a subdir, and an inside link.
type testRepo struct {
	bare                  string
	first, main, feature  string
	escaping, absoluteRef string // branches with a link out, and an absolute link
}

func needGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: the clone tests need the git CLI")
	}
}

func gitCmd(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t testing.TB, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newTestRepo(t testing.TB) testRepo {
	t.Helper()
	needGit(t)
	base := t.TempDir()
	w := filepath.Join(base, "work")
	if err := os.Mkdir(w, 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, w, "init", "-q", "-b", "main")
	write(t, filepath.Join(w, "app.py"), "print('v1')\n")
	write(t, filepath.Join(w, "svc", "web", "index.html"), "<p>hi</p>\n")
	if err := os.Symlink("app.py", filepath.Join(w, "link.py")); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, w, "add", "-A")
	gitCmd(t, w, "commit", "-q", "-m", "first")
	gitCmd(t, w, "tag", "v1")
	var r testRepo
	r.first = gitCmd(t, w, "rev-parse", "HEAD")
	write(t, filepath.Join(w, "app.py"), "print('v2')\n")
	gitCmd(t, w, "commit", "-q", "-am", "second")
	r.main = gitCmd(t, w, "rev-parse", "HEAD")

	gitCmd(t, w, "checkout", "-q", "-b", "feature")
	write(t, filepath.Join(w, "feature.txt"), "feature\n")
	gitCmd(t, w, "add", "-A")
	gitCmd(t, w, "commit", "-q", "-m", "feature")
	r.feature = gitCmd(t, w, "rev-parse", "HEAD")

	gitCmd(t, w, "checkout", "-q", "-b", "escaping", "main")
	if err := os.Symlink("../../../../../../etc", filepath.Join(w, "etc")); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, w, "add", "-A")
	gitCmd(t, w, "commit", "-q", "-m", "escape")
	r.escaping = "escaping"

	gitCmd(t, w, "checkout", "-q", "-b", "absolute", "main")
	if err := os.Symlink("/etc/passwd", filepath.Join(w, "passwd")); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, w, "add", "-A")
	gitCmd(t, w, "commit", "-q", "-m", "absolute")
	r.absoluteRef = "absolute"
	gitCmd(t, w, "checkout", "-q", "main")

	r.bare = filepath.Join(base, "repo.git")
	gitCmd(t, base, "clone", "-q", "--bare", w, r.bare)
	return r
}

func cloneDest(t testing.TB) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "source")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(d, "chk")
}

func TestCloneBranchesTagsAndCommits(t *testing.T) {
	r := newTestRepo(t)
	f := &Fetcher{AllowFile: true}
	cases := []struct {
		name, repo, ref, subdir string
		commit, file, body      string
	}{
		{"default branch, path", r.bare, "", "", r.main, "app.py", "print('v2')\n"},
		{"default branch, file URL", "file://" + r.bare, "", "", r.main, "app.py", "print('v2')\n"},
		{"branch", r.bare, "feature", "", r.feature, "feature.txt", "feature\n"},
		{"tag", r.bare, "v1", "", r.first, "app.py", "print('v1')\n"},
		{"commit", r.bare, r.first, "", r.first, "app.py", "print('v1')\n"},
		{"commit in upper case", r.bare, strings.ToUpper(r.main), "", r.main, "app.py", "print('v2')\n"},
		{"subdir", r.bare, "main", "svc/web", r.main, "svc/web/index.html", "<p>hi</p>\n"},
		{"subdir ./", r.bare, "main", "./svc/", r.main, "svc/web/index.html", "<p>hi</p>\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dest := cloneDest(t)
			commit, err := f.Clone(t.Context(), c.repo, c.ref, c.subdir, dest, Limits{}, nil)
			if err != nil {
				t.Fatalf("Clone: %v", err)
			}
			if commit != c.commit {
				t.Errorf("commit = %s, want %s", commit, c.commit)
			}
			b, err := os.ReadFile(filepath.Join(dest, c.file))
			if err != nil || string(b) != c.body {
				t.Errorf("%s = %q, %v; want %q", c.file, b, err, c.body)
			}
			if target, err := os.Readlink(filepath.Join(dest, "link.py")); err != nil || target != "app.py" {
				t.Errorf("link.py -> %q, %v", target, err)
			}
			if _, err := os.Stat(filepath.Join(dest, ".git")); err == nil {
				t.Error("the checkout kept .git")
			}
			if left, _ := os.ReadDir(filepath.Dir(dest)); len(left) != 1 {
				t.Errorf("leftovers beside the checkout: %v", left)
			}
		})
	}
}

func TestCloneRefusals(t *testing.T) {
	r := newTestRepo(t)
	// The checks of a finished checkout are under test here, not the
	// watch of a clone that grows (TestCloneStopsWhenItGrowsTooLarge): on
	// a slow machine the watch would stop the "too large" clone first.
	old := watchInterval
	watchInterval = time.Hour
	t.Cleanup(func() { watchInterval = old })
	cases := []struct {
		name, repo, ref, subdir string
		allowFile               bool
		lim                     Limits
		field, want             string
	}{
		{"unknown branch", r.bare, "nope", "", true, Limits{}, fieldRef, `source.ref "nope" was not found`},
		{"unknown commit", r.bare, strings.Repeat("ab", 20), "", true, Limits{}, fieldRef, "was not found"},
		{"unknown repository", filepath.Join(filepath.Dir(r.bare), "missing.git"), "", "", true, Limits{}, fieldRepository, "could not be fetched: check the URL"},
		{"local path not allowed", r.bare, "", "", false, Limits{}, fieldRepository, "is a local path"},
		{"file URL not allowed", "file://" + r.bare, "", "", false, Limits{}, fieldRepository, "uses file://"},
		{"link out of the checkout", r.bare, r.escaping, "", true, Limits{}, "", "points outside the checkout"},
		{"absolute link", r.bare, r.absoluteRef, "", true, Limits{}, "", "the link target is an absolute path"},
		{"missing subdir", r.bare, "", "nope", true, Limits{}, fieldSubdir, `source.subdir "nope" is not a directory`},
		{"subdir that is a file", r.bare, "", "app.py", true, Limits{}, fieldSubdir, "is not a directory"},
		{"subdir that is a link", r.bare, "", "link.py", true, Limits{}, fieldSubdir, "is not a directory"},
		{"subdir ..", r.bare, "", "../x", true, Limits{}, fieldSubdir, "must not contain .."},
		{"subdir option", r.bare, "", "-x", true, Limits{}, fieldSubdir, "must not start with -"},
		{"ref option", r.bare, "--upload-pack=touch /tmp/pwned", "", true, Limits{}, fieldRef, "must not start with -"},
		{"ref ..", r.bare, "a..b", "", true, Limits{}, fieldRef, "is not a valid"},
		{"too large", r.bare, "", "", true, Limits{MaxTotalBytes: 16}, "", "add up to more than the limit of 16 bytes"},
		{"too many entries", r.bare, "", "", true, Limits{MaxEntries: 2}, "", "more than 2 entries"},
		{"timeout", r.bare, "", "", true, Limits{CloneTimeout: time.Nanosecond}, fieldRepository, "took longer than the limit of 1ns"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dest := cloneDest(t)
			_, err := (&Fetcher{AllowFile: c.allowFile}).Clone(t.Context(), c.repo, c.ref, c.subdir, dest, c.lim, nil)
			e, ok := errcode.As(err)
			if !ok || e.Code != errcode.ValidInvalid {
				t.Fatalf("Clone = %v, want VALID_INVALID", err)
			}
			if !strings.Contains(e.Message, c.want) {
				t.Errorf("message %q, want %q", e.Message, c.want)
			}
			if c.field != "" && e.Details["field"] != c.field {
				t.Errorf("details.field = %v, want %s", e.Details["field"], c.field)
			}
			if left, _ := os.ReadDir(filepath.Dir(dest)); len(left) != 0 {
				t.Errorf("a refused clone left %v behind", left)
			}
		})
	}
}

// Credentials in the address never reach an error, whether the address
// is refused or git tries it.
func TestCloneNeverEchoesCredentials(t *testing.T) {
	needGit(t)
	const secret = "s3cret-t0ken"
	for _, f := range []*Fetcher{{}, {addrs: allowAll}} {
		for _, repo := range []string{
			"https://user:" + secret + "@127.0.0.1:1/acme/app.git",
			"https://" + secret + "@127.0.0.1:1/acme/app.git",
			"http://user:" + secret + "@127.0.0.1:1/acme/app.git",
		} {
			_, err := f.Clone(t.Context(), repo, "", "", cloneDest(t), Limits{CloneTimeout: 20 * time.Second}, nil)
			if err == nil {
				t.Fatalf("%s: cloned from a closed port", Redact(repo))
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the credentials: %v", err)
			}
		}
	}
}

// A clone that grows past twice the checkout limit while it runs is
// stopped there, history included.
func TestCloneStopsWhenItGrowsTooLarge(t *testing.T) {
	r := newTestRepo(t)
	w := filepath.Join(t.TempDir(), "big")
	gitCmd(t, filepath.Dir(w), "clone", "-q", r.bare, w)
	write(t, filepath.Join(w, "blob.bin"), randomBytes(8<<20))
	gitCmd(t, w, "add", "-A")
	gitCmd(t, w, "commit", "-q", "-m", "big")
	gitCmd(t, w, "push", "-q", "origin", "main")
	old := watchInterval
	watchInterval = time.Millisecond
	t.Cleanup(func() { watchInterval = old })
	_, err := (&Fetcher{AllowFile: true}).Clone(t.Context(), r.bare, "", "", cloneDest(t), Limits{MaxTotalBytes: 64 << 10}, nil)
	e, ok := errcode.As(err)
	if !ok || !strings.Contains(e.Message, "grew past the limit of 131072 bytes") || e.Details["limit"] != int64(128<<10) {
		t.Fatalf("Clone = %v, want the clone stopped at 131072 bytes", err)
	}
}
