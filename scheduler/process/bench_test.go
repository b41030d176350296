package process_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
)

func benchRuntime(b *testing.B) (*process.Runtime, scheduler.Artifact) {
	b.Helper()
	rt, err := process.New(process.Config{WorkDir: b.TempDir(), StopGrace: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Close() })
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("bench"), 0o600); err != nil {
		b.Fatal(err)
	}
	return rt, scheduler.Artifact{ID: "bench", Kind: spec.BuildStatic, Dir: dir}
}

// BenchmarkRunStop runs and stops a static job: the runtime's own cost
// of a job (port, log file, readiness check, record, stop).
func BenchmarkRunStop(b *testing.B) {
	rt, art := benchRuntime(b)
	ctx := context.Background()
	health := &spec.Health{Path: "/"}
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("job-%d", i)
		if _, err := rt.Run(ctx, scheduler.Job{ID: id, Workloads: map[string]scheduler.Task{"web": {Artifact: art, Health: health}}}); err != nil {
			b.Fatal(err)
		}
		if err := rt.Stop(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatus reads the status of a job of four workloads.
func BenchmarkStatus(b *testing.B) {
	rt, art := benchRuntime(b)
	ctx := context.Background()
	tasks := map[string]scheduler.Task{}
	for i := range 4 {
		tasks[fmt.Sprintf("web%d", i)] = scheduler.Task{Artifact: art}
	}
	if _, err := rt.Run(ctx, scheduler.Job{ID: "job-status", Workloads: tasks}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := rt.Status(ctx, "job-status"); err != nil {
			b.Fatal(err)
		}
	}
}
