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
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/internal/volumes"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

var ctx = actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_1"})

type fixture struct {
	store *raftstore.Store
	svc   *volumes.Service
	specs *spec.Service
	apps  *apps.Service
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	tables := append([]raftstore.Def{apps.Apps, audit.Entries, events.Events, events.Cursors, spec.Revisions, spec.Heads, secrets.Secrets}, identity.Tables()...)
	store := raftstoretest.Open(t, tables...)
	now := func() time.Time { return time.Now().UTC() }
	return &fixture{store: store, svc: volumes.NewService(store, now), specs: spec.NewService(store, now), apps: apps.NewService(store, now)}
}

func (f *fixture) app(t *testing.T, yaml string) string {
	t.Helper()
	a, err := f.apps.Create(ctx, authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: "usr_1", UserID: "usr_1"}}, apps.New{Name: "Vol"})
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
	list, err := f.svc.List(appID)
	if err != nil || len(list) != 1 || list[0].Name != "data" || len(list[0].Mounts) != 2 ||
		list[0].Mounts[0] != (volumes.Mount{Workload: "web", Path: "/data"}) || list[0].Mounts[1].Workload != "worker" {
		t.Fatalf("list = %+v, %v", list, err)
	}

	c, err := f.svc.Create(ctx, appID, volumes.Request{Name: "uploads", SizeBytes: 1 << 20, Path: "/var/uploads"})
	if err != nil {
		t.Fatal(err)
	}
	if c.SpecRevision != 2 || c.Volume.Name != "uploads" || c.Volume.SizeBytes != 1<<20 ||
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
	if list, _ := f.svc.List(appID); len(list) != 2 {
		t.Errorf("list = %+v", list)
	}

	// With revision 1 pinned, the list shows what the next deploy runs.
	if _, err := f.specs.Pin(ctx, appID, 1); err != nil {
		t.Fatal(err)
	}
	if list, _ := f.svc.List(appID); len(list) != 1 {
		t.Errorf("list with revision 1 pinned = %+v", list)
	}
	// The next one builds on the latest (2), not on the pinned one.
	c, err = f.svc.Create(ctx, appID, volumes.Request{Name: "cache", SizeBytes: 10 << 40, Workload: "worker", Path: "/cache"})
	if err != nil || c.SpecRevision != 3 {
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
			_, err := f.svc.Create(ctx, tt.app, tt.req)
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
	if list, err := f.svc.List(noSpec); err != nil || len(list) != 0 {
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
			c, errs[i] = f.svc.Create(ctx, appID, volumes.Request{Name: name, SizeBytes: 1 << 20, Path: "/" + name})
			revs[i] = c.SpecRevision
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
	list, err := f.svc.List(appID)
	if err != nil || len(list) != n+1 {
		t.Fatalf("the latest revision declares %d volumes (%v); want %d", len(list), err, n+1)
	}

	dup := make([]error, 6)
	for i := range dup {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, dup[i] = f.svc.Create(ctx, appID, volumes.Request{Name: "dup", SizeBytes: 1 << 20, Path: fmt.Sprintf("/dup%d", i)})
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
