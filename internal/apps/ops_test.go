package apps_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

type appsFixture struct {
	store  *raftstore.Store
	svc    *apps.Service
	ctx    context.Context
	caller authz.Caller
}

func newAppsFixture(t *testing.T) *appsFixture {
	t.Helper()
	store := raftstoretest.Open(t, append([]raftstore.Def{apps.Apps, audit.Entries, events.Events, events.Cursors}, identity.Tables()...)...)
	return &appsFixture{
		store:  store,
		svc:    apps.NewService(store, func() time.Time { return time.Now().UTC() }),
		ctx:    actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_1"}),
		caller: authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: "usr_1", UserID: "usr_1"}},
	}
}

func (f *appsFixture) create(t *testing.T, name string) apps.App {
	t.Helper()
	a, err := f.svc.Create(f.ctx, f.caller, apps.New{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (f *appsFixture) audited(action, appID string) int {
	items, _ := audit.Entries.List(f.store.Read(), raftstore.Query{})
	n := 0
	for _, it := range items {
		if it.Value.Action == action && it.Value.AppID != nil && *it.Value.AppID == appID {
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

// Concurrent renames of one app are applied one after another: none is
// refused for having raced another, each is audited, and the app ends
// with one of the names.
func TestConcurrentRenamesAllApply(t *testing.T) {
	f := newAppsFixture(t)
	a := f.create(t, "Hot")
	const n = 32
	names := map[string]bool{}
	for i := range n {
		names[fmt.Sprintf("Hot %d", i)] = true
	}
	errs := concurrently(n, func(i int) error {
		name := fmt.Sprintf("Hot %d", i)
		_, err := f.svc.Update(f.ctx, a.ID, apps.Patch{Name: &name})
		return err
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("rename %d: %v", i, err)
		}
	}
	got, err := f.svc.Get(a.ID)
	if err != nil || !names[got.Name] {
		t.Fatalf("after the renames: %+v, %v", got, err)
	}
	if c := f.audited("app.update", a.ID); c != n {
		t.Errorf("%d app.update entries for %d renames", c, n)
	}
}

// A slug is one app's: of concurrent requests for one free slug, one gets
// it and the others are STATE_INVALID (their own precondition failed),
// however the requests interleave.
func TestConcurrentSlugClaimsOneWins(t *testing.T) {
	f := newAppsFixture(t)
	const n = 8
	ids := make([]string, n)
	for i := range ids {
		ids[i] = f.create(t, fmt.Sprintf("Claimant %d", i)).ID
	}
	errs := concurrently(n, func(i int) error {
		slug := "wanted"
		_, err := f.svc.Update(f.ctx, ids[i], apps.Patch{Slug: &slug})
		return err
	})
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case errcode.CodeOf(err) != errcode.StateInvalid:
			t.Errorf("slug claim: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d requests got the slug; want exactly 1", won)
	}
	// And one at a time, a taken slug stays refused.
	slug := "wanted"
	if _, err := f.svc.Update(f.ctx, f.create(t, "Late").ID, apps.Patch{Slug: &slug}); errcode.CodeOf(err) != errcode.StateInvalid {
		t.Errorf("a taken slug: %v", err)
	}
}

// Creating apps of one name at once gives each its own slug.
func TestConcurrentCreatesOfOneNameGetDistinctSlugs(t *testing.T) {
	f := newAppsFixture(t)
	const n = 12
	slugs := make([]string, n)
	errs := concurrently(n, func(i int) error {
		a, err := f.svc.Create(f.ctx, f.caller, apps.New{Name: "Twin"})
		slugs[i] = a.Slug
		return err
	})
	seen := map[string]bool{}
	for i, err := range errs {
		if err != nil || seen[slugs[i]] {
			t.Errorf("create %d: slug %q, %v", i, slugs[i], err)
		}
		seen[slugs[i]] = true
	}
	if items, _ := identity.Grants.List(f.store.Read(), raftstore.Query{}); len(items) != 2*n {
		t.Errorf("%d grants for %d apps; want 2 each", len(items), n)
	}
}

// Deleting an app while it is renamed deletes it: the rename meanwhile is
// no reason to refuse.
func TestDeleteWhileRenamedDeletes(t *testing.T) {
	f := newAppsFixture(t)
	a := f.create(t, "Doomed")
	errs := concurrently(9, func(i int) error {
		if i == 0 {
			return f.svc.Delete(f.ctx, a.ID, apps.Decision{})
		}
		name := fmt.Sprintf("Doomed %d", i)
		_, err := f.svc.Update(f.ctx, a.ID, apps.Patch{Name: &name})
		if errcode.CodeOf(err) == errcode.NotFound {
			return nil // renamed after the delete
		}
		return err
	})
	for _, err := range errs {
		if err != nil {
			t.Errorf("delete or rename: %v", err)
		}
	}
	if _, err := f.svc.Get(a.ID); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("get after delete: %v", err)
	}
}

// transition applies TransitionOps to the app in the store.
func transition(t *testing.T, f *appsFixture, id string, tr apps.Transition) apps.App {
	t.Helper()
	_, err := f.store.Update(f.ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		return apps.TransitionOps(f.ctx, r, id, tr, time.Now().UTC())
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.svc.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// setState puts an app in a state through the transitions (a deploy, then
// what the reconciler observes).
func setState(t *testing.T, f *appsFixture, id, state, desired string) {
	t.Helper()
	transition(t, f, id, apps.Transition{Cause: apps.DeployBegan})
	if state == apps.StateDeploying {
		return
	}
	transition(t, f, id, apps.Transition{Cause: apps.DeployEnded, Succeeded: true})
	if desired == apps.DesiredStopped {
		if _, err := f.store.Update(f.ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
			_, _, ops, err := apps.DesiredOps(r, id, desired, "", time.Now().UTC())
			return ops, err
		}); err != nil {
			t.Fatal(err)
		}
	}
	transition(t, f, id, apps.Transition{Cause: apps.Observed, To: state})
}

// The state machine lives in apps: each cause and state gives the state
// the specification says, with one app.state_changed event per change.
func TestTransitionRules(t *testing.T) {
	cases := []struct {
		name           string
		state, desired string
		tr             apps.Transition
		want           string
		wantDesired    string
	}{
		{"a deploy begins from running", apps.StateRunning, apps.DesiredRunning, apps.Transition{Cause: apps.DeployBegan}, apps.StateDeploying, apps.DesiredRunning},
		{"a deploy begins from failed", apps.StateFailed, apps.DesiredRunning, apps.Transition{Cause: apps.DeployBegan}, apps.StateDeploying, apps.DesiredRunning},
		{"success runs and means to run", apps.StateDeploying, apps.DesiredStopped, apps.Transition{Cause: apps.DeployEnded, Succeeded: true}, apps.StateRunning, apps.DesiredRunning},
		{"failure with nothing deployed is draft", apps.StateDeploying, apps.DesiredRunning, apps.Transition{Cause: apps.DeployEnded}, apps.StateDraft, apps.DesiredRunning},
		{"failure returns to failed", apps.StateDeploying, apps.DesiredRunning, apps.Transition{Cause: apps.DeployEnded, Released: true, Prior: apps.StateFailed}, apps.StateFailed, apps.DesiredRunning},
		{"failure returns to stopped", apps.StateDeploying, apps.DesiredRunning, apps.Transition{Cause: apps.DeployEnded, Released: true, Prior: apps.StateStopped}, apps.StateStopped, apps.DesiredRunning},
		{"failure keeps serving", apps.StateDeploying, apps.DesiredRunning, apps.Transition{Cause: apps.DeployEnded, Released: true, Prior: apps.StateDegraded}, apps.StateRunning, apps.DesiredRunning},
		{"failure of an app meant stopped", apps.StateDeploying, apps.DesiredStopped, apps.Transition{Cause: apps.DeployEnded, Released: true, Prior: apps.StateRunning}, apps.StateStopped, apps.DesiredStopped},
		{"observed degraded", apps.StateRunning, apps.DesiredRunning, apps.Transition{Cause: apps.Observed, To: apps.StateDegraded}, apps.StateDegraded, apps.DesiredRunning},
		{"observation does not move a deploy", apps.StateDeploying, apps.DesiredRunning, apps.Transition{Cause: apps.Observed, To: apps.StateRunning}, apps.StateDeploying, apps.DesiredRunning},
		{"observation does not revive a failed app", apps.StateFailed, apps.DesiredRunning, apps.Transition{Cause: apps.Observed, To: apps.StateRunning}, apps.StateFailed, apps.DesiredRunning},
		{"observed stopped and meant to stay so", apps.StateRunning, apps.DesiredRunning, apps.Transition{Cause: apps.Observed, To: apps.StateStopped, Desired: apps.DesiredStopped}, apps.StateStopped, apps.DesiredStopped},
		{"meant stopped while a deploy holds it", apps.StateDeploying, apps.DesiredRunning, apps.Transition{Cause: apps.Observed, To: apps.StateStopped, Desired: apps.DesiredStopped}, apps.StateDeploying, apps.DesiredStopped},
		{"a deploy's success still means to run", apps.StateDeploying, apps.DesiredRunning, apps.Transition{Cause: apps.DeployEnded, Succeeded: true, Desired: apps.DesiredStopped}, apps.StateRunning, apps.DesiredRunning},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newAppsFixture(t)
			a := f.create(t, "Moving")
			setState(t, f, a.ID, c.state, c.desired)
			if c.desired == apps.DesiredStopped && c.state == apps.StateDeploying {
				if _, err := f.store.Update(f.ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
					_, _, ops, err := apps.DesiredOps(r, a.ID, c.desired, "", time.Now().UTC())
					return ops, err
				}); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := f.svc.Get(a.ID)
			if before.State != c.state || before.DesiredState != c.desired {
				t.Fatalf("set up %s/%s, got %s/%s", c.state, c.desired, before.State, before.DesiredState)
			}
			evs := stateEvents(f)
			got := transition(t, f, a.ID, c.tr)
			if got.State != c.want || got.DesiredState != c.wantDesired {
				t.Errorf("%s/%s, want %s/%s", got.State, got.DesiredState, c.want, c.wantDesired)
			}
			after := stateEvents(f)
			switch {
			case c.want == c.state && len(after) != len(evs):
				t.Errorf("no change wrote %d app.state_changed events", len(after)-len(evs))
			case c.want != c.state && (len(after) != len(evs)+1 || after[len(after)-1] != c.state+">"+c.want):
				t.Errorf("events %v after %v; want one %s>%s", after, evs, c.state, c.want)
			}
		})
	}
	f := newAppsFixture(t)
	if _, err := f.store.Update(f.ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		return apps.TransitionOps(f.ctx, r, "app_missing", apps.Transition{Cause: apps.Observed, To: apps.StateRunning}, time.Now())
	}); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("transition of a missing app: %v", err)
	}
	a := f.create(t, "Odd")
	if _, err := f.store.Update(f.ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		return apps.TransitionOps(f.ctx, r, a.ID, apps.Transition{Cause: apps.Observed, To: apps.StateStopped, Desired: "paused"}, time.Now())
	}); errcode.CodeOf(err) != errcode.Internal {
		t.Errorf("a desired state that is none: %v", err)
	}
}

// An app the system stops says why (stopped_because) until it is meant
// to run again; a person's stop says nothing.
func TestStoppedBecause(t *testing.T) {
	f := newAppsFixture(t)
	a := f.create(t, "Stopped")
	setState(t, f, a.ID, apps.StateRunning, apps.DesiredRunning)
	desire := func(desired, because string) apps.App {
		t.Helper()
		if _, err := f.store.Update(f.ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
			_, _, ops, err := apps.DesiredOps(r, a.ID, desired, because, time.Now().UTC())
			return ops, err
		}); err != nil {
			t.Fatal(err)
		}
		got, _ := f.svc.Get(a.ID)
		return got
	}
	because := func(a apps.App) string {
		if a.StoppedBecause == nil {
			return "<nil>"
		}
		return *a.StoppedBecause
	}
	if got := desire(apps.DesiredStopped, apps.StoppedIdle); because(got) != apps.StoppedIdle {
		t.Errorf("stopped for idleness: stopped_because %s", because(got))
	}
	if got := desire(apps.DesiredRunning, ""); got.StoppedBecause != nil {
		t.Errorf("started again: stopped_because %s, want nil", because(got))
	}
	if got := desire(apps.DesiredStopped, ""); got.StoppedBecause != nil {
		t.Errorf("stopped by a person: stopped_because %s, want nil", because(got))
	}
	desire(apps.DesiredRunning, "")
	got := transition(t, f, a.ID, apps.Transition{Cause: apps.Observed, To: apps.StateStopped, Desired: apps.DesiredStopped, Because: apps.StoppedDiskLimit})
	if because(got) != apps.StoppedDiskLimit {
		t.Errorf("stopped over its disk limit: stopped_because %s", because(got))
	}
	transition(t, f, a.ID, apps.Transition{Cause: apps.DeployBegan})
	if got := transition(t, f, a.ID, apps.Transition{Cause: apps.DeployEnded, Succeeded: true}); got.StoppedBecause != nil {
		t.Errorf("deployed again: stopped_because %s, want nil", because(got))
	}
}

// stateEvents lists the app.state_changed events as from>to, oldest first.
func stateEvents(f *appsFixture) []string {
	items, _ := events.Events.List(f.store.Read(), raftstore.Query{})
	var out []string
	for _, it := range items {
		if it.Value.Type == "app.state_changed" {
			out = append(out, fmt.Sprint(it.Value.Data["from"], ">", it.Value.Data["to"]))
		}
	}
	return out
}

// BenchmarkConcurrentRenames renames one app from 16 goroutines at once,
// without pause (one replicated write each, with its audit entry). It
// reports the renames the store gave up on after its bounded tries
// (busy/op: STORE_UNAVAILABLE, retryable) beside ns/op; any other refusal
// fails it.
func BenchmarkConcurrentRenames(b *testing.B) {
	store := raftstoretest.Open(b, append([]raftstore.Def{apps.Apps, audit.Entries, events.Events, events.Cursors}, identity.Tables()...)...)
	svc := apps.NewService(store, func() time.Time { return time.Now().UTC() })
	ctx := actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_1"})
	a, err := svc.Create(ctx, authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: "usr_1", UserID: "usr_1"}}, apps.New{Name: "Bench"})
	if err != nil {
		b.Fatal(err)
	}
	var n, busy atomic.Int64
	b.SetParallelism(8) // 16 writers on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := fmt.Sprintf("Bench %d", n.Add(1))
			_, err := svc.Update(ctx, a.ID, apps.Patch{Name: &name})
			switch {
			case err == nil:
			case errcode.Has(err, errcode.StoreUnavailable):
				busy.Add(1)
			default:
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(busy.Load())/float64(b.N), "busy/op")
}
