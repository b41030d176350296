package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler"
)

// person is a context acting as the account id.
func person(id string) context.Context {
	return actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: id, UserID: id})
}

func (f *fixture) audited(action string) int {
	items, _ := audit.Entries.List(f.store.Read(), raftstore.Query{})
	n := 0
	for _, it := range items {
		if it.Value.Action == action {
			n++
		}
	}
	return n
}

// concurrently runs do(0) … do(n-1) at once and returns their errors.
func concurrently(n int, do func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = do(i)
		}()
	}
	wg.Wait()
	return errs
}

// Of concurrent deploy requests for one app, one is queued and the others
// are STATE_INVALID: a deploy already runs, the request's own invariant,
// however the requests interleave. Deploys the service starts itself are
// all queued and wait their turn.
func TestConcurrentDeployRequests(t *testing.T) {
	f := newFixture(t, options{noWorkers: true})
	appID := f.app(t, webSpec)
	const n = 12
	errs := concurrently(n, func(int) error {
		_, err := f.sch.Create(alice, appID, 0, scheduler.TriggerAPI)
		return err
	})
	queued := 0
	for _, err := range errs {
		switch {
		case err == nil:
			queued++
		case !errcode.Has(err, errcode.StateInvalid):
			t.Errorf("deploy: %v", err)
		}
	}
	if queued != 1 || f.audited("deployment.create") != 1 {
		t.Fatalf("%d deploys queued, %d audited; want 1", queued, f.audited("deployment.create"))
	}
	for _, err := range concurrently(n, func(int) error {
		_, err := f.sch.Create(alice, appID, 0, scheduler.TriggerSecretRotation)
		return err
	}) {
		if err != nil {
			t.Errorf("a deploy the service starts: %v", err)
		}
	}
	if got := f.audited("deployment.create"); got != n+1 {
		t.Errorf("%d deployments created; want %d", got, n+1)
	}
}

// Concurrent approvals of one held deploy by different people are all
// recorded; with enough of them the deploy is queued.
func TestConcurrentApprovals(t *testing.T) {
	f := newFixture(t, options{noWorkers: true})
	const n = 6
	appID := f.app(t, webSpec+fmt.Sprintf("deploy: {approvals: %d}\n", n))
	d, err := f.sch.Create(alice, appID, 0, scheduler.TriggerAPI)
	if err != nil || d.State != scheduler.DepWaitingApproval {
		t.Fatalf("held deploy: %+v, %v", d, err)
	}
	for _, err := range concurrently(n, func(i int) error {
		_, err := f.sch.Approve(person(fmt.Sprintf("usr_approver%d", i)), appID, d.ID)
		return err
	}) {
		if err != nil {
			t.Errorf("approve: %v", err)
		}
	}
	if got := f.dep(t, appID, d.ID); len(got.Approvals) != n || got.State != scheduler.DepQueued {
		t.Errorf("after %d approvals: %d recorded, %s", n, len(got.Approvals), got.State)
	}

	// One person approving twice at once is recorded once; the other
	// request is STATE_INVALID (its own precondition: not approved yet).
	other := f.app(t, webSpec+"deploy: {approvals: 2}\n")
	d, err = f.sch.Create(alice, other, 0, scheduler.TriggerAPI)
	if err != nil {
		t.Fatal(err)
	}
	errs := concurrently(2, func(int) error {
		_, err := f.sch.Approve(bob, other, d.ID)
		return err
	})
	if (errs[0] == nil) == (errs[1] == nil) || !errcode.Has(errors.Join(errs[0], errs[1]), errcode.StateInvalid) {
		t.Errorf("one person approving twice at once: %v, %v", errs[0], errs[1])
	}
	if got := f.dep(t, other, d.ID); len(got.Approvals) != 1 || got.State != scheduler.DepWaitingApproval {
		t.Errorf("after: %d approvals, %s", len(got.Approvals), got.State)
	}
}

// Concurrent starts and stops of one app are all applied and audited; the
// app ends meant to be in one of the two states.
func TestConcurrentStartsAndStops(t *testing.T) {
	f := newFixture(t, options{noWorkers: true})
	appID := f.app(t, webSpec)
	const n = 16
	for _, err := range concurrently(n, func(i int) error {
		if i%2 == 0 {
			_, err := f.sch.Stop(alice, appID)
			return err
		}
		_, err := f.sch.Start(alice, appID)
		return err
	}) {
		if err != nil {
			t.Errorf("start or stop: %v", err)
		}
	}
	if s, p := f.audited("app.stop"), f.audited("app.start"); s != n/2 || p != n/2 {
		t.Errorf("%d app.stop and %d app.start entries; want %d each", s, p, n/2)
	}
	a, err := f.apps.Get(appID)
	if err != nil || (a.DesiredState != apps.DesiredRunning && a.DesiredState != apps.DesiredStopped) {
		t.Errorf("after: %+v, %v", a, err)
	}
}
