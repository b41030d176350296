package scheduler_test

import (
	"testing"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/raftstore"
)

// TestStopBecause: the system's stop with a reason (what idle apps use)
// writes nothing when its caller's check says no, and otherwise, in one
// write, the app meant to be stopped, the audit entry of app.stop with
// the reason and the caller's ops; an app meant to be stopped already is
// not stopped again (the check is not even asked).
func TestStopBecause(t *testing.T) {
	f := newFixture(t, options{noWorkers: true})
	appID := f.app(t, webSpec)
	asked := 0
	emit := func(yes bool) func(*raftstore.Reader, apps.App) ([]raftstore.Op, bool, error) {
		return func(_ *raftstore.Reader, a apps.App) ([]raftstore.Op, bool, error) {
			asked++
			return []raftstore.Op{events.Emit(alice, time.Now(), "app.idle_stopped", &events.AppRef{ID: a.ID, Name: a.Name, Slug: a.Slug}, "app", a.ID,
				map[string]any{"days": 1, "last_activity": a.CreatedAt})}, yes, nil
		}
	}
	stopped, err := f.sch.StopBecause(alice, appID, "idle", emit(false))
	if a, _ := f.apps.Get(appID); err != nil || stopped || a.DesiredState != apps.DesiredRunning || len(f.events(t, "app.idle_stopped")) != 0 {
		t.Fatalf("declined: stopped %v, %v, desired %s; want nothing written", stopped, err, a.DesiredState)
	}
	stopped, err = f.sch.StopBecause(alice, appID, "idle", emit(true))
	if a, _ := f.apps.Get(appID); err != nil || !stopped || a.DesiredState != apps.DesiredStopped || len(f.events(t, "app.idle_stopped")) != 1 {
		t.Fatalf("stopped %v, %v, desired %s, %d events; want the app meant to be stopped with the caller's event", stopped, err, a.DesiredState, len(f.events(t, "app.idle_stopped")))
	}
	if e := stopAudit(t, f, appID); e == nil || e.Details["reason"] != "idle" || e.Details["to"] != apps.DesiredStopped {
		t.Errorf("the stop's audit entry = %+v; want app.stop with reason idle", e)
	}
	before := asked
	stopped, err = f.sch.StopBecause(alice, appID, "idle", emit(true))
	if err != nil || stopped || asked != before || len(f.events(t, "app.idle_stopped")) != 1 {
		t.Errorf("again: stopped %v, %v, asked %d more times; want nothing done", stopped, err, asked-before)
	}
}
