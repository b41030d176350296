package subscriptions_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/internal/notify"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/subscriptions"
	"github.com/svchost/svc/internal/webhook"
	"github.com/svchost/svc/notifiers/ntfy"
	"github.com/svchost/svc/raftstore"
)

type fixture struct {
	store *raftstore.Store
	ring  *keyring.Ring
	pol   *policy.Service
	svc   *subscriptions.Service
	admin authz.Caller
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	tables := append([]raftstore.Def{apps.Apps, audit.Entries, events.Events, events.Cursors, keyring.Keys, policy.Table}, identity.Tables()...)
	tables = append(append(tables, adapters.Tables()...), subscriptions.Tables()...)
	store, err := raftstore.Open(raftstore.Config{NodeID: "n1", Dir: filepath.Join(dir, "store"), Tables: tables})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := store.ConsistentRead(ctx); err != nil {
		t.Fatal(err)
	}
	kek, err := keyring.LoadKEK(filepath.Join(dir, "kek"))
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Now().UTC() }
	var fixed policy.Fixed // the receivers of these tests are on loopback
	if err := fixed.Set("allow_private_webhooks", true, policy.OriginEnvironment); err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store, ring: keyring.New(store, kek, now), pol: policy.NewService(store, fixed, now)}
	f.svc = subscriptions.NewService(subscriptions.Deps{Store: store, Ring: f.ring, Policy: f.pol, Now: now})
	// An administrator: the owner of the subscriptions, whose access the
	// dispatcher checks at sending.
	role := authz.RoleAdmin
	u := identity.User{ID: "usr_01M8G0000000000000000ADMIN", Username: "admin", Status: identity.StatusActive, RoleID: &role, Source: "local", CreatedAt: now()}
	if _, err := store.Apply(ctx, identity.Users.Insert(&u)); err != nil {
		t.Fatal(err)
	}
	f.admin = authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: u.ID, UserID: u.ID}, Install: authz.SetOf(authz.InstallEventsManage)}
	return f
}

func (f *fixture) dispatcher(node string) *subscriptions.Dispatcher {
	return subscriptions.NewDispatcher(subscriptions.DispatchDeps{Store: f.store, Ring: f.ring, Policy: f.pol, NodeID: node,
		Sender:   webhook.NewSender(webhook.Options{Timeout: 30 * time.Second, AllowPrivate: func() bool { return true }}),
		Schedule: []time.Duration{50 * time.Millisecond}})
}

func (f *fixture) emit(t *testing.T, name string, data map[string]any) {
	t.Helper()
	ctx := actor.With(context.Background(), actor.System)
	if _, err := f.store.Apply(ctx, events.Emit(ctx, time.Now().UTC(), name, nil, "", "", data)); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestADeposedDispatcherCannotMarkAnythingDelivered: a dispatcher whose
// lease a newer one took (a leader that was deposed) may still finish an
// attempt in flight, but its record of it is refused, and it stops; the
// delivery's log has only the new dispatcher's attempt.
func TestADeposedDispatcherCannotMarkAnythingDelivered(t *testing.T) {
	f := newFixture(t)
	var (
		mu      sync.Mutex
		release []chan struct{}
	)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ch := make(chan struct{})
		mu.Lock()
		release = append(release, ch)
		mu.Unlock()
		<-ch
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rc.Close()
	arrived := func() int { mu.Lock(); defer mu.Unlock(); return len(release) }
	sub, err := f.svc.Create(context.Background(), f.admin, subscriptions.Request{Events: []string{"token.*"}, URL: ptr(rc.URL)})
	if err != nil {
		t.Fatal(err)
	}
	ctxA, stopA := context.WithCancel(context.Background())
	defer stopA()
	doneA := make(chan error, 1)
	go func() { doneA <- f.dispatcher("a").Run(ctxA) }()
	f.emit(t, "token.revoked", nil)
	waitFor(t, "the first dispatcher's attempt", func() bool { return arrived() == 1 })

	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	go func() { _ = f.dispatcher("b").Run(ctxB) }()
	waitFor(t, "the second dispatcher's attempt of the same delivery", func() bool { return arrived() == 2 })
	mu.Lock()
	close(release[0]) // the deposed dispatcher's attempt succeeds
	mu.Unlock()
	select {
	case err := <-doneA:
		if err == nil || !strings.Contains(err.Error(), "lease") {
			t.Fatalf("the deposed dispatcher stopped with %v; want its fencing error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the deposed dispatcher did not stop")
	}
	ds, err := f.svc.Deliveries(f.admin, sub.Subscription.ID)
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries %+v, %v", ds, err)
	}
	if len(ds[0].Attempts) != 0 || ds[0].State != subscriptions.StatePending {
		t.Fatalf("the deposed dispatcher recorded %+v", ds[0])
	}
	mu.Lock()
	close(release[1])
	mu.Unlock()
	waitFor(t, "the new dispatcher to record its attempt", func() bool {
		ds, _ := f.svc.Deliveries(f.admin, sub.Subscription.ID)
		return ds[0].State == subscriptions.StateDelivered
	})
	ds, _ = f.svc.Deliveries(f.admin, sub.Subscription.ID)
	if len(ds[0].Attempts) != 1 {
		t.Errorf("attempts %+v; want exactly the new dispatcher's", ds[0].Attempts)
	}
}

func ptr[T any](v T) *T { return &v }

// TestNotificationsGoThroughTheAdapter: a subscription with an adapter_id
// is sent through the loaded notification adapter (a real ntfy adapter to
// a receiver speaking the ntfy protocol), recorded as any delivery.
func TestNotificationsGoThroughTheAdapter(t *testing.T) {
	f := newFixture(t)
	var (
		mu  sync.Mutex
		got []*http.Request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Clone(context.Background()))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	ctx := context.Background()
	a := adapters.Adapter{ID: "adp_01M8G00000000000000000NTFY", Category: adapters.CategoryNotification, Kind: "ntfy",
		Settings: map[string]string{"server": srv.URL, "topic": "svc-alerts"}, Revision: 1, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}
	if _, err := f.store.Apply(ctx, adapters.Adapters.Insert(&a)); err != nil {
		t.Fatal(err)
	}
	inst, err := ntfy.Kind().Open(ctx, adapters.Config{ID: a.ID, Settings: a.Settings})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := f.svc.Create(ctx, f.admin, subscriptions.Request{Events: []string{"token.revoked"}, AdapterID: ptr(a.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if sub.SigningKey != "" {
		t.Errorf("a notification subscription was given a signing key")
	}
	d := subscriptions.NewDispatcher(subscriptions.DispatchDeps{Store: f.store, Ring: f.ring, Policy: f.pol, NodeID: "n1",
		Sender: webhook.NewSender(webhook.Options{Timeout: 5 * time.Second}),
		Notifier: func(id string) (notify.Notifier, bool) {
			n, ok := inst.(notify.Notifier)
			return n, ok && id == a.ID
		}})
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = d.Run(rctx) }()
	f.emit(t, "token.revoked", nil)
	waitFor(t, "the notification to be delivered", func() bool {
		ds, _ := f.svc.Deliveries(f.admin, sub.Subscription.ID)
		return len(ds) == 1 && ds[0].State == subscriptions.StateDelivered
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].URL.Path != "/svc-alerts" || got[0].Header.Get("Title") == "" {
		t.Errorf("ntfy got %d requests; first %+v", len(got), got)
	}
}

// TestABacklogIsNotSentToANewerSubscription: events the dispatcher had not
// fanned out yet when a subscription was made (a backlog after a leader
// change) are not sent to it; what happened after it was made is.
func TestABacklogIsNotSentToANewerSubscription(t *testing.T) {
	f := newFixture(t)
	var (
		mu  sync.Mutex
		got []string
	)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Svc-Event"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rc.Close()
	f.emit(t, "token.revoked", nil) // before the subscription, with no dispatcher running
	sub, err := f.svc.Create(context.Background(), f.admin, subscriptions.Request{Events: []string{"token.*"}, URL: ptr(rc.URL)})
	if err != nil {
		t.Fatal(err)
	}
	f.emit(t, "token.created", map[string]any{"name": "after", "kind": "delegated"})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = f.dispatcher("n1").Run(ctx) }()
	waitFor(t, "the event made after the subscription", func() bool {
		ds, _ := f.svc.Deliveries(f.admin, sub.Subscription.ID)
		return len(ds) == 1 && ds[0].State == subscriptions.StateDelivered
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "token.created" {
		t.Errorf("the receiver got %v; want only token.created", got)
	}
}

// TestADeclaredNotificationAdapterCanBeSubscribedTo: an adapter declared
// at startup is not in the store; Deps.Declared makes it known, and only a
// notification adapter is accepted.
func TestADeclaredNotificationAdapterCanBeSubscribedTo(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.svc.Create(ctx, f.admin, subscriptions.Request{Events: []string{"token.revoked"}, AdapterID: ptr("adp_alerts")}); !errcode.Has(err, errcode.ValidInvalid) {
		t.Fatalf("an unknown adapter without declarations: %v, want VALID_INVALID", err)
	}
	declared := map[string]string{"adp_alerts": adapters.CategoryNotification, "adp_backups": adapters.CategoryBackup}
	svc := subscriptions.NewService(subscriptions.Deps{Store: f.store, Ring: f.ring, Policy: f.pol,
		Declared: func(id string) (string, bool) { c, ok := declared[id]; return c, ok }})
	if _, err := svc.Create(ctx, f.admin, subscriptions.Request{Events: []string{"token.revoked"}, AdapterID: ptr("adp_alerts")}); err != nil {
		t.Errorf("the declared notification adapter: %v", err)
	}
	for _, id := range []string{"adp_backups", "adp_unknown"} {
		if _, err := svc.Create(ctx, f.admin, subscriptions.Request{Events: []string{"token.revoked"}, AdapterID: ptr(id)}); !errcode.Has(err, errcode.ValidInvalid) {
			t.Errorf("%s: %v, want VALID_INVALID", id, err)
		}
	}
}
