package process_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
)

// startOrphanChild starts a server (a child process running a runtime on
// dir at the isolation given) whose job's workload reports its pid, and
// returns the child and the pid it printed (in the workload's own PID
// namespace when sandboxed).
func startOrphanChild(t *testing.T, dir, isolation string) (*exec.Cmd, int) {
	t.Helper()
	child := exec.Command(helperCommand(t)[0])
	child.Env = append(os.Environ(), helperEnv+"=orphan-child", "WORKDIR="+dir, "ISOLATION="+isolation)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatalf("start the child server: %v", err)
	}
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	// The child prints pid=N once its job runs.
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "pid=") || strings.HasPrefix(sc.Text(), "error:") {
				lines <- sc.Text()
				return
			}
		}
		lines <- fmt.Sprint("no pid line: ", sc.Err())
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(45 * time.Second):
		t.Fatal("the child server did not report its workload")
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(line, "pid="))
	if err != nil {
		t.Fatalf("child said %q", line)
	}
	return child, pid
}

// TestOrphansKilledByNew: a server (a child process running a runtime)
// dies by SIGKILL; its workload lives on; a new runtime on the same work
// directory kills it and removes the job's record.
func TestOrphansKilledByNew(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on PATH")
	}
	dir := sandboxDir(t)
	child, pid := startOrphanChild(t, dir, "none")
	t.Cleanup(func() {
		if !processGone(pid) {
			_ = syscall.Kill(-pid, syscall.SIGKILL) // the group this test made
		}
	})

	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if processGone(pid) {
		t.Fatalf("workload %d died with its server; it must outlive it for this test", pid)
	}
	record := filepath.Join(dir, "jobs", "job-orphan.json")
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("the job's record after the crash: %v", err)
	}

	rt, err := process.New(process.Config{WorkDir: dir, Isolation: "none"})
	if err != nil {
		t.Fatalf("new runtime on the crashed one's directory: %v", err)
	}
	waitUntil(t, "the orphaned workload gone", func() (bool, string) {
		return processGone(pid), "pid " + strconv.Itoa(pid) + " alive"
	})
	if got, want := rt.Orphans(), map[string][]int{"job-orphan": {pid}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Orphans() = %v, want %v", got, want)
	}
	if _, err := os.Stat(record); !os.IsNotExist(err) {
		t.Errorf("the job's record after reaping: %v, want it removed", err)
	}
}

// TestOrphanedPodsKilledByNew: the same with the workload in a sandbox:
// the server dies, its workload and the workload's pod (the namespace
// holder and pasta) live on, and a new runtime kills every one of them
// and removes what the pod left on disk.
func TestOrphanedPodsKilledByNew(t *testing.T) {
	needSandbox(t)
	dir := sandboxDir(t)
	child, _ := startOrphanChild(t, dir, "sandbox")
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	b, err := os.ReadFile(filepath.Join(dir, "jobs", "job-orphan.json"))
	if err != nil {
		t.Fatalf("the job's record after the crash: %v", err)
	}
	var rec struct {
		Workloads map[string]struct{ PID int } `json:"workloads"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, name := range []string{"sleeper", "_pod-holder", "_pod-pasta"} {
		pid := rec.Workloads[name].PID
		if pid <= 0 || processGone(pid) {
			t.Fatalf("the record names %s as %d, which does not run: %s", name, pid, b)
		}
		pids = append(pids, pid)
		t.Cleanup(func() {
			if !processGone(pid) {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "pods", "job-orphan")); err != nil {
		t.Fatalf("the pod's files after the crash: %v", err)
	}
	if _, err := process.New(process.Config{WorkDir: dir}); err != nil {
		t.Fatalf("new runtime on the crashed one's directory: %v", err)
	}
	for _, pid := range pids {
		waitUntil(t, "the orphaned processes gone", func() (bool, string) {
			return processGone(pid), "pid " + strconv.Itoa(pid) + " alive"
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "pods", "job-orphan")); !os.IsNotExist(err) {
		t.Errorf("the pod's files after reaping: %v, want them removed", err)
	}
}

// TestNewLeavesOthersAlone: a record whose process is not the recorded
// one (another start time: a pid used again) kills nothing.
func TestNewLeavesOthersAlone(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep on PATH")
	}
	cmd := exec.Command("sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	dir := t.TempDir()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	rec := `{"id":"job-x","boot_id":"` + strings.TrimSpace(string(boot)) + `","workloads":{"w":{"pid":` +
		strconv.Itoa(cmd.Process.Pid) + `,"start_time":1}}}`
	if err := os.MkdirAll(filepath.Join(dir, "jobs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "jobs", "job-x.json"), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	rt, err := process.New(process.Config{WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if processGone(cmd.Process.Pid) {
		t.Fatal("New killed a process whose start time differs from the record's")
	}
	if got := rt.Orphans(); len(got) != 0 {
		t.Errorf("Orphans() = %v, want none", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs", "job-x.json")); !os.IsNotExist(err) {
		t.Errorf("the stale record: %v, want it removed", err)
	}
}

// TestBuildIsRecordedWhileItRuns: a running build's process group is in the
// records New reaps (a server killed mid-build leaves no build running
// after the next start), and the record goes once the build ends.
func TestBuildIsRecordedWhileItRuns(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep on PATH")
	}
	cfg := testConfig(t)
	rt := newRuntime(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := rt.Build(ctx, scheduler.BuildRequest{ID: "b-rec", Source: t.TempDir(), Build: spec.Build{Kind: spec.BuildCommand, Command: "sleep 60"}})
		done <- err
	}()
	record := filepath.Join(cfg.WorkDir, "jobs", "build-b-rec.json")
	waitUntil(t, "the build's record", func() (bool, string) {
		_, err := os.Stat(record)
		return err == nil, fmt.Sprint(err)
	})
	cancel()
	<-done
	if _, err := os.Stat(record); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the record of an ended build: %v, want it gone", err)
	}
}
