package process_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
)

// TestUsageReadsProcessGroup: a busy workload's CPU shows (its child's,
// too: the whole process group counts), as do its memory, its artifact's
// size, its volume's size and its limits; the host is this machine.
func TestUsageReadsProcessGroup(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("usage is read from /proc")
	}
	rt := newRuntime(t, testConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	art := commandArtifact(t)
	_, err := rt.Run(ctx, scheduler.Job{ID: "job-busy", AppID: "app-u", Workloads: map[string]scheduler.Task{
		"busy": {
			Artifact:  art,
			Command:   []string{"sh", "-c", `head -c 300000 /dev/zero > "$SVC_VOLUME_DATA/blob"; head -c 5000 /dev/zero > own; sh -c 'while :; do :; done' & wait`},
			NoPort:    true,
			Mounts:    []scheduler.Mount{{Volume: "data", Path: "/data"}},
			Resources: &spec.Resources{CPUMillis: 250, MemoryBytes: 64 << 20},
		},
		"site": {Artifact: scheduler.Artifact{Kind: spec.BuildStatic, Dir: t.TempDir()}},
	}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	var u scheduler.Usage
	waitUntil(t, "a reading with CPU, memory, disk and the volume", func() (bool, string) {
		if u, err = rt.Usage(ctx, "job-busy"); err != nil {
			return false, err.Error()
		}
		w := u.Workloads["busy"]
		return u.Supported && w.CPUMillis > 0 && w.MemoryBytes > 0 && w.DiskBytes >= 5000 && w.Volumes["data"] >= 300000,
			fmt.Sprintf("%+v", u)
	})
	w := u.Workloads["busy"]
	if w.CPUMillis > int64(runtime.NumCPU())*1000*2 {
		t.Errorf("CPU = %d millis, more than the host could give", w.CPUMillis)
	}
	if w.Limits.CPUMillis != 250 || w.Limits.MemoryBytes != 64<<20 || w.Limits.DiskBytes != 0 {
		t.Errorf("limits = %+v, want the task's", w.Limits)
	}
	if s, ok := u.Workloads["site"]; !ok || s.CPUMillis != 0 || s.MemoryBytes != 0 {
		t.Errorf("static workload's usage = %+v, %v; want present with no CPU or memory of its own", s, ok)
	}
	disk, err := rt.DiskUsage(ctx, "job-busy")
	if err != nil || len(disk) != 2 || disk["busy"] < 5000 || disk["busy"] >= 300000 {
		t.Errorf("DiskUsage = %v, %v; want both workloads, busy's working copy without its volume", disk, err)
	}
	if _, err := rt.DiskUsage(ctx, "job-none"); !errcode.Has(err, errcode.NotFound) {
		t.Errorf("DiskUsage of an unknown job = %v; want NOT_FOUND", err)
	}
	h, err := rt.Host(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.CPUMillis != int64(runtime.NumCPU())*1000 || h.MemoryBytes <= 0 || u.HostCPUMillis != h.CPUMillis || u.HostMemoryBytes != h.MemoryBytes {
		t.Errorf("host = %+v, usage's = %d/%d", h, u.HostCPUMillis, u.HostMemoryBytes)
	}
}
