package process

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
)

// Exec runs a command beside a workload: a new process (never inside the
// workload's own) in its artifact directory, with its environment and at
// its isolation (a sandboxed workload's command gets a sandbox of its own
// with the same mounts, but not the workload's PID namespace). Without a
// command it runs /bin/sh. On a TTY it runs on a pseudo-terminal of the
// asked size (24x80 when unset) with TERM=xterm-256color (in a sandbox,
// the command leads a session of its own there, so that a shell's job
// control works); otherwise on
// pipes, stdout and stderr merged. It runs whether the workload's process
// is up or not (a dead workload can be looked into). ctx bounds the start
// only. Close kills the command's process group.
//
// NOT_FOUND for an unknown job or workload; STATE_INVALID for a static
// workload: the runtime serves its files itself and there is nothing to
// exec beside.
func (r *Runtime) Exec(ctx context.Context, req scheduler.ExecRequest) (scheduler.ExecSession, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j := r.job(req.JobID)
	if j == nil {
		return nil, notFound(req.JobID)
	}
	w := j.get(req.Workload)
	if w == nil {
		return nil, workloadNotFound(req.JobID, req.Workload)
	}
	if w.sup == nil {
		return nil, errcode.New(errcode.StateInvalid, "workload %s is static: the runtime serves its files and runs no process to exec beside", req.Workload).
			WithDetail("workload", req.Workload)
	}
	argv := req.Command
	if len(argv) == 0 {
		argv = []string{"/bin/sh"}
	}
	var cmd *exec.Cmd
	if w.sandbox != nil {
		if req.TTY {
			// The command leads a session of its own inside the sandbox,
			// its terminal its controlling one: outside, the terminal's
			// foreground group is in a PID namespace the command cannot
			// see, and a shell's job control fails (and with it the
			// shell, exiting 2 whatever it was told).
			argv = append([]string{"setsid", "--ctty", "--wait"}, argv...)
		}
		var err error
		if cmd, err = r.sandboxCommand(context.Background(), *w.sandbox, argv); err != nil {
			return nil, errcode.New(errcode.PlanCapabilityUnsupp, "the workload's sandbox cannot be had: %v", err)
		}
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
	}
	cmd.Dir = w.dir
	cmd.Env = append([]string(nil), w.env...)
	if req.TTY {
		return startTTY(cmd, req.Rows, req.Cols, w.sandbox == nil)
	}
	return startPipes(cmd)
}

// startTTY starts cmd in a new session on a new pseudo-terminal; ctty
// makes the terminal cmd's controlling one (a sandbox's command takes it
// itself, inside).
func startTTY(cmd *exec.Cmd, rows, cols uint16, ctty bool) (*execSession, error) {
	cmd.Env = append(cmd.Env, "TERM=xterm-256color")
	if rows == 0 || cols == 0 {
		rows, cols = 24, 80
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty = true, ctty
	f, err := pty.StartWithAttrs(cmd, &pty.Winsize{Rows: rows, Cols: cols}, cmd.SysProcAttr)
	if err != nil {
		return nil, execStartErr(cmd, err)
	}
	// pty's calls put the terminal in blocking mode; back to the poller,
	// so that Close interrupts a pending Read.
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = syscall.SetNonblock(int(fd), true) })
	}
	return newExecSession(cmd, f, f, true), nil
}

func startPipes(cmd *exec.Cmd) (*execSession, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, outW
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	err = cmd.Start()
	// The child has its ends; ours would keep the output open forever.
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, execStartErr(cmd, err)
	}
	return newExecSession(cmd, outR, inW, false), nil
}

func execStartErr(cmd *exec.Cmd, err error) error {
	return errcode.Wrap(err, errcode.ValidInvalid, "the command %q cannot start: %v", cmd.Args[0], err).WithDetail("field", "command")
}

// execSession is a running command of Exec.
type execSession struct {
	cmd *exec.Cmd
	out *os.File // its output
	in  *os.File // its input (the same terminal on a TTY)
	tty bool

	done      chan struct{} // closed once the command has been waited for
	code      int
	waitErr   error
	closeOnce sync.Once
}

var _ scheduler.ExecSession = (*execSession)(nil)

func newExecSession(cmd *exec.Cmd, out, in *os.File, tty bool) *execSession {
	s := &execSession{cmd: cmd, out: out, in: in, tty: tty, done: make(chan struct{})}
	// Reap the command as soon as it ends, whether or not Wait is called.
	go func() {
		err := cmd.Wait()
		s.code = exitCodeOf(cmd.ProcessState)
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			s.waitErr = err
		}
		close(s.done)
	}()
	return s
}

// Read reads the command's output; io.EOF once it has ended and its
// output is drained.
func (s *execSession) Read(p []byte) (int, error) {
	n, err := s.out.Read(p)
	if err != nil && s.tty && errors.Is(err, syscall.EIO) {
		// The terminal's other side closed: every process on it ended.
		err = io.EOF
	}
	return n, err
}

// Write writes to the command's input.
func (s *execSession) Write(p []byte) (int, error) { return s.in.Write(p) }

// Resize changes the terminal's size; a no-op without a TTY.
func (s *execSession) Resize(rows, cols uint16) error {
	if !s.tty {
		return nil
	}
	rc, err := s.out.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	}); err != nil {
		return err
	}
	return ierr
}

// Wait waits for the command to end and returns its exit code (128 plus
// the signal for a command killed by one).
func (s *execSession) Wait() (int, error) {
	<-s.done
	return s.code, s.waitErr
}

// Close kills the command's process group (what it left behind too) and
// releases its terminal or pipes. It does not wait for the command to be
// reaped (Wait does).
func (s *execSession) Close() error {
	s.closeOnce.Do(func() {
		pgid := s.cmd.Process.Pid
		select {
		case <-s.done:
			// Reaped: its group's ID is safe to signal only while members
			// are left (until then it is given to no other process).
			if groupAlive(pgid) {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
		default:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		s.in.Close()
		if s.out != s.in {
			s.out.Close()
		}
	})
	return nil
}
