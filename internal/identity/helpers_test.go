package identity

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/throttle"
	"github.com/svchost/svc/raftstore"
)

// testPW is a password every rule accepts.
const testPW = "correct-horse-battery-staple"

var bg = context.Background()

// newTestEnv is newEnv that, before the store closes, waits for the
// service's background writes (session refresh, token touch) to finish.
func newTestEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	t.Cleanup(func() { waitBackground(t, e.svc) })
	return e
}

// waitBackground waits until no session refresh or token touch is under way.
func waitBackground(t testing.TB, s *Service) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		busy := false
		s.inflight.Range(func(any, any) bool { busy = true; return false })
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Error("background writes still under way after 10s")
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// eventually polls cond until it holds or a deadline passes; for the
// service's background writes only.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen within 5s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// wantCode checks err's code and returns the error for further checks.
func wantCode(t *testing.T, what string, err error, want errcode.Code) *errcode.Error {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %s", what, want)
		return nil
	}
	if got := errcode.CodeOf(err); got != want {
		t.Errorf("%s: err = %v (code %s), want %s", what, err, got, want)
	}
	e, _ := errcode.As(err)
	return e
}

// wantVerb checks a PERM_VERB_REQUIRED refusal naming the verb.
func wantVerb(t *testing.T, what string, err error, verb authz.Verb) {
	t.Helper()
	if e := wantCode(t, what, err, errcode.PermVerbRequired); e != nil && e.Details["verb"] != string(verb) {
		t.Errorf("%s: details.verb = %v, want %s", what, e.Details["verb"], verb)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// withService replaces the env's service with one built from d; Store,
// Hasher, Policy, limiters and clock default to the env's own.
func (e *env) withService(t *testing.T, d Deps) *Service {
	t.Helper()
	clock := func() time.Time { return e.now }
	if d.Store == nil {
		d.Store = e.store
	}
	if d.Hasher == nil {
		d.Hasher = cheapHasher
	}
	if d.Policy == nil {
		d.Policy = e.pol
	}
	if d.AccountLimit == nil {
		d.AccountLimit = throttle.New(10, 15*time.Minute, clock, 1000)
	}
	if d.ClientLimit == nil {
		d.ClientLimit = throttle.New(50, 15*time.Minute, clock, 1000)
	}
	if d.AccountAnyLimit == nil {
		d.AccountAnyLimit = throttle.New(100, 15*time.Minute, clock, 1000)
	}
	if d.KnownClients == nil {
		d.KnownClients = throttle.NewRecent(30*24*time.Hour, clock, 1000)
	}
	if d.Now == nil {
		d.Now = clock
	}
	s := New(d)
	t.Cleanup(func() { waitBackground(t, s) })
	return s
}

// Callers.

func (e *env) caller(p authz.Principal) authz.Caller {
	return authz.Caller{Principal: p, Install: authz.InstallVerbs(FactsOf(e.store.Read()), p, authz.Floor{})}
}

func userPrincipal(id string) authz.Principal {
	return authz.Principal{Kind: authz.KindUser, ID: id, UserID: id}
}

func (e *env) userCaller(id string) authz.Caller { return e.caller(userPrincipal(id)) }

func (e *env) verbsOf(p authz.Principal) authz.Set {
	return authz.InstallVerbs(FactsOf(e.store.Read()), p, authz.Floor{})
}

// Accounts.

// setup creates the first administrator "admin" and returns it signed in.
func (e *env) setup(t *testing.T) (User, SignedIn) {
	t.Helper()
	si, err := e.svc.Setup(bg, "admin", "The Admin", testPW, Client{IP: "192.0.2.1"})
	must(t, "setup", err)
	return si.User, si
}

// mkUser creates an account with testPW and no role.
func (e *env) mkUser(t *testing.T, name string) User {
	t.Helper()
	u, _, err := e.svc.CreateUser(bg, NewUser{Username: name, Password: testPW})
	must(t, "create user "+name, err)
	return u
}

// mkUserWithRole creates an account and gives it an installation role.
func (e *env) mkUserWithRole(t *testing.T, name, role string) User {
	t.Helper()
	u := e.mkUser(t, name)
	u, err := e.svc.SetUserRole(bg, u.ID, &role)
	must(t, "give "+name+" "+role, err)
	return u
}

func (e *env) signIn(t *testing.T, name string) SignedIn {
	t.Helper()
	si, err := e.svc.SignIn(bg, name, testPW, Client{IP: "192.0.2.2", UserAgent: "test"})
	must(t, "sign in "+name, err)
	return si
}

func (e *env) getUser(t *testing.T, id string) User {
	t.Helper()
	u, _, ok := Users.Get(e.store.Read(), id)
	if !ok {
		t.Fatalf("no account %s", id)
	}
	return u
}

func (e *env) userExists(id string) bool {
	_, _, ok := Users.Get(e.store.Read(), id)
	return ok
}

func (e *env) sessionExists(id string) bool {
	_, _, ok := Sessions.Get(e.store.Read(), id)
	return ok
}

func (e *env) sessionsOf(userID string) []Session {
	items, _ := Sessions.List(e.store.Read(), raftstore.Query{Index: "user", Key: userID})
	out := make([]Session, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out
}

func (e *env) getGroup(t *testing.T, id string) Group {
	t.Helper()
	g, _, ok := Groups.Get(e.store.Read(), id)
	if !ok {
		t.Fatalf("no group %s", id)
	}
	return g
}

func (e *env) mkGroup(t *testing.T, name string, role *string, members ...string) Group {
	t.Helper()
	g, err := e.svc.CreateGroup(bg, name)
	must(t, "create group "+name, err)
	if len(members) > 0 {
		g, err = e.svc.SetMembers(bg, g.ID, members)
		must(t, "set members of "+name, err)
	}
	if role != nil {
		g, err = e.svc.SetGroupRole(bg, g.ID, role)
		must(t, "give group "+name+" a role", err)
	}
	return g
}

func (e *env) putGrant(t *testing.T, g Grant) Grant {
	t.Helper()
	if g.CreatedAt.IsZero() {
		g.CreatedAt = e.now
	}
	if g.ID == "" {
		g.ID = ids.New(ids.Grant)
	}
	_, err := e.store.Apply(bg, Grants.Insert(&g))
	must(t, "insert grant", err)
	return g
}

func (e *env) grantExists(id string) bool {
	_, _, ok := Grants.Get(e.store.Read(), id)
	return ok
}

func (e *env) mkToken(t *testing.T, c authz.Caller, kind, name string) (Token, string) {
	t.Helper()
	tok, secret, err := e.svc.CreateToken(bg, c, kind, NewToken{Name: name})
	must(t, "create token "+name, err)
	return tok, secret
}

func ptr[T any](v T) *T { return &v }

// Audit entries and events written since a mark.

// mark is a point of the log: every later write has a higher raft index.
func (e *env) mark() uint64 {
	r := e.store.Read()
	var m uint64
	for _, d := range append(Tables(), audit.Entries, events.Events) {
		m = max(m, r.TableIndex(d))
	}
	return m
}

func (e *env) auditSince(m uint64, action string) []raftstore.Item[audit.Entry] {
	items, _ := audit.Entries.List(e.store.Read(), raftstore.Query{})
	var out []raftstore.Item[audit.Entry]
	for _, it := range items {
		if it.Meta.CreateIndex > m && (action == "" || it.Value.Action == action) {
			out = append(out, it)
		}
	}
	return out
}

func (e *env) eventsSince(m uint64, typ string) []raftstore.Item[events.Event] {
	items, _ := events.Events.List(e.store.Read(), raftstore.Query{})
	var out []raftstore.Item[events.Event]
	for _, it := range items {
		if it.Meta.CreateIndex > m && (typ == "" || it.Value.Type == typ) {
			out = append(out, it)
		}
	}
	return out
}

// oneAudit returns the one entry of an action written since m.
func (e *env) oneAudit(t *testing.T, m uint64, action string) raftstore.Item[audit.Entry] {
	t.Helper()
	got := e.auditSince(m, action)
	if len(got) != 1 {
		t.Fatalf("%d audit entries %s since %d, want 1", len(got), action, m)
	}
	return got[0]
}

// oneEvent returns the one event of a type written since m.
func (e *env) oneEvent(t *testing.T, m uint64, typ string) raftstore.Item[events.Event] {
	t.Helper()
	got := e.eventsSince(m, typ)
	if len(got) != 1 {
		t.Fatalf("%d events %s since %d, want 1", len(got), typ, m)
	}
	return got[0]
}

// wantData checks fields of an event's or entry's data.
func wantData(t *testing.T, what string, data map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		got, ok := data[k]
		if !ok {
			t.Errorf("%s: no field %s in %v", what, k, data)
			continue
		}
		if !jsonEqual(got, v) {
			t.Errorf("%s: %s = %#v, want %#v", what, k, got, v)
		}
	}
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// dump marshals every row of every table the env holds, for searching
// secrets in it.
func (e *env) dump(t *testing.T) string {
	t.Helper()
	r := e.store.Read()
	var b strings.Builder
	add := func(v any) {
		j, err := json.Marshal(v)
		must(t, "marshal", err)
		b.Write(j)
		b.WriteByte('\n')
	}
	users, _ := Users.List(r, raftstore.Query{})
	add(users)
	sessions, _ := Sessions.List(r, raftstore.Query{})
	add(sessions)
	tokens, _ := Tokens.List(r, raftstore.Query{})
	add(tokens)
	groups, _ := Groups.List(r, raftstore.Query{})
	add(groups)
	roles, _ := Roles.List(r, raftstore.Query{})
	add(roles)
	grants, _ := Grants.List(r, raftstore.Query{})
	add(grants)
	entries, _ := audit.Entries.List(r, raftstore.Query{})
	add(entries)
	evs, _ := events.Events.List(r, raftstore.Query{})
	add(evs)
	return b.String()
}

// countingHasher counts the calls to a Hasher.
type countingHasher struct {
	inner               Hasher
	hash, verify, dummy atomic.Int64
}

func (h *countingHasher) Hash(ctx context.Context, pw string) (string, error) {
	h.hash.Add(1)
	return h.inner.Hash(ctx, pw)
}

func (h *countingHasher) Verify(ctx context.Context, encoded, pw string) (bool, bool, error) {
	h.verify.Add(1)
	return h.inner.Verify(ctx, encoded, pw)
}

func (h *countingHasher) Dummy(ctx context.Context, pw string) {
	h.dummy.Add(1)
	h.inner.Dummy(ctx, pw)
}

func (h *countingHasher) reset() { h.hash.Store(0); h.verify.Store(0); h.dummy.Store(0) }

var _ Hasher = (*countingHasher)(nil)

// barrierStore holds every change, once built from its first view, until
// n of them have been built, so that n concurrent changes all read the
// state before any of them writes.
type barrierStore struct {
	Store
	wg sync.WaitGroup
}

func newBarrierStore(s Store, n int) *barrierStore {
	b := &barrierStore{Store: s}
	b.wg.Add(n)
	return b
}

func (b *barrierStore) Update(ctx context.Context, build raftstore.Build) (uint64, error) {
	first := true
	return b.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		ops, err := build(r)
		if first {
			first = false
			b.wg.Done()
			b.wg.Wait()
		}
		return ops, err
	})
}

// hookStore runs before once, just after the first change is built and
// before it reaches the store: another change slipped in between a
// service's read and its write.
type hookStore struct {
	Store
	once   sync.Once
	before func()
}

func (h *hookStore) Update(ctx context.Context, build raftstore.Build) (uint64, error) {
	return h.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		ops, err := build(r)
		h.once.Do(h.before)
		return ops, err
	})
}
