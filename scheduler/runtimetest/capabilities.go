package runtimetest

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
)

// buildNothing builds an artifact for workloads that are shell commands.
func buildNothing(ctx context.Context, t *testing.T, b scheduler.Builder) scheduler.Artifact {
	t.Helper()
	src := writeTree(t, map[string]string{"x.txt": "x\n"})
	art, err := b.Build(ctx, scheduler.BuildRequest{Source: src, Build: spec.Build{Kind: spec.BuildCommand, Command: "true"}})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return art
}

// logsCapped: a workload that writes far more than its log cap keeps at
// most the cap, and the most recent lines, oldest first.
func logsCapped(t *testing.T, newRuntime Factory) {
	needTools(t, "sh", "yes", "head")
	b, r := newRuntime(t)
	lr, ok := r.(scheduler.LogReader)
	if !ok {
		t.Skip("the runner does not read logs")
	}
	ctx := testContext(t)
	art := buildNothing(ctx, t, b)
	const capBytes = 8 << 10
	runJob(ctx, t, r, scheduler.Job{ID: "job-noisy", Workloads: map[string]scheduler.Task{"noisy": {
		Artifact:    art,
		Command:     []string{"sh", "-c", "yes noise-line-0123456789-abcdefghij | head -n 20000; echo noise-done; exec sleep 1000"},
		NoPort:      true,
		LogCapBytes: capBytes,
	}}})
	var lines []string
	waitFor(t, "the last line in the kept log", func() (bool, string) {
		var err error
		lines, err = lr.Logs(ctx, "job-noisy", "noisy")
		if err != nil {
			return false, err.Error()
		}
		for _, l := range lines {
			if l == "noise-done" {
				return true, ""
			}
		}
		return false, tail(lines)
	})
	size, done := 0, -1
	for i, l := range lines {
		size += len(l) + 1
		if l == "noise-done" {
			done = i
		}
	}
	if size > capBytes {
		t.Errorf("kept log = %d bytes in %d lines, over the cap of %d", size, len(lines), capBytes)
	}
	if done < 1 || !strings.HasPrefix(lines[done-1], "noise-line") {
		t.Errorf("kept log = %s, want the noise lines and then noise-done, oldest first", tail(lines))
	}
}

func tail(lines []string) string {
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// usage: a running Go program uses memory, the host has CPUs and memory,
// and the limits are the task's.
func usage(t *testing.T, newRuntime Factory) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain on PATH")
	}
	b, r := newRuntime(t)
	ur, ok := r.(scheduler.UsageReader)
	if !ok {
		t.Skip("the runner does not read usage")
	}
	ctx := testContext(t)
	src := writeTree(t, map[string]string{"app/go.mod": "module sample\n\ngo 1.21\n", "app/main.go": goSample})
	art, err := b.Build(ctx, scheduler.BuildRequest{Source: src, Build: spec.Build{Kind: spec.BuildGo, Context: "app", Command: "go build -o app ."}})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	limits := &spec.Resources{CPUMillis: 500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30}
	runJob(ctx, t, r, scheduler.Job{ID: "job-usage", Workloads: map[string]scheduler.Task{"web": {
		Artifact:  art,
		Command:   []string{"./app"},
		Health:    &spec.Health{Path: "/healthz", Interval: spec.Duration(100 * time.Millisecond)},
		Resources: limits,
	}}})
	var u scheduler.Usage
	waitFor(t, "a usage reading with memory", func() (bool, string) {
		var err error
		if u, err = ur.Usage(ctx, "job-usage"); err != nil {
			return false, err.Error()
		}
		return u.Supported && u.Workloads["web"].MemoryBytes > 0, fmt.Sprintf("%+v", u)
	})
	if u.HostCPUMillis <= 0 || u.HostMemoryBytes <= 0 {
		t.Errorf("host in usage = %d CPU millis, %d bytes; want both positive", u.HostCPUMillis, u.HostMemoryBytes)
	}
	wu := u.Workloads["web"]
	want := scheduler.Limits{CPUMillis: limits.CPUMillis, MemoryBytes: limits.MemoryBytes, DiskBytes: limits.DiskBytes}
	if wu.Limits != want {
		t.Errorf("limits = %+v, want the task's %+v", wu.Limits, want)
	}
	if wu.CPUMillis < 0 || wu.DiskBytes < 0 {
		t.Errorf("usage = %+v, want no negative reading", wu)
	}
	if hr, ok := r.(scheduler.HostReader); ok {
		h, err := hr.Host(ctx)
		if err != nil || h.CPUMillis <= 0 || h.MemoryBytes <= 0 {
			t.Errorf("Host = %+v, %v; want positive CPU and memory", h, err)
		}
	}
}

// execCase: a command runs beside a workload with its environment, with
// and without a terminal; its output and exit code come back, its input
// goes in, a terminal resizes.
func execCase(t *testing.T, newRuntime Factory) {
	needTools(t, "sh")
	b, r := newRuntime(t)
	ex, ok := r.(scheduler.Execer)
	if !ok {
		t.Skip("the runner does not exec")
	}
	ctx := testContext(t)
	art := buildNothing(ctx, t, b)
	runJob(ctx, t, r, scheduler.Job{ID: "job-exec", Workloads: map[string]scheduler.Task{"shell": {
		Artifact: art,
		Command:  []string{"sh", "-c", "exec sleep 1000"},
		Env:      map[string]string{"EXEC_MARK": "from-env"},
		NoPort:   true,
	}}})
	for _, tty := range []bool{false, true} {
		req := scheduler.ExecRequest{JobID: "job-exec", Workload: "shell", TTY: tty, Rows: 24, Cols: 80,
			Command: []string{"sh", "-c", "echo exec-marker $EXEC_MARK; exit 3"}}
		s := startExec(ctx, t, ex, req)
		if out := readAllWithin(t, s); !strings.Contains(out, "exec-marker from-env") {
			t.Errorf("tty %v: output = %q, want the marker with the workload's environment", tty, out)
		}
		if code, err := s.Wait(); err != nil || code != 3 {
			t.Errorf("tty %v: Wait = %d, %v; want 3", tty, code, err)
		}

		req.Command = []string{"sh", "-c", "read line; echo got-$line"}
		s = startExec(ctx, t, ex, req)
		if _, err := io.WriteString(s, "exec-input\n"); err != nil {
			t.Fatalf("tty %v: write: %v", tty, err)
		}
		if out := readAllWithin(t, s); !strings.Contains(out, "got-exec-input") {
			t.Errorf("tty %v: output = %q, want the input read back", tty, out)
		}
		if code, err := s.Wait(); err != nil || code != 0 {
			t.Errorf("tty %v: Wait = %d, %v; want 0", tty, code, err)
		}
	}

	needTools(t, "stty")
	s := startExec(ctx, t, ex, scheduler.ExecRequest{JobID: "job-exec", Workload: "shell", TTY: true, Rows: 24, Cols: 80,
		Command: []string{"sh", "-c", "read go; stty size"}})
	if err := s.Resize(40, 100); err != nil {
		t.Fatalf("resize: %v", err)
	}
	if _, err := io.WriteString(s, "\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	if out := readAllWithin(t, s); !strings.Contains(out, "40 100") {
		t.Errorf("stty size after a resize to 40x100 = %q", out)
	}

	if _, err := ex.Exec(ctx, scheduler.ExecRequest{JobID: "job-exec", Workload: "no-such-workload"}); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("Exec(unknown workload) = %v, want NOT_FOUND", err)
	}
}

func startExec(ctx context.Context, t *testing.T, ex scheduler.Execer, req scheduler.ExecRequest) scheduler.ExecSession {
	t.Helper()
	s, err := ex.Exec(ctx, req)
	if err != nil {
		t.Fatalf("exec %q (tty %v): %v", req.Command, req.TTY, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// readAllWithin reads r to its end, failing the test if that takes past
// the suite's deadline.
func readAllWithin(t *testing.T, r io.Reader) string {
	t.Helper()
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(r)
		ch <- result{b, err}
	}()
	select {
	case res := <-ch:
		if res.err != nil {
			t.Errorf("read: %v", res.err)
		}
		return string(res.b)
	case <-time.After(deadline):
		t.Fatalf("the command's output did not end within %s", deadline)
		return ""
	}
}
