package nomad

import (
	"context"
	"crypto/rand"
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	register := func(memoryMB int) {
		t.Helper()
		job := api.NewServiceJob("svc-app-big", "app big", "global", 50)
		job.Datacenters = []string{"*"}
		task := api.NewTask("web", "raw_exec").SetConfig("command", "sleep").SetConfig("args", []string{"1000"}).
			Require(&api.Resources{CPU: ptr(100), MemoryMB: ptr(memoryMB)})
		job.AddTaskGroup(api.NewTaskGroup("web", 1).AddTask(task))
		if _, _, err := r.client.Jobs().Register(job, nil); err != nil {
			t.Fatalf("register: %v", err)
		}
	}
	register(1 << 20)
	m := r.unplaced(ctx, "svc-app-big")
	if m["web"] == nil {
		t.Fatalf("unplaced = %v, want web", m)
	}
	ws := scheduler.WorkloadStatus{Problem: scheduler.ProblemOf(placementFailure("svc-app-big", "web", m["web"]))}
	if ws.Problem.Code != string(errcode.CapacityOversubscribe) || ws.Problem.Remedy == "" {
		t.Fatalf("problem = %+v, want CAPACITY_WOULD_OVERSUBSCRIBE with a remedy", ws.Problem)
	}
	register(64)
	if m := r.unplaced(ctx, "svc-app-big"); len(m) != 0 {
		t.Fatalf("unplaced after a registration that fits = %v, want none", m)
	}
}

