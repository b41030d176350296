package adapters_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

// flaky is an instance whose health the test sets.
type flaky struct{ failing atomic.Bool }

var _ adapters.Instance = (*flaky)(nil)

func (f *flaky) Check(context.Context) error {
	if f.failing.Load() {
		return errcode.New(errcode.AdapterUnavailable, "backend down")
	}
	return nil
}
func (f *flaky) Capabilities() map[string]any { return map[string]any{"ok": true} }

func newService(t *testing.T, inst *flaky, opened *atomic.Int32) (*adapters.Service, *raftstore.Store) {
	t.Helper()
	store := raftstoretest.Open(t, adapters.Adapters, adapters.Healths, keyring.Keys, audit.Entries, events.Events, events.Cursors)
	kek, err := keyring.LoadKEK(filepath.Join(t.TempDir(), "kek"))
	if err != nil {
		t.Fatal(err)
	}
	open := func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
		opened.Add(1)
		if c.Credentials["password"] == "refuse" {
			return nil, errors.New("refused to open")
		}
		return inst, nil
	}
	svc, err := adapters.New(adapters.Deps{Store: store, Ring: keyring.New(store, kek, time.Now), Now: func() time.Time { return time.Now().UTC() },
		Kinds: []adapters.Kind{
			{Category: "backup", Name: "local", Default: true, DefaultID: "adp_builtin_backup", Open: open},
			{Category: "backup", Name: "s3", Settings: []adapters.Setting{{Name: "bucket", Required: true}, {Name: "password", Credential: true}}, Open: open},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return svc, store
}

var ctx = actor.With(context.Background(), actor.System)

func TestTheMostRecentlyConfiguredAdapterIsPrimary(t *testing.T) {
	var opened atomic.Int32
	svc, _ := newService(t, &flaky{}, &opened)
	set := svc.Load(ctx)
	if p, ok := set.Primary("backup"); !ok || p.Adapter.ID != "adp_builtin_backup" || !p.Virtual {
		t.Fatalf("primary before configuring = %+v", p)
	}
	pw := "pw"
	v, created, err := svc.Configure(ctx, adapters.Request{Category: "backup", Kind: "s3", Config: map[string]any{"bucket": "b"}, Credentials: map[string]*string{"password": &pw}})
	if err != nil || !created {
		t.Fatal(err)
	}
	if l := svc.List(); !l.RestartNeeded {
		t.Fatal("a new adapter is not pending a restart")
	}
	set = svc.Load(ctx)
	if p, _ := set.Primary("backup"); p.Adapter.ID != v.AdapterID || p.Instance == nil {
		t.Fatalf("primary after configuring s3 = %+v", p)
	}
	time.Sleep(2 * time.Millisecond)
	if _, _, err := svc.Configure(ctx, adapters.Request{Category: "backup", Kind: "local"}); err != nil {
		t.Fatal(err)
	}
	set = svc.Load(ctx)
	if p, _ := set.Primary("backup"); p.Adapter.ID != "adp_builtin_backup" || p.Virtual {
		t.Fatalf("primary after configuring the default again = %+v", p)
	}
	if len(set.Of("backup")) != 2 {
		t.Fatalf("loaded = %d", len(set.Of("backup")))
	}
}

func TestHealthChangesAreRecordedOnceEach(t *testing.T) {
	var opened atomic.Int32
	inst := &flaky{}
	svc, store := newService(t, inst, &opened)
	svc.Load(ctx)
	count := func(name string) int {
		items, _ := events.Events.List(store.Read(), raftstore.Query{})
		n := 0
		for _, e := range items {
			if e.Value.Type == name {
				n++
				if e.Value.Data["adapter_id"] != "adp_builtin_backup" || e.Value.Data["category"] != "backup" {
					t.Fatalf("%s data = %v", name, e.Value.Data)
				}
				if name == "adapter.unhealthy" && e.Value.Data["reason"] == "" {
					t.Fatal("adapter.unhealthy without a reason")
				}
			}
		}
		return n
	}
	step := func(failing bool, unhealthy, recovered int) {
		t.Helper()
		inst.failing.Store(failing)
		if err := svc.CheckHealth(ctx); err != nil {
			t.Fatal(err)
		}
		if u, r := count("adapter.unhealthy"), count("adapter.recovered"); u != unhealthy || r != recovered {
			t.Fatalf("after a check (failing=%v): %d unhealthy, %d recovered; want %d, %d", failing, u, r, unhealthy, recovered)
		}
	}
	step(false, 0, 0) // healthy from the start: nothing to announce
	step(true, 1, 0)
	step(true, 1, 0) // still failing: announced once
	step(false, 1, 1)
	step(false, 1, 1)
	step(true, 2, 1)
	h, _, ok := adapters.Healths.Get(store.Read(), "adp_builtin_backup")
	if !ok || h.Healthy || h.Reason != "ADAPTER_UNAVAILABLE: backend down" {
		t.Fatalf("recorded health = %+v", h)
	}
	if l := svc.List(); l.Items[0].Health == nil || l.Items[0].Health.Healthy {
		t.Fatalf("GET /adapters health = %+v", l.Items[0].Health)
	}
}

func TestAnAdapterThatDoesNotOpenIsReportedNotFatal(t *testing.T) {
	var opened atomic.Int32
	svc, store := newService(t, &flaky{}, &opened)
	refuse := "refuse"
	v, _, err := svc.Configure(ctx, adapters.Request{Category: "backup", Kind: "s3", Config: map[string]any{"bucket": "b"}, Credentials: map[string]*string{"password": &refuse}})
	if err != nil {
		t.Fatal(err)
	}
	set := svc.Load(ctx)
	l, ok := set.Get(v.AdapterID)
	if !ok || l.Instance != nil || l.Err == nil {
		t.Fatalf("loaded = %+v", l)
	}
	var view adapters.View
	for _, it := range svc.List().Items {
		if it.AdapterID == v.AdapterID {
			view = it
		}
	}
	if view.Loaded || view.Error == nil {
		t.Fatalf("view = %+v", view)
	}
	if err := svc.CheckHealth(ctx); err != nil {
		t.Fatal(err)
	}
	if h, _, ok := adapters.Healths.Get(store.Read(), v.AdapterID); ok && h.Healthy {
		t.Fatal("an adapter that did not open is healthy")
	}
}
