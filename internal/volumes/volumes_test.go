package volumes_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/idle"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/security"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/internal/volumes"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

var ctx = actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_1"})

// member may edit apps' specs; operator also holds install.backup.manage.
var (
	member   = authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: "usr_1", UserID: "usr_1"}}
	operator = authz.Caller{Principal: member.Principal, Install: authz.SetOf(authz.InstallBackupManage)}
)

type fixture struct {
	store *raftstore.Store
	svc   *volumes.Service
	specs *spec.Service
	apps  *apps.Service
	data  *fakeData
}

// fakeData stands for the runtime's side: what each volume holds, and
// which were removed.
type fakeData struct {
	mu      sync.Mutex
	used    map[string]int64
	removed []string
}

var _ volumes.Data = (*fakeData)(nil)

func (d *fakeData) UsedBytes(_ context.Context, id string) (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.used[id]
	return n, ok
}

func (d *fakeData) RemoveVolume(id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.removed = append(d.removed, id)
	delete(d.used, id)
	return nil
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	tables := append([]raftstore.Def{apps.Apps, volumes.Volumes, idle.Activities, security.Results, audit.Entries, events.Events, events.Cursors, spec.Revisions, spec.Heads, secrets.Secrets}, identity.Tables()...)
	store := raftstoretest.Open(t, tables...)
	now := func() time.Time { return time.Now().UTC() }
	data := &fakeData{used: map[string]int64{}}
	return &fixture{store: store, data: data, svc: volumes.NewService(store, now, data), specs: spec.NewService(store, now), apps: apps.NewService(store, now)}
}

func (f *fixture) app(t *testing.T, yaml string) string {
	t.Helper()
	return f.appNamed(t, "Vol", yaml)
}

func (f *fixture) appNamed(t *testing.T, name, yaml string) string {
	t.Helper()
	a, err := f.apps.Create(ctx, member, apps.New{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if yaml != "" {
		doc, err := spec.Parse([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.specs.Create(ctx, a.ID, doc); err != nil {
			t.Fatal(err)
		}
	}
	return a.ID
}

const twoWorkloads = `
workloads:
  web: {primary: true, build: {kind: go}, run: {command: [./app], port: 8080}, mounts: [{volume: data, path: /data}]}
  worker: {build: {kind: go}, run: {command: [./worker]}, mounts: [{volume: data, path: /srv/data}]}
volumes: {data: {size_bytes: 1073741824}}
`

func TestDeclareAVolume(t *testing.T) {
	f := newFixture(t)
	appID := f.app(t, twoWorkloads)
	list, err := f.svc.List(ctx, appID)
	if err != nil || len(list) != 1 || list[0].Name != "data" || len(list[0].Mounts) != 2 ||
		list[0].Mounts[0] != (volumes.Mount{Workload: "web", Path: "/data"}) || list[0].Mounts[1].Workload != "worker" {
		t.Fatalf("list = %+v, %v", list, err)
	}

	c, err := f.svc.Create(ctx, member, appID, volumes.Request{Name: "uploads", SizeBytes: 1 << 20, Path: "/var/uploads"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Spec.Number != 2 || c.Volume.Name != "uploads" || c.Volume.SizeBytes != 1<<20 ||
		len(c.Volume.Mounts) != 1 || c.Volume.Mounts[0] != (volumes.Mount{Workload: "web", Path: "/var/uploads"}) {
		t.Fatalf("created = %+v", c)
	}
	// A new revision, not pinned: nothing pinned yet, so the list reads
	// the latest, which has it.
	v, err := f.specs.Get(appID, 2)
	if err != nil || v.Pinned || v.Spec.Volumes["uploads"].SizeBytes != 1<<20 || len(v.Spec.Workloads["web"].Mounts) != 2 || v.CreatedBy != "usr_1" {
		t.Fatalf("revision 2 = %+v, %v", v, err)
	}
	prev, _ := f.specs.Get(appID, 1)
	if len(prev.Spec.Volumes) != 1 || len(prev.Spec.Workloads["web"].Mounts) != 1 {
		t.Fatalf("revision 1 changed: %+v", prev.Spec)
	}
	if list, _ := f.svc.List(ctx, appID); len(list) != 2 {
		t.Errorf("list = %+v", list)
	}

	// With revision 1 pinned, the list shows what the next deploy runs.
	if _, err := f.specs.Pin(ctx, appID, 1); err != nil {
		t.Fatal(err)
	}
	if list, _ := f.svc.List(ctx, appID); len(list) != 1 {
		t.Errorf("list with revision 1 pinned = %+v", list)
	}
	// The next one builds on the latest (2), not on the pinned one.
	c, err = f.svc.Create(ctx, member, appID, volumes.Request{Name: "cache", SizeBytes: 10 << 40, Workload: "worker", Path: "/cache"})
	if err != nil || c.Spec.Number != 3 {
		t.Fatalf("%+v, %v", c, err)
	}
	v, _ = f.specs.Get(appID, 3)
	if len(v.Spec.Volumes) != 3 || v.Pinned {
		t.Errorf("revision 3 volumes = %v", v.Spec.Volumes)
	}

	items, _ := audit.Entries.List(f.store.Read(), raftstore.Query{})
	n := 0
	for _, it := range items {
		if it.Value.Action == "volume.create" {
			n++
			if it.Value.Details["name"] == nil || it.Value.Details["spec_revision"] == nil {
				t.Errorf("details = %v", it.Value.Details)
			}
		}
		if it.Value.Action == "spec.create" && it.Value.Details["revision"] != float64(1) && it.Value.Details["revision"] != uint64(1) {
			t.Errorf("declaring a volume also wrote %s %v", it.Value.Action, it.Value.Details)
		}
	}
	if n != 2 {
		t.Errorf("%d volume.create entries", n)
	}
}

func TestDeclareAVolumeIsValidated(t *testing.T) {
	f := newFixture(t)
	appID := f.app(t, twoWorkloads)
	noSpec := f.app(t, "")
	ok := volumes.Request{Name: "more", SizeBytes: 1 << 30, Path: "/more"}
	with := func(mod func(*volumes.Request)) volumes.Request { r := ok; mod(&r); return r }
	tests := []struct {
		name  string
		app   string
		req   volumes.Request
		code  errcode.Code
		field string
	}{
		{"no app", "app_none", ok, errcode.NotFound, ""},
		{"no spec", noSpec, ok, errcode.StateInvalid, ""},
		{"bad name", appID, with(func(r *volumes.Request) { r.Name = "Data" }), errcode.ValidInvalid, "name"},
		{"long name", appID, with(func(r *volumes.Request) { r.Name = "a234567890123456789012345678901x" }), errcode.ValidInvalid, "name"},
		{"too small", appID, with(func(r *volumes.Request) { r.SizeBytes = 1<<20 - 1 }), errcode.ValidInvalid, "size_bytes"},
		{"too large", appID, with(func(r *volumes.Request) { r.SizeBytes = 10<<40 + 1 }), errcode.ValidInvalid, "size_bytes"},
		{"relative path", appID, with(func(r *volumes.Request) { r.Path = "data" }), errcode.ValidInvalid, "path"},
		{"unclean path", appID, with(func(r *volumes.Request) { r.Path = "/a/../b" }), errcode.ValidInvalid, "path"},
		{"root", appID, with(func(r *volumes.Request) { r.Path = "/" }), errcode.ValidInvalid, "path"},
		{"declared already", appID, with(func(r *volumes.Request) { r.Name = "data" }), errcode.StateInvalid, "name"},
		{"no such workload", appID, with(func(r *volumes.Request) { r.Workload = "cron" }), errcode.ValidInvalid, "workload"},
		{"path mounted already", appID, with(func(r *volumes.Request) { r.Path = "/data" }), errcode.ValidInvalid, "path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.svc.Create(ctx, member, tt.app, tt.req)
			e, isCoded := errcode.As(err)
			if !isCoded || e.Code != tt.code {
				t.Fatalf("err = %v, want %s", err, tt.code)
			}
			if tt.field != "" && e.Details["field"] != tt.field {
				t.Errorf("field = %v, want %s", e.Details["field"], tt.field)
			}
		})
	}
	if h, _, _ := spec.Heads.Get(f.store.Read(), appID); h.Latest != 1 {
		t.Errorf("refusals wrote revisions: latest %d", h.Latest)
	}
	if list, err := f.svc.List(ctx, noSpec); err != nil || len(list) != 0 {
		t.Errorf("list without a spec = %v, %v", list, err)
	}
}

// Concurrent declarations of different volumes are all applied, one after
// another, each over the revision the one before wrote: distinct revision
// numbers, none lost, and the latest revision declares every volume. Of
// concurrent declarations of one name, one is applied and the others are
// STATE_INVALID (the spec declares it already: their own precondition).
func TestConcurrentDeclarations(t *testing.T) {
	f := newFixture(t)
	appID := f.app(t, twoWorkloads)
	const n = 12
	revs := make([]uint64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("v%d", i)
			var c volumes.Created
			c, errs[i] = f.svc.Create(ctx, member, appID, volumes.Request{Name: name, SizeBytes: 1 << 20, Path: "/" + name})
			revs[i] = c.Spec.Number
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for i, err := range errs {
		if err != nil || seen[revs[i]] || revs[i] < 2 || revs[i] > n+1 {
			t.Errorf("declare v%d: revision %d, %v", i, revs[i], err)
		}
		seen[revs[i]] = true
	}
	list, err := f.svc.List(ctx, appID)
	if err != nil || len(list) != n+1 {
		t.Fatalf("the latest revision declares %d volumes (%v); want %d", len(list), err, n+1)
	}

	dup := make([]error, 6)
	for i := range dup {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, dup[i] = f.svc.Create(ctx, member, appID, volumes.Request{Name: "dup", SizeBytes: 1 << 20, Path: fmt.Sprintf("/dup%d", i)})
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range dup {
		switch e, _ := errcode.As(err); {
		case err == nil:
			won++
		case e == nil || e.Code != errcode.StateInvalid || e.Details["field"] != "name":
			t.Errorf("a second declaration of one name: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d declarations of one name applied; want 1", won)
	}
}

// TestVolumesAreResources: a declared volume has a vol_ ID and its use;
// deleting the app keeps it (listed, with app_gone_at), a new app of the
// same name takes it over (with install.backup.manage only), a kept one is
// deleted explicitly and the sweep removes its data, and force discards.
func TestVolumesAreResources(t *testing.T) {
	f := newFixture(t)
	appID := f.app(t, twoWorkloads)
	slug := appSlug(t, f, appID)
	c, err := f.svc.Create(ctx, member, appID, volumes.Request{Name: "uploads", Path: "/var/uploads"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Volume.ID == nil || len(*c.Volume.ID) < 5 || (*c.Volume.ID)[:4] != "vol_" || c.Volume.SizeBytes != volumes.DefaultSizeBytes {
		t.Fatalf("created = %+v", c.Volume)
	}
	uploads := *c.Volume.ID
	f.data.used[uploads] = 4096
	list, _ := f.svc.List(ctx, appID)
	if len(list) != 2 || list[0].ID == nil || list[1].ID == nil || *list[1].ID != uploads || list[1].UsedBytes == nil || *list[1].UsedBytes != 4096 || list[0].UsedBytes != nil {
		t.Fatalf("list = %+v (declaring one made the rows of every volume of the revision)", list)
	}
	// A volume of a spec written directly has no row until a deploy makes
	// it (EnsureOps, from the scheduler); then it has, once.
	direct := f.appNamed(t, "Direct", twoWorkloads)
	if list, _ := f.svc.List(ctx, direct); len(list) != 1 || list[0].ID != nil || list[0].CreatedAt != nil {
		t.Fatalf("list before a deploy = %+v", list)
	}
	doc := latestDoc(t, f, direct)
	if _, err := f.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		_, ops := volumes.EnsureOps(r, direct, "direct", doc, time.Now())
		return ops, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := volumes.Attached(f.store.Read(), direct); len(got) != 1 || got["data"].ID == "" {
		t.Fatalf("attached = %+v", got)
	}
	if _, ops := volumes.EnsureOps(f.store.Read(), direct, "direct", doc, time.Now()); len(ops) != 0 {
		t.Errorf("EnsureOps again wrote %d ops", len(ops))
	}

	// Deleting the app keeps both.
	if err := f.svc.DeleteApp(ctx, appID, apps.Decision{Storage: true, Backup: true}, "bkp_X"); err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, v := range f.svc.ListAll(ctx) {
		if v.AppID == appID && v.AppGoneAt != nil {
			kept++
		}
	}
	if kept != 2 {
		t.Fatalf("kept = %+v", f.svc.ListAll(ctx))
	}
	for _, v := range f.svc.ListAll(ctx) {
		if v.AppID == appID && v.AppSlug != slug {
			t.Errorf("a kept volume's app_slug %q, want %q", v.AppSlug, slug)
		}
	}
	if deleted := lastEvent(t, f, "app.deleted"); deleted["backup_id"] != "bkp_X" || deleted["volumes_discarded"] != false {
		t.Errorf("app.deleted = %v", deleted)
	}

	// A new app of the same name takes "uploads" over; a member may not.
	again := f.app(t, twoWorkloads)
	if appSlug(t, f, again) != slug {
		t.Fatalf("the new app's slug %q, want %q", appSlug(t, f, again), slug)
	}
	req := volumes.Request{Name: "files", Path: "/files", VolumeID: uploads}
	if _, err := f.svc.Create(ctx, member, again, req); !errcode.Has(err, errcode.PermVerbRequired) {
		t.Fatalf("a member taking over: %v", err)
	}
	other := f.appNamed(t, "Other", twoWorkloads)
	if _, err := f.svc.Create(ctx, operator, other, req); !errcode.Has(err, errcode.StateInvalid) {
		t.Fatalf("another app's slug taking over: %v", err)
	}
	taken, err := f.svc.Create(ctx, operator, again, req)
	if err != nil || *taken.Volume.ID != uploads || taken.Volume.SizeBytes != volumes.DefaultSizeBytes {
		t.Fatalf("take over = %+v, %v", taken, err)
	}
	if got := volumes.Attached(f.store.Read(), again); got["files"].ID != uploads {
		t.Errorf("attached after take over = %+v", got)
	}
	if _, err := f.svc.Create(ctx, operator, again, volumes.Request{Name: "more", Path: "/more", VolumeID: uploads}); !errcode.Has(err, errcode.StateInvalid) {
		t.Errorf("taking a live volume: %v", err)
	}

	// The other kept one ("data") is deleted explicitly; a live one is not.
	var data string
	for _, v := range f.svc.ListAll(ctx) {
		if v.Name == "data" && v.AppGoneAt != nil {
			data = *v.ID
		}
	}
	if err := f.svc.Delete(ctx, uploads, nil); !errcode.Has(err, errcode.StateInvalid) {
		t.Errorf("deleting a live volume: %v", err)
	}
	if err := f.svc.Delete(ctx, data, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Delete(ctx, data, nil); !errcode.Has(err, errcode.NotFound) {
		t.Errorf("deleting it twice: %v", err)
	}
	if err := f.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := volumes.Volumes.Get(f.store.Read(), data); ok || len(f.data.removed) != 1 || f.data.removed[0] != data {
		t.Errorf("after the sweep: row kept %v, removed %v", ok, f.data.removed)
	}

	// force discards: the rows are marked and the sweep removes the data.
	if err := f.svc.DeleteApp(ctx, again, apps.Decision{Storage: true, Force: true}, ""); err != nil {
		t.Fatal(err)
	}
	if deleted := lastEvent(t, f, "app.deleted"); deleted["backup_id"] != nil || deleted["volumes_discarded"] != true {
		t.Errorf("app.deleted = %v", deleted)
	}
	if err := f.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := volumes.Volumes.Get(f.store.Read(), uploads); ok || len(f.data.removed) != 2 || f.data.removed[1] != uploads {
		t.Errorf("after force: row kept %v, removed %v", ok, f.data.removed)
	}
	for _, v := range f.svc.ListAll(ctx) {
		if *v.ID == uploads {
			t.Errorf("a discarded volume is listed: %+v", v)
		}
	}
}

func appSlug(t *testing.T, f *fixture, id string) string {
	t.Helper()
	a, _, ok := apps.Apps.Get(f.store.Read(), id)
	if !ok {
		t.Fatalf("no app %s", id)
	}
	return a.Slug
}

func latestDoc(t *testing.T, f *fixture, appID string) spec.Document {
	t.Helper()
	h, _, _ := spec.Heads.Get(f.store.Read(), appID)
	rev, ok := spec.RevisionAt(f.store.Read(), appID, h.Latest)
	if !ok {
		t.Fatal("no revision")
	}
	doc, err := rev.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func lastEvent(t *testing.T, f *fixture, name string) map[string]any {
	t.Helper()
	items, _ := events.Events.List(f.store.Read(), raftstore.Query{})
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Value.Type == name {
			return items[i].Value.Data
		}
	}
	t.Fatalf("no %s event", name)
	return nil
}
