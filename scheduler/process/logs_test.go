package process_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
)

// TestLogsOnDisk: a workload's output goes to its log file within the
// cap, with one rotated file; after Stop, and from a new runtime on the
// same work directory, Logs reads the files; RemoveLogs removes them.
func TestLogsOnDisk(t *testing.T) {
	cfg := testConfig(t)
	cfg.LogCapBytes = 4096 // the task sets none
	rt, err := process.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	_, err = rt.Run(ctx, scheduler.Job{ID: "job-logs", Workloads: map[string]scheduler.Task{"noisy": {
		Artifact: commandArtifact(t),
		Command:  []string{"sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo noise-$i; i=$((i+1)); done; echo last-line; exec sleep 1000"},
		NoPort:   true,
	}}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	waitUntil(t, "the last line logged", func() (bool, string) {
		lines, err := rt.Logs(ctx, "job-logs", "noisy")
		return err == nil && len(lines) > 0 && lines[len(lines)-1] == "last-line", strings.Join(lines[max(len(lines)-3, 0):], "|")
	})
	if err := rt.Stop(ctx, "job-logs"); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(cfg.WorkDir, "logs", "job-logs", "noisy.log")
	var total int64
	for _, p := range []string{log, log + ".1"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("log file after stop: %v", err)
		}
		total += fi.Size()
	}
	if total > 4096 {
		t.Errorf("log files hold %d bytes, over the cap of 4096", total)
	}

	// A new runtime, which does not run the job, reads its logs.
	again, err := process.New(process.Config{WorkDir: cfg.WorkDir})
	if err != nil {
		t.Fatal(err)
	}
	lines, err := again.Logs(ctx, "job-logs", "noisy")
	if err != nil {
		t.Fatalf("logs from a new runtime: %v", err)
	}
	if !strings.HasPrefix(lines[0], "noise-") || !strings.Contains(strings.Join(lines, "\n"), "last-line\n[svc] workload noisy exited with code") {
		t.Errorf("logs = %q…, want noise, the last line and the exit", lines[:min(len(lines), 3)])
	}
	if _, err := again.Logs(ctx, "job-logs", "other"); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("logs of an unknown workload = %v, want NOT_FOUND", err)
	}
	if _, err := again.Logs(ctx, "../job-logs", "noisy"); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("logs of a path = %v, want NOT_FOUND", err)
	}
	if err := again.RemoveLogs("job-logs"); err != nil {
		t.Fatalf("remove logs: %v", err)
	}
	if _, err := again.Logs(ctx, "job-logs", "noisy"); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("logs after RemoveLogs = %v, want NOT_FOUND", err)
	}
}

func TestRemoveLogsOfRunningJob(t *testing.T) {
	rt := newRuntime(t, testConfig(t))
	ctx := context.Background()
	if _, err := rt.Run(ctx, scheduler.Job{ID: "job-run", Workloads: map[string]scheduler.Task{"w": {
		Artifact: commandArtifact(t), Command: []string{"sleep", "1000"}, NoPort: true,
	}}}); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemoveLogs("job-run"); errcode.CodeOf(err) != errcode.StateInvalid {
		t.Errorf("RemoveLogs(running) = %v, want STATE_INVALID", err)
	}
}
