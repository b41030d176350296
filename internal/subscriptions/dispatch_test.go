package subscriptions_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/schema"
	"github.com/svchost/svc/internal/subscriptions"
	"github.com/svchost/svc/internal/webhook"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

type noPolicy struct{}

func (noPolicy) Current() policy.Policy { return policy.Policy{} }

type noSender struct{}

func (noSender) Send(context.Context, webhook.Request) webhook.Result {
	return webhook.Result{Error: "not sent in this test"}
}

var (
	_ subscriptions.Policy = noPolicy{}
	_ subscriptions.Sender = noSender{}
)

// runDispatcher runs a dispatcher on the store (a single node, its leader)
// until the test ends.
func runDispatcher(t *testing.T, d subscriptions.DispatchDeps) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = subscriptions.NewDispatcher(d).Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitCursor waits until the outbox cursor has passed index.
func waitCursor(t *testing.T, store *raftstore.Store, index uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		r := store.Read()
		if through, _ := events.ReadCursor(r); through >= index {
			return
		}
		if err := r.Wait(ctx); err != nil {
			through, _ := events.ReadCursor(store.Read())
			t.Fatalf("the outbox cursor is at %d, short of %d, after 30s", through, index)
		}
	}
}

// TestFanOutKeepsAWritesEventsTogether: the cursor is a raft index, so a
// fan-out never stops inside a write's events. Two writes of 150 events
// each to five subscriptions make more events than one fan-out reads (256)
// and more deliveries than one records (1,000); one write of 300 events
// fills a fan-out's page by itself. Every event still gets exactly one
// delivery per subscription.
func TestFanOutKeepsAWritesEventsTogether(t *testing.T) {
	for _, c := range []struct{ writes, perWrite, subs int }{{2, 150, 5}, {1, 300, 1}} {
		t.Run(fmt.Sprintf("%dx%d events to %d", c.writes, c.perWrite, c.subs), func(t *testing.T) {
			fanOutAll(t, c.writes, c.perWrite, c.subs)
		})
	}
}

func fanOutAll(t *testing.T, writes, perWrite, subs int) {
	store := raftstoretest.Open(t, schema.Tables()...)
	ctx := context.Background()
	var subIDs []string
	_, err := store.Update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) {
		var ops []raftstore.Op
		for range subs {
			s := subscriptions.Subscription{ID: ids.New(ids.Subscription), OwnerID: "usr_someone", Events: []string{"app.*"},
				URL: "http://192.0.2.1/hook", Method: "POST", ContentType: "application/json",
				Keys: []subscriptions.Key{{Sealed: []byte("sealed"), CreatedAt: time.Now()}}, Enabled: true}
			subIDs = append(subIDs, s.ID)
			ops = append(ops, subscriptions.Subscriptions.Insert(&s))
		}
		return ops, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	app := &events.AppRef{ID: "app_x", Name: "X", Slug: "x"}
	var last uint64
	for w := range writes {
		last, err = store.Update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) {
			var ops []raftstore.Op
			for i := range perWrite {
				ops = append(ops, events.Emit(ctx, time.Now(), "app.secret_changed", app, "", "", map[string]any{"key": fmt.Sprintf("W%dE%d", w, i)}))
			}
			return ops, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	runDispatcher(t, subscriptions.DispatchDeps{Store: store, Policy: noPolicy{}, Sender: noSender{}, NodeID: "n1"})
	waitCursor(t, store, last)

	r := store.Read()
	evs, _ := events.Events.Since(r, 0, 0)
	ds, _ := subscriptions.Deliveries.List(r, raftstore.Query{})
	got := map[string]int{}
	for _, d := range ds {
		got[d.Value.EventID+"/"+d.Value.SubscriptionID]++
	}
	missing := 0
	for _, ev := range evs {
		for _, sub := range subIDs {
			if n := got[ev.Value.ID+"/"+sub]; n != 1 {
				if missing++; missing <= 3 {
					t.Errorf("event %s (%v) has %d deliveries to %s; want 1", ev.Value.ID, ev.Value.Data["key"], n, sub)
				}
			}
		}
	}
	if len(evs) != writes*perWrite || len(ds) != writes*perWrite*subs {
		t.Errorf("%d events, %d deliveries; want %d and %d", len(evs), len(ds), writes*perWrite, writes*perWrite*subs)
	}
}

type plainRing struct{}

func (plainRing) Seal(_ context.Context, plaintext, _ []byte) ([]byte, error) { return plaintext, nil }
func (plainRing) Open(sealed, _ []byte) ([]byte, error)                       { return sealed, nil }

// gateSender holds every attempt until release is closed, and counts the
// attempts in flight.
type gateSender struct {
	started chan string
	release chan struct{}

	mu            sync.Mutex
	inFlight, max int
}

func (g *gateSender) Send(ctx context.Context, req webhook.Request) webhook.Result {
	g.mu.Lock()
	g.inFlight++
	g.max = max(g.max, g.inFlight)
	g.mu.Unlock()
	defer func() { g.mu.Lock(); g.inFlight--; g.mu.Unlock() }()
	g.started <- req.DeliveryID
	select {
	case <-g.release:
		return webhook.Result{StatusCode: 204}
	case <-ctx.Done():
		return webhook.Result{Error: "cancelled"}
	}
}

var (
	_ subscriptions.Sealer = plainRing{}
	_ subscriptions.Sender = (*gateSender)(nil)
)

// TestWorkersBoundAttemptsInFlight: with every worker busy, a change of
// the deliveries (a new event fanned out) starts no attempt beyond the
// bound, whatever the subscriptions' own shares allow.
func TestWorkersBoundAttemptsInFlight(t *testing.T) {
	store := raftstoretest.Open(t, schema.Tables()...)
	ctx := context.Background()
	admin, role := "usr_admin", authz.RoleAdmin
	_, err := store.Update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) {
		ops := []raftstore.Op{identity.Users.Insert(&identity.User{ID: admin, Username: "admin", Status: identity.StatusActive,
			RoleID: &role, Source: "local", CreatedAt: time.Now(), UpdatedAt: time.Now()})}
		for range 2 {
			ops = append(ops, subscriptions.Subscriptions.Insert(&subscriptions.Subscription{ID: ids.New(ids.Subscription), OwnerID: admin,
				Events: []string{"app.*"}, URL: "http://192.0.2.1/hook", Method: "POST", ContentType: "application/json",
				Keys: []subscriptions.Key{{Sealed: []byte("whsec_test"), CreatedAt: time.Now()}}, Enabled: true}))
		}
		return ops, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	emit := func(key string) uint64 {
		t.Helper()
		i, err := store.Update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) {
			return []raftstore.Op{events.Emit(ctx, time.Now(), "app.secret_changed", &events.AppRef{ID: "app_x", Name: "X", Slug: "x"}, "", "", map[string]any{"key": key})}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	g := &gateSender{started: make(chan string, 8), release: make(chan struct{})}
	emit("FIRST")
	runDispatcher(t, subscriptions.DispatchDeps{Store: store, Ring: plainRing{}, Policy: noPolicy{}, Sender: g, NodeID: "n1",
		Workers: 1, PerSubscription: 1})
	select {
	case <-g.started:
	case <-time.After(30 * time.Second):
		t.Fatal("no attempt started within 30s")
	}
	// Two more deliveries are recorded while the one worker is busy: the
	// sending loop wakes to them, and must leave them waiting.
	waitCursor(t, store, emit("SECOND"))
	select {
	case id := <-g.started:
		t.Errorf("attempt of %s started while the only worker was busy", id)
	case <-time.After(500 * time.Millisecond): // it would have started by now
	}
	close(g.release)
	ctxWait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		r := store.Read()
		ds, _ := subscriptions.Deliveries.List(r, raftstore.Query{})
		delivered := 0
		for _, d := range ds {
			if d.Value.State == subscriptions.StateDelivered {
				delivered++
			}
		}
		if delivered == 4 {
			break
		}
		if r.Wait(ctxWait) != nil {
			t.Fatalf("%d of 4 deliveries delivered after 30s", delivered)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.max != 1 {
		t.Errorf("%d attempts were in flight at once; Workers is 1", g.max)
	}
}
