package nomad

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad/fakenomad"
)

// TestStatusNamesAGroupNomadCannotPlace: a group left unplaced by its
// job's blocked evaluation has Nomad's reason as its problem (the
// dimension exhausted), and a newer registration that places it clears
// the reason, as Nomad cancels the blocked evaluation.
func TestStatusNamesAGroupNomadCannotPlace(t *testing.T) {
	r := internalRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	registerSleep(t, r, "svc-app-big", 1<<20)
	m := r.unplaced(ctx, "svc-app-big")
	if m["web"] == nil {
		t.Fatalf("unplaced = %v, want web", m)
	}
	ws := scheduler.WorkloadStatus{Problem: scheduler.ProblemOf(placementFailure("svc-app-big", "web", m["web"]))}
	if ws.Problem.Code != string(errcode.CapacityOversubscribe) || ws.Problem.Remedy == "" {
		t.Fatalf("problem = %+v, want CAPACITY_WOULD_OVERSUBSCRIBE with a remedy", ws.Problem)
	}
	registerSleep(t, r, "svc-app-big", 64)
	if m := r.unplaced(ctx, "svc-app-big"); len(m) != 0 {
		t.Fatalf("unplaced after a registration that fits = %v, want none", m)
	}
}

// TestAllocationWaitsEndAtTheStartTimeout: a wait on a job's allocations
// (a stop, a promotion, a revert) that never settles ends at the start
// timeout the context carries, ADAPTER_UNAVAILABLE naming the job.
func TestAllocationWaitsEndAtTheStartTimeout(t *testing.T) {
	r := internalRuntime(t)
	registerSleep(t, r, "svc-app-wait", 64)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := r.awaitAllocs(scheduler.WithStartTimeout(ctx, 300*time.Millisecond), "svc-app-wait", func(*api.AllocationListStub) bool { return false })
	if e, ok := errcode.As(err); !ok || e.Code != errcode.AdapterUnavailable || !strings.Contains(e.Message, "svc-app-wait") {
		t.Fatalf("wait = %v, want ADAPTER_UNAVAILABLE naming the job", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the wait ran to the test's own deadline")
	}
}

// internalRuntime is a runtime on a fake Nomad whose node has 1 GiB.
func internalRuntime(t *testing.T) *Runtime {
	t.Helper()
	fake, err := fakenomad.Start(fakenomad.Config{DataDir: t.TempDir(), NodeMemoryMB: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	arts, err := NewArtifacts(ArtifactsConfig{Dir: t.TempDir(), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Address: fake.URL(), Artifacts: arts, ArtifactBaseURL: "http://127.0.0.1:9"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// registerSleep registers a job of one group, web, asking for memoryMB.
func registerSleep(t *testing.T, r *Runtime, id string, memoryMB int) {
	t.Helper()
	job := api.NewServiceJob(id, id, "global", 50)
	job.Datacenters = []string{"*"}
	task := api.NewTask("web", "raw_exec").SetConfig("command", "sleep").SetConfig("args", []string{"1000"}).
		Require(&api.Resources{CPU: ptr(100), MemoryMB: ptr(memoryMB)})
	job.AddTaskGroup(api.NewTaskGroup("web", 1).AddTask(task))
	if _, _, err := r.client.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register: %v", err)
	}
}
