package server

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/ids"
)

// newSharingHarness is a harness whose host policy lets apps be shared
// with everyone.
func newSharingHarness(t testing.TB, more ...string) *harness {
	t.Helper()
	return newHarnessWith(t, harnessOptions{adminPassword: adminPassword, env: append([]string{"SVC_POLICY_PUBLIC_SHARING=allowed"}, more...)})
}

// grantTo inserts a grant directly (no rules checked) and returns its ID.
func (h *harness) grantTo(t testing.TB, appID, plane, kind, principalID string, roleID *string) string {
	t.Helper()
	g := identity.Grant{ID: ids.New(ids.Grant), AppID: appID, Plane: plane, PrincipalKind: kind, PrincipalID: principalID,
		RoleID: roleID, CreatedAt: time.Now().UTC()}
	if _, err := h.store.Apply(context.Background(), identity.Grants.Insert(&g)); err != nil {
		t.Fatalf("grant on %s: %v", appID, err)
	}
	return g.ID
}

// passcodeApp creates an app shared with everyone behind code, through the
// API.
func (h *harness) passcodeApp(t testing.TB, name, code string) string {
	t.Helper()
	app := h.app(t, name)
	a := h.send("POST", api+"/apps/"+app+"/grants", jsonOf(map[string]string{"plane": "data", "principal_kind": "anonymous", "passcode": code}))
	if a.status != http.StatusCreated {
		t.Fatalf("share %s with everyone: %d %s", name, a.status, a.body)
	}
	return app
}

// enterPasscode posts a passcode without a credential, from addr.
func (h *harness) enterPasscode(app, code, addr string) answer {
	req := httptest.NewRequest("POST", api+"/apps/"+app+"/passcode", strings.NewReader(jsonOf(map[string]string{"passcode": code})))
	req.Header.Set("Content-Type", "application/json")
	req.RemoteAddr = addr
	rec := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(rec, req)
	return answer{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

func TestSharingAPI(t *testing.T) {
	h := newSharingHarness(t)
	app := h.app(t, "Shared")
	grants := func() identity.AppGrants {
		t.Helper()
		a := h.send("GET", api+"/apps/"+app+"/grants", "")
		wantStatus(t, "grants", a, http.StatusOK)
		return decodeAs[identity.AppGrants](t, a)
	}
	g := grants()
	if len(g.Management) != 1 || *g.Management[0].RoleID != authz.RoleOwner || *g.Management[0].PrincipalID != h.adminID ||
		len(g.Access) != 1 || g.Access[0].RoleID != nil {
		t.Fatalf("a new app's grants = %+v", g)
	}

	bob := h.account(t, "bob", nil, true)
	a := h.send("POST", api+"/apps/"+app+"/grants", jsonOf(map[string]string{"plane": "control", "principal_kind": "user", "principal_id": bob.userID, "role_id": "role_viewer"}))
	wantStatus(t, "share with bob", a, http.StatusCreated)
	created := decodeAs[grantAnswer](t, a).Grant
	if !ids.Valid(ids.Grant, created.ID) || created.AppID != app || created.Plane != "control" || *created.RoleID != "role_viewer" || created.Passcode {
		t.Errorf("grant = %s", a.body)
	}
	for _, field := range []string{`"principal_id":"` + bob.userID + `"`, `"passcode":false`, `"created_at":"`} {
		if !bytes.Contains(a.body, []byte(field)) {
			t.Errorf("the grant lacks %s: %s", field, a.body)
		}
	}
	wantError(t, "the same grant again", h.send("POST", api+"/apps/"+app+"/grants", jsonOf(map[string]string{"plane": "control", "principal_kind": "user", "principal_id": bob.userID, "role_id": "role_owner"})),
		http.StatusConflict, errcode.StateInvalid)
	// Bob can now view the app, and not open it; the app's answer says
	// which verbs each caller holds on it, for a client to offer.
	a = h.send("GET", api+"/apps/"+app, "", bob.bearer()...)
	wantStatus(t, "bob views the app", a, http.StatusOK)
	if v := decodeAs[appAnswer](t, a).Verbs; !slices.Equal(v, []authz.Verb{authz.AppView, authz.AppLogsRead}) {
		t.Errorf("bob's verbs on the app = %v, want the viewer role's app.view and app.logs.read", v)
	}
	a = h.send("GET", api+"/apps/"+app, "")
	if v := decodeAs[appAnswer](t, a).Verbs; !slices.Contains(v, authz.AppExec) || !slices.Contains(v, authz.AppGrantsMgmt) || !slices.Contains(v, authz.AppSecretsR) {
		t.Errorf("the owner's verbs on the app = %v", v)
	}
	wantStatus(t, "exec off by policy", h.send("PUT", api+"/policy", `{"policy":{"disabled_verbs":["app.exec"]}}`), http.StatusOK)
	a = h.send("GET", api+"/apps/"+app, "")
	if v := decodeAs[appAnswer](t, a).Verbs; slices.Contains(v, authz.AppExec) || !slices.Contains(v, authz.AppDeploy) {
		t.Errorf("the owner's verbs with exec off by policy = %v", v)
	}
	wantStatus(t, "exec on again", h.send("PUT", api+"/policy", `{"policy":{"disabled_verbs":[]}}`), http.StatusOK)

	a = h.send("POST", api+"/apps/"+app+"/grants", `{"plane":"data","principal_kind":"anonymous","passcode":"open-sesame"}`)
	wantStatus(t, "share with everyone", a, http.StatusCreated)
	if !bytes.Contains(a.body, []byte(`"principal_id":null`)) || !bytes.Contains(a.body, []byte(`"passcode":true`)) || bytes.Contains(a.body, []byte("open-sesame")) {
		t.Errorf("the grant to everyone = %s", a.body)
	}
	everyone := decodeAs[grantAnswer](t, a).Grant.ID
	g = grants()
	if len(g.Access) != 2 || g.Access[1].ID != everyone || !g.Access[1].Passcode || len(g.Management) != 2 {
		t.Errorf("grants = %+v", g)
	}

	a = h.send("PATCH", api+"/apps/"+app+"/grants/"+created.ID, `{"role_id":"role_developer"}`)
	wantStatus(t, "change bob's role", a, http.StatusOK)
	if *decodeAs[grantAnswer](t, a).Grant.RoleID != "role_developer" {
		t.Errorf("changed grant = %s", a.body)
	}
	wantStatus(t, "bob deploys' verbs: edit the spec", h.send("GET", api+"/apps/"+app+"/specs", "", bob.bearer()...), http.StatusOK)
	wantStatus(t, "a new passcode", h.send("PATCH", api+"/apps/"+app+"/grants/"+everyone, `{"passcode":"open-sesame-2"}`), http.StatusOK)
	wantError(t, "a passcode on bob's grant", h.send("PATCH", api+"/apps/"+app+"/grants/"+created.ID, `{"passcode":"open-sesame-3"}`), http.StatusBadRequest, errcode.ValidInvalid)
	wantError(t, "a malformed grant ID", h.send("PATCH", api+"/apps/"+app+"/grants/nope", `{"role_id":"role_viewer"}`), http.StatusNotFound, errcode.NotFound)
	wantError(t, "an unknown grant", h.send("DELETE", api+"/apps/"+app+"/grants/"+ids.New(ids.Grant), ""), http.StatusNotFound, errcode.NotFound)
	wantError(t, "an unknown app", h.send("GET", api+"/apps/"+ids.New(ids.App)+"/grants", ""), http.StatusNotFound, errcode.NotFound)

	p := decodeAs[identity.PrincipalMatches](t, h.send("GET", api+"/apps/"+app+"/principals?q="+strings.ToUpper(bob.username), ""))
	if len(p.Users) != 1 || p.Users[0].ID != bob.userID || len(p.Groups) != 0 {
		t.Errorf("principals = %+v", p)
	}
	if b := h.send("GET", api+"/apps/"+app+"/principals?q=", "").body; bytes.Contains(b, []byte("hash")) || !bytes.Contains(b, []byte(`"groups":[]`)) {
		t.Errorf("principals = %s", b)
	}

	wantStatus(t, "take bob's grant away", h.send("DELETE", api+"/apps/"+app+"/grants/"+created.ID, ""), http.StatusNoContent)
	wantError(t, "bob no longer sees the app", h.send("GET", api+"/apps/"+app, "", bob.bearer()...), http.StatusNotFound, errcode.NotFound)

	// The events, in the outbox.
	kinds := map[string]int{}
	for _, ev := range h.allEvents(t) {
		if ev.App != nil && ev.App.ID == app && strings.HasPrefix(ev.Type, "grant.") {
			kinds[ev.Type]++
		}
	}
	if kinds["grant.created"] != 2 || kinds["grant.role_changed"] != 1 || kinds["grant.deleted"] != 1 {
		t.Errorf("grant events = %v", kinds)
	}
}

func TestSharingRefusals(t *testing.T) {
	t.Run("public_sharing none", func(t *testing.T) {
		h := newHarness(t)
		app := h.app(t, "Private")
		for _, body := range []string{`{"plane":"data","principal_kind":"anonymous"}`, `{"plane":"data","principal_kind":"anonymous","passcode":"open-sesame"}`} {
			wantError(t, body, h.send("POST", api+"/apps/"+app+"/grants", body), http.StatusForbidden, errcode.PolicyAnonymousGrant)
		}
	})
	t.Run("public_sharing passcode_only", func(t *testing.T) {
		h := newSharingHarness(t, "SVC_POLICY_PUBLIC_SHARING=passcode_only")
		app := h.app(t, "Guarded")
		e := wantError(t, "without a passcode", h.send("POST", api+"/apps/"+app+"/grants", `{"plane":"data","principal_kind":"anonymous"}`), http.StatusForbidden, errcode.PolicyAnonymousGrant)
		if !strings.Contains(e.Message, "passcode") {
			t.Errorf("message %q does not say a passcode is needed", e.Message)
		}
		a := h.send("POST", api+"/apps/"+app+"/grants", `{"plane":"data","principal_kind":"anonymous","passcode":"open-sesame"}`)
		wantStatus(t, "with a passcode", a, http.StatusCreated)
		wantError(t, "remove the passcode", h.send("PATCH", api+"/apps/"+app+"/grants/"+decodeAs[grantAnswer](t, a).Grant.ID, `{"passcode":""}`),
			http.StatusForbidden, errcode.PolicyAnonymousGrant)
	})
	t.Run("escalation and the last manager", func(t *testing.T) {
		h := newHarness(t)
		app := h.app(t, "Escalation")
		sharer := h.account(t, "sharer", nil, true)
		h.grantApp(t, app, authz.KindUser, sharer.userID, h.role(t, authz.ScopeApp, authz.AppGrantsMgmt))
		bob := h.account(t, "bob", nil, false)
		e := wantError(t, "give a role beyond one's own", h.send("POST", api+"/apps/"+app+"/grants",
			jsonOf(map[string]string{"plane": "control", "principal_kind": "user", "principal_id": bob.userID, "role_id": "role_viewer"}), sharer.bearer()...),
			http.StatusForbidden, errcode.PermDenied)
		if e.Details["verbs"] == nil {
			t.Errorf("details = %v", e.Details)
		}
		wantStatus(t, "open it to bob", h.send("POST", api+"/apps/"+app+"/grants",
			jsonOf(map[string]string{"plane": "data", "principal_kind": "user", "principal_id": bob.userID}), sharer.bearer()...), http.StatusCreated)

		owner := h.account(t, "owner", nil, true)
		solo := h.app(t, "Solo")
		ownerGrant := h.grantTo(t, solo, identity.PlaneControl, authz.KindUser, owner.userID, ptrTo(authz.RoleOwner))
		// The administrator's own grant goes first (an administrator may).
		for _, g := range decodeAs[identity.AppGrants](t, h.send("GET", api+"/apps/"+solo+"/grants", "")).Management {
			if g.ID != ownerGrant {
				wantStatus(t, "the administrator removes its grant", h.send("DELETE", api+"/apps/"+solo+"/grants/"+g.ID, ""), http.StatusNoContent)
			}
		}
		e = wantError(t, "the last owner leaves", h.send("DELETE", api+"/apps/"+solo+"/grants/"+ownerGrant, "", owner.bearer()...), http.StatusConflict, errcode.StateInvalid)
		if e.Details["protected"] != "app.grants.manage" {
			t.Errorf("details = %v", e.Details)
		}
	})
}

func ptrTo[T any](v T) *T { return &v }

func TestPasscodeAPI(t *testing.T) {
	h := newSharingHarness(t)
	app := h.passcodeApp(t, "Garden", "open-sesame")
	open := h.app(t, "Open")
	wantStatus(t, "share Open with everyone", h.send("POST", api+"/apps/"+open+"/grants", `{"plane":"data","principal_kind":"anonymous"}`), http.StatusCreated)

	a := h.send("GET", api+"/apps/"+app+"/passcode", "", "Authorization", "")
	wantStatus(t, "the passcode page", a, http.StatusOK)
	if string(bytes.TrimSpace(a.body)) != `{"name":"Garden"}` {
		t.Errorf("the passcode page's answer = %s", a.body)
	}
	var messages []string
	for _, id := range []string{open, h.app(t, "Private"), ids.New(ids.App), "nope"} {
		e := wantError(t, "the passcode page of "+id, h.send("GET", api+"/apps/"+id+"/passcode", "", "Authorization", ""), http.StatusNotFound, errcode.NotFound)
		messages = append(messages, strings.Replace(e.Message, id, "ID", 1))
	}
	for _, m := range messages[1:] {
		if m != messages[0] {
			t.Errorf("NOT_FOUND messages differ: %q, %q: an oracle", m, messages[0])
		}
	}

	const addr = "192.0.2.10:40000"
	a = h.enterPasscode(app, "wrong-guess", addr)
	wantError(t, "a wrong passcode", a, http.StatusForbidden, errcode.PermPasscodeRequired)
	if cookieNamed(a, edge.PasscodeCookie(app)) != nil {
		t.Error("a wrong passcode set the cookie")
	}
	a = h.enterPasscode(app, "open-sesame", addr)
	wantStatus(t, "the right passcode", a, http.StatusNoContent)
	ck := cookieNamed(a, edge.PasscodeCookie(app))
	if ck == nil || ck.Value == "" || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != edge.HandoffEndpoint || ck.Domain != "" || ck.MaxAge != 86400 || ck.Secure {
		t.Fatalf("admission cookie = %+v", ck)
	}
	if d := time.Until(ck.Expires); d < 23*time.Hour || d > 25*time.Hour {
		t.Errorf("the cookie expires in %v", d)
	}
	if a.header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control = %q", a.header.Get("Cache-Control"))
	}
	// What the edge asks.
	var passcodes edge.Passcodes = h.sharing
	if !passcodes.Admitted(app, ck.Value) || passcodes.Admitted(open, ck.Value) {
		t.Error("the edge's check of the admission is wrong")
	}
	// Over TLS the cookie is Secure.
	req := httptest.NewRequest("POST", "https://svc.example"+api+"/apps/"+app+"/passcode", strings.NewReader(`{"passcode":"open-sesame"}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(rec, req)
	if ck := cookieNamed(answer{header: rec.Header()}, edge.PasscodeCookie(app)); rec.Code != http.StatusNoContent || ck == nil || !ck.Secure {
		t.Errorf("over TLS: %d, cookie %+v", rec.Code, ck)
	}

	// A new passcode ends the admission.
	var everyone string
	for _, g := range decodeAs[identity.AppGrants](t, h.send("GET", api+"/apps/"+app+"/grants", "")).Access {
		if g.PrincipalKind == authz.KindAnonymous {
			everyone = g.ID
		}
	}
	wantStatus(t, "a new passcode", h.send("PATCH", api+"/apps/"+app+"/grants/"+everyone, `{"passcode":"open-sesame-2"}`), http.StatusOK)
	if h.sharing.Admitted(app, ck.Value) {
		t.Error("an admission of the old passcode admits")
	}
}

func TestPasscodeRateLimitedAPI(t *testing.T) {
	h := newSharingHarness(t)
	app := h.app(t, "Guessed")
	wantStatus(t, "share", h.send("POST", api+"/apps/"+app+"/grants", `{"plane":"data","principal_kind":"anonymous","passcode":"open-sesame"}`), http.StatusCreated)
	before := len(h.auditEntries(t))
	const addr = "192.0.2.20:40000"
	for i := range 10 {
		wantError(t, "guess "+strconv.Itoa(i), h.enterPasscode(app, "guess-"+strconv.Itoa(i), addr), http.StatusForbidden, errcode.PermPasscodeRequired)
	}
	for _, code := range []string{"guess-10", "open-sesame"} {
		a := h.enterPasscode(app, code, addr)
		wantError(t, "after ten wrong tries: "+code, a, http.StatusInternalServerError, errcode.RateLimited)
		if n, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || n < 1 || n > 900 {
			t.Errorf("Retry-After = %q", a.header.Get("Retry-After"))
		}
		if cookieNamed(a, edge.PasscodeCookie(app)) != nil {
			t.Error("a limited try set the cookie")
		}
	}
	if after := len(h.auditEntries(t)); after != before {
		t.Errorf("wrong and limited tries wrote %d audit entries", after-before)
	}
	wantStatus(t, "another address", h.enterPasscode(app, "open-sesame", "192.0.2.21:40000"), http.StatusNoContent)
	if !strings.Contains(h.logs.String(), "wrong passcode") || strings.Contains(h.logs.String(), "guess-3") {
		t.Error("wrong tries are not logged, or logged with the guess")
	}
}

func TestUserAndGroupAppsAPI(t *testing.T) {
	h := newHarness(t)
	bob := h.account(t, "bob", nil, true)
	carol := h.account(t, "carol", nil, true)
	grp := h.group(t, nil, bob.userID)
	managed, opened := h.app(t, "Managed"), h.app(t, "Opened")
	h.app(t, "Unrelated")
	h.grantTo(t, managed, identity.PlaneControl, "group", grp, ptrTo(authz.RoleDeveloper))
	h.grantTo(t, opened, identity.PlaneData, authz.KindUser, bob.userID, nil)

	items := decodeAs[list[identity.AppAccess]](t, h.send("GET", api+"/users/"+bob.userID+"/apps", "")).Items
	if len(items) != 2 || items[0].App.Name != "Managed" || *items[0].RoleID != authz.RoleDeveloper || *items[0].Via != "group" ||
		*items[0].GroupID != grp || !items[0].CanManage || items[0].CanOpen ||
		items[1].App.Name != "Opened" || items[1].RoleID != nil || !items[1].CanOpen || items[1].CanManage {
		t.Errorf("bob's apps = %+v", items)
	}
	if own := decodeAs[list[identity.AppAccess]](t, h.send("GET", api+"/users/"+bob.userID+"/apps", "", bob.bearer()...)).Items; len(own) != 2 {
		t.Errorf("bob's own apps = %+v", own)
	}
	wantError(t, "carol on bob's apps", h.send("GET", api+"/users/"+bob.userID+"/apps", "", carol.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
	wantError(t, "carol on an unknown account's apps", h.send("GET", api+"/users/"+ids.New(ids.User)+"/apps", "", carol.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
	wantError(t, "an unknown account", h.send("GET", api+"/users/"+ids.New(ids.User)+"/apps", ""), http.StatusNotFound, errcode.NotFound)

	items = decodeAs[list[identity.AppAccess]](t, h.send("GET", api+"/groups/"+grp+"/apps", "")).Items
	if len(items) != 1 || items[0].App.ID != managed || !items[0].CanManage || items[0].CanOpen {
		t.Errorf("the group's apps = %+v", items)
	}
	wantError(t, "an unknown group", h.send("GET", api+"/groups/"+ids.New(ids.Group)+"/apps", ""), http.StatusNotFound, errcode.NotFound)
}
