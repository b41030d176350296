package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/svchost/svc/api"
)

// newExecCmd is `svc exec APP [-- CMD ARGS…]`: a terminal in one of the
// app's running workloads.
func newExecCmd() *cobra.Command {
	var f clientFlags
	var workload string
	cmd := &cobra.Command{
		Use:   "exec APP [-- CMD ARGS...]",
		Short: "A terminal in a running workload: a shell, or CMD with its arguments",
		Long: "A terminal in a running workload of the app (GET /api/v1/apps/{appID}/exec, a websocket): CMD with its arguments, or a shell; exits with the command's exit code.\n\n" +
			"Open a terminal in one of the app's running workloads (--workload, default the primary one) and run CMD in it, or a shell.\n\n" +
			"When stdin is a terminal it is put in raw mode (every key goes to the remote terminal, Ctrl-C included) and restored on the way out;\n" +
			"the remote terminal takes its size and follows resizes. When stdin is not a terminal it is piped in as it is and its end sent as\n" +
			"end-of-file (Ctrl-D): echo ls | svc exec APP -- sh. The remote side is a terminal either way: its output has CRLF line ends.\n" +
			"svc exits with the command's exit code. Host policy can turn exec off for everyone (POLICY_EXEC_DISABLED).",
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeApps(&f),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n := cmd.ArgsLenAtDash(); n > 1 || (n < 0 && len(args) > 1) {
				return usageError("svc exec takes one APP; put the command after --: svc exec %s -- CMD ARGS...", args[0])
			}
			c, a, _, err := f.app(cmd, args[0])
			if err != nil {
				return err
			}
			return execTerminal(cmd, c, a.ID, api.ExecOptions{Workload: workload, Command: args[1:]})
		},
	}
	f.add(cmd)
	cmd.Flags().StringVarP(&workload, "workload", "w", "", "the workload (default: the app's primary workload)")
	return cmd
}

// execTerminal runs the session between the command's stdin and stdout
// and returns the remote command's exit code as the command's.
func execTerminal(cmd *cobra.Command, c *api.Client, appID string, o api.ExecOptions) error {
	in, out := cmd.InOrStdin(), cmd.OutOrStdout()
	tty := -1
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		tty = int(f.Fd())
		if cols, rows, err := term.GetSize(tty); err == nil {
			o.Rows, o.Cols = rows, cols
		}
	}
	ctx, stop := context.WithCancel(cmd.Context())
	defer stop()
	sess, err := c.Exec(ctx, appID, o)
	if err != nil {
		return refusal(cmd.ErrOrStderr(), err)
	}
	defer sess.Close()
	// Signals end the session (and so restore the terminal on the way out):
	// in raw mode Ctrl-C is a key for the remote side, not a signal here.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	var caught atomic.Value // the os.Signal that ended the session
	go func() {
		select {
		case s := <-sigs:
			caught.Store(s)
			_ = sess.Close()
		case <-ctx.Done():
		}
	}()
	if tty >= 0 {
		restore, err := rawMode(tty)
		if err != nil {
			return err
		}
		defer restore()
		go followResizes(ctx, tty, sess)
	}
	go sendInput(in, sess, tty < 0)
	if _, err := io.Copy(out, sess); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		_ = sess.Close()
	}
	code, err := sess.Wait()
	stop()
	if s, ok := caught.Load().(syscall.Signal); ok {
		return &exitError{code: 128 + int(s), err: fmt.Errorf("%v: the terminal was closed", s)}
	}
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	if code != 0 {
		// As kubectl exec says it: the exit code is the command's, and
		// this line on stderr says it was not svc's own failure.
		return &exitError{code: exitCodeOf(code), err: fmt.Errorf("command terminated with exit code %d", code)}
	}
	return nil
}

// exitCodeOf maps a remote exit code to one a process can exit with: 1 to
// 255 as it is, anything else 1.
func exitCodeOf(code int) int {
	if code < 1 || code > 255 {
		return 1
	}
	return code
}

// rawMode puts the terminal fd in raw mode and returns how to restore it
// (idempotent).
func rawMode(fd int) (func(), error) {
	old, err := term.MakeRaw(fd)
	if err != nil {
		return nil, fmt.Errorf("raw mode: %w", err)
	}
	done := false
	return func() {
		if !done {
			done = true
			_ = term.Restore(fd, old)
		}
	}, nil
}

// followResizes sends the terminal's size on every SIGWINCH until ctx
// ends.
func followResizes(ctx context.Context, fd int, sess *api.ExecSession) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-winch:
			if cols, rows, err := term.GetSize(fd); err == nil {
				_ = sess.Resize(ctx, rows, cols)
			}
		}
	}
}

// sendInput types what in gives into the terminal. At the end of input
// that is not a terminal it sends end-of-file as a terminal's user would:
// Ctrl-D at the start of a line (a second one after a partial line, the
// first only ending it).
func sendInput(in io.Reader, sess *api.ExecSession, eof bool) {
	buf := make([]byte, 32<<10)
	lineStart := true
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if _, werr := sess.Write(buf[:n]); werr != nil {
				return
			}
			lineStart = buf[n-1] == '\n'
		}
		if err != nil {
			break
		}
	}
	if !eof {
		return
	}
	end := []byte{4}
	if !lineStart {
		end = []byte{4, 4}
	}
	_, _ = sess.Write(end)
}
