// Package secretstest is the contract suite every secrets adapter must
// pass: it drives a real secrets service, on a real single-node store, over
// the adapter under test (builtin always; vault against a real dev server).
//
// It is for tests only and must not be imported by production code.
package secretstest

import (
	"context"
	"fmt"
	"strings"
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
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

// Env is what an adapter under test is built from: a real store holding
// every table the suite needs, and a keyring over it.
type Env struct {
	Store *raftstore.Store
	Ring  *keyring.Ring
}

// Tables are the tables the suite's store holds.
func Tables() []raftstore.Def {
	return append([]raftstore.Def{apps.Apps, secrets.Secrets, keyring.Keys, audit.Entries, events.Events, events.Cursors}, identity.Tables()...)
}

// NewEnv opens a store and a keyring for one test.
func NewEnv(t testing.TB) Env {
	t.Helper()
	store := raftstoretest.Open(t, Tables()...)
	kek, err := keyring.LoadKEK(t.TempDir() + "/kek")
	if err != nil {
		t.Fatal(err)
	}
	return Env{Store: store, Ring: keyring.New(store, kek, now)}
}

func now() time.Time { return time.Now().UTC() }

// Factory builds the adapter under test, with its adapter ID.
type Factory func(t *testing.T, env Env) (id string, b secrets.Backend)

// Run runs the contract against the adapter the factory builds.
func Run(t *testing.T, factory Factory) {
	cases := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"set, list and read", setListRead},
		{"rotation is a new version", rotation},
		{"delete", deleteSecret},
		{"missing secret and missing app", missing},
		{"apps do not see each other's secrets", isolation},
		{"values of every shape come back exactly", shapes},
		{"keys and values outside the limits are refused", limits},
		{"the adapter lists names and versions, never values", adapterList},
		{"concurrent writers are all applied, one after another", concurrentWriters},
		{"concurrent new secrets of one app are all applied", concurrentKeys},
		{"a value whose row was not written is never served; the retry converges", unwrittenRow},
		{"a write whose row comes late never hides a newer version", lateRow},
		{"every change and every read is audited without the value", auditTrail},
		{"the secrets of a deleted app are swept away", sweep},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := NewEnv(t)
			id, b := factory(t, env)
			h := &harness{t: t, env: env, id: id, backend: b,
				svc: secrets.NewService(secrets.Deps{Store: env.Store, Now: now,
					Backends: func() (map[string]secrets.Backend, string) { return map[string]secrets.Backend{id: b}, id }})}
			c.fn(t, h)
		})
	}
}

type harness struct {
	t       *testing.T
	env     Env
	id      string
	backend secrets.Backend
	svc     *secrets.Service
}

// Ctx is the context the suite acts in: a fixed account and request.
var Ctx = actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_contract", RequestID: "req_contract"})

var ctx = Ctx

// App creates an app in env's store and returns its ID.
func App(t testing.TB, env Env, name string) string {
	t.Helper()
	a, err := apps.NewService(env.Store, now).Create(ctx, authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: "usr_contract", UserID: "usr_contract"}}, apps.New{Name: name})
	if err != nil {
		t.Fatalf("create app: %v", err)
	}
	return a.ID
}

// app creates an app owned by a fixed account (the suite needs no users:
// grants name principals by ID only).
func (h *harness) app(name string) string {
	h.t.Helper()
	return App(h.t, h.env, name)
}

func (h *harness) put(appID, key, value string) secrets.View {
	h.t.Helper()
	v, err := h.svc.Put(ctx, secrets.Ref{AppID: appID, Key: key}, value)
	if err != nil {
		h.t.Fatalf("put %s: %v", key, err)
	}
	return v
}

func (h *harness) value(appID, key string) string {
	h.t.Helper()
	v, err := h.svc.Value(ctx, secrets.Ref{AppID: appID, Key: key})
	if err != nil {
		h.t.Fatalf("read %s: %v", key, err)
	}
	return v
}

func wantCode(t *testing.T, err error, code errcode.Code) {
	t.Helper()
	if errcode.CodeOf(err) != code {
		t.Fatalf("got %v (code %s), want code %s", err, errcode.CodeOf(err), code)
	}
}

func setListRead(t *testing.T, h *harness) {
	app := h.app("contract")
	v := h.put(app, "API_KEY", "s3cr3t-value")
	if v.Key != "API_KEY" || v.Origin != h.id || v.Version < 1 || v.UpdatedAt.IsZero() {
		t.Fatalf("put answered %+v", v)
	}
	h.put(app, "DB_PASSWORD", "hunter2")
	list, err := h.svc.List(app)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Key != "API_KEY" || list[1].Key != "DB_PASSWORD" {
		t.Fatalf("list = %+v", list)
	}
	for _, s := range list {
		if s.Origin != h.id {
			t.Fatalf("origin = %q, want %q", s.Origin, h.id)
		}
	}
	if got := h.value(app, "API_KEY"); got != "s3cr3t-value" {
		t.Fatalf("value = %q", got)
	}
}

func rotation(t *testing.T, h *harness) {
	app := h.app("rotation")
	v1 := h.put(app, "TOKEN", "one")
	v2 := h.put(app, "TOKEN", "two")
	if v2.Version <= v1.Version {
		t.Fatalf("rotation did not raise the version: %d then %d", v1.Version, v2.Version)
	}
	if got := h.value(app, "TOKEN"); got != "two" {
		t.Fatalf("after rotation value = %q, want two", got)
	}
	v3 := h.put(app, "TOKEN", "two") // the same value again is still a new version
	if v3.Version <= v2.Version {
		t.Fatalf("rewrite did not raise the version: %d then %d", v2.Version, v3.Version)
	}
}

func deleteSecret(t *testing.T, h *harness) {
	app := h.app("delete")
	h.put(app, "GONE", "bye")
	if err := h.svc.Delete(ctx, secrets.Ref{AppID: app, Key: "GONE"}); err != nil {
		t.Fatal(err)
	}
	_, err := h.svc.Value(ctx, secrets.Ref{AppID: app, Key: "GONE"})
	wantCode(t, err, errcode.NotFound)
	wantCode(t, h.svc.Delete(ctx, secrets.Ref{AppID: app, Key: "GONE"}), errcode.NotFound)
	entries, err := h.backend.List(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("the adapter still lists %+v after delete", entries)
	}
	// A deleted secret set again starts over and reads back.
	h.put(app, "GONE", "back")
	if got := h.value(app, "GONE"); got != "back" {
		t.Fatalf("value after re-create = %q", got)
	}
}

func missing(t *testing.T, h *harness) {
	app := h.app("missing")
	_, err := h.svc.Value(ctx, secrets.Ref{AppID: app, Key: "NOPE"})
	wantCode(t, err, errcode.NotFound)
	_, err = h.svc.Put(ctx, secrets.Ref{AppID: "app_01JZZZZZZZZZZZZZZZZZZZZZZZ", Key: "K"}, "v")
	wantCode(t, err, errcode.NotFound)
	_, err = h.svc.List("app_01JZZZZZZZZZZZZZZZZZZZZZZZ")
	wantCode(t, err, errcode.NotFound)
}

func isolation(t *testing.T, h *harness) {
	a, b := h.app("alpha"), h.app("beta")
	h.put(a, "SHARED", "alpha-value")
	h.put(b, "SHARED", "beta-value")
	if h.value(a, "SHARED") != "alpha-value" || h.value(b, "SHARED") != "beta-value" {
		t.Fatal("apps see each other's values")
	}
	if err := h.svc.Delete(ctx, secrets.Ref{AppID: a, Key: "SHARED"}); err != nil {
		t.Fatal(err)
	}
	if h.value(b, "SHARED") != "beta-value" {
		t.Fatal("deleting one app's secret touched another's")
	}
}

func shapes(t *testing.T, h *harness) {
	app := h.app("shapes")
	values := map[string]string{
		"EMPTY":     "",
		"UNICODE":   "päss wörd ✓ 秘密 🔑",
		"NEWLINES":  "-----BEGIN KEY-----\nabc\r\ndef\n-----END KEY-----\n",
		"QUOTES":    `{"json": "inside", 'single'} $HOME ${X} \n`,
		"LARGE":     strings.Repeat("x", secrets.MaxValueBytes),
		"SPACES":    "  leading and trailing  ",
		"SLASHES":   "a/b/../c?d=e&f#g",
		"lowercase": "keys keep their case",
	}
	for k, v := range values {
		h.put(app, k, v)
	}
	for k, v := range values {
		if got := h.value(app, k); got != v {
			t.Errorf("%s came back as %q (len %d), want len %d", k, truncate(got), len(got), len(v))
		}
	}
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func limits(t *testing.T, h *harness) {
	app := h.app("limits")
	badKeys := []string{"", "1ABC", "A-B", "A B", "A.B", "../X", "A/B", "Ä", strings.Repeat("K", secrets.MaxKeyLen+1), "A\x00B"}
	for _, k := range badKeys {
		_, err := h.svc.Put(ctx, secrets.Ref{AppID: app, Key: k}, "v")
		wantCode(t, err, errcode.ValidInvalid)
	}
	badValues := []string{strings.Repeat("x", secrets.MaxValueBytes+1), "\xff\xfe", "nul\x00inside"}
	for _, v := range badValues {
		_, err := h.svc.Put(ctx, secrets.Ref{AppID: app, Key: "K"}, v)
		wantCode(t, err, errcode.ValidInvalid)
	}
	if list, _ := h.svc.List(app); len(list) != 0 {
		t.Fatalf("refused writes left %+v", list)
	}
}

func adapterList(t *testing.T, h *harness) {
	app := h.app("adapterlist")
	h.put(app, "ONE", "first-secret-value")
	h.put(app, "TWO", "second-secret-value")
	h.put(app, "TWO", "second-secret-value-rotated")
	entries, err := h.backend.List(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, e := range entries {
		got[e.Key] = e.Version
		if strings.Contains(fmt.Sprintf("%+v", e), "secret-value") {
			t.Fatalf("the adapter's listing carries a value: %+v", e)
		}
	}
	list, _ := h.svc.List(app)
	for _, s := range list {
		if got[s.Key] != s.Version {
			t.Fatalf("adapter lists %s at version %d, the store at %d", s.Key, got[s.Key], s.Version)
		}
	}
	if len(got) != 2 {
		t.Fatalf("adapter lists %v", got)
	}
}

// concurrentWriters: 16 writes to one secret at once are all applied, each
// as its own version; the row ends on the newest, whose value reads back,
// and each write is audited once.
func concurrentWriters(t *testing.T, h *harness) {
	app := h.app("concurrent")
	const writers = 16
	var wg sync.WaitGroup
	views := make([]secrets.View, writers)
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			views[i], errs[i] = h.svc.Put(ctx, secrets.Ref{AppID: app, Key: "RACE"}, fmt.Sprintf("value-%d", i))
		}()
	}
	wg.Wait()
	newest, seen := -1, map[int64]int{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d of %d concurrent writers was refused: %v", i, writers, err)
		}
		if j, dup := seen[views[i].Version]; dup {
			t.Fatalf("writers %d and %d were both given version %d", j, i, views[i].Version)
		}
		seen[views[i].Version] = i
		if newest < 0 || views[i].Version > views[newest].Version {
			newest = i
		}
	}
	list, _ := h.svc.List(app)
	if len(list) != 1 || list[0].Version != views[newest].Version {
		t.Fatalf("after the race the store lists %+v, want RACE at the newest version %d", list, views[newest].Version)
	}
	if v, want := h.value(app, "RACE"), fmt.Sprintf("value-%d", newest); v != want {
		t.Fatalf("value after the race = %q, want %q (the newest version's)", v, want)
	}
	entries, _ := audit.Entries.List(h.env.Store.Read(), raftstore.Query{})
	sets := 0
	for _, e := range entries {
		if e.Value.Action == "secret.set" && e.Value.AppID != nil && *e.Value.AppID == app {
			sets++
		}
	}
	if sets != writers {
		t.Errorf("%d secret.set entries, want %d", sets, writers)
	}
}

// concurrentKeys: 16 new secrets of one app written at once are all there.
func concurrentKeys(t *testing.T, h *harness) {
	app := h.app("concurrent-keys")
	const writers = 16
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = h.svc.Put(ctx, secrets.Ref{AppID: app, Key: fmt.Sprintf("KEY_%d", i)}, fmt.Sprintf("value-%d", i))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d was refused: %v", i, err)
		}
	}
	if list, _ := h.svc.List(app); len(list) != writers {
		t.Fatalf("%d secrets after %d concurrent writes: %+v", len(list), writers, list)
	}
	for i := range writers {
		if v, want := h.value(app, fmt.Sprintf("KEY_%d", i)), fmt.Sprintf("value-%d", i); v != want {
			t.Errorf("KEY_%d = %q, want %q", i, v, want)
		}
	}
}

// unwrittenRow: when the adapter took a value but its row could not be
// written (the store refused), reads keep serving the row's value, and the
// request made again writes a newer version that reads back.
func unwrittenRow(t *testing.T, h *harness) {
	app := h.app("unwritten")
	ref := secrets.Ref{AppID: app, Key: "KEPT"}
	before := h.put(app, "KEPT", "kept-value")
	failing := secrets.NewService(secrets.Deps{Store: noRows{h.env.Store}, Now: now,
		Backends: func() (map[string]secrets.Backend, string) { return map[string]secrets.Backend{h.id: h.backend}, h.id }})
	if _, err := failing.Put(ctx, ref, "lost-value"); errcode.CodeOf(err) != errcode.StoreUnavailable {
		t.Fatalf("put with the store refusing: %v, want STORE_UNAVAILABLE", err)
	}
	if v := h.value(app, "KEPT"); v != "kept-value" {
		t.Fatalf("after a write whose row failed, the value read is %q, want the row's %q", v, "kept-value")
	}
	again := h.put(app, "KEPT", "lost-value")
	if again.Version <= before.Version {
		t.Fatalf("the retry wrote version %d after %d", again.Version, before.Version)
	}
	if v := h.value(app, "KEPT"); v != "lost-value" {
		t.Fatalf("after the retry the value read is %q", v)
	}
}

// lateRow: a write whose row is held back until a later write of the same
// secret has committed is applied too, and the row ends on the newest
// version (by the adapter's numbering), whose value reads back.
func lateRow(t *testing.T, h *harness) {
	app := h.app("late")
	ref := secrets.Ref{AppID: app, Key: "LATE"}
	held := &heldStore{Store: h.env.Store, waiting: make(chan struct{}), release: make(chan struct{})}
	slow := secrets.NewService(secrets.Deps{Store: held, Now: now,
		Backends: func() (map[string]secrets.Backend, string) { return map[string]secrets.Backend{h.id: h.backend}, h.id }})
	var first secrets.View
	var firstErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		first, firstErr = slow.Put(ctx, ref, "first-value")
	}()
	<-held.waiting // the first value is in the adapter, its row held back
	second := h.put(app, "LATE", "second-value")
	close(held.release)
	<-done
	if firstErr != nil {
		t.Fatalf("the held-back write: %v", firstErr)
	}
	if first.Version == second.Version {
		t.Fatalf("both writes have version %d", first.Version)
	}
	newest, want := first, "first-value"
	if second.Version > first.Version {
		newest, want = second, "second-value"
	}
	list, _ := h.svc.List(app)
	if len(list) != 1 || list[0].Version != newest.Version {
		t.Fatalf("the store lists %+v, want version %d", list, newest.Version)
	}
	if v := h.value(app, "LATE"); v != want {
		t.Fatalf("value = %q, want %q", v, want)
	}
}

// heldStore holds the first write back until release is closed, after
// saying so on waiting.
type heldStore struct {
	*raftstore.Store
	once    sync.Once
	waiting chan struct{}
	release chan struct{}
}

func (s *heldStore) Update(ctx context.Context, build raftstore.Build) (uint64, error) {
	s.once.Do(func() {
		close(s.waiting)
		<-s.release
	})
	return s.Store.Update(ctx, build)
}

// noRows is a store that reads but refuses every write, as a store without
// a leader does.
type noRows struct{ *raftstore.Store }

func (noRows) Update(context.Context, raftstore.Build) (uint64, error) {
	return 0, errcode.New(errcode.StoreUnavailable, "no leader")
}

func auditTrail(t *testing.T, h *harness) {
	app := h.app("audited")
	const canary = "canary-7f3a9c-value"
	h.put(app, "WATCHED", canary)
	h.put(app, "WATCHED", canary+"-2")
	h.value(app, "WATCHED")
	h.value(app, "WATCHED")
	if err := h.svc.Delete(ctx, secrets.Ref{AppID: app, Key: "WATCHED"}); err != nil {
		t.Fatal(err)
	}
	r := h.env.Store.Read()
	entries, _ := audit.Entries.List(r, raftstore.Query{})
	counts := map[string]int{}
	for _, e := range entries {
		if e.Value.AppID != nil && *e.Value.AppID == app {
			counts[e.Value.Action]++
		}
		if strings.Contains(fmt.Sprintf("%+v", e.Value), canary) {
			t.Fatalf("an audit entry carries the value: %+v", e.Value)
		}
	}
	want := map[string]int{"app.create": 1, "secret.set": 2, "secret.read": 2, "secret.delete": 1}
	for a, n := range want {
		if counts[a] != n {
			t.Errorf("audit %s: %d entries, want %d (all: %v)", a, counts[a], n, counts)
		}
	}
	evs, _ := events.Events.List(r, raftstore.Query{})
	changed := 0
	for _, e := range evs {
		if strings.Contains(fmt.Sprintf("%+v", e.Value), canary) {
			t.Fatalf("an event carries the value: %+v", e.Value)
		}
		if e.Value.Type == "app.secret_changed" {
			changed++
			if e.Value.Data["key"] != "WATCHED" {
				t.Fatalf("app.secret_changed data = %v", e.Value.Data)
			}
		}
	}
	if changed != 3 {
		t.Fatalf("%d app.secret_changed events, want 3 (two sets, one delete)", changed)
	}
}

func sweep(t *testing.T, h *harness) {
	gone, kept := h.app("deleted"), h.app("kept")
	h.put(gone, "A", "swept-a")
	h.put(gone, "B", "swept-b")
	h.put(kept, "A", "kept-a")
	if err := apps.NewService(h.env.Store, now).Delete(ctx, gone, apps.Decision{Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := h.svc.SweepDeletedApps(ctx); err != nil {
		t.Fatal(err)
	}
	rows, _ := secrets.Secrets.List(h.env.Store.Read(), raftstore.Query{Index: "app", Key: gone})
	if len(rows) != 0 {
		t.Fatalf("rows of a deleted app remain: %+v", rows)
	}
	if entries, err := h.backend.List(ctx, gone); err != nil || len(entries) != 0 {
		t.Fatalf("the adapter still holds a deleted app's secrets: %+v %v", entries, err)
	}
	if h.value(kept, "A") != "kept-a" {
		t.Fatal("the sweep touched another app's secret")
	}
}
