package e2e

import (
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/testserver"
)

// launched checks what svc launch printed for a launch that went through
// and returns the URL of its last line, after sharing the app with
// everyone (so that the test reaches it through the edge without signing
// in).
func launched(t *testing.T, srv *appServer, c cliAs, slug, out, errs string, code int) *url.URL {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if code != 0 || !strings.Contains(out, "Detected ") || !strings.Contains(out, "WORKLOAD") || !strings.Contains(out, "Accepted the proposal as revision ") ||
		!strings.Contains(out, "system | ") || !strings.HasPrefix(last, slug+" is running at http") {
		t.Fatalf("svc launch: exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	u, err := url.Parse(strings.TrimPrefix(last, slug+" is running at "))
	if err != nil {
		t.Fatal(err)
	}
	var a struct{ App struct{ ID string } }
	c.decoded(t, &a, "apps", "get", slug)
	srv.must(t, "POST", "/apps/"+a.App.ID+"/grants", map[string]any{"plane": "data", "principal_kind": "anonymous"}, http.StatusCreated, nil)
	return u
}

// TestCLILaunchSamples runs `svc launch DIR` of every directory of
// samples/ with the built binary against one server, the launches at the
// same time: each creates its app, uploads the directory, shows
// detection's proposal, accepts it (with a greeting set), deploys with the
// log followed and prints a URL at which the sample answers as itself.
// A sample whose toolchain this machine lacks is skipped, saying which.
//
// Then the questions path: a directory whose detection asks for a value
// (python-hello with a .env.example listing GREETING without one) makes
// svc launch print the question with how to answer it and exit 1, and
// launching again into that app with --answer serves the answer.
func TestCLILaunchSamples(t *testing.T) {
	first, err := testserver.FreePorts(7)
	if err != nil {
		t.Fatal(err)
	}
	srv := startAppServer(t, "cli-samples", "SVC_APP_PORT_START="+strconv.Itoa(first), "SVC_APP_PORT_END="+strconv.Itoa(first+6))
	c := cliAs{base: srv.p.Base(), token: srv.token(), config: t.TempDir()}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, sm := range []struct {
		dir   string
		tools []string // the toolchain its build and run need
		want  string   // GET / answers this (and the greeting, for a program)
	}{
		{"go-hello", []string{"go"}, "hello from go"},
		{"go-whoami", []string{"go"}, "Hostname: "},
		{"node-hello", []string{"node", "npm"}, "hello from node"},
		{"python-hello", []string{"python3", "pip"}, "hello from python"},
		{"static-hello", nil, "hello from static"},
	} {
		t.Run(sm.dir, func(t *testing.T) {
			for _, tool := range sm.tools {
				if _, err := exec.LookPath(tool); err != nil {
					t.Skipf("%s is not on this machine's PATH: the process runtime builds %s with the host's toolchain", tool, sm.dir)
				}
			}
			t.Parallel()
			greeting := "greeting-" + sm.dir + "-" + randomHex(t)
			out, errs, code := c.run(t, "", "launch", filepath.Join(root, "samples", sm.dir), "--set", "GREETING="+greeting)
			u := launched(t, srv, c, sm.dir, out, errs, code)
			body := waitAnswer(t, u.Host, u.Path, sm.want)
			if strings.HasSuffix(sm.dir, "-hello") && sm.dir != "static-hello" && !strings.Contains(body, greeting) {
				t.Errorf("GET %s = %q; want the greeting set at launch", u, body)
			}
		})
	}

	t.Run("repository", func(t *testing.T) {
		// svc launch --repo: the server clones the repository (served
		// by git's own HTTP backend) and detects it; launch waits for
		// that, accepts and deploys.
		repo, ip := serveGitRepo(t, filepath.Join(root, "samples", "go-hello"), "")
		if ip.IsPrivate() {
			// archive: keeps uploads (the later launches of directories) allowed.
			c.ok(t, "policy", "set", "--policy", `{"source_allowlist":["`+ip.String()+`","archive:"]}`)
		}
		greeting := "from-git-" + randomHex(t)
		out, errs, code := c.run(t, "", "launch", "--repo", repo, "--ref", "main", "--set", "GREETING="+greeting)
		u := launched(t, srv, c, "hello", out, errs, code)
		waitAnswer(t, u.Host, u.Path, greeting)
		c.misused(t, "", "launch", repo, "--repo", repo)                     // a directory and a repository
		c.misused(t, "", "launch", "--ref", "main")                          // --ref without --repo
		c.misused(t, "", "launch", "--repo", "/elsewhere", "--app", "hello") // not the app's repository
	})

	t.Run("questions", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "asks")
		if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "samples", "python-hello"))); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".env.example"), []byte("GREETING=\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errs, code := c.run(t, "", "launch", dir, "--name", "asks")
		if code != 1 || !strings.Contains(out, "Detected python") ||
			!strings.Contains(errs, "question env.GREETING (string): Value of GREETING") ||
			!strings.Contains(errs, "answer with --answer env.GREETING=VALUE") ||
			!strings.Contains(errs, "--app asks with the answers") || strings.Contains(out, "Accepted") {
			t.Fatalf("svc launch of a directory whose detection asks: exit %d, stderr %q, stdout:\n%s", code, errs, out)
		}
		answer := "answered-" + randomHex(t)
		out, errs, code = c.run(t, "", "launch", dir, "--app", "asks", "--answer", "env.GREETING="+answer)
		u := launched(t, srv, c, "asks", out, errs, code)
		waitAnswer(t, u.Host, u.Path, "hello from python: "+answer)
		c.misused(t, "", "launch", dir, "--app", "asks", "--answer", "no-equals-sign")
	})
}

// networkAddr is an IPv4 address of this host that is not loopback or
// link-local: one svc may clone from.
func networkAddr(t *testing.T) netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP.To4()); ok && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
				return ip
			}
		}
	}
	t.Skip("this machine has no IPv4 address but loopback: svc clones only from addresses of a network")
	return netip.Addr{}
}

// serveGitRepo serves, with git's own HTTP backend on an address of this
// host's network (svc never clones from loopback; host policy must name the
// address when it is private), a repository named hello.git with one
// commit on main holding dir's tree under sub ("" for its root). It returns
// the repository's URL and the address.
func serveGitRepo(t *testing.T, dir, sub string) (string, netip.Addr) {
	t.Helper()
	work, served := filepath.Join(t.TempDir(), "work"), t.TempDir()
	if err := os.CopyFS(filepath.Join(work, sub), os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(served, "hello.git")
	for _, args := range [][]string{{"-C", work, "init", "-q", "-b", "main"}, {"-C", work, "add", "."},
		{"-C", work, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "first"},
		{"clone", "-q", "--bare", work, bare}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	ip := networkAddr(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{Path: git, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + served, "GIT_HTTP_EXPORT_ALL=1"}}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: backend}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/hello.git", ip
}
