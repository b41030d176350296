package nomad_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
)

// neverReady is a job whose one workload runs but never listens on its
// port: Run waits for it until the start timeout, or the job goes.
func neverReady(ctx context.Context, t *testing.T, e *env, id string) scheduler.Job {
	return scheduler.Job{ID: id, AppID: "app-" + id, Workloads: map[string]scheduler.Task{"web": {
		Artifact: buildTrue(ctx, t, e), Command: []string{"sh", "-c", "exec sleep 1000"},
	}}}
}

// eachNomad runs a wait test against the fake Nomad and, when there is a
// nomad binary (SVC_NOMAD_BIN), against a real agent. The runtime's own
// start timeout and healthy deadline are an hour, and its checks are
// Nomad's own (a port nothing listens on is never healthy): only the
// context's start timeout, or the job going, ends a wait within the
// tests' two minutes.
func eachNomad(t *testing.T, test func(t *testing.T, e *env, client *api.Client)) {
	slow := func(c *nomad.Config) {
		c.StartTimeout, c.HealthyDeadline = time.Hour, time.Hour
		c.ServiceProvider = jobtemplates.ProviderNomad
	}
	run := func(t *testing.T, address string) {
		e := newEnv(t, options{address: address, runtime: slow})
		if address == "" {
			address = e.fake.URL()
		}
		client, err := api.NewClient(&api.Config{Address: address, HttpClient: &http.Client{}})
		if err != nil {
			t.Fatal(err)
		}
		test(t, e, client)
	}
	t.Run("fake", func(t *testing.T) { run(t, "") })
	t.Run("agent", func(t *testing.T) { run(t, startAgent(t)) })
}

// startedAlloc waits until Nomad runs the allocation of the job (Run is
// then waiting for it to be ready) and returns the Nomad job's ID.
func startedAlloc(t *testing.T, client *api.Client, appID string) string {
	t.Helper()
	var nid string
	waitUntil(t, "the job's allocation runs", func() bool {
		stubs, _, err := client.Jobs().ListOptions(&api.JobListOptions{Fields: &api.JobListFields{Meta: true}}, nil)
		if err != nil {
			return false
		}
		for _, s := range stubs {
			if s.Meta[jobtemplates.MetaAppID] == appID && !s.Stop {
				nid = s.ID
			}
		}
		if nid == "" {
			return false
		}
		allocs, _, err := client.Jobs().Allocations(nid, false, nil)
		return err == nil && len(allocs) == 1 && allocs[0].ClientStatus == api.AllocClientStatusRunning
	})
	return nid
}

// TestRunEndsWhenTheJobGoes is the stall: an operator stops, then
// purges, the Nomad job (or purges it at once) while svc waits for it to
// be ready. The wait ends at once with NOT_FOUND, not after the start
// timeout (an hour here: the test's context would end first, and Run
// would fail with that instead); then Status says NOT_FOUND too.
func TestRunEndsWhenTheJobGoes(t *testing.T) {
	eachNomad(t, func(t *testing.T, e *env, client *api.Client) {
		for i, c := range []struct {
			name  string
			purge []bool // the deregistrations, in order: purge or not
		}{
			{"stop", []bool{false}},
			{"stop then purge", []bool{false, true}},
			{"purge", []bool{true}},
		} {
			id := fmt.Sprintf("job-gone-%d", i)
			t.Run(c.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				job := neverReady(ctx, t, e, id)
				ran := make(chan error, 1)
				go func() {
					_, err := e.rt.Run(scheduler.WithStartTimeout(ctx, time.Hour), job)
					ran <- err
				}()
				nid := startedAlloc(t, client, job.AppID)
				for _, purge := range c.purge {
					if _, _, err := client.Jobs().Deregister(nid, purge, nil); err != nil {
						t.Fatalf("deregister (purge %t): %v", purge, err)
					}
				}
				went := time.Now()
				err := <-ran
				if errcode.CodeOf(err) != errcode.NotFound || errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("run of a job stopped or purged meanwhile = %v, want NOT_FOUND", err)
				}
				t.Logf("run ended %s after the job went: %v", time.Since(went).Round(time.Millisecond), err)
				if _, err := e.rt.Status(ctx, job.ID); errcode.CodeOf(err) != errcode.NotFound {
					t.Errorf("status after = %v, want NOT_FOUND", err)
				}
			})
		}
	})
}

// TestRunWaitsTheStartTimeoutOfTheContext: the start timeout the
// scheduler passes (runtime.start_timeout) bounds the wait for a workload
// that never becomes ready, not the runtime's own (an hour here): Run
// returns without an error, the job runs on, and Status reports the
// workload's health as not passing.
func TestRunWaitsTheStartTimeoutOfTheContext(t *testing.T) {
	eachNomad(t, func(t *testing.T, e *env, _ *api.Client) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		job := neverReady(ctx, t, e, "job-slow")
		start := time.Now()
		st, err := e.rt.Run(scheduler.WithStartTimeout(ctx, 2*time.Second), job)
		if err != nil {
			t.Fatalf("run = %v; want it to return once the start timeout passed", err)
		}
		t.Logf("run returned %s after it began (start timeout 2s)", time.Since(start).Round(time.Millisecond))
		t.Cleanup(func() { _ = e.rt.Stop(context.Background(), job.ID) })
		if ws := st.Workloads["web"]; ws.Health == scheduler.HealthPassing {
			t.Errorf("workload = %+v; it never listens, so its health cannot pass", ws)
		}
		if _, err := e.rt.Status(ctx, job.ID); err != nil {
			t.Errorf("status of the job left running: %v", err)
		}
	})
}
