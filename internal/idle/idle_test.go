package idle_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/backupstores/local"
	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/backuprepo"
	"github.com/svchost/svc/internal/backups"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/idle"
	"github.com/svchost/svc/internal/schema"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/internal/volumes"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler"
)

// Idle apps on a real store with the real scheduler (its stop), volumes
// and backups services (deletion with an on_delete backup into a real
// encrypted repository on local storage), and a fake clock. The edge is
// stood for by stamps (what edge.Proxy.Activity answers); an app runs a
// release written as a deploy would (the runtime plays no part: the
// reconciler is what stops a job, and it is not under test here).

var (
	ctx   = actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_1"})
	owner = authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: "usr_1", UserID: "usr_1"}}
	t0    = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	day   = idle.Day
)

// clock is the fake clock every service reads.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

// stamps stands for the edge's in-memory activity stamps.
type stamps struct {
	mu sync.Mutex
	m  map[string]time.Time
}

var _ idle.Stamps = (*stamps)(nil)

func (s *stamps) touch(appID string, at time.Time) { s.mu.Lock(); defer s.mu.Unlock(); s.m[appID] = at }
func (s *stamps) forget(appID string)              { s.mu.Lock(); defer s.mu.Unlock(); delete(s.m, appID) }
func (s *stamps) LastActivity(appID string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[appID]
}
func (s *stamps) Activity() map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]time.Time{}
	for k, v := range s.m {
		out[k] = v
	}
	return out
}

// host keeps volumes' data in a directory; pausing an app is a no-op.
type host struct{ dir string }

var (
	_ backups.Data   = host{}
	_ backups.Runner = host{}
)

func (h host) VolumePath(id string) string                       { return filepath.Join(h.dir, id) }
func (h host) HandOver(context.Context, string, string) error    { return nil }
func (h host) CanQuiesce(string) error                           { return nil }
func (h host) Restart(context.Context, string) (apps.App, error) { return apps.App{}, nil }
func (h host) Quiesce(context.Context, string) (func(), string, error) {
	return func() {}, "paused", nil
}

type fixture struct {
	dir    string
	store  *raftstore.Store
	clock  *clock
	stamps *stamps
	host   host
	apps   *apps.Service
	specs  *spec.Service
	vols   *volumes.Service
	backup *backups.Service
	sch    *scheduler.Service
	idle   *idle.Service
}

// open opens the store in dir (again after a restart) and builds the
// services over it, the edge's stamps empty as after a start.
func open(t testing.TB, dir string, c *clock) *fixture {
	t.Helper()
	store, err := raftstore.Open(raftstore.Config{NodeID: "n1", Dir: filepath.Join(dir, "store"), Tables: schema.Tables()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := store.ConsistentRead(rctx); err != nil {
		t.Fatalf("store did not become ready: %v", err)
	}
	f := &fixture{dir: dir, store: store, clock: c, stamps: &stamps{m: map[string]time.Time{}}, host: host{dir: filepath.Join(dir, "volumes")}}
	f.apps = apps.NewService(store, c.now)
	f.specs = spec.NewService(store, c.now)
	f.vols = volumes.NewService(store, c.now, nil)
	f.sch = scheduler.NewService(scheduler.Config{}, scheduler.Deps{Store: store, Specs: f.specs, Now: c.now})
	key, err := backups.LoadIdentity(filepath.Join(dir, "backup-key"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := local.New(filepath.Join(dir, "backups"))
	if err != nil {
		t.Fatal(err)
	}
	repo := backups.Over(backuprepo.New(st, backuprepo.Keys{Identity: key}, filepath.Join(dir, "restores")))
	f.backup = backups.New(backups.Deps{Store: store, Repo: func() (backups.Repo, error) { return repo, nil },
		Data: f.host, Runner: f.host, Volumes: f.vols, Now: c.now})
	f.idle = idle.New(idle.Deps{Store: store, Stamps: f.stamps, Releases: f.sch, Stopper: f.sch, Deleter: f.backup, Now: c.now})
	return f
}

func newFixture(t *testing.T) *fixture {
	return open(t, t.TempDir(), &clock{t: t0})
}

// deployed makes an app running the spec (YAML) as a deploy at now
// leaves it: the revision, its volumes' rows, the release and the state.
func (f *fixture) deployed(t testing.TB, name, doc string) string {
	t.Helper()
	a, err := f.apps.Create(ctx, owner, apps.New{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	d, err := spec.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.specs.Create(ctx, a.ID, d)
	if err != nil {
		t.Fatal(err)
	}
	now := f.clock.now()
	if _, err := f.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		cur, _, _ := apps.Apps.Get(r, a.ID)
		cur.State = apps.StateRunning
		_, ops := volumes.EnsureOps(r, a.ID, a.Slug, d, now)
		return append(ops, apps.Apps.Put(&cur), scheduler.Releases.Put(&scheduler.Release{
			AppID: a.ID, DeploymentID: "dep_" + name, SpecID: v.ID, Revision: v.Number, Runtime: "process", JobID: "dep_" + name, At: now,
		})), nil
	}); err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// at moves the clock to t0+d and runs the leader's pass.
func (f *fixture) check(d time.Duration) {
	f.clock.set(t0.Add(d))
	f.idle.CheckOnce(context.Background())
}

// appEvents are the app's events of one name, oldest first.
func (f *fixture) appEvents(name, appID string) []events.Event {
	items, _ := events.Events.List(f.store.Read(), raftstore.Query{})
	var out []events.Event
	for _, it := range items {
		if e := it.Value; e.Type == name && e.App != nil && e.App.ID == appID {
			out = append(out, e)
		}
	}
	return out
}

func (f *fixture) app(t *testing.T, id string) (apps.App, bool) {
	t.Helper()
	a, _, ok := apps.Apps.Get(f.store.Read(), id)
	return a, ok
}

// when reads a time from an event's data, however the store decoded it.
func when(t *testing.T, v any) time.Time {
	t.Helper()
	s, _ := v.(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("%v is not a time", v)
	}
	return at
}

func num(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	case int64:
		return int(n)
	}
	return -1
}

const site = "workloads:\n  web: {primary: true, build: {kind: static}}\n"

// TestIdleAppIsWarnedThenStopped: three idle days, the action stop. Two
// days after its deploy the owner is warned once (action, days, last
// activity, when); on the third the app is stopped through the
// scheduler's stop (meant to stay stopped, the system's app.stop with
// reason idle) with app.idle_stopped; further passes do not stop it
// again. Apps without a lifecycle, or with idle_days 0, are untouched.
// Started again, the start counts as activity.
func TestIdleAppIsWarnedThenStopped(t *testing.T) {
	f := newFixture(t)
	id := f.deployed(t, "idler", site+"lifecycle: {idle_days: 3}\n")
	plain := f.deployed(t, "plain", site)
	never := f.deployed(t, "never", site+"lifecycle: {idle_days: 0, idle_action: delete}\n")

	f.check(2*day - time.Minute)
	if n := len(f.appEvents("app.idle_warning", id)); n != 0 {
		t.Fatalf("%d warnings before the day before", n)
	}
	f.check(2 * day)
	f.check(2*day + time.Hour)
	warned := f.appEvents("app.idle_warning", id)
	if len(warned) != 1 {
		t.Fatalf("warnings = %+v; want one", warned)
	}
	w := warned[0].Data
	if w["action"] != "stop" || num(w["days"]) != 3 || !when(t, w["last_activity"]).Equal(t0) || !when(t, w["action_at"]).Equal(t0.Add(3*day)) {
		t.Errorf("the warning says %v; want stop after 3 days, last activity %s, action at %s", w, t0, t0.Add(3*day))
	}
	if a, _ := f.app(t, id); a.DesiredState != apps.DesiredRunning {
		t.Fatalf("the app after the warning is meant to be %s", a.DesiredState)
	}

	f.check(3 * day)
	a, _ := f.app(t, id)
	if a.DesiredState != apps.DesiredStopped {
		t.Fatalf("the app after its idle days is meant to be %s; want stopped", a.DesiredState)
	}
	stopped := f.appEvents("app.idle_stopped", id)
	if len(stopped) != 1 || num(stopped[0].Data["days"]) != 3 || !when(t, stopped[0].Data["last_activity"]).Equal(t0) {
		t.Fatalf("app.idle_stopped = %+v; want one, 3 days, last activity %s", stopped, t0)
	}
	if e := lastAudit(f, "app.stop", id); e == nil || e.PrincipalKind != "system" || e.Details["reason"] != "idle" {
		t.Errorf("the stop's audit entry = %+v; want the system's app.stop for idleness", e)
	}

	// A stopped app is not stopped again, nor warned.
	f.check(4 * day)
	f.check(10 * day)
	if n, m := len(f.appEvents("app.idle_stopped", id)), len(f.appEvents("app.idle_warning", id)); n != 1 || m != 1 {
		t.Errorf("after more passes: %d stops and %d warnings; want 1 and 1", n, m)
	}
	// Untouched: no lifecycle, idle_days 0.
	for _, other := range []string{plain, never} {
		a, ok := f.app(t, other)
		if !ok || a.DesiredState != apps.DesiredRunning || len(f.appEvents("app.idle_warning", other)) != 0 {
			t.Errorf("app %s without idle days: %+v (exists %v); want it running, never warned", other, a, ok)
		}
	}

	// Started again (day 10): the start is activity, so the next warning
	// comes two days later, not at once.
	if _, err := f.sch.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		a, _, _ := apps.Apps.Get(r, id)
		a.State = apps.StateRunning // the reconciler ran it
		return []raftstore.Op{apps.Apps.Put(&a)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	f.check(10*day + time.Hour)
	if a, _ := f.app(t, id); a.DesiredState != apps.DesiredRunning || len(f.appEvents("app.idle_warning", id)) != 1 {
		t.Fatalf("right after a start the app is meant to be %s, warned %d times; want running, still once",
			a.DesiredState, len(f.appEvents("app.idle_warning", id)))
	}
	f.check(12 * day)
	if n := len(f.appEvents("app.idle_warning", id)); n != 2 {
		t.Errorf("%d warnings two days after the start; want 2", n)
	}
}

func lastAudit(f *fixture, action, appID string) *audit.Entry {
	items, _ := audit.Entries.List(f.store.Read(), raftstore.Query{})
	var last *audit.Entry
	for _, it := range items {
		if e := it.Value; e.Action == action && e.AppID != nil && *e.AppID == appID {
			last = &e
		}
	}
	return last
}

// TestIdleAppWithVolumesIsWarnedThenDeletedWithABackup: two idle days,
// the action delete, an app with a volume holding data. After the warning
// the app is deleted as DELETE ?backup=true deletes: an on_delete backup
// of its volume first, completed, named by app.deleted with reason idle;
// its volume kept; its activity record gone. An app without volumes is
// deleted plainly (no backup named).
func TestIdleAppWithVolumesIsWarnedThenDeletedWithABackup(t *testing.T) {
	f := newFixture(t)
	id := f.deployed(t, "keeper", `
workloads:
  web: {primary: true, build: {kind: static}, mounts: [{volume: data, path: /data}]}
volumes: {data: {size_bytes: 1048576}}
lifecycle: {idle_days: 2, idle_action: delete}
`)
	bare := f.deployed(t, "bare", site+"lifecycle: {idle_days: 2, idle_action: delete}\n")
	vol := volumes.Attached(f.store.Read(), id)["data"]
	if err := os.MkdirAll(f.host.VolumePath(vol.ID), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.host.VolumePath(vol.ID), "notes"), []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}

	f.check(day)
	for _, app := range []string{id, bare} {
		if w := f.appEvents("app.idle_warning", app); len(w) != 1 || w[0].Data["action"] != "delete" {
			t.Fatalf("warnings of %s = %+v; want one of a deletion", app, w)
		}
		if _, _, ok := idle.Activities.Get(f.store.Read(), app); !ok {
			t.Fatalf("no activity record remembers the warning of %s", app)
		}
	}
	f.check(2 * day)
	if _, ok := f.app(t, id); ok {
		t.Fatal("the idle app still exists after its idle days")
	}
	deleted := f.appEvents("app.deleted", id)
	if len(deleted) != 1 || deleted[0].Data["reason"] != "idle" {
		t.Fatalf("app.deleted = %+v; want one with reason idle", deleted)
	}
	bid, _ := deleted[0].Data["backup_id"].(string)
	b, err := f.backup.Get(bid)
	if err != nil || b.Kind != backups.KindOnDelete || b.State != backups.StateCompleted || len(b.Volumes) != 1 {
		t.Fatalf("the backup app.deleted names (%q): %+v, %v; want a completed on_delete backup of the volume", bid, b, err)
	}
	if v, err := f.backup.Verify(ctx, bid); err != nil || !v.OK {
		t.Errorf("the on_delete backup does not verify: %+v, %v", v, err)
	}
	if kept, _, ok := volumes.Volumes.Get(f.store.Read(), vol.ID); !ok || kept.AppGoneAt == nil || kept.DiscardAt != nil {
		t.Errorf("the volume after the deletion: %+v (exists %v); want it kept", kept, ok)
	}
	if e := lastAudit(f, "app.delete", id); e == nil || e.PrincipalKind != "system" {
		t.Errorf("the deletion's audit entry = %+v; want the system's", e)
	}
	if _, ok := f.app(t, bare); ok {
		t.Fatal("the idle app without volumes still exists")
	}
	if d := f.appEvents("app.deleted", bare); len(d) != 1 || d[0].Data["reason"] != "idle" || d[0].Data["backup_id"] != nil {
		t.Errorf("app.deleted of the app without volumes = %+v; want reason idle and no backup", d)
	}
	for _, app := range []string{id, bare} {
		if row, _, ok := idle.Activities.Get(f.store.Read(), app); ok {
			t.Errorf("the activity record of deleted %s is left: %+v", app, row)
		}
	}
}

// TestActivityAfterTheWarningPutsTheActionOff: a request after the
// warning, stored by a flush, makes the warning stale: no action at the
// time told; the app is warned anew a day before its idle days counted
// from that request, and stopped then.
func TestActivityAfterTheWarningPutsTheActionOff(t *testing.T) {
	f := newFixture(t)
	id := f.deployed(t, "busy", site+"lifecycle: {idle_days: 3, idle_action: stop}\n")
	f.check(2 * day)
	if n := len(f.appEvents("app.idle_warning", id)); n != 1 {
		t.Fatalf("%d warnings; want 1", n)
	}
	request := t0.Add(2*day + 2*time.Hour)
	f.stamps.touch(id, request)
	f.clock.set(request.Add(time.Minute))
	if err := f.idle.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f.stamps.forget(id) // as if another server had taken the request

	f.check(3 * day)
	f.check(4*day + time.Hour)
	if a, _ := f.app(t, id); a.DesiredState != apps.DesiredRunning || len(f.appEvents("app.idle_stopped", id)) != 0 {
		t.Fatalf("the app was stopped though it had a request after the warning")
	}
	if n := len(f.appEvents("app.idle_warning", id)); n != 1 {
		t.Fatalf("%d warnings before the day before the new idle days; want 1", n)
	}
	f.check(4*day + 2*time.Hour)
	warned := f.appEvents("app.idle_warning", id)
	if len(warned) != 2 || !when(t, warned[1].Data["last_activity"]).Equal(request.Truncate(time.Minute)) ||
		!when(t, warned[1].Data["action_at"]).Equal(request.Add(3*day)) {
		t.Fatalf("warnings = %+v; want a second one about the request at %s", warned, request)
	}
	f.check(5*day + 2*time.Hour)
	if a, _ := f.app(t, id); a.DesiredState != apps.DesiredStopped {
		t.Errorf("the app three idle days after its last request is meant to be %s; want stopped", a.DesiredState)
	}
}

// TestActivitySurvivesARestart: the edge's stamps are stored coarsely
// (one write per app per hour of movement; at shutdown, whatever moved)
// and read back after the store is closed and opened again with the
// edge's memory empty, so a restart does not make an active app look
// idle.
func TestActivitySurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: t0}
	f := open(t, dir, c)
	id := f.deployed(t, "survivor", site+"lifecycle: {idle_days: 3}\n")

	request := t0.Add(day + 30*time.Second)
	f.stamps.touch(id, request)
	c.set(request.Add(time.Minute))
	if err := f.idle.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	row, meta, ok := idle.Activities.Get(f.store.Read(), id)
	if !ok || !row.Last.Equal(request.Truncate(time.Minute)) {
		t.Fatalf("the stored activity = %+v (exists %v); want %s", row, ok, request.Truncate(time.Minute))
	}
	// Cheap: a stamp that moved less than an hour is not written.
	f.stamps.touch(id, request.Add(59*time.Minute))
	if err := f.idle.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, again, _ := idle.Activities.Get(f.store.Read(), id); again.ModifyIndex != meta.ModifyIndex {
		t.Errorf("a stamp 59 minutes on was written (index %d → %d)", meta.ModifyIndex, again.ModifyIndex)
	}
	// The server shuts down: what moved at all is written.
	if err := f.idle.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	latest := request.Add(59 * time.Minute).Truncate(time.Minute)
	if err := f.store.Close(); err != nil {
		t.Fatal(err)
	}

	f = open(t, dir, c)
	if got := f.stamps.LastActivity(id); !got.IsZero() {
		t.Fatalf("the edge's memory after a restart holds %s", got)
	}
	// Without the stored request the warning would be due at day 2 and
	// the stop at day 3; with it, about an hour after day 3, and day 4.
	f.check(3*day + 58*time.Minute)
	if n := len(f.appEvents("app.idle_warning", id)); n != 0 {
		t.Fatalf("%d warnings after the restart; the stored request should put them off", n)
	}
	f.check(3*day + time.Hour)
	if w := f.appEvents("app.idle_warning", id); len(w) != 1 || !when(t, w[0].Data["last_activity"]).Equal(latest) {
		t.Fatalf("warnings = %+v; want one about the request stored at shutdown (%s)", w, latest)
	}

	// A plain deletion takes the record with it.
	if err := f.vols.DeleteApp(ctx, id, apps.Decision{Force: true}, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := idle.Activities.Get(f.store.Read(), id); ok {
		t.Error("the activity record outlived its app")
	}
}

// BenchmarkCheckAndFlush1000Apps: the leader's pass over 1,000 running
// apps with idle days, nothing due (each reads its release's spec and its
// record), and a flush of 1,000 stamps none of which moved an hour (the
// common case: a read, no write).
func BenchmarkCheckAndFlush1000Apps(b *testing.B) {
	f := open(b, b.TempDir(), &clock{t: t0})
	for i := range 1000 {
		id := f.deployed(b, "app-"+strconv.Itoa(i), site+"lifecycle: {idle_days: 30}\n")
		f.stamps.touch(id, t0)
	}
	if err := f.idle.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	f.clock.set(t0.Add(day))
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			f.idle.CheckOnce(context.Background())
		}
	})
	b.Run("flush", func(b *testing.B) {
		for b.Loop() {
			if err := f.idle.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
