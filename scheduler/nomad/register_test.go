package nomad

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler/nomad/fakenomad"
)

// heldJob is a job the fake places but never starts (Hold).
func heldJob(id string) *api.Job {
	return &api.Job{ID: ptr(id), Name: ptr(id), Type: ptr("service"), Datacenters: []string{"*"},
		TaskGroups: []*api.TaskGroup{{Name: ptr("web"), Count: ptr(1), Tasks: []*api.Task{{
			Name: "web", Driver: "raw_exec", Config: map[string]any{"command": "sleep", "args": []any{"1000"}},
		}}}}}
}

func startHeldFake(t testing.TB) *fakenomad.Server {
	t.Helper()
	fake, err := fakenomad.Start(fakenomad.Config{DataDir: t.TempDir(), Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	return fake
}

// TestRegisterEnforcesTheModifyIndex: a registration that expects a new
// job loses to one that made it; one holding the current index wins; one
// holding a stale index loses. Losers are STATE_INVALID.
func TestRegisterEnforcesTheModifyIndex(t *testing.T) {
	fake := startHeldFake(t)
	r := newTestRuntime(t, fake.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	idx, err := r.register(ctx, heldJob("j"), true, 0, "web")
	if err != nil {
		t.Fatalf("first register: %v", err)
	}
	// Another controller planned before the first registered: it expects
	// a new job (index 0) and must lose.
	if _, err := r.register(ctx, heldJob("j"), false, 0, "web"); errcode.CodeOf(err) != errcode.StateInvalid {
		t.Fatalf("register expecting a new job = %v, want STATE_INVALID", err)
	}
	next, err := r.register(ctx, heldJob("j"), false, idx, "web")
	if err != nil {
		t.Fatalf("register with the current index: %v", err)
	}
	if next <= idx {
		t.Errorf("modify index after the update = %d, want past %d", next, idx)
	}
	if _, err := r.register(ctx, heldJob("j"), false, idx, "web"); errcode.CodeOf(err) != errcode.StateInvalid {
		t.Fatalf("register with a stale index = %v, want STATE_INVALID", err)
	}
	// A first registration of a job another controller runs is refused,
	// whatever index the plan saw (the plan may have run after that
	// controller registered).
	if _, err := r.register(ctx, heldJob("j"), true, 0, "web"); errcode.CodeOf(err) != errcode.StateInvalid {
		t.Fatalf("first register of a running job = %v, want STATE_INVALID", err)
	}
	// A stopped job of the same ID is registered again at its own index.
	if _, _, err := r.client.Jobs().Deregister("j", false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.register(ctx, heldJob("j"), true, 0, "web"); err != nil {
		t.Fatalf("first register of a stopped job: %v", err)
	}
}

// BenchmarkRegister measures one registration (plan, then register with
// the modify index) against the fake, with placement but no process.
func BenchmarkRegister(b *testing.B) {
	fake := startHeldFake(b)
	arts, err := NewArtifacts(ArtifactsConfig{Dir: b.TempDir(), Key: make([]byte, 32)})
	if err != nil {
		b.Fatal(err)
	}
	r, err := New(Config{Address: fake.URL(), Builder: builderFunc(nil), Artifacts: arts, ArtifactBaseURL: "http://127.0.0.1:1"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	job := heldJob("bench")
	idx, err := r.register(ctx, job, true, 0, "web")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if idx, err = r.register(ctx, job, false, idx, "web"); err != nil {
			b.Fatal(err)
		}
	}
}
