package main

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore/raftstoretest"
	"github.com/svchost/svc/scheduler"
)

// fakeSource is a route source the test sets by hand.
type fakeSource struct {
	mu      sync.Mutex
	ups     edge.Upstreams
	synced  bool
	changed chan struct{}
}

var _ routeSource = (*fakeSource)(nil)

func newFakeSource() *fakeSource {
	return &fakeSource{ups: edge.Upstreams{}, changed: make(chan struct{})}
}

func (f *fakeSource) Run(ctx context.Context) error { <-ctx.Done(); return nil }

func (f *fakeSource) Upstreams() (edge.Upstreams, bool, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ups, f.synced, f.changed
}

func (f *fakeSource) set(ups edge.Upstreams, synced bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ups, f.synced = ups, synced
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitTable waits until the table holds want exactly.
func waitTable(t *testing.T, table *edge.Table, want ...edge.Route) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		changed := table.Changed()
		got := table.All()
		if equalRoutes(got, want) {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("the table holds %v, want %v", got, want)
		}
	}
}

func equalRoutes(a, b []edge.Route) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFeedMerged(t *testing.T) {
	store := raftstoretest.Open(t, apps.Apps, scheduler.Ports)
	ctx := context.Background()
	a := apps.App{ID: "app_01J0000000000000000000000A", Name: "Notes", Slug: "notes"}
	if _, err := store.Apply(ctx, apps.Apps.Insert(&a), scheduler.Ports.Insert(&scheduler.Port{AppID: a.ID, Port: 9001})); err != nil {
		t.Fatal(err)
	}
	src := newFakeSource()
	table := edge.NewTable()
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); feedMerged(fctx, store, src, table) }()

	// The store gives the app; nothing serves it yet.
	waitTable(t, table, edge.Route{AppID: a.ID, Slug: "notes", Port: 9001})
	// The source reports an instance (and one of an app svc does not know).
	src.set(edge.Upstreams{a.ID: {"10.0.0.2:8080", "10.0.0.1:8080"}, ids.New(ids.App): {"10.0.0.9:80"}}, true)
	waitTable(t, table, edge.Route{AppID: a.ID, Slug: "notes", Port: 9001, Upstream: "10.0.0.1:8080"})
	// A new app in the store is routed as soon as it is written.
	b := apps.App{ID: "app_01J0000000000000000000000B", Name: "Wiki", Slug: "wiki"}
	if _, err := store.Apply(ctx, apps.Apps.Insert(&b)); err != nil {
		t.Fatal(err)
	}
	waitTable(t, table,
		edge.Route{AppID: a.ID, Slug: "notes", Port: 9001, Upstream: "10.0.0.1:8080"},
		edge.Route{AppID: b.ID, Slug: "wiki"})
	// Its instance, and the first app's leaving.
	src.set(edge.Upstreams{b.ID: {"10.0.0.3:8080"}}, true)
	waitTable(t, table,
		edge.Route{AppID: a.ID, Slug: "notes", Port: 9001},
		edge.Route{AppID: b.ID, Slug: "wiki", Upstream: "10.0.0.3:8080"})
	cancel()
	<-done
}

func TestWaitSynced(t *testing.T) {
	src := newFakeSource()
	log := slog.New(slog.DiscardHandler)
	got := make(chan bool, 1)
	go func() { got <- waitSynced(context.Background(), log, "adp_x", src) }()
	src.set(edge.Upstreams{}, false)
	select {
	case <-got:
		t.Fatal("waitSynced returned before the source synced")
	default:
	}
	src.set(edge.Upstreams{}, true)
	if !<-got {
		t.Error("waitSynced = false after the source synced")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if waitSynced(ctx, log, "adp_x", newFakeSource()) {
		t.Error("waitSynced = true with its context ended")
	}
}

// The store reads feedMerged makes must be watched, or it would not wake.
func TestBaseRoutesWatch(t *testing.T) {
	store := raftstoretest.Open(t, apps.Apps, scheduler.Ports)
	r := store.Read()
	if got := baseRoutes(r); len(got) != 0 {
		t.Fatalf("baseRoutes of an empty store = %v", got)
	}
	woke := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		woke <- r.Wait(ctx)
	}()
	a := apps.App{ID: "app_01J0000000000000000000000A", Name: "Notes", Slug: "notes"}
	if _, err := store.Apply(context.Background(), apps.Apps.Insert(&a)); err != nil {
		t.Fatal(err)
	}
	if err := <-woke; err != nil {
		t.Errorf("the reader did not wake on a new app: %v", err)
	}
}
