package nomad_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
)

// TestRegisterRace: two controllers (two runtimes on one Nomad) run the
// same job at once: exactly one registers it, the other is refused with
// STATE_INVALID, and Nomad saw one registration (job version 0).
func TestRegisterRace(t *testing.T) {
	a := newEnv(t, options{})
	b := newEnv(t, options{address: a.fake.URL()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := func(e *env) scheduler.Job {
		return scheduler.Job{ID: "job-race", AppID: "app-r", Workloads: map[string]scheduler.Task{"web": {
			Artifact: buildTrue(ctx, t, e), Command: []string{"sh", "-c", "exec sleep 1000"}, NoPort: true,
		}}}
	}
	jobs := []scheduler.Job{job(a), job(b)}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, rt := range []*nomad.Runtime{a.rt, b.rt} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = rt.Run(ctx, jobs[i])
		}()
	}
	wg.Wait()
	t.Cleanup(func() { _ = a.rt.Stop(context.Background(), "job-race") })
	ok, refused := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errcode.CodeOf(err) == errcode.StateInvalid:
			refused++
		default:
			t.Errorf("run: %v, want success or STATE_INVALID", err)
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("runs: %d succeeded, %d refused (%v); want one of each", ok, refused, errs)
	}
	var stubs []struct {
		ID             string
		JobModifyIndex uint64
	}
	if err := json.Unmarshal([]byte(getBody(t, a.fake.URL()+"/v1/jobs")), &stubs); err != nil || len(stubs) != 1 {
		t.Fatalf("jobs = %+v, %v; want one", stubs, err)
	}
	var got struct{ Version uint64 }
	_ = json.Unmarshal([]byte(getBody(t, a.fake.URL()+"/v1/job/"+stubs[0].ID)), &got)
	if got.Version != 0 {
		t.Errorf("job version = %d, want 0: the job was registered more than once", got.Version)
	}
	// Both controllers now see the one job; the loser reads its status.
	if _, err := b.rt.Status(ctx, "job-race"); err != nil {
		t.Errorf("status through the other controller: %v", err)
	}
}

// TestRunRefusesARunningJob: running a job Nomad already runs is refused.
func TestRunRefusesARunningJob(t *testing.T) {
	e := newEnv(t, options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := scheduler.Job{ID: "job-twice", Workloads: map[string]scheduler.Task{"web": {
		Artifact: buildTrue(ctx, t, e), Command: []string{"sh", "-c", "exec sleep 1000"}, NoPort: true,
	}}}
	if _, err := e.rt.Run(ctx, job); err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Cleanup(func() { _ = e.rt.Stop(context.Background(), job.ID) })
	if _, err := e.rt.Run(ctx, job); errcode.CodeOf(err) != errcode.StateInvalid {
		t.Fatalf("second run = %v, want STATE_INVALID", err)
	}
	// Stopped, the same job runs again (a new version of the Nomad job).
	if err := e.rt.Stop(ctx, job.ID); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := e.rt.Run(ctx, job); err != nil {
		t.Fatalf("run after stop: %v", err)
	}
}
