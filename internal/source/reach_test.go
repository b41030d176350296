package source

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
)

// allowAll lets a clone reach any address, for tests against servers on
// loopback.
func allowAll(string, netip.Addr) error { return nil }

// allowOnly lets a clone reach only the address a (and refuses the rest as
// the default rule would refuse a loopback address).
func allowOnly(a netip.Addr) addrPolicy {
	strict := defaultAddrPolicy(nil)
	return func(host string, b netip.Addr) error {
		if b.Unmap() == a {
			return nil
		}
		return strict(host, b)
	}
}

func TestAddressRule(t *testing.T) {
	tests := []struct {
		host, addr string
		allowlist  []string
		ok         bool
	}{
		{"github.com", "140.82.121.4", nil, true},
		{"github.com", "2606:50c0:8000::153", nil, true},
		{"localhost", "127.0.0.1", nil, false},
		{"x", "127.8.9.1", []string{"x"}, false}, // loopback: never
		{"x", "::1", []string{"*"}, false},
		{"x", "::ffff:127.0.0.1", nil, false},
		{"metadata", "169.254.169.254", []string{"metadata"}, false},
		{"x", "fe80::1", nil, false},
		{"x", "0.0.0.0", nil, false},
		{"x", "0.1.2.3", nil, false},
		{"x", "224.0.0.1", nil, false},
		{"git.corp", "10.0.0.5", nil, false},
		{"git.corp", "10.0.0.5", []string{"*"}, false},
		{"git.corp", "10.0.0.5", []string{"github.com"}, false},
		{"git.corp", "10.0.0.5", []string{"git.corp"}, true},
		{"git.corp", "192.168.1.5", []string{"https://git.corp:8443/team/"}, true},
		{"a.git.corp", "172.16.0.9", []string{"*.git.corp"}, true},
		{"10.0.0.5", "10.0.0.5", []string{"10.0.0.5"}, true},
		{"fd00::5", "fd00::5", []string{"[fd00::5]:22"}, true},
		{"git.corp", "100.64.1.1", nil, false},
		{"git.corp", "fd12::1", nil, false},
	}
	for _, tt := range tests {
		err := defaultAddrPolicy(tt.allowlist)(tt.host, netip.MustParseAddr(tt.addr))
		if (err == nil) != tt.ok {
			t.Errorf("%s at %s under %q: %v, want allowed %v", tt.host, tt.addr, tt.allowlist, err, tt.ok)
		}
		if e, ok := errcode.As(err); err != nil && (!ok || e.Code != errcode.PolicySourceNotAllow) {
			t.Errorf("%s at %s: %v, want POLICY_SOURCE_NOT_ALLOWED", tt.host, tt.addr, err)
		}
	}
}

// TestCloneNeverReachesTheHost: with the shipped rule, a repository on a
// loopback or link-local address, by address or by a name that resolves
// there, over http(s) or ssh, is refused as host policy, and nothing is
// asked of the server.
func TestCloneNeverReachesTheHost(t *testing.T) {
	needGit(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	for _, repo := range []string{
		srv.URL + "/x.git",
		fmt.Sprintf("http://localhost:%d/x.git", port),
		fmt.Sprintf("https://localhost:%d/x.git", port),
		fmt.Sprintf("http://[::1]:%d/x.git", port),
		"http://169.254.169.254/latest/meta-data.git",
		"ssh://git@127.0.0.1/x.git",
		"git@localhost:x.git",
	} {
		_, err := (&Fetcher{}).Clone(t.Context(), repo, "", "", cloneDest(t), Limits{CloneTimeout: 30 * time.Second}, []string{"*"})
		if e, ok := errcode.As(err); !ok || e.Code != errcode.PolicySourceNotAllow {
			t.Errorf("%s: %v, want POLICY_SOURCE_NOT_ALLOWED", repo, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server on loopback was asked %d times", n)
	}
}

// gitServer serves the bare repository bare over smart HTTP (git
// http-backend) at /repo.git, on addr.
func gitServer(t *testing.T, bare, addr string, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	root := filepath.Dir(bare)
	if err := os.Rename(bare, filepath.Join(root, "repo.git")); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	var h http.Handler = &cgi.Handler{Path: git, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}}
	if wrap != nil {
		h = wrap(h)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("listen on %s: %v", addr, err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/repo.git"
}

// TestCloneOverHTTPGoesThroughTheGuard: a clone over http works through
// the proxy, and a redirect from an allowed address to one the rule
// refuses is refused, with nothing asked of the second server.
func TestCloneOverHTTPGoesThroughTheGuard(t *testing.T) {
	r := newTestRepo(t)
	url := gitServer(t, r.bare, "127.0.0.1:0", nil)
	f := &Fetcher{addrs: allowOnly(netip.MustParseAddr("127.0.0.1"))}
	commit, err := f.Clone(t.Context(), url, "", "", cloneDest(t), Limits{}, nil)
	if err != nil || commit != r.main {
		t.Fatalf("clone over http through the proxy: %s, %v; want %s", commit, err, r.main)
	}

	var hits atomic.Int32
	other := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("listen on 127.0.0.2: %v", err)
	}
	other.Listener = ln
	other.Start()
	defer other.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, other.URL+req.URL.RequestURI(), http.StatusFound)
	}))
	defer redirector.Close()
	_, err = f.Clone(t.Context(), redirector.URL+"/x.git", "", "", cloneDest(t), Limits{}, nil)
	if e, ok := errcode.As(err); !ok || e.Code != errcode.PolicySourceNotAllow {
		t.Errorf("a redirect to a refused address: %v, want POLICY_SOURCE_NOT_ALLOWED", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the redirect's target was asked %d times", n)
	}
}

// TestGuardTunnels: the proxy's CONNECT tunnel (https) reaches an allowed
// address and refuses another; without its password it answers 407.
func TestGuardTunnels(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "through") }))
	defer tlsSrv.Close()
	g, err := startGuard(allowOnly(netip.MustParseAddr("127.0.0.1")))
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	proxy, _ := url.Parse(g.proxyURL())
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxy), TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	res, err := client.Get(tlsSrv.URL)
	if err != nil {
		t.Fatalf("through the tunnel: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "through" {
		t.Errorf("through the tunnel: %q", b)
	}
	port := tlsSrv.Listener.Addr().(*net.TCPAddr).Port
	if _, err := client.Get(fmt.Sprintf("https://127.0.0.2:%d/", port)); err == nil || g.refused() == nil {
		t.Errorf("a tunnel to an address the rule refuses: %v, refusal %v", err, g.refused())
	}

	conn, err := net.Dial("tcp", g.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", tlsSrv.Listener.Addr(), tlsSrv.Listener.Addr())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusProxyAuthRequired {
		t.Errorf("CONNECT without the password: %v, %v; want 407", resp, err)
	}
}

// TestFetchFailuresLookAlike: a closed port, an open port that is not git
// (HTTP and raw TCP) and a server asking for credentials give the same
// code and message (up to the address given), naming no server path; git's
// reason is only in the error's cause, for the log.
func TestFetchFailuresLookAlike(t *testing.T) {
	needGit(t)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html>an internal dashboard</html>")
	}))
	defer html.Close()
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="internal"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer auth.Close()
	raw, _ := net.Listen("tcp", "127.0.0.1:0")
	defer raw.Close()
	go func() {
		for {
			c, err := raw.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "SSH-2.0-OpenSSH_9.2\r\n")
			c.Close()
		}
	}()
	f := &Fetcher{addrs: allowAll}
	var first string
	for _, base := range []string{"http://" + closedAddr, html.URL, auth.URL, "http://" + raw.Addr().String()} {
		repo := base + "/x.git"
		dest := cloneDest(t)
		_, err := f.Clone(t.Context(), repo, "", "", dest, Limits{CloneTimeout: 30 * time.Second}, nil)
		e, ok := errcode.As(err)
		if !ok || e.Code != errcode.ValidInvalid || e.Details["field"] != fieldRepository {
			t.Fatalf("%s: %v, want VALID_INVALID on source.repository", repo, err)
		}
		msg := strings.ReplaceAll(e.Message, repo, "<repo>")
		if first == "" {
			first = msg
		} else if msg != first {
			t.Errorf("%s: message %q, unlike %q", repo, msg, first)
		}
		for _, leak := range []string{filepath.Dir(filepath.Dir(dest)), os.TempDir(), "401", "refused", "html", "dashboard", "SSH"} {
			if strings.Contains(msg, leak) {
				t.Errorf("%s: the message %q shows %q", repo, e.Message, leak)
			}
		}
		if e.Err == nil {
			t.Errorf("%s: no cause kept for the log", repo)
		}
	}
	if !strings.Contains(first, "could not be fetched: check the URL, that it is reachable from the server, and that it is public") {
		t.Errorf("message %q", first)
	}
}

// TestFetchRecordsOnlyWhatTheCallerMaySee: a background fetch's failure,
// as the app's record is told it, is the same generic message for a
// closed port as for anything else git could not fetch, and a failure on
// the server's side names neither the work dir nor the cause, only the
// request whose log line has it. The API refuses a loopback address at
// once.
func TestFetchRecordsOnlyWhatTheCallerMaySee(t *testing.T) {
	needGit(t)
	f := newFixture(t)
	failed := make(chan string, 2)
	svc, err := New(Deps{WorkDir: f.work, Apps: f.apps, Policy: f.pol, Git: Fetcher{addrs: allowAll},
		OnFetchFailed: func(_ context.Context, _ string, msg string) { failed <- msg }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	ctx := actor.With(f.ctx, actor.Actor{Kind: authz.KindUser, ID: "usr_1", RequestID: "req_01TEST0000000000000000000"})
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	repo := "http://" + closed.Addr().String() + "/x.git"
	closed.Close()
	wait := func() string {
		select {
		case m := <-failed:
			return m
		case <-time.After(time.Minute):
			t.Fatal("no failure reported")
			return ""
		}
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(svc.Fetch(ctx, f.app(t, "closed"), apps.Source{Kind: KindRepository, Repository: repo}))
	if m := wait(); m != "VALID_INVALID: the repository "+repo+" could not be fetched: check the URL, that it is reachable from the server, and that it is public" {
		t.Errorf("recorded %q", m)
	}

	// The server's own failure: the app's source directory cannot be made.
	app := f.app(t, "broken")
	must(os.MkdirAll(filepath.Join(f.work, "apps", app), 0o755))
	must(os.WriteFile(filepath.Join(f.work, "apps", app, "source"), nil, 0o644))
	must(svc.Fetch(ctx, app, apps.Source{Kind: KindRepository, Repository: "https://example.invalid/x.git"}))
	m := wait()
	if strings.Contains(m, f.work) || !strings.Contains(m, "INTERNAL") || !strings.Contains(m, "req_01TEST0000000000000000000") {
		t.Errorf("a server-side failure recorded as %q", m)
	}

	// Through the shipped rule, the loopback address is refused at once.
	err = f.svc.Fetch(ctx, f.app(t, "loopback"), apps.Source{Kind: KindRepository, Repository: repo})
	if e, ok := errcode.As(err); !ok || e.Code != errcode.PolicySourceNotAllow {
		t.Errorf("Fetch of a loopback address: %v, want POLICY_SOURCE_NOT_ALLOWED", err)
	}
}
