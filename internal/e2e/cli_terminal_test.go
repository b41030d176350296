package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/svchost/svc/internal/testserver"
)

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitOutput waits until out holds want after offset from (a deadline
// against hanging only) and returns the index after it.
func waitOutput(t *testing.T, out *lockedBuffer, from int, want, what string) int {
	t.Helper()
	timeout := scaled(30 * time.Second)
	deadline := time.Now().Add(timeout)
	for {
		s := out.String()
		if i := strings.Index(s[min(from, len(s)):], want); i >= 0 {
			return from + i + len(want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q within %s; the output after %d:\n%q", what, want, timeout, from, s[min(from, len(s)):])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cliCommand is the built svc as cliRun starts it: a home of its own
// (config), no SVC_ variables, NO_COLOR.
func cliCommand(config string, args ...string) *exec.Cmd {
	cmd := exec.Command(svcBin, args...)
	cmd.Env = append(childEnv(nil), "XDG_CONFIG_HOME="+config, "HOME="+config, "SVC_ADMIN_PASSWORD=", "NO_COLOR=1", "TERM=xterm")
	return cmd
}

// terminalSession is svc running on a real pseudo-terminal: the test holds
// both sides, types on the master and reads the screen, and reads the
// terminal's modes on the tty side.
type terminalSession struct {
	cmd    *exec.Cmd
	ptmx   *os.File
	tty    *os.File
	screen *lockedBuffer
	done   chan struct{}
}

// startOnTerminal starts svc with a pseudo-terminal of rows by cols as its
// controlling terminal, stdin, stdout and stderr.
func startOnTerminal(t *testing.T, config string, rows, cols uint16, args ...string) *terminalSession {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		t.Fatal(err)
	}
	s := &terminalSession{cmd: cliCommand(config, args...), ptmx: ptmx, tty: tty, screen: &lockedBuffer{}, done: make(chan struct{})}
	s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = tty, tty, tty
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.done)
		_, _ = io.Copy(s.screen, ptmx) // until the tty side is closed
	}()
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
		tty.Close()
		ptmx.Close()
	})
	return s
}

// echoOn reports whether the terminal echoes what is typed (off in raw
// mode).
func (s *terminalSession) echoOn(t *testing.T) bool {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(s.tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return tio.Lflag&unix.ECHO != 0
}

// wait waits for svc to exit and returns its exit code.
func (s *terminalSession) wait(t *testing.T) int {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(scaled(30 * time.Second)):
		t.Fatalf("svc did not exit; the screen:\n%q", s.screen.String())
	}
	return s.cmd.ProcessState.ExitCode()
}

// TestCLITerminalLogsAndCompletion drives the built binary against a real
// server with go-hello launched (no control sequences in launch's output
// through pipes: the progress line is for terminals):
//   - svc exec in a real pseudo-terminal: raw mode while it runs (no local
//     echo), a typed command's output, the remote terminal's size from the
//     local one and following a resize (stty size), the remote exit code
//     as svc's, the terminal's modes restored, also when svc is ended by a
//     signal;
//   - svc exec with stdin a pipe: the input runs and its end ends the shell;
//   - svc logs -f: a request made after it started shows up, Ctrl-C ends it
//     with exit 0;
//   - svc __complete (what the shells' completion scripts run): the app's
//     slug from the server; nothing but cobra's directive when not logged
//     in;
//   - with host policy turning exec off, svc exec exits 1 with
//     POLICY_EXEC_DISABLED on stderr.
func TestCLITerminalLogsAndCompletion(t *testing.T) {
	first, err := testserver.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	srv := startAppServer(t, "cli-terminal", "SVC_APP_PORT_START="+strconv.Itoa(first), "SVC_APP_PORT_END="+strconv.Itoa(first+1))
	config := t.TempDir()
	if out, errs, code := cliRun(t, config, adminPassword+"\n", nil, "login", "--addr", srv.p.Base(), "--username", "admin"); code != 0 {
		t.Fatalf("svc login: exit %d, %q %q", code, out, errs)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, errs, code := cliRun(t, config, "", nil, "launch", filepath.Join(root, "samples", "go-hello"), "--set", "GREETING=terminal")
	if code != 0 || !strings.Contains(out, "go-hello is running at") {
		t.Fatalf("svc launch: exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	if strings.ContainsAny(out+errs, "\r\x1b") {
		t.Errorf("svc launch through pipes wrote control sequences: stdout %q, stderr %q", out, errs)
	}

	t.Run("exec in a pseudo-terminal", func(t *testing.T) {
		// The default command: an interactive shell, with job control
		// (it leads its own session in the sandbox), whose exit status
		// is svc's.
		s := startOnTerminal(t, config, 30, 100, "exec", "go-hello")
		if _, err := io.WriteString(s.ptmx, "stty size; echo typed-$((6*7))\r"); err != nil {
			t.Fatal(err)
		}
		at := waitOutput(t, s.screen, 0, "typed-42", "the typed command's output")
		if !strings.Contains(s.screen.String(), "30 100") {
			t.Errorf("stty size did not say 30 100 (the local terminal's size):\n%q", s.screen.String())
		}
		if s.echoOn(t) {
			t.Errorf("the local terminal echoes while svc exec runs: not in raw mode")
		}
		if err := pty.Setsize(s.ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
			t.Fatal(err)
		}
		// The resize travels (SIGWINCH, a control message) while the test
		// types: ask again until the remote terminal has it.
		deadline := time.Now().Add(scaled(30 * time.Second))
		for !strings.Contains(s.screen.String()[at:], "40 120") {
			if time.Now().After(deadline) {
				t.Fatalf("stty size never said 40 120 after the resize:\n%q", s.screen.String()[at:])
			}
			if _, err := io.WriteString(s.ptmx, "stty size\r"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if _, err := io.WriteString(s.ptmx, "exit 3\r"); err != nil {
			t.Fatal(err)
		}
		if code := s.wait(t); code != 3 {
			t.Errorf("svc exec exited %d; want the shell's 3 (screen %q)", code, s.screen.String())
		}
		if !s.echoOn(t) {
			t.Errorf("after svc exec the terminal is still in raw mode")
		}
	})

	t.Run("exec ended by a signal restores the terminal", func(t *testing.T) {
		s := startOnTerminal(t, config, 24, 80, "exec", "go-hello")
		if _, err := io.WriteString(s.ptmx, "echo ready-$((1+1))\r"); err != nil {
			t.Fatal(err)
		}
		waitOutput(t, s.screen, 0, "ready-2", "the shell")
		if s.echoOn(t) {
			t.Fatalf("not in raw mode while the shell runs")
		}
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := s.wait(t); code != 128+int(syscall.SIGTERM) {
			t.Errorf("svc exec after SIGTERM exited %d; want %d", code, 128+int(syscall.SIGTERM))
		}
		if !s.echoOn(t) {
			t.Errorf("after SIGTERM the terminal is still in raw mode")
		}
	})

	t.Run("exec with stdin a pipe", func(t *testing.T) {
		out, errs, code := cliRun(t, config, "echo piped-$((2+3))\n", nil, "exec", "go-hello", "--", "sh")
		if code != 0 || !strings.Contains(out, "piped-5") {
			t.Errorf("echo … | svc exec go-hello -- sh: exit %d, stdout %q, stderr %q", code, out, errs)
		}
		out, errs, code = cliRun(t, config, "", nil, "exec", "go-hello", "--", "sh", "-c", "echo from-sh; exit 4")
		if code != 4 || !strings.Contains(out, "from-sh") || !strings.Contains(errs, "exit code 4") {
			t.Errorf("svc exec go-hello -- sh -c '…; exit 4': exit %d, stdout %q, stderr %q", code, out, errs)
		}
	})

	t.Run("logs -f", func(t *testing.T) {
		var app struct {
			App struct{ ID string }
		}
		mustJSON(t, []byte(cliOut(t, config, "apps", "get", "go-hello", "-o", "json")), &app)
		var st struct {
			Workloads map[string]struct{ Address string }
		}
		srv.must(t, "GET", "/apps/"+app.App.ID+"/status", nil, 200, &st)
		addr := st.Workloads["web"].Address
		cmd := cliCommand(config, "logs", "go-hello", "-f", "--tail", "3")
		stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill() }()
		waitOutput(t, stdout, 0, "go-hello: ", "the last lines kept") // the stream is open
		path := "/env/FOLLOWED_" + randomHex(t)
		if code, body, err := hit("GET", addr, path); err != nil || code != 404 {
			t.Fatalf("GET http://%s%s: %d %q %v", addr, path, code, body, err)
		}
		waitOutput(t, stdout, 0, "GET "+path, "the request made after svc logs -f started")
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil || stderr.String() != "" {
			t.Errorf("svc logs -f after Ctrl-C: %v, stderr %q; want exit 0 and nothing said", err, stderr.String())
		}
	})

	t.Run("completion", func(t *testing.T) {
		out, errs, code := cliRun(t, config, "", nil, "__complete", "apps", "get", "")
		if code != 0 || !strings.Contains(out, "go-hello\tgo-hello\n") || !strings.HasSuffix(out, ":4\n") {
			t.Errorf("__complete apps get '': exit %d, stdout %q, stderr %q; want go-hello and :4 (no files)", code, out, errs)
		}
		if out, _, _ := cliRun(t, config, "", nil, "__complete", "exec", "go"); !strings.Contains(out, "go-hello\t") {
			t.Errorf("__complete exec go: %q", out)
		}
		var app struct {
			App struct{ ID string }
		}
		mustJSON(t, []byte(cliOut(t, config, "apps", "get", "go-hello", "-o", "json")), &app)
		if out, _, _ := cliRun(t, config, "", nil, "__complete", "logs", app.App.ID[:6]); !strings.Contains(out, app.App.ID+"\tgo-hello\n") {
			t.Errorf("__complete logs %s: %q; want the app's ID", app.App.ID[:6], out)
		}
		out, errs, code = cliRun(t, t.TempDir(), "", nil, "__complete", "apps", "get", "")
		if code != 0 || out != ":4\n" || strings.TrimSpace(errs) != "Completion ended with directive: ShellCompDirectiveNoFileComp" {
			t.Errorf("__complete when not logged in: exit %d, stdout %q, stderr %q; want no candidates and no error", code, out, errs)
		}
	})

	t.Run("exec refused by host policy", func(t *testing.T) {
		var pol struct {
			Policy json.RawMessage `json:"policy"`
		}
		srv.must(t, "GET", "/policy", nil, 200, &pol)
		srv.must(t, "PUT", "/policy", map[string]any{"policy": map[string]any{"disabled_verbs": []string{"app.exec"}}}, 200, nil)
		defer srv.must(t, "PUT", "/policy", map[string]any{"policy": pol.Policy}, 200, nil)
		out, errs, code := cliRun(t, config, "", nil, "exec", "go-hello", "--", "true")
		if code != 1 || !strings.HasPrefix(errs, "POLICY_EXEC_DISABLED: ") || out != "" {
			t.Errorf("svc exec with exec disabled: exit %d, stdout %q, stderr %q; want 1 and POLICY_EXEC_DISABLED", code, out, errs)
		}
	})
}
