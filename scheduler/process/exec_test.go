package process_test

import (
	"bufio"
	"context"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
)

func runSleeper(t *testing.T, ctx context.Context, rtRun func(context.Context, scheduler.Job) (scheduler.JobStatus, error), art scheduler.Artifact) {
	t.Helper()
	if _, err := rtRun(ctx, scheduler.Job{ID: "job-x", Workloads: map[string]scheduler.Task{
		"shell":  {Artifact: art, Command: []string{"sleep", "1000"}, NoPort: true, Env: map[string]string{"TERM": "dumb"}},
		"static": {Artifact: scheduler.Artifact{Kind: spec.BuildStatic, Dir: t.TempDir()}},
	}}); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestExecShell: without a command Exec runs a shell in the workload's
// working directory; on a TTY, TERM is xterm-256color.
func TestExecShell(t *testing.T) {
	cfg := testConfig(t)
	rt := newRuntime(t, cfg)
	wd := filepath.Join(cfg.WorkDir, "work", "job-x", "shell")
	ctx := context.Background()
	art := commandArtifact(t)
	runSleeper(t, ctx, rt.Run, art)
	for _, tty := range []bool{false, true} {
		s, err := rt.Exec(ctx, scheduler.ExecRequest{JobID: "job-x", Workload: "shell", TTY: tty})
		if err != nil {
			t.Fatalf("exec: %v", err)
		}
		defer s.Close()
		if _, err := io.WriteString(s, "echo \"dir=$(pwd) term=$TERM\"; exit 5\n"); err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(s)
		want := "term=dumb"
		if tty {
			want = "term=xterm-256color"
		}
		if !strings.Contains(string(out), "dir="+wd+" "+want) {
			t.Errorf("tty %v: output %q, want dir=%s %s", tty, out, wd, want)
		}
		if code, err := s.Wait(); code != 5 || err != nil {
			t.Errorf("tty %v: Wait = %d, %v; want 5", tty, code, err)
		}
	}
}

// TestExecCloseKillsGroup: Close ends the command and what it started.
func TestExecCloseKillsGroup(t *testing.T) {
	rt := newRuntime(t, testConfig(t))
	ctx := context.Background()
	runSleeper(t, ctx, rt.Run, commandArtifact(t))
	for _, tty := range []bool{false, true} {
		s, err := rt.Exec(ctx, scheduler.ExecRequest{JobID: "job-x", Workload: "shell", TTY: tty,
			Command: []string{"sh", "-c", "sleep 1000 & echo child=$!; wait"}})
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(s).ReadString('\n')
		if err != nil {
			t.Fatalf("tty %v: read: %v", tty, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "child=")))
		if err != nil {
			t.Fatalf("tty %v: output %q", tty, line)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the command's child gone", func() (bool, string) { return processGone(pid), "" })
		done := make(chan int, 1)
		go func() { code, _ := s.Wait(); done <- code }()
		select {
		case code := <-done:
			if code != 128+9 {
				t.Errorf("tty %v: exit code after Close = %d, want 137 (SIGKILL)", tty, code)
			}
		case <-time.After(45 * time.Second):
			t.Fatalf("tty %v: Wait did not return after Close", tty)
		}
	}
}

func TestExecRefused(t *testing.T) {
	rt := newRuntime(t, testConfig(t))
	ctx := context.Background()
	runSleeper(t, ctx, rt.Run, commandArtifact(t))
	tests := []struct {
		name string
		req  scheduler.ExecRequest
		want errcode.Code
	}{
		{"static workload", scheduler.ExecRequest{JobID: "job-x", Workload: "static"}, errcode.StateInvalid},
		{"unknown workload", scheduler.ExecRequest{JobID: "job-x", Workload: "nope"}, errcode.NotFound},
		{"unknown job", scheduler.ExecRequest{JobID: "nope", Workload: "shell"}, errcode.NotFound},
		{"missing program", scheduler.ExecRequest{JobID: "job-x", Workload: "shell", Command: []string{"/no/such/program"}}, errcode.ValidInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := rt.Exec(ctx, tt.req)
			if err == nil {
				s.Close()
			}
			if errcode.CodeOf(err) != tt.want {
				t.Errorf("exec = %v, want %s", err, tt.want)
			}
		})
	}
}

// TestExecShellInSandbox: an interactive shell in a sandboxed workload's
// terminal leads its own session there: job control works (the shell
// finds its terminal's foreground group inside the sandbox's PID
// namespace), and the shell's exit status is the session's.
func TestExecShellInSandbox(t *testing.T) {
	needSandbox(t)
	rt := newRuntime(t, sandboxConfig(t))
	ctx := context.Background()
	if _, err := rt.Run(ctx, scheduler.Job{ID: "job-x", Workloads: map[string]scheduler.Task{
		"shell": {Artifact: commandArtifact(t), Command: []string{"sleep", "1000"}, NoPort: true, Isolation: "sandbox"},
	}}); err != nil {
		t.Fatalf("run: %v", err)
	}
	s, err := rt.Exec(ctx, scheduler.ExecRequest{JobID: "job-x", Workload: "shell", TTY: true})
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	defer s.Close()
	if _, err := io.WriteString(s, "case $- in *m*) echo job-control-on;; *) echo job-control-off;; esac; exit 3\n"); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(s)
	if !strings.Contains(string(out), "job-control-on") || strings.Contains(string(out), "Cannot set tty") {
		t.Errorf("output %q: the shell has no job control in its terminal", out)
	}
	if code, err := s.Wait(); code != 3 || err != nil {
		t.Errorf("Wait = %d, %v; want the shell's exit 3", code, err)
	}
}
