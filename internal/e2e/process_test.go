package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svchost/svc/api"
)

// servingTimeout bounds the wait for the "svc is serving" line.
const servingTimeout = 30 * time.Second

// proc is one svc server process, started, stopped, killed and restarted
// with the same environment and work directory. Its stdout and stderr go to
// one log file, appended to across restarts.
type proc struct {
	t       testing.TB
	name    string
	env     []string
	args    []string
	logPath string
	// bin is the binary to run; "" is svcBin.
	bin string

	mu     sync.Mutex
	cur    *run        // the latest process, nil before the first start
	base   string      // the API base URL of the current process, "" when not serving
	client *api.Client // nil when not serving
	tr     *http.Transport
	starts int
	token  string // sent by the client, once signIn gave one
}

// run is one process of a proc.
type run struct {
	cmd    *exec.Cmd
	logOff int64         // where this run's output starts in the log
	exited chan struct{} // closed once the process has been reaped
	state  *os.ProcessState
}

func (r *run) done() bool {
	select {
	case <-r.exited:
		return true
	default:
		return false
	}
}

// newProc prepares a server process (it does not start it). env holds the
// SVC_ variables; the test's own SVC_ variables are not passed on. The
// process is killed when the test ends, and the tail of its log is logged if
// the test failed.
func newProc(t testing.TB, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{
		t:       t,
		name:    name,
		env:     childEnv(env),
		args:    append([]string{"serve"}, args...),
		logPath: logPath(t, name),
	}
	t.Cleanup(func() {
		if r := p.current(); r != nil && !r.done() {
			_ = r.cmd.Process.Signal(syscall.SIGKILL)
			select {
			case <-r.exited:
			case <-time.After(10 * time.Second):
				t.Errorf("%s: pid %d did not die after SIGKILL", p.name, r.cmd.Process.Pid)
			}
		}
		p.checkLog()
		if t.Failed() {
			t.Logf("%s: log %s, tail (request lines with status 2xx left out):\n%s", p.name, p.logPath, p.tail(60))
		}
	})
	return p
}

// logPath is where a process's log goes: under SVC_E2E_LOG_DIR when set (so
// that it outlives the test), else in the test's temp dir.
func logPath(t testing.TB, name string) string {
	dir := t.TempDir()
	if keep := os.Getenv("SVC_E2E_LOG_DIR"); keep != "" {
		dir = filepath.Join(keep, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("SVC_E2E_LOG_DIR: %v", err)
		}
		_ = os.Remove(filepath.Join(dir, name+".log"))
	}
	return filepath.Join(dir, name+".log")
}

// childEnv is this process's environment without its SVC_ variables, plus
// a text log at info level, plus env.
func childEnv(env []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SVC_") {
			out = append(out, kv)
		}
	}
	out = append(out, "SVC_LOG_FORMAT=text", "SVC_LOG_LEVEL=info", "SVC_ADMIN_PASSWORD="+adminPassword)
	return append(out, env...) // exec uses the last of duplicate keys
}

// adminPassword is the password of the "admin" account every server of
// these tests creates on its first run (SVC_ADMIN_PASSWORD).
const adminPassword = "e2e-admin-password-7f3c1a"

// signIn signs in as admin on one of the processes (trying until the first
// run has created the account), mints a token and gives it to every
// process, so that their clients authenticate with it.
func signIn(t testing.TB, timeout time.Duration, procs ...*proc) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		for _, p := range procs {
			c := p.Client()
			if c == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := c.SignIn(ctx, "admin", adminPassword)
			if err == nil {
				var secret string
				_, secret, err = c.CreateToken(ctx, api.NewToken{Name: "e2e"}, false)
				if err == nil {
					cancel()
					for _, q := range procs {
						q.setToken(secret)
					}
					return
				}
			}
			cancel()
			last = err
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("could not sign in as admin within %s: %v", timeout, last)
}

// setToken makes the process's client (now and after restarts) send token.
func (p *proc) setToken(token string) {
	p.mu.Lock()
	p.token = token
	base := p.base
	p.mu.Unlock()
	if base != "" {
		p.serveAt(base)
	}
}

func (p *proc) current() *run {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// Client is the API client of the serving process, nil while it is not
// serving (not started yet, killed, stopped).
func (p *proc) Client() *api.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.client
}

// Base is the API base URL of the serving process.
func (p *proc) Base() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.base
}

// start starts the process; it does not wait for it to serve.
func (p *proc) start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil && !p.cur.done() {
		p.t.Fatalf("%s: start while pid %d still runs", p.name, p.cur.cmd.Process.Pid)
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatalf("%s: open log: %v", p.name, err)
	}
	defer f.Close()
	p.starts++
	fmt.Fprintf(f, "=== e2e: start #%d of %s at %s\n", p.starts, p.name, time.Now().Format(time.RFC3339Nano))
	off, err := f.Seek(0, 2)
	if err != nil {
		p.t.Fatalf("%s: log offset: %v", p.name, err)
	}
	bin := svcBin
	if p.bin != "" {
		bin = p.bin
	}
	cmd := exec.Command(bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = f, f // the child writes the file itself: nothing is lost on SIGKILL
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("%s: start %s: %v", p.name, bin, err)
	}
	r := &run{cmd: cmd, logOff: off, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		r.state = cmd.ProcessState
		close(r.exited)
	}()
	p.cur, p.base, p.client = r, "", nil
}

var (
	servingAPI  = regexp.MustCompile(`msg="svc is serving".* api=(\S+)`)
	servingLine = regexp.MustCompile(`.*msg="svc is serving".*`)
)

// waitServing waits for this run's "svc is serving" line, and points the
// client at the API address it names. It returns the base URL.
func (p *proc) waitServing() string {
	p.t.Helper()
	r := p.current()
	if r == nil {
		p.t.Fatalf("%s: waitServing before start", p.name)
	}
	timeout := scaled(servingTimeout)
	deadline := time.Now().Add(timeout)
	for {
		if m := servingAPI.FindStringSubmatch(p.runLog(r)); m != nil {
			base, err := apiBase(m[1])
			if err != nil {
				p.t.Fatalf("%s: serving line: %v", p.name, err)
			}
			p.serveAt(base)
			return base
		}
		if r.done() {
			p.t.Fatalf("%s: exited (%s) before it logged \"svc is serving\"; its output:\n%s", p.name, r.state, p.runLog(r))
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: no \"svc is serving\" line within %s; its output:\n%s", p.name, timeout, lastLines(p.runLog(r), 40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// apiBase turns the logged API URL (http://localhost:PORT/api/v1) into the
// client's base URL. The servers listen on 127.0.0.1 (SVC_SERVER_ADDR), so
// localhost is dialed as 127.0.0.1 rather than left to the resolver.
func apiBase(logged string) (string, error) {
	u, err := url.Parse(logged)
	if err != nil || u.Host == "" || !strings.HasSuffix(u.Path, "/api/v1") {
		return "", fmt.Errorf("api=%q is not an http://host:port/api/v1 URL", logged)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return "", fmt.Errorf("api=%q: %v", logged, err)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	return u.Scheme + "://" + net.JoinHostPort(host, port) + strings.TrimSuffix(u.Path, "/api/v1"), nil
}

func (p *proc) serveAt(base string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tr != nil {
		p.tr.CloseIdleConnections()
	}
	p.tr = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}
	c, err := api.New(base, api.WithHTTPClient(&http.Client{Transport: p.tr, Timeout: 60 * time.Second}), api.WithToken(p.token))
	if err != nil {
		p.t.Errorf("%s: api.New(%q): %v", p.name, base, err)
		return
	}
	p.base, p.client = base, c
}

// notServing forgets the API address before the process goes away, so that
// nobody picks it any more.
func (p *proc) notServing() *run {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.base, p.client = "", nil
	if p.tr != nil {
		p.tr.CloseIdleConnections()
	}
	return p.cur
}

// startServing starts the process and waits until it serves.
func (p *proc) startServing() string {
	p.t.Helper()
	p.start()
	return p.waitServing()
}

// restart starts the process again, with the same environment and work
// dir, and waits until it serves (perhaps on another API port).
func (p *proc) restart() string {
	p.t.Helper()
	return p.startServing()
}

// stop sends SIGTERM and waits up to timeout for the process to exit. It
// returns the exit code and how long the exit took.
func (p *proc) stop(timeout time.Duration) (int, time.Duration) {
	p.t.Helper()
	r := p.notServing()
	if r == nil || r.done() {
		p.t.Fatalf("%s: stop: not running", p.name)
	}
	start := time.Now()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("%s: SIGTERM: %v", p.name, err)
	}
	select {
	case <-r.exited:
		return r.state.ExitCode(), time.Since(start)
	case <-time.After(timeout):
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.exited
		p.t.Fatalf("%s: did not exit within %s of SIGTERM (killed it)", p.name, timeout)
		return -1, 0
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (p *proc) kill() {
	p.t.Helper()
	r := p.notServing()
	if r == nil || r.done() {
		p.t.Fatalf("%s: kill: not running", p.name)
	}
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatalf("%s: SIGKILL: %v", p.name, err)
	}
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		p.t.Fatalf("%s: pid %d still there 10s after SIGKILL", p.name, r.cmd.Process.Pid)
	}
}

// running reports whether the latest process is still running.
func (p *proc) running() bool {
	r := p.current()
	return r != nil && !r.done()
}

// logText returns the whole log, every run.
func (p *proc) logText() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		p.t.Errorf("%s: read log: %v", p.name, err)
	}
	return string(b)
}

// runLog returns the output of one run.
func (p *proc) runLog(r *run) string {
	s := p.logText()
	if int64(len(s)) < r.logOff {
		return ""
	}
	return s[r.logOff:]
}

// currentLog returns the output of the latest run.
func (p *proc) currentLog() string {
	r := p.current()
	if r == nil {
		return ""
	}
	return p.runLog(r)
}

// waitLog waits until the latest run has logged a line matching re.
func (p *proc) waitLog(re *regexp.Regexp, timeout time.Duration) (string, bool) {
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindString(p.currentLog()); m != "" {
			return m, true
		}
		if time.Now().After(deadline) {
			return "", false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tail returns the last n interesting lines of the log: the access log
// lines of successful requests are left out, so that a busy node's tail
// still shows what happened to it.
func (p *proc) tail(n int) string {
	var keep []string
	for _, l := range strings.Split(p.logText(), "\n") {
		if strings.Contains(l, "msg=request ") && strings.Contains(l, " status=2") {
			continue
		}
		keep = append(keep, l)
	}
	return lastLines(strings.Join(keep, "\n"), n)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[… %d lines before]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// checkLog fails the test on a race report, a panic or a fatal runtime
// error in any run's output.
func (p *proc) checkLog() {
	log := p.logText()
	for _, marker := range []string{"WARNING: DATA RACE", "\npanic: ", "\nfatal error: "} {
		if i := strings.Index(log, marker); i >= 0 {
			end := min(len(log), i+4000)
			p.t.Errorf("%s: its log reports %q:\n%s", p.name, strings.TrimSpace(marker), log[i:end])
		}
	}
}

// status asks the process for its view of the store.
func (p *proc) status(withDigest bool) (api.RaftStatus, error) {
	c := p.Client()
	if c == nil {
		return api.RaftStatus{}, fmt.Errorf("%s is not serving", p.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), scaled(10*time.Second))
	defer cancel()
	return c.RaftStatus(ctx, withDigest)
}

// ready calls /readyz.
func (p *proc) ready() (bool, error) {
	c := p.Client()
	if c == nil {
		return false, fmt.Errorf("%s is not serving", p.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Ready(ctx)
}

// waitReady waits until /readyz answers 200.
func (p *proc) waitReady(timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	var last any
	for {
		ok, err := p.ready()
		if ok {
			return
		}
		last = err
		if err == nil {
			last = "503 not ready"
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: not ready within %s (last: %v)", p.name, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runOnce runs `svc serve` with env and args to its end, for a
// configuration that must be refused. It fails the test if the process
// still runs after timeout.
func runOnce(t testing.TB, env []string, timeout time.Duration, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, svcBin, append([]string{"serve"}, args...)...)
	cmd.Env = childEnv(env)
	cmd.SysProcAttr = procAttr()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("svc serve still ran after %s (killed it); it was expected to refuse its configuration.\nstdout:\n%s\nstderr:\n%s",
			timeout, lastLines(out.String(), 20), lastLines(errb.String(), 20))
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run svc serve: %v", err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}
