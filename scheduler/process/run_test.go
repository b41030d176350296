package process_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
)

func TestRunRefusesBadJobs(t *testing.T) {
	rt := newRuntime(t, testConfig(t))
	art := commandArtifact(t)
	task := scheduler.Task{Artifact: art, Command: []string{"sleep", "1000"}, NoPort: true}
	tests := []struct {
		name string
		job  scheduler.Job
	}{
		{"no workloads", scheduler.Job{ID: "j"}},
		{"job ID with a slash", scheduler.Job{ID: "a/b", Workloads: map[string]scheduler.Task{"w": task}}},
		{"workload name ..", scheduler.Job{ID: "j", Workloads: map[string]scheduler.Task{"..": task}}},
		{"order names an unknown workload", scheduler.Job{ID: "j", Workloads: map[string]scheduler.Task{"w": task}, Order: []string{"x"}}},
		{"order names a workload twice", scheduler.Job{ID: "j", Workloads: map[string]scheduler.Task{"w": task}, Order: []string{"w", "w"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := rt.Run(context.Background(), tt.job); errcode.CodeOf(err) != errcode.ValidInvalid {
				t.Errorf("run = %v, want VALID_INVALID", err)
			}
		})
	}
}

// TestStartOrderFillsIn: workloads the order leaves out start after it,
// by name; each starts once those before it are ready.
func TestStartOrderFillsIn(t *testing.T) {
	rt := newRuntime(t, testConfig(t))
	art := commandArtifact(t)
	started := filepath.Join(t.TempDir(), "started")
	task := func(name string) scheduler.Task {
		return scheduler.Task{Artifact: art, NoPort: true, Env: map[string]string{"STARTED": started},
			Command: []string{"sh", "-c", `echo ` + name + ` >> "$STARTED"; exec sleep 1000`}}
	}
	_, err := rt.Run(context.Background(), scheduler.Job{
		ID:        "job-order",
		Workloads: map[string]scheduler.Task{"a": task("a"), "b": task("b"), "c": task("c"), "d": task("d")},
		Order:     []string{"c", "a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(started)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(string(b)), "c a b d"; strings.Join(got, " ") != want {
		t.Errorf("start order = %v, want %s", got, want)
	}
}

// TestJobRecord: a running job's record names its workloads' processes;
// a restart rewrites it; Stop removes it.
func TestJobRecord(t *testing.T) {
	cfg := testConfig(t)
	rt := newRuntime(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if _, err := rt.Run(ctx, scheduler.Job{ID: "job-rec", AppID: "app", Workloads: map[string]scheduler.Task{
		"w": {Artifact: commandArtifact(t), Command: []string{"sleep", "1000"}, NoPort: true},
	}}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.WorkDir, "jobs", "job-rec.json")
	read := func() string {
		b, _ := os.ReadFile(path)
		return string(b)
	}
	first := read()
	if !strings.Contains(first, `"pid":`) || !strings.Contains(first, `"start_time":`) || !strings.Contains(first, `"app_id":"app"`) {
		t.Fatalf("record = %s", first)
	}
	if err := rt.Restart(ctx, "job-rec"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the record rewritten with the new process", func() (bool, string) {
		now := read()
		return now != first && strings.Contains(now, `"pid":`), now
	})
	st, _ := rt.Status(ctx, "job-rec")
	if st.Workloads["w"].Restarts != 1 {
		t.Errorf("restarts after Restart = %d, want 1", st.Workloads["w"].Restarts)
	}
	if err := rt.Stop(ctx, "job-rec"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("record after stop: %v, want it removed", err)
	}
}

// TestClose: Close stops every job and refuses new ones.
func TestClose(t *testing.T) {
	cfg := testConfig(t)
	rt := newRuntime(t, cfg)
	ctx := context.Background()
	job := scheduler.Job{ID: "job-c", Workloads: map[string]scheduler.Task{
		"w": {Artifact: commandArtifact(t), Command: []string{"sleep", "1000"}, NoPort: true},
	}}
	if _, err := rt.Run(ctx, job); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Status(ctx, "job-c"); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("status after close = %v, want NOT_FOUND", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.WorkDir, "jobs", "job-c.json")); !os.IsNotExist(err) {
		t.Errorf("record after close: %v, want it removed", err)
	}
	if _, err := rt.Run(ctx, job); errcode.CodeOf(err) != errcode.StateInvalid {
		t.Errorf("run after close = %v, want STATE_INVALID", err)
	}
}

// TestPythonBuildUsesItsOwnVirtualenv: a Python build installs into a
// virtualenv in the artifact, never into the host's interpreter, and the
// workload runs with that virtualenv first on PATH.
func TestPythonBuildUsesItsOwnVirtualenv(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 on PATH")
	}
	cfg := testConfig(t)
	rt := newRuntime(t, cfg)
	ctx := context.Background()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "requirements.txt"), []byte("# nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	art, err := rt.Build(ctx, scheduler.BuildRequest{Source: src,
		Build: spec.Build{Kind: spec.BuildPython, Command: `pip install -r requirements.txt && python -c "import sys; print(sys.prefix)" > build-prefix.txt`}})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(art.Dir, "build-prefix.txt"))
	if err != nil || strings.TrimSpace(string(b)) != filepath.Join(art.Dir, ".venv") {
		t.Fatalf("the build's interpreter prefix = %q, %v; want the artifact's .venv", b, err)
	}
	if _, err := rt.Run(ctx, scheduler.Job{ID: "job-py", Workloads: map[string]scheduler.Task{"w": {Artifact: art, NoPort: true,
		Command: []string{"sh", "-c", `python -c "import sys; print(sys.prefix)" > run-prefix.txt; exec sleep 1000`}}}}); err != nil {
		t.Fatalf("run: %v", err)
	}
	wd := filepath.Join(cfg.WorkDir, "work", "job-py", "w")
	waitUntil(t, "the workload's interpreter prefix", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(wd, "run-prefix.txt"))
		return err == nil && strings.TrimSpace(string(b)) == filepath.Join(wd, ".venv"), string(b)
	})
}
