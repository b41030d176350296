package process_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
)

// TestKindFor: the adapter's instances run on the Runtime they were made
// with and say what it can do.
func TestKindFor(t *testing.T) {
	rt := newRuntime(t, testConfig(t))
	k := process.KindFor(rt)
	if k.Category != adapters.CategoryRuntime || k.Name != "process" || !k.Default || k.DefaultID != process.DefaultID {
		t.Errorf("kind = %+v", k)
	}
	inst, err := k.Open(context.Background(), adapters.Config{ID: process.DefaultID})
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.Check(context.Background()); err != nil {
		t.Errorf("check: %v", err)
	}
	caps := inst.Capabilities()
	for key, want := range map[string]any{"resource_limits": false, "exec": true, "usage": true, "volumes": true, "logs": true, "restarts": true} {
		if caps[key] != want {
			t.Errorf("capability %s = %v, want %v", key, caps[key], want)
		}
	}
	if iso := caps["isolation"]; iso != "none" && iso != "sandbox" {
		t.Errorf("isolation = %v", iso)
	}
	if iso, avail := caps["isolation"], caps["sandbox_available"]; (iso == "sandbox") != (avail == true) {
		t.Errorf("isolation %v but sandbox_available %v", iso, avail)
	}

	r, ok := inst.(scheduler.Runtime)
	if !ok {
		t.Fatal("the instance is no scheduler.Runtime")
	}
	for name, ok := range map[string]bool{
		"LogReader":   is[scheduler.LogReader](inst),
		"UsageReader": is[scheduler.UsageReader](inst),
		"HostReader":  is[scheduler.HostReader](inst),
		"Execer":      is[scheduler.Execer](inst),
	} {
		if !ok {
			t.Errorf("the instance is no scheduler.%s", name)
		}
	}
	// It runs on rt: a job run through it shows on rt.
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "index.html"), []byte("hi"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	art, err := r.Build(ctx, scheduler.BuildRequest{Source: src, Build: spec.Build{Kind: spec.BuildStatic}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(ctx, scheduler.Job{ID: "job-k", Workloads: map[string]scheduler.Task{"web": {Artifact: art}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Status(ctx, "job-k"); err != nil {
		t.Errorf("status on the runtime of a job run through the instance: %v", err)
	}
	if err := r.Restart(ctx, "job-k"); err != nil {
		t.Errorf("restart of a static job: %v", err)
	}
	if err := r.Stop(ctx, "job-k"); err != nil {
		t.Error(err)
	}
}

func is[T any](v any) bool {
	_, ok := v.(T)
	return ok
}
