package upgrade

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The environment a trial child and an exec'd binary are given.
const (
	// EnvListenFD names the inherited descriptor of the listening socket:
	// the server serves on it instead of listening again.
	EnvListenFD = "SVC_LISTEN_FD"
	// EnvReadyFD names a pipe the server writes "ready" to once it serves.
	EnvReadyFD = "SVC_UPGRADE_READY_FD"
	// EnvTrial marks a trial child and names the version it replaces: the
	// child leaves the marker alone, and writes nothing that version could
	// not apply (raftstore.Config.VersionFloor), so that a rollback finds a
	// store the previous binary reads.
	EnvTrial = "SVC_UPGRADE_TRIAL"
)

// ReadyLine is what a server writes to EnvReadyFD once it serves.
const ReadyLine = "ready"

// TrialConfig describes a trial start of the new binary.
type TrialConfig struct {
	Exe  string   // the binary (already swapped in)
	From string   // the version it replaces
	Args []string // its arguments, without argv[0]
	Env  []string // its environment, before the variables above
	// Listener is the listening socket, inherited by the child.
	Listener *os.File
	// Timeout bounds the wait for readiness; StopTimeout the child's
	// graceful stop once ready.
	Timeout, StopTimeout time.Duration
	// Output receives the child's stdout and stderr.
	Output io.Writer
}

// Trial starts the new binary as a child on the inherited socket, waits
// for its readiness line, then stops it (SIGTERM, SIGKILL after
// StopTimeout). A nil error: it became ready. Otherwise the error is the
// short reason: its exit status and last line of output, or the timeout.
func Trial(ctx context.Context, c TrialConfig) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("trial: %v", err)
	}
	defer pr.Close()
	cmd := exec.Command(c.Exe, c.Args...)
	cmd.Env = append(Without(c.Env, EnvListenFD, EnvReadyFD, EnvTrial), EnvListenFD+"=3", EnvReadyFD+"=4", EnvTrial+"="+c.From)
	cmd.ExtraFiles = []*os.File{c.Listener, pw}
	tail := &tailWriter{}
	out := io.MultiWriter(c.Output, tail)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		pw.Close()
		return fmt.Errorf("it did not start: %v", err)
	}
	pw.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(pr).ReadString('\n')
		ready <- strings.TrimSpace(line) == ReadyLine
	}()
	timer := time.NewTimer(c.Timeout)
	defer timer.Stop()
	var fail error
	select {
	case ok := <-ready:
		if !ok { // the pipe closed without the line: it exited
			err := <-exited
			return exitReason(err, tail)
		}
	case err := <-exited:
		return exitReason(err, tail)
	case <-timer.C:
		fail = fmt.Errorf("not ready within %s", c.Timeout)
	case <-ctx.Done():
		fail = fmt.Errorf("the server stopped during the trial")
	}
	if fail != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fail
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(c.StopTimeout):
		_ = cmd.Process.Kill()
		<-exited
	}
	return nil
}

func exitReason(err error, tail *tailWriter) error {
	var ee *exec.ExitError
	status := "it exited"
	if errors.As(err, &ee) {
		status = "it exited (" + ee.ProcessState.String() + ")"
	}
	if l := tail.last(); l != "" {
		return fmt.Errorf("%s before it was ready: %s", status, l)
	}
	return fmt.Errorf("%s before it was ready", status)
}

// tailWriter keeps the last 4 KiB written.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if n := len(t.buf); n > 4096 {
		t.buf = append([]byte(nil), t.buf[n-4096:]...)
	}
	return len(p), nil
}

func (t *tailWriter) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return lastLine(t.buf)
}

// Without returns env without the named variables.
func Without(env []string, names ...string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, n := range names {
			if name == n {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// Exec replaces the process with the binary at exe (same PID), handing it
// the listening socket l through EnvListenFD. It returns only on failure.
func Exec(exe string, args, env []string, l *os.File) error {
	fd := l.Fd()
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETFD, 0); errno != 0 {
		return fmt.Errorf("exec %s: keep the socket open across exec: %v", exe, errno)
	}
	env = append(Without(env, EnvListenFD, EnvReadyFD, EnvTrial), EnvListenFD+"="+strconv.FormatUint(uint64(fd), 10))
	err := syscall.Exec(exe, append([]string{exe}, args...), env)
	return fmt.Errorf("exec %s: %w", exe, err)
}

// Inherited returns the listening socket an upgrade handed this process
// (EnvListenFD), and unsets the variable; nil when there is none.
func Inherited() (*os.File, error) {
	v, ok := os.LookupEnv(EnvListenFD)
	if !ok {
		return nil, nil
	}
	_ = os.Unsetenv(EnvListenFD)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q is not a descriptor", EnvListenFD, v)
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "listener"), nil
}

// SignalReady writes the readiness line to EnvReadyFD, when a trial set
// it, and closes it.
func SignalReady() {
	v, ok := os.LookupEnv(EnvReadyFD)
	if !ok {
		return
	}
	_ = os.Unsetenv(EnvReadyFD)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return
	}
	f := os.NewFile(uintptr(fd), "ready")
	_, _ = io.WriteString(f, ReadyLine+"\n")
	_ = f.Close()
}

// IsTrial says whether this process is a trial child.
func IsTrial() bool { return TrialFrom() != "" }

// TrialFrom is, in a trial child, the version the trial would replace;
// "" in any other process.
func TrialFrom() string { return os.Getenv(EnvTrial) }
