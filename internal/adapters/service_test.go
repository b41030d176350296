package adapters_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
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
	return newServiceOf(t, nil, func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
		opened.Add(1)
		if c.Credentials["password"] == "refuse" {
			return nil, errors.New("refused to open")
		}
		return inst, nil
	})
}

// newServiceOf is a service over a real store with a built-in backup kind
// and an s3 kind (a required bucket, a password credential) that open,
// and whose dependents are deps.
func newServiceOf(t *testing.T, deps adapters.DependentsFunc, open func(context.Context, adapters.Config) (adapters.Instance, error)) (*adapters.Service, *raftstore.Store) {
	t.Helper()
	store := raftstoretest.Open(t, adapters.Adapters, adapters.Healths, keyring.Keys, audit.Entries, events.Events, events.Cursors)
	kek, err := keyring.LoadKEK(filepath.Join(t.TempDir(), "kek"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := adapters.New(adapters.Deps{Store: store, Ring: keyring.New(store, kek, time.Now), Now: func() time.Time { return time.Now().UTC() },
		Dependents: deps,
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

// bucketInstance is an s3 instance that remembers the configuration it
// was opened with, and whether it was closed.
type bucketInstance struct {
	bucket string
	closed atomic.Bool
}

func (b *bucketInstance) Check(context.Context) error { return nil }
func (b *bucketInstance) Capabilities() map[string]any {
	return map[string]any{"bucket": b.bucket}
}
func (b *bucketInstance) Close() error { b.closed.Store(true); return nil }

// newBucketService is a service whose s3 kind opens bucketInstances, and
// whose dependents are what deps returns.
func newBucketService(t *testing.T, deps adapters.DependentsFunc) (*adapters.Service, *raftstore.Store, *[]*bucketInstance) {
	t.Helper()
	var opened []*bucketInstance
	svc, store := newServiceOf(t, deps, func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
		b := &bucketInstance{bucket: c.Settings["bucket"]}
		opened = append(opened, b)
		return b, nil
	})
	return svc, store, &opened
}

func eventsOf(store *raftstore.Store, name string) []events.Event {
	items, _ := events.Events.List(store.Read(), raftstore.Query{})
	var out []events.Event
	for _, it := range items {
		if it.Value.Type == name {
			out = append(out, it.Value)
		}
	}
	return out
}

// TestConfiguringAKindAgainReplacesItsAdapter: the documented body posted
// again changes the adapter of that category and kind (same ID, next
// revision, credentials kept) instead of making a second one; after the
// next load the new configuration is the one loaded and the instance of
// the old one is not (it is closed with its set, and nothing of the new
// set refers to it). Several of a kind need adapter_id; new: true adds one.
func TestConfiguringAKindAgainReplacesItsAdapter(t *testing.T) {
	svc, store, opened := newBucketService(t, nil)
	pw := "pw"
	first, created, err := svc.Configure(ctx, adapters.Request{Category: "backup", Kind: "s3", Config: map[string]any{"bucket": "one"}, Credentials: map[string]*string{"password": &pw}})
	if err != nil || !created {
		t.Fatalf("configure: created %v, %v", created, err)
	}
	old := svc.Load(ctx)
	l, _ := old.Get(first.AdapterID)
	oldInst, _ := l.Instance.(*bucketInstance)
	if oldInst == nil || oldInst.bucket != "one" || len(*opened) != 2 {
		t.Fatalf("loaded %+v (%d opened)", l, len(*opened))
	}

	// The same body with another bucket and the same password.
	again, created, err := svc.Configure(ctx, adapters.Request{Category: "backup", Kind: "s3", Config: map[string]any{"bucket": "two"}, Credentials: map[string]*string{"password": &pw}})
	if err != nil || created || again.AdapterID != first.AdapterID || again.Revision != 2 || !again.PendingRestart {
		t.Fatalf("configure again: %+v created %v, %v", again, created, err)
	}
	if e := eventsOf(store, "adapter.configured"); len(e) != 2 || e[1].Data["credentials_changed"] != false {
		t.Fatalf("adapter.configured events = %+v (the same password again is no change)", e)
	}
	stored, _ := adapters.Adapters.List(store.Read(), raftstore.Query{})
	if len(stored) != 1 {
		t.Fatalf("%d adapters stored, want 1", len(stored))
	}

	if err := old.Close(); err != nil { // what a restart does with the old set
		t.Fatal(err)
	}
	set := svc.Load(ctx)
	s3 := 0
	for _, l := range set.Of("backup") {
		if l.Adapter.Kind != "s3" {
			continue
		}
		s3++
		b := l.Instance.(*bucketInstance)
		if b == oldInst || b.bucket != "two" || b.closed.Load() || l.Adapter.Revision != 2 {
			t.Fatalf("loaded s3 = %+v (instance %+v)", l.Adapter, b)
		}
	}
	if s3 != 1 || !oldInst.closed.Load() {
		t.Fatalf("%d s3 adapters loaded, old instance closed %v; want 1, true", s3, oldInst.closed.Load())
	}
	if p, _ := set.Primary("backup"); p.Adapter.ID != first.AdapterID || p.Instance.Capabilities()["bucket"] != "two" {
		t.Fatalf("primary = %+v", p.Adapter)
	}

	// A second one of the kind, then a request that does not say which.
	second, created, err := svc.Configure(ctx, adapters.Request{New: true, Category: "backup", Kind: "s3", Config: map[string]any{"bucket": "three"}})
	if err != nil || !created || second.AdapterID == first.AdapterID {
		t.Fatalf("new: %+v created %v, %v", second, created, err)
	}
	_, _, err = svc.Configure(ctx, adapters.Request{Category: "backup", Kind: "s3", Config: map[string]any{"bucket": "four"}})
	if e, ok := errcode.As(err); !ok || e.Code != errcode.ValidInvalid || e.Details["field"] != "adapter_id" {
		t.Fatalf("an ambiguous configure = %v, want VALID_INVALID on adapter_id", err)
	}
	v, _, err := svc.Configure(ctx, adapters.Request{AdapterID: second.AdapterID, Category: "backup", Kind: "s3", Config: map[string]any{"bucket": "four"}})
	if err != nil || v.AdapterID != second.AdapterID || v.Config["bucket"] != "four" {
		t.Fatalf("by adapter_id: %+v, %v", v, err)
	}
	for name, req := range map[string]adapters.Request{
		"another kind":       {AdapterID: second.AdapterID, Category: "backup", Kind: "local"},
		"adapter_id and new": {AdapterID: second.AdapterID, New: true, Category: "backup", Kind: "s3", Config: map[string]any{"bucket": "x"}},
		"a built-in new":     {New: true, Category: "backup", Kind: "local"},
	} {
		if _, _, err := svc.Configure(ctx, req); errcode.CodeOf(err) != errcode.ValidInvalid {
			t.Errorf("%s: %v, want VALID_INVALID", name, err)
		}
	}
}

// TestDeleteRemovesOnlyWhatNothingDependsOn: a delete is refused with
// STATE_INVALID naming the dependents and the remedy (what the store
// records, and being the primary this server loaded while another adapter
// of the category is loaded); a built-in adapter is never deleted; an
// adapter nothing depends on goes with its health row, an audit entry and
// the adapter.configured event, stays loaded and listed as deleted until
// the next load, and its health is not recorded again meanwhile.
func TestDeleteRemovesOnlyWhatNothingDependsOn(t *testing.T) {
	var held atomic.Value // the adapter ID the fake dependents find secrets on
	held.Store("")
	deps := func(_ *raftstore.Reader, a adapters.Adapter) ([]adapters.Dependent, []raftstore.Op) {
		if a.ID != held.Load() {
			return nil, nil
		}
		return []adapters.Dependent{{What: "secrets", Count: 1, IDs: []string{"app_1/K"}, Message: "it holds 1 secret(s)", Remedy: "set each secret again"}}, nil
	}
	svc, store, _ := newBucketService(t, deps)
	older, _, err := svc.Configure(ctx, adapters.Request{Category: "backup", Kind: "s3", Config: map[string]any{"bucket": "old"}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // the newer one is primary
	newer, _, err := svc.Configure(ctx, adapters.Request{New: true, Category: "backup", Kind: "s3", Config: map[string]any{"bucket": "new"}})
	if err != nil {
		t.Fatal(err)
	}
	svc.Load(ctx)
	if err := svc.CheckHealth(ctx); err != nil {
		t.Fatal(err)
	}

	refused := func(id, what string) {
		t.Helper()
		e, ok := errcode.As(svc.Delete(ctx, id))
		if !ok || e.Code != errcode.StateInvalid || e.Remedy == "" {
			t.Fatalf("delete %s = %v, want STATE_INVALID with a remedy", id, e)
		}
		if what == "" {
			return
		}
		ds, _ := e.Details["dependents"].([]adapters.Dependent)
		if len(ds) != 1 || ds[0].What != what || !strings.Contains(e.Message, ds[0].Message) {
			t.Fatalf("delete %s: dependents %+v in %q, want %s", id, ds, e.Message, what)
		}
	}
	refused("adp_builtin_backup", "")
	refused(newer.AdapterID, "primary")
	held.Store(older.AdapterID)
	refused(older.AdapterID, "secrets")
	if _, _, ok := adapters.Adapters.Get(store.Read(), older.AdapterID); !ok {
		t.Fatal("a refused delete removed the adapter")
	}
	if err := svc.Delete(ctx, "adp_01JZZZZZZZZZZZZZZZZZZZZZZZ"); errcode.CodeOf(err) != errcode.NotFound {
		t.Fatalf("delete of an unknown adapter = %v", err)
	}

	held.Store("")
	if err := svc.Delete(ctx, older.AdapterID); err != nil {
		t.Fatal(err)
	}
	r := store.Read()
	if _, _, ok := adapters.Adapters.Get(r, older.AdapterID); ok {
		t.Fatal("the adapter is still stored")
	}
	if _, _, ok := adapters.Healths.Get(r, older.AdapterID); ok {
		t.Fatal("its health row is still stored")
	}
	entries, _ := audit.Entries.List(r, raftstore.Query{})
	if last := entries[len(entries)-1].Value; last.Action != "adapter.delete" || last.TargetID == nil || *last.TargetID != older.AdapterID {
		t.Fatalf("last audit entry = %+v", last)
	}
	ev := eventsOf(store, "adapter.configured")
	if last := ev[len(ev)-1]; last.Data["target_id"] != older.AdapterID || last.Data["category"] != "backup" || last.Data["kind"] != "s3" {
		t.Fatalf("last adapter.configured = %+v", last)
	}
	l := svc.List()
	var v adapters.View
	for _, it := range l.Items {
		if it.AdapterID == older.AdapterID {
			v = it
		}
	}
	if !v.Deleted || !v.PendingRestart || !v.Loaded || !l.RestartNeeded {
		t.Fatalf("listed until the restart as %+v (restart_needed %v)", v, l.RestartNeeded)
	}
	if err := svc.CheckHealth(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := adapters.Healths.Get(store.Read(), older.AdapterID); ok {
		t.Fatal("a health check recorded the health of a deleted adapter")
	}
	set := svc.Load(ctx)
	if _, ok := set.Get(older.AdapterID); ok {
		t.Fatal("a deleted adapter was loaded again")
	}
	for _, it := range svc.List().Items {
		if it.AdapterID == older.AdapterID {
			t.Fatalf("listed after the restart: %+v", it)
		}
	}
}
