package process_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
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
	rt, err := process.New(process.Config{WorkDir: b.TempDir(), StopGrace: time.Second, Isolation: "none"})
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

// isolations are the two ways the runtime runs a workload, for the
// benchmarks that compare them: the sandbox (the default: a pod with
// pasta, bubblewrap, an unprivileged user) and none.
var isolations = []string{"none", "sandbox"}

// isolatedRuntime is a runtime for the sandbox benchmarks, at the
// isolation given; without a sandbox here, the sandbox's benchmark skips.
func isolatedRuntime(b *testing.B, isolation string) *process.Runtime {
	b.Helper()
	rt, err := process.New(process.Config{WorkDir: sandboxDir(b), Isolation: isolation, StopGrace: time.Second,
		SettleTime: 100 * time.Millisecond, GoCacheSeed: testSeed()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Close() })
	if err := rt.SandboxError(); isolation == "sandbox" && err != nil {
		b.Skipf("no sandbox here: %v", err)
	}
	return rt
}

// helperArtifact is an artifact holding the test binary, which serves
// HTTP as the "listen" helper.
func helperArtifact(b *testing.B) scheduler.Artifact {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile(exe)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "helper"), raw, 0o755); err != nil {
		b.Fatal(err)
	}
	return scheduler.Artifact{ID: "helper", Kind: spec.BuildCommand, Dir: dir}
}

// BenchmarkRunToReady runs a workload serving HTTP until its health check
// passes, and stops it: what a deploy waits for once the build is done,
// with and without the sandbox (which adds its pod and bubblewrap).
func BenchmarkRunToReady(b *testing.B) {
	for _, iso := range isolations {
		b.Run(iso, func(b *testing.B) {
			rt := isolatedRuntime(b, iso)
			art := helperArtifact(b)
			ctx := context.Background()
			task := scheduler.Task{Artifact: art, Command: []string{"./helper"}, Env: map[string]string{helperEnv: "listen"},
				Health: &spec.Health{Path: "/", Interval: spec.Duration(50 * time.Millisecond)}}
			for i := 0; b.Loop(); i++ {
				id := fmt.Sprintf("job-%d", i)
				if _, err := rt.Run(ctx, scheduler.Job{ID: id, AppID: "app-bench", Workloads: map[string]scheduler.Task{"web": task}}); err != nil {
					b.Fatal(err)
				}
				if err := rt.Stop(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBuildCommand runs a trivial build command: a build's fixed
// cost (work area, pod, sandbox) with and without the sandbox.
func BenchmarkBuildCommand(b *testing.B) {
	for _, iso := range isolations {
		b.Run(iso, func(b *testing.B) {
			rt := isolatedRuntime(b, iso)
			src := b.TempDir()
			if err := os.WriteFile(filepath.Join(src, "in"), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				art, err := rt.Build(context.Background(), scheduler.BuildRequest{AppID: "app-bench", Source: src,
					Build: spec.Build{Kind: spec.BuildCommand, Command: "cp in out"}})
				if err != nil {
					b.Fatal(err)
				}
				_ = rt.RemoveArtifact(context.Background(), art)
			}
		})
	}
}

// BenchmarkWorkloadRequest sends HTTP requests to a running workload at
// its address (where the edge sends them), from 8 clients with kept-alive
// connections: the sandbox puts pasta's forwarding on the path.
func BenchmarkWorkloadRequest(b *testing.B) {
	for _, iso := range isolations {
		b.Run(iso, func(b *testing.B) {
			rt := isolatedRuntime(b, iso)
			st, err := rt.Run(context.Background(), scheduler.Job{ID: "job-req", AppID: "app-bench", Workloads: map[string]scheduler.Task{"web": {
				Artifact: helperArtifact(b), Command: []string{"./helper"}, Env: map[string]string{helperEnv: "listen"},
				Health: &spec.Health{Path: "/"}}}})
			if err != nil {
				b.Fatal(err)
			}
			url := "http://" + st.Workloads["web"].Address + "/"
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			b.SetParallelism(4) // 8 clients on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get(url)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}
