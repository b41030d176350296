package identity

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/throttle"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

// testApps is an AppFinder over apps a test declares.
type testApps struct {
	mu   sync.Mutex
	apps map[string]events.AppRef
}

func (a *testApps) FindApp(_ *raftstore.Reader, id string) (events.AppRef, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	app, ok := a.apps[id]
	return app, ok
}

var _ AppFinder = (*testApps)(nil)

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// shareEnv is an env with the sharing service over the same store, a real
// keyring, apps declared by the test and an administrator.
type shareEnv struct {
	*env
	sh     *Sharing
	ring   *keyring.Ring
	apps   *testApps
	hasher *countingHasher
	logs   *lockedBuffer
	admin  User
}

func newShareEnv(t *testing.T) *shareEnv {
	t.Helper()
	return newShareEnvWith(t, nil, nil)
}

// newShareEnvWith builds a shareEnv; nil limiters are the production ones
// (10 per app and address, 100 per app, in fifteen minutes) on the env's
// clock.
func newShareEnvWith(t *testing.T, clientLimit, appLimit Limiter) *shareEnv {
	t.Helper()
	tables := append(Tables(), audit.Entries, events.Events, keyring.Keys)
	e := &env{store: raftstoretest.Open(t, tables...), pol: &fixedPolicy{p: policy.Default()}, now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	clock := func() time.Time { return e.now }
	e.svc = New(Deps{
		Store: e.store, Hasher: cheapHasher, Policy: e.pol,
		AccountLimit:    throttle.New(10, 15*time.Minute, clock, 1000),
		ClientLimit:     throttle.New(50, 15*time.Minute, clock, 1000),
		AccountAnyLimit: throttle.New(100, 15*time.Minute, clock, 1000),
		KnownClients:    throttle.NewRecent(30*24*time.Hour, clock, 1000),
		Now:             clock,
	})
	t.Cleanup(func() { waitBackground(t, e.svc) })
	kek, err := keyring.LoadKEK(filepath.Join(t.TempDir(), "kek"))
	must(t, "kek", err)
	se := &shareEnv{env: e, ring: keyring.New(e.store, kek, clock), apps: &testApps{apps: map[string]events.AppRef{}},
		hasher: &countingHasher{inner: cheapHasher}, logs: &lockedBuffer{}}
	if clientLimit == nil {
		clientLimit = throttle.New(10, 15*time.Minute, clock, 1000)
	}
	if appLimit == nil {
		appLimit = throttle.New(100, 15*time.Minute, clock, 1000)
	}
	se.sh = NewSharing(SharingDeps{
		Store: e.store, Hasher: se.hasher, Policy: e.pol, Ring: se.ring, Apps: se.apps,
		ClientLimit: clientLimit, AppLimit: appLimit, KnownClients: throttle.NewRecent(24*time.Hour, clock, 1000), Now: clock,
		Logger: slog.New(slog.NewTextHandler(se.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	se.admin, _ = e.setup(t)
	return se
}

// app declares an app owned by owner (a control-plane owner grant and a
// data-plane grant, as apps.Create gives its creator).
func (e *shareEnv) app(t *testing.T, name, owner string) string {
	t.Helper()
	id := ids.New(ids.App)
	e.apps.mu.Lock()
	e.apps.apps[id] = events.AppRef{ID: id, Name: name, Slug: strings.ToLower(name)}
	e.apps.mu.Unlock()
	if owner != "" {
		e.putGrant(t, Grant{AppID: id, Plane: PlaneControl, PrincipalKind: authz.KindUser, PrincipalID: owner, RoleID: ptr(authz.RoleOwner)})
		e.putGrant(t, Grant{AppID: id, Plane: PlaneData, PrincipalKind: authz.KindUser, PrincipalID: owner})
	}
	return id
}

func (e *shareEnv) adminCaller() authz.Caller { return e.userCaller(e.admin.ID) }

func (e *shareEnv) policy(p func(*policy.Policy)) {
	pp := policy.Default()
	p(&pp)
	e.pol.p = pp
}

func (e *shareEnv) getGrant(t *testing.T, id string) Grant {
	t.Helper()
	g, _, ok := Grants.Get(e.store.Read(), id)
	if !ok {
		t.Fatalf("no grant %s", id)
	}
	return g
}

func (e *shareEnv) create(t *testing.T, c authz.Caller, appID string, n NewGrant) GrantInfo {
	t.Helper()
	g, err := e.sh.CreateGrant(bg, c, appID, n)
	must(t, fmt.Sprintf("create grant %+v", n), err)
	return g
}

func TestCreateGrantRefusesMalformedGrants(t *testing.T) {
	e := newShareEnv(t)
	app := e.app(t, "Shape", e.admin.ID)
	bob := e.mkUser(t, "bob")
	s := func(v string) *string { return &v }
	cases := []struct {
		name  string
		n     NewGrant
		field string
	}{
		{"no plane", NewGrant{PrincipalKind: "user", PrincipalID: bob.ID}, "plane"},
		{"unknown plane", NewGrant{Plane: "both", PrincipalKind: "user", PrincipalID: bob.ID}, "plane"},
		{"unknown kind", NewGrant{Plane: PlaneData, PrincipalKind: "robot", PrincipalID: bob.ID}, "principal_kind"},
		{"no principal", NewGrant{Plane: PlaneData, PrincipalKind: "user"}, "principal_id"},
		{"anonymous with a principal", NewGrant{Plane: PlaneData, PrincipalKind: "anonymous", PrincipalID: bob.ID}, "principal_id"},
		{"anonymous managing", NewGrant{Plane: PlaneControl, PrincipalKind: "anonymous", RoleID: s(authz.RoleViewer)}, "plane"},
		{"control without a role", NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID}, "role_id"},
		{"control with an empty role", NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: s("")}, "role_id"},
		{"data with a role", NewGrant{Plane: PlaneData, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: s(authz.RoleViewer)}, "role_id"},
		{"a passcode for a user", NewGrant{Plane: PlaneData, PrincipalKind: "user", PrincipalID: bob.ID, Passcode: s("hunter22")}, "passcode"},
		{"a short passcode", NewGrant{Plane: PlaneData, PrincipalKind: "anonymous", Passcode: s("12345")}, "passcode"},
		{"a huge passcode", NewGrant{Plane: PlaneData, PrincipalKind: "anonymous", Passcode: s(strings.Repeat("p", PasscodeMaxLen+1))}, "passcode"},
		{"a passcode of spaces", NewGrant{Plane: PlaneData, PrincipalKind: "anonymous", Passcode: s("        ")}, "passcode"},
		{"a passcode with a control character", NewGrant{Plane: PlaneData, PrincipalKind: "anonymous", Passcode: s("pass\x00code")}, "passcode"},
		{"a passcode not UTF-8", NewGrant{Plane: PlaneData, PrincipalKind: "anonymous", Passcode: s("pass\xffcode")}, "passcode"},
		{"an unknown account", NewGrant{Plane: PlaneData, PrincipalKind: "user", PrincipalID: ids.New(ids.User)}, "principal_id"},
		{"an unknown group", NewGrant{Plane: PlaneData, PrincipalKind: "group", PrincipalID: ids.New(ids.Group)}, "principal_id"},
		{"an unknown token", NewGrant{Plane: PlaneData, PrincipalKind: "token", PrincipalID: ids.New(ids.Token)}, "principal_id"},
		{"an unknown role", NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: s("role_nope")}, "role_id"},
		{"an installation role", NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: s(authz.RoleAdmin)}, "role_id"},
	}
	m := e.mark()
	for _, c := range cases {
		_, err := e.sh.CreateGrant(bg, e.adminCaller(), app, c.n)
		if err := wantCode(t, c.name, err, errcode.ValidInvalid); err != nil && err.Details["field"] != c.field {
			t.Errorf("%s: details.field = %v, want %s (%s)", c.name, err.Details["field"], c.field, err.Message)
		}
	}
	_, err := e.sh.CreateGrant(bg, e.adminCaller(), ids.New(ids.App), NewGrant{Plane: PlaneData, PrincipalKind: "user", PrincipalID: bob.ID})
	wantCode(t, "an unknown app", err, errcode.NotFound)
	if got := e.auditSince(m, ""); len(got) != 0 {
		t.Errorf("refusals wrote %d audit entries", len(got))
	}
	if e.hasher.hash.Load() != 0 {
		t.Errorf("refusals hashed %d passcodes", e.hasher.hash.Load())
	}
}

func TestCreateGrantPrincipals(t *testing.T) {
	e := newShareEnv(t)
	app := e.app(t, "Principals", e.admin.ID)
	bob, carol := e.mkUser(t, "bob"), e.mkUser(t, "carol")
	_, err := e.svc.UpdateUser(bg, e.adminCaller(), carol.ID, UserPatch{Status: ptr(StatusSuspended)})
	must(t, "suspend carol", err)
	g := e.mkGroup(t, "team", nil, bob.ID)
	svcTok, _ := e.mkToken(t, e.adminCaller(), TokenService, "ci")
	delegated, _ := e.mkToken(t, e.userCaller(bob.ID), TokenDelegated, "bob's")

	e.create(t, e.adminCaller(), app, NewGrant{Plane: PlaneData, PrincipalKind: "user", PrincipalID: bob.ID})
	e.create(t, e.adminCaller(), app, NewGrant{Plane: PlaneControl, PrincipalKind: "group", PrincipalID: g.ID, RoleID: ptr(authz.RoleDeveloper)})
	e.create(t, e.adminCaller(), app, NewGrant{Plane: PlaneControl, PrincipalKind: "token", PrincipalID: svcTok.ID, RoleID: ptr(authz.RoleViewer)})
	custom, err := e.svc.CreateRole(bg, "deployer", authz.ScopeApp, []authz.Verb{authz.AppView, authz.AppDeploy})
	must(t, "custom role", err)
	e.create(t, e.adminCaller(), app, NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: &custom.ID})

	_, err = e.sh.CreateGrant(bg, e.adminCaller(), app, NewGrant{Plane: PlaneData, PrincipalKind: "user", PrincipalID: carol.ID})
	if ce := wantCode(t, "a suspended account", err, errcode.StateInvalid); ce != nil && ce.Details["field"] != "principal_id" {
		t.Errorf("details = %v", ce.Details)
	}
	_, err = e.sh.CreateGrant(bg, e.adminCaller(), app, NewGrant{Plane: PlaneData, PrincipalKind: "token", PrincipalID: delegated.ID})
	wantCode(t, "a delegated token", err, errcode.ValidInvalid)

	// One grant per plane and principal.
	_, err = e.sh.CreateGrant(bg, e.adminCaller(), app, NewGrant{Plane: PlaneData, PrincipalKind: "user", PrincipalID: bob.ID})
	if ce := wantCode(t, "a second data grant to bob", err, errcode.StateInvalid); ce != nil && ce.Details["grant_id"] == nil {
		t.Errorf("the refusal does not name the grant: %v", ce.Details)
	}
	_, err = e.sh.CreateGrant(bg, e.adminCaller(), app, NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: ptr(authz.RoleOwner)})
	wantCode(t, "a second management grant to bob", err, errcode.StateInvalid)

	// What the grants give, through the authorization facts.
	r := e.store.Read()
	if v := authz.AppVerbs(FactsOf(r), userPrincipal(bob.ID), app, authz.Floor{}); !v.Has(authz.AppDeploy) || !v.Has(authz.AppSpecEdit) || v.Has(authz.AppDelete) {
		t.Errorf("bob's verbs (custom role and the group's developer) = %v", v.Verbs())
	}
	if !CanOpen(r, app, userPrincipal(bob.ID)) {
		t.Error("bob cannot open the app shared with him")
	}
	svcP := authz.Principal{Kind: authz.KindToken, ID: svcTok.ID}
	if v := authz.AppVerbs(FactsOf(r), svcP, app, authz.Floor{}); !v.Has(authz.AppView) || v.Has(authz.AppDeploy) {
		t.Errorf("the service token's verbs = %v", v.Verbs())
	}
}

func TestCreateGrantWritesOneEntryAndItsEvent(t *testing.T) {
	e := newShareEnv(t)
	app := e.app(t, "Evented", e.admin.ID)
	bob := e.mkUser(t, "bob")
	m := e.mark()
	g := e.create(t, e.adminCaller(), app, NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: ptr(authz.RoleViewer)})
	if !ids.Valid(ids.Grant, g.ID) || g.AppID != app || g.PrincipalID == nil || *g.PrincipalID != bob.ID || *g.RoleID != authz.RoleViewer || g.Passcode {
		t.Errorf("grant = %+v", g)
	}
	entry := e.oneAudit(t, m, "grant.create")
	ev := e.oneEvent(t, m, "grant.created")
	if entry.Meta.CreateIndex != ev.Meta.CreateIndex || entry.Meta.CreateIndex != e.store.Read().TableIndex(Grants) {
		t.Errorf("the grant, its entry and its event are not one write: %d %d", entry.Meta.CreateIndex, ev.Meta.CreateIndex)
	}
	if *entry.Value.AppID != app || *entry.Value.TargetKind != "grant" || *entry.Value.TargetID != g.ID {
		t.Errorf("entry = %+v", entry.Value)
	}
	wantData(t, "grant.created", ev.Value.Data, map[string]any{"plane": "control", "role_id": authz.RoleViewer,
		"principal_kind": "user", "principal_id": bob.ID, "passcode": false, "target_kind": "grant", "target_id": g.ID})
	if ev.Value.App == nil || ev.Value.App.ID != app || ev.Value.App.Name != "Evented" || ev.Value.App.Slug != "evented" {
		t.Errorf("event app = %+v", ev.Value.App)
	}
	if len(e.auditSince(m, "")) != 1 {
		t.Errorf("one grant wrote %d entries", len(e.auditSince(m, "")))
	}
}

func TestAnonymousGrantObeysHostPolicy(t *testing.T) {
	e := newShareEnv(t)
	anon := func(code string) NewGrant {
		n := NewGrant{Plane: PlaneData, PrincipalKind: authz.KindAnonymous}
		if code != "" {
			n.Passcode = &code
		}
		return n
	}
	cases := []struct {
		name                 string
		set                  func(*policy.Policy)
		plain, withPasscode  bool // allowed
		wantMessageForNoCode string
	}{
		{"allowed", func(p *policy.Policy) { p.PublicSharing = policy.SharingAllowed }, true, true, ""},
		{"unset, anonymous grants allowed", func(p *policy.Policy) {}, true, true, ""},
		{"passcode_only", func(p *policy.Policy) { p.PublicSharing = policy.SharingPasscodeOnly }, false, true, "passcode"},
		{"none", func(p *policy.Policy) { p.PublicSharing = policy.SharingNone }, false, false, "forbids"},
		{"unset, anonymous grants off", func(p *policy.Policy) { p.AllowAnonymousGrants = false }, false, false, "forbids"},
		{"passcode_only wins over allow_anonymous_grants", func(p *policy.Policy) {
			p.PublicSharing, p.AllowAnonymousGrants = policy.SharingPasscodeOnly, false
		}, false, true, "passcode"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.policy(c.set)
			for _, code := range []string{"", "open-sesame"} {
				app := e.app(t, "Public", e.admin.ID)
				m := e.mark()
				g, err := e.sh.CreateGrant(bg, e.adminCaller(), app, anon(code))
				want := c.plain
				if code != "" {
					want = c.withPasscode
				}
				if !want {
					ce := wantCode(t, "refused", err, errcode.PolicyAnonymousGrant)
					if ce != nil && code == "" && !strings.Contains(ce.Message, c.wantMessageForNoCode) {
						t.Errorf("message %q does not say %q", ce.Message, c.wantMessageForNoCode)
					}
					if len(e.auditSince(m, "")) != 0 {
						t.Error("a refusal wrote an audit entry")
					}
					continue
				}
				must(t, "anonymous grant", err)
				if g.PrincipalID != nil || g.Passcode != (code != "") || g.RoleID != nil {
					t.Errorf("grant = %+v", g)
				}
				ev := e.oneEvent(t, m, "grant.created")
				wantData(t, "grant.created", ev.Value.Data, map[string]any{"principal_kind": "anonymous", "principal_id": nil, "passcode": code != "", "role_id": nil, "plane": "data"})
			}
		})
	}
}

// TestEscalationAndTheLastManager: a caller gives, changes and takes away
// only roles within its own verbs; an app keeps a grant able to manage its
// sharing unless an administrator acts.
func TestEscalationAndTheLastManager(t *testing.T) {
	e := newShareEnv(t)
	owner := e.mkUser(t, "owner")
	app := e.app(t, "Guarded", owner.ID)
	sharer := e.mkUser(t, "sharer")
	onlyShare, err := e.svc.CreateRole(bg, "sharer", authz.ScopeApp, []authz.Verb{authz.AppGrantsMgmt})
	must(t, "role", err)
	e.create(t, e.userCaller(owner.ID), app, NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: sharer.ID, RoleID: &onlyShare.ID})
	bob := e.mkUser(t, "bob")

	// The sharer may open the app to others, and give its own role...
	e.create(t, e.userCaller(sharer.ID), app, NewGrant{Plane: PlaneData, PrincipalKind: "user", PrincipalID: bob.ID})
	bobCtl := e.create(t, e.userCaller(sharer.ID), app, NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: &onlyShare.ID})
	// ...but not a role with verbs it lacks, nor touch the owner's.
	carol := e.mkUser(t, "carol")
	_, err = e.sh.CreateGrant(bg, e.userCaller(sharer.ID), app, NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: carol.ID, RoleID: ptr(authz.RoleViewer)})
	if ce := wantCode(t, "give viewer without app.view", err, errcode.PermDenied); ce != nil && !slices.Contains(ce.Details["verbs"].([]string), "app.view") {
		t.Errorf("details = %v", ce.Details)
	}
	_, err = e.sh.UpdateGrant(bg, e.userCaller(sharer.ID), app, bobCtl.ID, GrantPatch{RoleID: ptr(authz.RoleOwner)})
	wantCode(t, "promote bob to owner", err, errcode.PermDenied)
	ownerGrant := e.grantOf(t, app, PlaneControl, owner.ID)
	_, err = e.sh.UpdateGrant(bg, e.userCaller(sharer.ID), app, ownerGrant, GrantPatch{RoleID: &onlyShare.ID})
	wantCode(t, "demote the owner", err, errcode.PermDenied)
	wantCode(t, "remove the owner", e.sh.DeleteGrant(bg, e.userCaller(sharer.ID), app, ownerGrant), errcode.PermDenied)

	// Policy's floor does not stop an owner sharing what it owns.
	e.policy(func(p *policy.Policy) { p.DisabledVerbs = []string{"app.exec"} })
	e.create(t, e.userCaller(owner.ID), app, NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: carol.ID, RoleID: ptr(authz.RoleOwner)})
	e.policy(func(*policy.Policy) {})

	// The last grant able to manage sharing stays, unless an administrator
	// removes it.
	solo := e.app(t, "Solo", owner.ID)
	soloOwner := e.grantOf(t, solo, PlaneControl, owner.ID)
	_, err = e.sh.UpdateGrant(bg, e.userCaller(owner.ID), solo, soloOwner, GrantPatch{RoleID: ptr(authz.RoleDeveloper)})
	if ce := wantCode(t, "demote the last owner", err, errcode.StateInvalid); ce != nil && ce.Details["protected"] != "app.grants.manage" {
		t.Errorf("details = %v", ce.Details)
	}
	wantCode(t, "remove the last owner", e.sh.DeleteGrant(bg, e.userCaller(owner.ID), solo, soloOwner), errcode.StateInvalid)
	// With a second manager, the first may go.
	dave := e.mkUser(t, "dave")
	e.create(t, e.userCaller(owner.ID), solo, NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: dave.ID, RoleID: ptr(authz.RoleOwner)})
	must(t, "demote with another owner", func() error {
		_, err := e.sh.UpdateGrant(bg, e.userCaller(owner.ID), solo, soloOwner, GrantPatch{RoleID: ptr(authz.RoleDeveloper)})
		return err
	}())
	daveGrant := e.grantOf(t, solo, PlaneControl, dave.ID)
	wantCode(t, "the new last owner", e.sh.DeleteGrant(bg, e.userCaller(dave.ID), solo, daveGrant), errcode.StateInvalid)
	must(t, "an administrator removes the last owner", e.sh.DeleteGrant(bg, e.adminCaller(), solo, daveGrant))
}

// grantOf returns the ID of the grant on app of plane to a user.
func (e *shareEnv) grantOf(t *testing.T, app, plane, userID string) string {
	t.Helper()
	for _, g := range appGrants(e.store.Read(), app) {
		if g.Plane == plane && g.PrincipalKind == authz.KindUser && g.PrincipalID == userID {
			return g.ID
		}
	}
	t.Fatalf("no %s grant to %s on %s", plane, userID, app)
	return ""
}

func TestUpdateGrantRole(t *testing.T) {
	e := newShareEnv(t)
	app := e.app(t, "Roles", e.admin.ID)
	bob := e.mkUser(t, "bob")
	g := e.create(t, e.adminCaller(), app, NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: ptr(authz.RoleViewer)})
	data := e.create(t, e.adminCaller(), app, NewGrant{Plane: PlaneData, PrincipalKind: "user", PrincipalID: bob.ID})

	m := e.mark()
	got, err := e.sh.UpdateGrant(bg, e.adminCaller(), app, g.ID, GrantPatch{RoleID: ptr(authz.RoleDeveloper)})
	must(t, "change the role", err)
	if *got.RoleID != authz.RoleDeveloper || got.ID != g.ID || !got.CreatedAt.Equal(g.CreatedAt) {
		t.Errorf("grant = %+v", got)
	}
	entry, ev := e.oneAudit(t, m, "grant.update"), e.oneEvent(t, m, "grant.role_changed")
	if entry.Meta.CreateIndex != ev.Meta.CreateIndex {
		t.Error("the change and its event are not one write")
	}
	wantData(t, "grant.role_changed", ev.Value.Data, map[string]any{"role_id": authz.RoleDeveloper, "target_id": g.ID})
	wantData(t, "grant.update", entry.Value.Details, map[string]any{"role_id": authz.RoleDeveloper, "previous_role_id": authz.RoleViewer})
	if n := len(e.eventsSince(m, "")); n != 1 {
		t.Errorf("a role change emitted %d events", n)
	}
	if !authz.AppVerbs(FactsOf(e.store.Read()), userPrincipal(bob.ID), app, authz.Floor{}).Has(authz.AppDeploy) {
		t.Error("bob does not hold the new role")
	}

	// The same role again writes nothing.
	m = e.mark()
	_, err = e.sh.UpdateGrant(bg, e.adminCaller(), app, g.ID, GrantPatch{RoleID: ptr(authz.RoleDeveloper)})
	must(t, "same role", err)
	if len(e.auditSince(m, "")) != 0 {
		t.Error("an unchanged role was written")
	}

	for _, c := range []struct {
		name, id string
		p        GrantPatch
		code     errcode.Code
	}{
		{"nothing", g.ID, GrantPatch{}, errcode.ValidInvalid},
		{"an empty role", g.ID, GrantPatch{RoleID: ptr("")}, errcode.ValidInvalid},
		{"a role on a data grant", data.ID, GrantPatch{RoleID: ptr(authz.RoleViewer)}, errcode.ValidInvalid},
		{"an installation role", g.ID, GrantPatch{RoleID: ptr(authz.RoleAuditor)}, errcode.ValidInvalid},
		{"a passcode on bob's grant", data.ID, GrantPatch{Passcode: ptr("open-sesame")}, errcode.ValidInvalid},
		{"an unknown grant", ids.New(ids.Grant), GrantPatch{RoleID: ptr(authz.RoleViewer)}, errcode.NotFound},
	} {
		_, err := e.sh.UpdateGrant(bg, e.adminCaller(), app, c.id, c.p)
		wantCode(t, c.name, err, c.code)
	}
	other := e.app(t, "Other", e.admin.ID)
	_, err = e.sh.UpdateGrant(bg, e.adminCaller(), other, g.ID, GrantPatch{RoleID: ptr(authz.RoleViewer)})
	wantCode(t, "a grant of another app", err, errcode.NotFound)
	wantCode(t, "delete a grant of another app", e.sh.DeleteGrant(bg, e.adminCaller(), other, g.ID), errcode.NotFound)
}

func TestDeleteGrant(t *testing.T) {
	e := newShareEnv(t)
	e.policy(func(p *policy.Policy) { p.PublicSharing = policy.SharingAllowed })
	app := e.app(t, "Deleted", e.admin.ID)
	bob := e.mkUser(t, "bob")
	g := e.create(t, e.adminCaller(), app, NewGrant{Plane: PlaneData, PrincipalKind: "user", PrincipalID: bob.ID})
	anon := e.create(t, e.adminCaller(), app, NewGrant{Plane: PlaneData, PrincipalKind: "anonymous", Passcode: ptr("open-sesame")})
	for _, id := range []string{g.ID, anon.ID} {
		m := e.mark()
		must(t, "delete", e.sh.DeleteGrant(bg, e.adminCaller(), app, id))
		if e.grantExists(id) {
			t.Errorf("grant %s remains", id)
		}
		entry, ev := e.oneAudit(t, m, "grant.delete"), e.oneEvent(t, m, "grant.deleted")
		if entry.Meta.CreateIndex != ev.Meta.CreateIndex {
			t.Error("the removal and its event are not one write")
		}
		wantData(t, "grant.deleted", ev.Value.Data, map[string]any{"scope": "app", "target_kind": "grant", "target_id": id})
		if ev.Value.App == nil || ev.Value.App.Name != "Deleted" {
			t.Errorf("event app = %+v", ev.Value.App)
		}
	}
	wantCode(t, "again", e.sh.DeleteGrant(bg, e.adminCaller(), app, g.ID), errcode.NotFound)
	if CanOpen(e.store.Read(), app, userPrincipal(bob.ID)) {
		t.Error("bob still opens the app")
	}
}

// TestConcurrentDuplicateGrants: two requests giving the same grant at once
// leave one grant; the other is refused as a duplicate.
func TestConcurrentDuplicateGrants(t *testing.T) {
	e := newShareEnv(t)
	app := e.app(t, "Race", e.admin.ID)
	bob := e.mkUser(t, "bob")
	e.sh.d.Store = newBarrierStore(e.store, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.sh.CreateGrant(bg, e.adminCaller(), app, NewGrant{Plane: PlaneData, PrincipalKind: "user", PrincipalID: bob.ID})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else if errcode.CodeOf(err) != errcode.StateInvalid {
			t.Errorf("the loser: %v, want STATE_INVALID", err)
		}
	}
	n := 0
	for _, g := range appGrants(e.store.Read(), app) {
		if g.PrincipalID == bob.ID {
			n++
		}
	}
	if ok != 1 || n != 1 {
		t.Errorf("%d succeeded, %d grants to bob; want 1 and 1", ok, n)
	}
}

// TestConcurrentLastManagers: two owners removing each other's grant at
// once cannot leave the app with nobody to manage it.
func TestConcurrentLastManagers(t *testing.T) {
	e := newShareEnv(t)
	a, b := e.mkUser(t, "ann"), e.mkUser(t, "ben")
	app := e.app(t, "Pair", a.ID)
	e.create(t, e.userCaller(a.ID), app, NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: b.ID, RoleID: ptr(authz.RoleOwner)})
	ga, gb := e.grantOf(t, app, PlaneControl, a.ID), e.grantOf(t, app, PlaneControl, b.ID)
	e.sh.d.Store = newBarrierStore(e.store, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, c := range []struct{ by, grant string }{{a.ID, gb}, {b.ID, ga}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.sh.DeleteGrant(bg, e.userCaller(c.by), app, c.grant)
		}()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("errors %v, %v: want exactly one removal", errs[0], errs[1])
	}
	n := 0
	for _, g := range appGrants(e.store.Read(), app) {
		if g.Plane == PlaneControl {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d management grants left, want 1", n)
	}
}

// TestRemovingPrincipalsRemovesTheirGrants: deleting an account, a group, a
// service token or a custom role deletes the grants to it with a
// grant.deleted each; the grant to everyone stays.
func TestRemovingPrincipalsRemovesTheirGrants(t *testing.T) {
	e := newShareEnv(t)
	e.policy(func(p *policy.Policy) { p.PublicSharing = policy.SharingAllowed })
	app := e.app(t, "Kept", e.admin.ID)
	anon := e.create(t, e.adminCaller(), app, NewGrant{Plane: PlaneData, PrincipalKind: "anonymous", Passcode: ptr("open-sesame")})
	bob := e.mkUser(t, "bob")
	grp := e.mkGroup(t, "team", nil)
	tok, _ := e.mkToken(t, e.adminCaller(), TokenService, "ci")
	role, err := e.svc.CreateRole(bg, "looker", authz.ScopeApp, []authz.Verb{authz.AppView})
	must(t, "role", err)
	carol := e.mkUser(t, "carol")
	cases := []struct {
		name   string
		grants []NewGrant
		remove func() error
	}{
		{"an account", []NewGrant{{Plane: PlaneData, PrincipalKind: "user", PrincipalID: bob.ID}, {Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: ptr(authz.RoleViewer)}},
			func() error { return e.svc.DeleteUser(bg, bob.ID) }},
		{"a group", []NewGrant{{Plane: PlaneData, PrincipalKind: "group", PrincipalID: grp.ID}},
			func() error { return e.svc.DeleteGroup(bg, grp.ID) }},
		{"a service token", []NewGrant{{Plane: PlaneControl, PrincipalKind: "token", PrincipalID: tok.ID, RoleID: ptr(authz.RoleViewer)}},
			func() error { return e.svc.RevokeToken(bg, e.adminCaller(), tok.ID) }},
		{"a custom role", []NewGrant{{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: carol.ID, RoleID: &role.ID}},
			func() error { return e.svc.DeleteRole(bg, role.ID) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var made []string
			for _, n := range c.grants {
				made = append(made, e.create(t, e.adminCaller(), app, n).ID)
			}
			m := e.mark()
			must(t, "remove", c.remove())
			var deleted []string
			for _, ev := range e.eventsSince(m, "grant.deleted") {
				if ev.Value.App != nil && ev.Value.App.ID == app {
					deleted = append(deleted, ev.Value.Data["target_id"].(string))
					wantData(t, "grant.deleted", ev.Value.Data, map[string]any{"scope": "app"})
				}
			}
			slices.Sort(made)
			slices.Sort(deleted)
			if !slices.Equal(made, deleted) {
				t.Errorf("grant.deleted for %v, want %v", deleted, made)
			}
			for _, id := range made {
				if e.grantExists(id) {
					t.Errorf("grant %s remains", id)
				}
			}
			if g := e.getGrant(t, anon.ID); !g.Passcode || g.PasscodeHash == "" {
				t.Errorf("the grant to everyone changed: %+v", g.Info())
			}
		})
	}
}

func TestGrantsListsTwoPlanes(t *testing.T) {
	e := newShareEnv(t)
	e.policy(func(p *policy.Policy) { p.PublicSharing = policy.SharingAllowed })
	app := e.app(t, "Listed", e.admin.ID)
	bob := e.mkUser(t, "bob")
	e.now = e.now.Add(time.Second)
	e.create(t, e.adminCaller(), app, NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: ptr(authz.RoleViewer)})
	e.now = e.now.Add(time.Second)
	anon := e.create(t, e.adminCaller(), app, NewGrant{Plane: PlaneData, PrincipalKind: "anonymous", Passcode: ptr("open-sesame")})
	got, err := e.sh.Grants(app)
	must(t, "grants", err)
	if len(got.Management) != 2 || len(got.Access) != 2 || got.Management[1].PrincipalID == nil || *got.Management[1].PrincipalID != bob.ID {
		t.Fatalf("grants = %+v", got)
	}
	if a := got.Access[1]; a.ID != anon.ID || !a.Passcode || a.PrincipalID != nil {
		t.Errorf("the grant to everyone = %+v", a)
	}
	if _, err := e.sh.Grants(ids.New(ids.App)); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("an unknown app: %v", err)
	}
}

func TestPrincipalSearch(t *testing.T) {
	e := newShareEnv(t)
	app := e.app(t, "Search", e.admin.ID)
	for i := range 25 {
		_, _, err := e.svc.CreateUser(bg, NewUser{Username: fmt.Sprintf("dev%02d", i), DisplayName: "Developer", Password: testPW})
		must(t, "user", err)
	}
	alice, _, err := e.svc.CreateUser(bg, NewUser{Username: "alice", DisplayName: "Alice Liddell", Email: "Alice@Example.com", Password: testPW})
	must(t, "alice", err)
	sus := e.mkUser(t, "alicia")
	_, err = e.svc.UpdateUser(bg, e.adminCaller(), sus.ID, UserPatch{Status: ptr(StatusSuspended)})
	must(t, "suspend", err)
	e.mkGroup(t, "Alice's team", nil)
	for i := range 22 {
		e.mkGroup(t, fmt.Sprintf("devs-%02d", i), nil)
	}
	cases := []struct {
		q             string
		users, groups int
		first         string
	}{
		{"LIDDELL", 1, 0, "alice"},
		{"example.COM", 1, 0, "alice"},
		{"ali", 1, 1, "alice"},
		{"dev", 20, 20, "dev00"},
		{"", 20, 20, "admin"},
		{"nobody", 0, 0, ""},
	}
	for _, c := range cases {
		got, err := e.sh.Principals(app, c.q)
		must(t, "search "+c.q, err)
		if len(got.Users) != c.users || len(got.Groups) != c.groups {
			t.Errorf("q=%q: %d users, %d groups; want %d, %d", c.q, len(got.Users), len(got.Groups), c.users, c.groups)
		}
		if c.first != "" && (len(got.Users) == 0 || got.Users[0].Username != c.first) {
			t.Errorf("q=%q: first user %+v, want %s", c.q, got.Users, c.first)
		}
	}
	got, _ := e.sh.Principals(app, "alice")
	if len(got.Users) != 1 || got.Users[0] != (PrincipalUser{ID: alice.ID, Username: "alice", DisplayName: "Alice Liddell", Email: "Alice@Example.com"}) {
		t.Errorf("alice = %+v", got.Users)
	}
	for _, q := range []string{strings.Repeat("a", MaxPrincipalQuery+1), "a\x00b", "tab\there", "\xff"} {
		_, err := e.sh.Principals(app, q)
		if ce := wantCode(t, fmt.Sprintf("q=%q", q), err, errcode.ValidInvalid); ce != nil && ce.Details["field"] != "q" {
			t.Errorf("details = %v", ce.Details)
		}
	}
	_, err = e.sh.Principals(ids.New(ids.App), "a")
	wantCode(t, "an unknown app", err, errcode.NotFound)
}

func TestUserAndGroupApps(t *testing.T) {
	e := newShareEnv(t)
	bob := e.mkUser(t, "bob")
	grp := e.mkGroup(t, "team", nil, bob.ID)
	direct := e.app(t, "Direct", e.admin.ID)
	viaGroup := e.app(t, "Via group", e.admin.ID)
	openOnly := e.app(t, "Open only", e.admin.ID)
	both := e.app(t, "Both", e.admin.ID)
	hidden := e.app(t, "Hidden", "") // nobody but administrators sees it
	e.app(t, "Nothing", e.admin.ID)
	for _, n := range []struct {
		app string
		n   NewGrant
	}{
		{direct, NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: ptr(authz.RoleDeveloper)}},
		{viaGroup, NewGrant{Plane: PlaneControl, PrincipalKind: "group", PrincipalID: grp.ID, RoleID: ptr(authz.RoleViewer)}},
		{openOnly, NewGrant{Plane: PlaneData, PrincipalKind: "group", PrincipalID: grp.ID}},
		{both, NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: ptr(authz.RoleViewer)}},
		{both, NewGrant{Plane: PlaneControl, PrincipalKind: "group", PrincipalID: grp.ID, RoleID: ptr(authz.RoleOwner)}},
		{both, NewGrant{Plane: PlaneData, PrincipalKind: "user", PrincipalID: bob.ID}},
		{hidden, NewGrant{Plane: PlaneData, PrincipalKind: "user", PrincipalID: bob.ID}},
	} {
		e.create(t, e.adminCaller(), n.app, n.n)
	}
	type row struct {
		name, role, via string
		open, manage    bool
	}
	summarize := func(items []AppAccess) []row {
		out := []row{}
		for _, a := range items {
			r := row{name: a.App.Name, open: a.CanOpen, manage: a.CanManage}
			if a.RoleID != nil {
				r.role, r.via = *a.RoleID, *a.Via
				if (a.Via != nil && *a.Via == ViaGroup) != (a.GroupID != nil && *a.GroupID == grp.ID) {
					t.Errorf("%s: via %v, group %v", a.App.Name, *a.Via, a.GroupID)
				}
			}
			out = append(out, r)
		}
		return out
	}
	check := func(what string, got, want []row) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
		}
	}

	// The administrator sees every app.
	items, err := e.sh.UserApps(e.adminCaller(), bob.ID)
	must(t, "bob's apps", err)
	check("bob's apps, to the administrator", summarize(items), []row{
		{"Both", authz.RoleOwner, ViaGroup, true, true},
		{"Direct", authz.RoleDeveloper, ViaDirect, false, true},
		{"Hidden", "", "", true, false},
		{"Open only", "", "", true, false},
		{"Via group", authz.RoleViewer, ViaGroup, false, true},
	})
	// Bob sees his own without a verb, all of which he can see.
	items, err = e.sh.UserApps(e.userCaller(bob.ID), bob.ID)
	must(t, "own apps", err)
	if len(items) != 5 {
		t.Errorf("bob sees %d of his apps, want 5", len(items))
	}
	// An auditor sees every app, a viewer of one only that one.
	carol := e.mkUser(t, "carol")
	_, err = e.sh.UserApps(e.userCaller(carol.ID), bob.ID)
	wantVerb(t, "someone else's without install.view", err, authz.InstallView)
	_, err = e.sh.UserApps(e.userCaller(carol.ID), ids.New(ids.User))
	wantVerb(t, "an unknown account without install.view", err, authz.InstallView)
	viewer := e.mkUserWithRole(t, "vic", authz.RoleAuditor)
	items, _ = e.sh.UserApps(e.userCaller(viewer.ID), bob.ID)
	if len(items) != 5 {
		t.Errorf("an auditor sees %d apps, want 5", len(items))
	}
	custom, err := e.svc.CreateRole(bg, "peeker", authz.ScopeInstall, []authz.Verb{authz.InstallView})
	must(t, "role", err)
	peeker := e.mkUserWithRole(t, "peeker", custom.ID)
	e.create(t, e.adminCaller(), direct, NewGrant{Plane: PlaneControl, PrincipalKind: "user", PrincipalID: peeker.ID, RoleID: ptr(authz.RoleViewer)})
	items, _ = e.sh.UserApps(e.userCaller(peeker.ID), bob.ID)
	check("bob's apps, to a viewer of one", summarize(items), []row{{"Direct", authz.RoleDeveloper, ViaDirect, false, true}})
	_, err = e.sh.UserApps(e.adminCaller(), ids.New(ids.User))
	wantCode(t, "an unknown account", err, errcode.NotFound)

	// Under a floor that disables every verb of a role, it manages nothing.
	e.policy(func(p *policy.Policy) { p.DisabledVerbs = []string{"app.view", "app.logs.read"} })
	items, _ = e.sh.UserApps(e.adminCaller(), bob.ID)
	for _, a := range items {
		if a.App.Name == "Via group" && a.CanManage {
			t.Error("a viewer role under a floor disabling its verbs can manage")
		}
	}
	e.policy(func(*policy.Policy) {})

	items, err = e.sh.GroupApps(e.adminCaller(), grp.ID)
	must(t, "group apps", err)
	check("the group's apps", summarize(items), []row{
		{"Both", authz.RoleOwner, ViaDirect, false, true},
		{"Open only", "", "", true, false},
		{"Via group", authz.RoleViewer, ViaDirect, false, true},
	})
	items, _ = e.sh.GroupApps(e.userCaller(peeker.ID), grp.ID)
	if len(items) != 0 {
		t.Errorf("a caller seeing none of the group's apps sees %d", len(items))
	}
	_, err = e.sh.GroupApps(e.adminCaller(), ids.New(ids.Group))
	wantCode(t, "an unknown group", err, errcode.NotFound)
}

// TestGrantAlwaysOvertakenGivesUp: a change that another write overtakes
// every time it is built is built again a bounded number of times, then
// refused STORE_UNAVAILABLE with a wait: the store is busy, which says
// nothing about the request (not STATE_INVALID), and nothing is written.
func TestGrantAlwaysOvertakenGivesUp(t *testing.T) {
	e := newShareEnv(t)
	app := e.app(t, "Busy", e.admin.ID)
	bob := e.mkUser(t, "bob")
	tries := 0
	e.sh.d.Store = &alwaysRacing{Store: e.store, before: func() {
		tries++
		e.putGrant(t, Grant{AppID: ids.New(ids.App), Plane: PlaneData, PrincipalKind: "user", PrincipalID: bob.ID})
	}}
	_, err := e.sh.CreateGrant(bg, e.adminCaller(), app, NewGrant{Plane: PlaneData, PrincipalKind: "user", PrincipalID: bob.ID})
	ec := wantCode(t, "always overtaken", err, errcode.StoreUnavailable)
	if ec != nil && ec.RetryAfter == 0 {
		t.Errorf("no wait said: %+v", ec)
	}
	// The store's retry policy (raftstore/DESIGN.md, Writing): at most 12.
	if tries < 2 || tries > 12 {
		t.Errorf("built %d times, want 2 to 12", tries)
	}
	if CanOpen(e.store.Read(), app, userPrincipal(bob.ID)) {
		t.Error("the refused grant was written")
	}
}

// alwaysRacing lets another grant in after every build of a change, before
// it reaches the store.
type alwaysRacing struct {
	Store
	before func()
}

func (a *alwaysRacing) Update(ctx context.Context, build raftstore.Build) (uint64, error) {
	return a.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		ops, err := build(r)
		a.before()
		return ops, err
	})
}

// TestRemovingAPrincipalRacingAGrantToIt: an account, a group or a service
// token removed while a grant to it is given (the grant commits between
// the removal's read and its write): the removal is built again and takes
// that grant too, so no grant names a principal that is gone.
func TestRemovingAPrincipalRacingAGrantToIt(t *testing.T) {
	for _, kind := range []string{authz.KindUser, "group", authz.KindToken} {
		t.Run(kind, func(t *testing.T) {
			e := newShareEnv(t)
			app := e.app(t, "Raced", e.admin.ID)
			var id string
			switch kind {
			case authz.KindUser:
				id = e.mkUser(t, "bob").ID
			case "group":
				id = e.mkGroup(t, "team", nil).ID
			default:
				tok, _ := e.mkToken(t, e.adminCaller(), TokenService, "ci")
				id = tok.ID
			}
			racing := e.withService(t, Deps{Store: &hookStore{Store: e.store, before: func() {
				e.create(t, e.adminCaller(), app, NewGrant{Plane: PlaneData, PrincipalKind: kind, PrincipalID: id})
			}}})
			var err error
			switch kind {
			case authz.KindUser:
				err = racing.DeleteUser(bg, id)
			case "group":
				err = racing.DeleteGroup(bg, id)
			default:
				err = racing.RevokeToken(bg, e.adminCaller(), id)
			}
			must(t, "remove the principal", err)
			for _, g := range appGrants(e.store.Read(), app) {
				if g.PrincipalID == id {
					t.Errorf("grant %s still names the removed %s %s", g.ID, kind, id)
				}
			}
		})
	}
}
