package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/identity"
)

func TestMe(t *testing.T) {
	h := newHarness(t)
	a := h.send("GET", api+"/me", "")
	me := decodeAs[meDTO](t, a)
	if me.User == nil || me.User.ID != h.adminID || me.Token == nil || me.Token.Kind != identity.TokenDelegated {
		t.Errorf("admin's GET /me = %s", a.body)
	}
	if want := authz.Verbs(authz.ScopeInstall); !slices.Equal(me.Verbs, want) {
		t.Errorf("admin's verbs = %v, want every installation verb %v", me.Verbs, want)
	}
	p := h.holder(t, authz.InstallView, authz.AppView)
	if me := decodeAs[meDTO](t, h.send("GET", api+"/me", "", p.bearer()...)); !slices.Equal(me.Verbs, []authz.Verb{authz.InstallView}) {
		t.Errorf("verbs of a holder of install.view and app.view = %v, want the installation ones only", me.Verbs)
	}
	none := h.account(t, "none", nil, true)
	a = h.send("GET", api+"/me", "", none.bearer()...)
	if !bytes.Contains(a.body, []byte(`"verbs":[]`)) {
		t.Errorf("no verbs: %s", a.body)
	}
	// A service token: no account.
	st := h.serviceToken(t)
	a = h.send("GET", api+"/me", "", st.bearer()...)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(a.body, &raw); err != nil || a.status != http.StatusOK {
		t.Fatalf("service token GET /me: %d %s", a.status, a.body)
	}
	me = decodeAs[meDTO](t, a)
	if string(raw["user"]) != "null" || me.Token == nil || me.Token.Kind != identity.TokenService || me.Token.ID != st.tokenID || len(me.Verbs) != 0 {
		t.Errorf("service token GET /me = %s; want user null, the token, no verbs", a.body)
	}
	for _, leak := range []string{"secret", "hash", "password"} {
		if bytes.Contains(a.body, []byte(leak)) {
			t.Errorf("GET /me shows %q: %s", leak, a.body)
		}
	}
}

func TestUsersCreateAndRead(t *testing.T) {
	h := newHarness(t)
	a := h.send("POST", api+"/users", `{"username":"gen","display_name":"Generated","email":"gen@example.com"}`)
	wantStatus(t, "create without a password", a, http.StatusCreated)
	created := decodeAs[userAnswer](t, a)
	if n := len(created.Password); n < 18 || n > 22 || !created.User.MustChangePassword || created.User.RoleID != nil || created.User.Source != "local" || created.User.Status != "active" {
		t.Errorf("created = %s", a.body)
	}
	if !strings.HasSuffix(created.User.CreatedAt.Format(time.RFC3339Nano), "Z") {
		t.Errorf("created_at not UTC: %v", created.User.CreatedAt)
	}
	for _, path := range []string{api + "/users/" + created.User.ID, api + "/users"} {
		g := h.send("GET", path, "")
		wantStatus(t, "GET "+path, g, http.StatusOK)
		for _, leak := range []string{created.Password, "password_hash", "$argon2id$", `"password"`} {
			if bytes.Contains(g.body, []byte(leak)) {
				t.Errorf("GET %s shows %q: %s", path, leak, g.body)
			}
		}
	}
	// Argon2id hash in the store, and it signs in.
	u, _, _ := identity.Users.Get(h.store.Read(), created.User.ID)
	if !strings.HasPrefix(u.PasswordHash, "$argon2id$") {
		t.Errorf("stored hash = %q", u.PasswordHash)
	}
	if in, _ := h.signIn("gen", created.Password); in.status != http.StatusOK {
		t.Errorf("the generated password does not sign in: %d %s", in.status, in.body)
	}

	a = h.send("POST", api+"/users", `{"username":"chosen","password":"chosen-password-123"}`)
	wantStatus(t, "create with a password", a, http.StatusCreated)
	if bytes.Contains(a.body, []byte(`"password"`)) || decodeAs[userAnswer](t, a).User.MustChangePassword {
		t.Errorf("create with a password answers %s; want no password and must_change_password false", a.body)
	}
	if got := decodeAs[userAnswer](t, a).User.DisplayName; got != "chosen" {
		t.Errorf("display name defaults to %q", got)
	}
	a = h.send("POST", api+"/users", `{"username":"forced","password":"forced-password-123","must_change_password":true}`)
	if !decodeAs[userAnswer](t, a).User.MustChangePassword {
		t.Errorf("must_change_password true not kept: %s", a.body)
	}

	for _, c := range []struct {
		body, field string
		status      int
		code        errcode.Code
	}{
		{`{"username":"chosen","password":"another-password-1"}`, "username", 409, errcode.StateInvalid},
		{`{"username":"CHOSEN","password":"another-password-1"}`, "username", 409, errcode.StateInvalid},
		{`{"username":"has space","password":"another-password-1"}`, "username", 400, errcode.ValidInvalid},
		{`{"username":"","password":"another-password-1"}`, "username", 400, errcode.ValidInvalid},
		{`{"username":"short","password":"short"}`, "password", 400, errcode.ValidInvalid},
		{`{"username":"samename12345","password":"SameName12345"}`, "password", 400, errcode.ValidInvalid},
		{`{"username":"mail","email":"not an email","password":"another-password-1"}`, "email", 400, errcode.ValidInvalid},
		{`{"username":"ctl","display_name":"a\u0007b","password":"another-password-1"}`, "display_name", 400, errcode.ValidInvalid},
	} {
		e := wantError(t, c.body, h.send("POST", api+"/users", c.body), c.status, c.code)
		if e.Details["field"] != c.field {
			t.Errorf("%s: details.field = %v, want %s", c.body, e.Details["field"], c.field)
		}
	}

	// Paging of GET /users.
	seen := pageAll(t, h, api+"/users?limit=2", 10, func(u userDTO) string { return u.ID })
	if len(seen) != 4 || !slices.IsSorted(seen) {
		t.Errorf("paged users = %v, want the 4 accounts in ID order", seen)
	}
	wantError(t, "GET unknown user", h.send("GET", api+"/users/usr_01M7ZVAA7HN5NZE25AZ701FBCF", ""), 404, errcode.NotFound)
	wantError(t, "GET malformed user ID", h.send("GET", api+"/users/grp_01M7ZVAA7HN5NZE25AZ701FBCF", ""), 404, errcode.NotFound)
}

func TestUsersPatch(t *testing.T) {
	h := newHarness(t)
	self := h.account(t, "self", nil, true)
	other := h.account(t, "other", nil, true)
	viewer := h.holder(t, authz.InstallView)
	patch := func(p *principal, id, body string) answer {
		return h.send("PATCH", api+"/users/"+id, body, p.bearer()...)
	}

	// Own display name and email: no verb.
	a := patch(self, self.userID, `{"display_name":"Self Person","email":"self@example.com"}`)
	wantStatus(t, "own display name and email", a, http.StatusOK)
	if got := decodeAs[userAnswer](t, a).User; got.DisplayName != "Self Person" || got.Email != "self@example.com" {
		t.Errorf("patched = %+v", got)
	}
	// Own username and status need the verb.
	wantError(t, "own username", patch(self, self.userID, `{"username":"renamed"}`), 403, errcode.PermVerbRequired)
	wantError(t, "own status", patch(self, self.userID, `{"status":"suspended"}`), 403, errcode.PermVerbRequired)
	// Someone else's: install.users.manage, whether or not the account
	// exists (an installation resource: the verb alone guards it).
	wantError(t, "someone else's, no verb", patch(self, other.userID, `{"display_name":"X"}`), 403, errcode.PermVerbRequired)
	wantError(t, "someone else's, install.view", patch(viewer, other.userID, `{"display_name":"X"}`), 403, errcode.PermVerbRequired)
	wantError(t, "unknown account, no verb", patch(self, "usr_01M7ZVAA7HN5NZE25AZ701FBCF", `{"display_name":"X"}`), 403, errcode.PermVerbRequired)
	wantError(t, "malformed account ID, no verb", patch(self, "nope", `{"display_name":"X"}`), 403, errcode.PermVerbRequired)
	wantError(t, "unknown account, the verb", h.send("PATCH", api+"/users/usr_01M7ZVAA7HN5NZE25AZ701FBCF", `{"display_name":"X"}`), 404, errcode.NotFound)

	// The administrator: username, display name, email, status.
	a = h.send("PATCH", api+"/users/"+other.userID, `{"username":"renamed-other","email":""}`)
	wantStatus(t, "admin renames", a, http.StatusOK)
	if decodeAs[userAnswer](t, a).User.Username != "renamed-other" {
		t.Errorf("rename: %s", a.body)
	}
	wantError(t, "username taken", h.send("PATCH", api+"/users/"+other.userID, jsonOf(map[string]string{"username": self.username})), 409, errcode.StateInvalid)
	for body, field := range map[string]string{
		`{"email":"nope"}`:        "email",
		`{"status":"banned"}`:     "status",
		`{"username":"bad name"}`: "username",
		`{"display_name":""}`:     "display_name",
		`{"display_name":"   "}`:  "display_name",
		`{"username":"renamed-other","display_name":"` + strings.Repeat("x", 129) + `"}`: "display_name",
	} {
		e := wantError(t, body, h.send("PATCH", api+"/users/"+other.userID, body), 400, errcode.ValidInvalid)
		if e.Details["field"] != field {
			t.Errorf("%s: details.field = %v, want %s", body, e.Details["field"], field)
		}
	}

	// Suspension ends sessions and orphans delegated tokens; reactivation
	// restores the tokens.
	_, cookie := h.signIn(other.username, other.password)
	wantStatus(t, "suspend", h.send("PATCH", api+"/users/"+other.userID, `{"status":"suspended"}`), http.StatusOK)
	wantError(t, "session of a suspended account", h.send("GET", api+"/me", "", withCookie(cookie)...), 401, errcode.AuthRequired)
	wantError(t, "token of a suspended account", h.send("GET", api+"/me", "", other.bearer()...), 401, errcode.AuthTokenOrphaned)
	wantStatus(t, "reactivate", h.send("PATCH", api+"/users/"+other.userID, `{"status":"active"}`), http.StatusOK)
	wantStatus(t, "token after reactivation", h.send("GET", api+"/me", "", other.bearer()...), http.StatusOK)

	// The last administrator cannot be suspended.
	e := wantError(t, "suspend the last administrator", h.send("PATCH", api+"/users/"+h.adminID, `{"status":"suspended"}`), 409, errcode.StateInvalid)
	if e.Details["protected"] == nil {
		t.Errorf("details = %v, want protected", e.Details)
	}
	// An empty patch changes nothing.
	wantStatus(t, "empty patch", h.send("PATCH", api+"/users/"+other.userID, `{}`), http.StatusOK)
}

func TestUsersDelete(t *testing.T) {
	h := newHarness(t)
	gone := h.account(t, "gone", nil, true)
	_, cookie := h.signIn(gone.username, gone.password)
	g := h.group(t, nil, gone.userID)
	svc := h.send("POST", api+"/tokens/service", `{"name":"outlives"}`, gone.bearer()...)
	if svc.status != http.StatusForbidden {
		t.Fatalf("a no-verb account minted a service token: %d", svc.status)
	}

	wantStatus(t, "delete", h.send("DELETE", api+"/users/"+gone.userID, ""), http.StatusNoContent)
	wantError(t, "GET the deleted account", h.send("GET", api+"/users/"+gone.userID, ""), 404, errcode.NotFound)
	wantError(t, "its session", h.send("GET", api+"/me", "", withCookie(cookie)...), 401, errcode.AuthRequired)
	// Specification, Authentication rule 3: "A token whose owner was
	// suspended or deleted no longer resolves: AUTH_TOKEN_ORPHANED."
	wantError(t, "its delegated token", h.send("GET", api+"/me", "", gone.bearer()...), 401, errcode.AuthTokenOrphaned)
	grp, _, _ := identity.Groups.Get(h.store.Read(), g)
	if slices.Contains(grp.MemberIDs, gone.userID) {
		t.Errorf("the deleted account is still a member of %s", g)
	}
	wantError(t, "delete again", h.send("DELETE", api+"/users/"+gone.userID, ""), 404, errcode.NotFound)

	// With a second administrator, the first may go; the last may not while
	// other accounts remain (see TestDeletingTheOnlyAccountIsRefused).
	h.account(t, "bystander", nil, false)
	admin := authz.RoleAdmin
	second := h.account(t, "second", &admin, true)
	wantStatus(t, "delete the first administrator", h.send("DELETE", api+"/users/"+h.adminID, "", second.bearer()...), http.StatusNoContent)
	e := wantError(t, "delete the last administrator", h.send("DELETE", api+"/users/"+second.userID, "", second.bearer()...), 409, errcode.StateInvalid)
	if e.Details["protected"] == nil {
		t.Errorf("details = %v, want protected", e.Details)
	}
}

// The last administrator who is also the only account: deleting it would
// leave nobody able to manage accounts (API.md, "Status codes and
// refusals": deleting the last administrator is refused 409 STATE_INVALID)
// and, with no account left, reopen POST /setup to anyone.
func TestDeletingTheOnlyAccountIsRefused(t *testing.T) {
	h := newHarness(t)
	a := h.send("DELETE", api+"/users/"+h.adminID, "")
	e := wantError(t, "the only account, an administrator, deletes itself", a, 409, errcode.StateInvalid)
	if e.Details["protected"] == nil {
		t.Errorf("details = %v, want protected", e.Details)
	}
	if a.status != http.StatusNoContent {
		return
	}
	if s := h.send("GET", api+"/setup", "", "Authorization", ""); bytes.Contains(s.body, []byte(`"setup_required":true`)) {
		t.Errorf("after deleting the last administrator, GET /setup = %s", s.body)
	}
	a = h.send("POST", api+"/setup", `{"username":"intruder","display_name":"Intruder","password":"intruder-password-1"}`, "Authorization", "")
	if a.status == http.StatusCreated {
		t.Errorf("after deleting the last administrator, an anonymous POST /setup made itself administrator: %s", a.body)
	}
}

func TestUserRole(t *testing.T) {
	h := newHarness(t)
	u := h.account(t, "u", nil, true)
	put := func(id, body string) answer { return h.send("PUT", api+"/users/"+id+"/role", body) }

	a := put(u.userID, `{"role_id":"role_auditor"}`)
	wantStatus(t, "give auditor", a, http.StatusOK)
	if got := decodeAs[userAnswer](t, a).User.RoleID; got == nil || *got != authz.RoleAuditor {
		t.Errorf("role_id = %v", got)
	}
	wantStatus(t, "the auditor reads the audit log", h.send("GET", api+"/audit", "", u.bearer()...), http.StatusOK)
	wantError(t, "an app role", put(u.userID, `{"role_id":"role_owner"}`), 400, errcode.ValidInvalid)
	wantError(t, "an unknown role", put(u.userID, `{"role_id":"role_01M7ZVAA7HN5NZE25AZ701FBCF"}`), 404, errcode.NotFound)
	wantError(t, "no role_id", put(u.userID, `{}`), 400, errcode.ValidInvalid)
	wantError(t, "an unknown account", put("usr_01M7ZVAA7HN5NZE25AZ701FBCF", `{"role_id":"role_member"}`), 404, errcode.NotFound)

	wantStatus(t, "remove", h.send("DELETE", api+"/users/"+u.userID+"/role", ""), http.StatusNoContent)
	wantError(t, "after removal", h.send("GET", api+"/audit", "", u.bearer()...), 403, errcode.PermVerbRequired)
	wantStatus(t, "remove again", h.send("DELETE", api+"/users/"+u.userID+"/role", ""), http.StatusNoContent)

	// The last administrator cannot be demoted, by removal or by another role.
	for _, a := range []answer{
		h.send("DELETE", api+"/users/"+h.adminID+"/role", ""),
		put(h.adminID, `{"role_id":"role_member"}`),
	} {
		e := wantError(t, "demote the last administrator", a, 409, errcode.StateInvalid)
		if e.Details["protected"] == nil {
			t.Errorf("details = %v, want protected", e.Details)
		}
	}
	// A custom role holding install.users.manage keeps someone able to manage
	// accounts: then the admin role may go.
	managers := h.role(t, authz.ScopeInstall, authz.InstallUsersManage)
	wantStatus(t, "give a manager role", put(u.userID, jsonOf(map[string]string{"role_id": managers})), http.StatusOK)
	wantStatus(t, "demote the administrator", h.send("DELETE", api+"/users/"+h.adminID+"/role", "", u.bearer()...), http.StatusNoContent)
	wantError(t, "the demoted administrator", h.send("GET", api+"/users", ""), 403, errcode.PermVerbRequired)
	// And now the custom role is the protected one.
	e := wantError(t, "delete the last managers' role", h.send("DELETE", api+"/roles/"+managers, "", u.bearer()...), 409, errcode.StateInvalid)
	if e.Details["protected"] == nil {
		t.Errorf("details = %v", e.Details)
	}
}

func TestPasswordReset(t *testing.T) {
	h := newHarness(t)
	u := h.account(t, "forgetful", nil, true)
	_, cookie := h.signIn(u.username, u.password)
	reset := func(id, body string) answer { return h.send("POST", api+"/users/"+id+"/password", body) }

	wantStatus(t, "reset", reset(u.userID, `{"password":"fresh-password-123"}`), http.StatusNoContent)
	wantError(t, "the session after a reset", h.send("GET", api+"/me", "", withCookie(cookie)...), 401, errcode.AuthRequired)
	got := decodeAs[userAnswer](t, h.send("GET", api+"/users/"+u.userID, ""))
	if !got.User.MustChangePassword {
		t.Error("must_change_password is not true by default after a reset")
	}
	if a, _ := h.signIn(u.username, u.password); a.status != http.StatusUnauthorized {
		t.Errorf("the old password still signs in: %d", a.status)
	}
	_, cookie = h.signIn(u.username, "fresh-password-123")
	wantError(t, "before changing the reset password", h.send("GET", api+"/tokens", "", withCookie(cookie)...), 403, errcode.PermDenied)
	// The account's token is held to the same rule.
	wantError(t, "its token before the change", h.send("GET", api+"/tokens", "", u.bearer()...), 403, errcode.PermDenied)

	wantStatus(t, "reset without must_change", reset(u.userID, `{"password":"fresh-password-456","must_change_password":false}`), http.StatusNoContent)
	if got := decodeAs[userAnswer](t, h.send("GET", api+"/users/"+u.userID, "")); got.User.MustChangePassword {
		t.Error("must_change_password false was not kept")
	}
	e := wantError(t, "a weak password", reset(u.userID, `{"password":"short"}`), 400, errcode.ValidInvalid)
	if e.Details["field"] != "password" {
		t.Errorf("details = %v", e.Details)
	}
	wantError(t, "no password", reset(u.userID, `{}`), 400, errcode.ValidInvalid)
	wantError(t, "unknown account", reset("usr_01M7ZVAA7HN5NZE25AZ701FBCF", `{"password":"fresh-password-123"}`), 404, errcode.NotFound)
}

func TestGeneratePassword(t *testing.T) {
	h := newHarness(t)
	seen := map[string]bool{}
	for range 50 {
		a := h.send("POST", api+"/passwords/generate", "")
		wantStatus(t, "generate", a, http.StatusOK)
		if cc := a.header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control = %q", cc)
		}
		pw := decodeAs[passwordDTO](t, a).Password
		if n := len(pw); n < 18 || n > 22 || seen[pw] {
			t.Errorf("password %q: %d characters or repeated", pw, n)
		}
		seen[pw] = true
		for _, class := range []string{"ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz", "0123456789", "-_.:!@#%+=?*"} {
			if !strings.ContainsAny(pw, class) {
				t.Errorf("password %q lacks one of %q", pw, class)
			}
		}
	}
	before := len(h.auditEntries(t))
	h.send("POST", api+"/passwords/generate", "")
	if len(h.auditEntries(t)) != before {
		t.Error("generating a password wrote something")
	}
}

func TestGroups(t *testing.T) {
	h := newHarness(t)
	a := h.send("POST", api+"/groups", `{"name":"Operators"}`)
	wantStatus(t, "create", a, http.StatusCreated)
	g := decodeAs[groupDTO](t, a).Group
	if g.ID == "" || g.Name != "Operators" || g.Source != "local" || g.RoleID != nil || g.MemberIDs == nil || !bytes.Contains(a.body, []byte(`"member_ids":[]`)) {
		t.Errorf("created = %s", a.body)
	}
	wantError(t, "same name", h.send("POST", api+"/groups", `{"name":"operators"}`), 409, errcode.StateInvalid)
	for _, bad := range []string{`{"name":""}`, `{"name":" padded "}`, `{}`} {
		wantError(t, bad, h.send("POST", api+"/groups", bad), 400, errcode.ValidInvalid)
	}

	x := h.account(t, "x", nil, true)
	y := h.account(t, "y", nil, true)
	path := api + "/groups/" + g.ID
	a = h.send("PUT", path+"/members", jsonOf(map[string][]string{"user_ids": {x.userID, x.userID, y.userID}}))
	wantStatus(t, "set members", a, http.StatusOK)
	if got := decodeAs[groupDTO](t, a).Group.MemberIDs; !slices.Equal(got, []string{x.userID, y.userID}) {
		t.Errorf("members = %v (duplicates kept?)", got)
	}
	e := wantError(t, "an unknown member", h.send("PUT", path+"/members", `{"user_ids":["usr_01M7ZVAA7HN5NZE25AZ701FBCF"]}`), 400, errcode.ValidInvalid)
	if e.Details["field"] != "user_ids" {
		t.Errorf("details = %v", e.Details)
	}
	wantError(t, "no user_ids", h.send("PUT", path+"/members", `{}`), 400, errcode.ValidInvalid)
	wantStatus(t, "empty the group", h.send("PUT", path+"/members", `{"user_ids":[]}`), http.StatusOK)
	wantStatus(t, "add one", h.send("PUT", path+"/members/"+x.userID, ""), http.StatusOK)
	wantStatus(t, "add it again", h.send("PUT", path+"/members/"+x.userID, ""), http.StatusOK)
	wantError(t, "add an unknown account", h.send("PUT", path+"/members/usr_01M7ZVAA7HN5NZE25AZ701FBCF", ""), 404, errcode.NotFound)
	wantError(t, "remove a non-member", h.send("DELETE", path+"/members/"+y.userID, ""), 404, errcode.NotFound)
	wantError(t, "an unknown group", h.send("PUT", api+"/groups/grp_01M7ZVAA7HN5NZE25AZ701FBCF/members/"+x.userID, ""), 404, errcode.NotFound)
	wantError(t, "a malformed group ID", h.send("DELETE", api+"/groups/usr_01M7ZVAA7HN5NZE25AZ701FBCF", ""), 404, errcode.NotFound)

	// A group's role reaches its members.
	wantError(t, "before the group role", h.send("GET", api+"/users", "", x.bearer()...), 403, errcode.PermVerbRequired)
	wantError(t, "an app role on a group", h.send("PUT", path+"/role", `{"role_id":"role_viewer"}`), 400, errcode.ValidInvalid)
	wantError(t, "no role_id", h.send("PUT", path+"/role", `{}`), 400, errcode.ValidInvalid)
	wantStatus(t, "group role admin", h.send("PUT", path+"/role", `{"role_id":"role_admin"}`), http.StatusOK)
	wantStatus(t, "a member holds the group's role", h.send("GET", api+"/users", "", x.bearer()...), http.StatusOK)
	list := decodeAs[list[identity.Group]](t, h.send("GET", api+"/groups", ""))
	if len(list.Items) != 1 || list.Items[0].RoleID == nil || *list.Items[0].RoleID != authz.RoleAdmin {
		t.Errorf("GET /groups = %+v", list.Items)
	}

	// Now x manages accounts only through the group: once the administrator
	// is demoted, removing x, the group's role or the group is refused.
	wantStatus(t, "demote the administrator", h.send("DELETE", api+"/users/"+h.adminID+"/role", "", x.bearer()...), http.StatusNoContent)
	for _, r := range []struct{ name, method, path string }{
		{"remove the last manager", "DELETE", path + "/members/" + x.userID},
		{"remove the group's role", "DELETE", path + "/role"},
		{"delete the group", "DELETE", path},
	} {
		e := wantError(t, r.name, h.send(r.method, r.path, "", x.bearer()...), 409, errcode.StateInvalid)
		if e.Details["protected"] == nil {
			t.Errorf("%s: details = %v, want protected", r.name, e.Details)
		}
	}
	e = wantError(t, "empty the managers' group", h.send("PUT", path+"/members", `{"user_ids":[]}`, x.bearer()...), 409, errcode.StateInvalid)
	if e.Details["protected"] == nil {
		t.Errorf("details = %v", e.Details)
	}
	// With the administrator restored, all of it goes through.
	wantStatus(t, "restore the administrator", h.send("PUT", api+"/users/"+h.adminID+"/role", `{"role_id":"role_admin"}`, x.bearer()...), http.StatusOK)
	wantStatus(t, "remove the group's role", h.send("DELETE", path+"/role", ""), http.StatusOK)
	wantStatus(t, "remove the member", h.send("DELETE", path+"/members/"+x.userID, ""), http.StatusOK)
	wantStatus(t, "delete the group", h.send("DELETE", path, ""), http.StatusNoContent)
	wantError(t, "delete it again", h.send("DELETE", path, ""), 404, errcode.NotFound)
}

func TestRolesAndVerbs(t *testing.T) {
	h := newHarness(t)
	ids := func(a answer) []string {
		var out []string
		for _, r := range decodeAs[list[authz.Role]](t, a).Items {
			out = append(out, r.ID)
		}
		return out
	}
	a := h.send("POST", api+"/roles", `{"name":"Deployers","scope":"app","verbs":["app.view","app.deploy","app.view"]}`)
	wantStatus(t, "create an app role", a, http.StatusCreated)
	appRole := decodeAs[roleDTO](t, a).Role
	if appRole.Builtin || !slices.Equal(appRole.Verbs, []authz.Verb{authz.AppView, authz.AppDeploy}) || !strings.HasPrefix(appRole.ID, "role_") {
		t.Errorf("created = %s", a.body)
	}
	a = h.send("POST", api+"/roles", `{"name":"Readers","scope":"install","verbs":["install.view","app.view"]}`)
	wantStatus(t, "create an install role", a, http.StatusCreated)
	installRole := decodeAs[roleDTO](t, a).Role

	for q, want := range map[string][]string{
		"":               {authz.RoleAdmin, authz.RoleAuditor, authz.RoleMember, installRole.ID},
		"?scope=install": {authz.RoleAdmin, authz.RoleAuditor, authz.RoleMember, installRole.ID},
		"?scope=app":     {authz.RoleOwner, authz.RoleDeveloper, authz.RoleViewer, appRole.ID},
		"?scope=all":     {authz.RoleAdmin, authz.RoleAuditor, authz.RoleMember, authz.RoleOwner, authz.RoleDeveloper, authz.RoleViewer},
	} {
		got := ids(h.send("GET", api+"/roles"+q, ""))
		for _, id := range want {
			if !slices.Contains(got, id) {
				t.Errorf("GET /roles%s = %v, lacks %s", q, got, id)
			}
		}
		if q == "?scope=all" && len(got) != 8 {
			t.Errorf("GET /roles?scope=all = %v, want 8 roles", got)
		}
	}
	e := wantError(t, "bad scope", h.send("GET", api+"/roles?scope=everything", ""), 400, errcode.ValidInvalid)
	if e.Details["field"] != "scope" {
		t.Errorf("details = %v", e.Details)
	}
	for body, field := range map[string]string{
		`{"name":"x","scope":"app","verbs":["install.view"]}`: "verbs",
		`{"name":"x","scope":"install","verbs":["app.fly"]}`:  "verbs",
		`{"name":"x","scope":"install","verbs":[]}`:           "verbs",
		`{"name":"x","scope":"galaxy","verbs":["app.view"]}`:  "scope",
		`{"name":"","scope":"install","verbs":["app.view"]}`:  "name",
	} {
		e := wantError(t, body, h.send("POST", api+"/roles", body), 400, errcode.ValidInvalid)
		if e.Details["field"] != field {
			t.Errorf("%s: details.field = %v, want %s", body, e.Details["field"], field)
		}
	}
	wantError(t, "a built-in name", h.send("POST", api+"/roles", `{"name":"Admin","scope":"install","verbs":["install.view"]}`), 409, errcode.StateInvalid)
	wantError(t, "a taken name", h.send("POST", api+"/roles", `{"name":"readers","scope":"install","verbs":["install.view"]}`), 409, errcode.StateInvalid)
	for _, id := range []string{authz.RoleAdmin, authz.RoleViewer} {
		e := wantError(t, "delete "+id, h.send("DELETE", api+"/roles/"+id, ""), 409, errcode.StateInvalid)
		if e.Details["protected"] != id {
			t.Errorf("details = %v", e.Details)
		}
	}
	wantError(t, "delete an unknown role", h.send("DELETE", api+"/roles/role_01M7ZVAA7HN5NZE25AZ701FBCF", ""), 404, errcode.NotFound)

	// Deleting a custom role takes it from its holders.
	u := h.account(t, "reader", &installRole.ID, true)
	wantStatus(t, "holder of the custom role", h.send("GET", api+"/users", "", u.bearer()...), http.StatusOK)
	wantStatus(t, "delete the custom role", h.send("DELETE", api+"/roles/"+installRole.ID, ""), http.StatusNoContent)
	wantError(t, "after the role is gone", h.send("GET", api+"/users", "", u.bearer()...), 403, errcode.PermVerbRequired)
	if got := decodeAs[userAnswer](t, h.send("GET", api+"/users/"+u.userID, "")).User.RoleID; got != nil {
		t.Errorf("the account still names the deleted role %s", *got)
	}

	v := decodeAs[verbsDTO](t, h.send("GET", api+"/verbs", ""))
	if !slices.Equal(v.Install, authz.Verbs(authz.ScopeInstall)) || !slices.Equal(v.App, authz.Verbs(authz.ScopeApp)) ||
		len(v.Install) != 9 || len(v.App) != 10 || !slices.Contains(v.Install, authz.AppCreate) {
		t.Errorf("GET /verbs = %+v", v)
	}
}

func TestTokens(t *testing.T) {
	h := newHarness(t)
	alice := h.account(t, "alice", nil, true)
	bob := h.account(t, "bob", nil, true)
	users := h.holder(t, authz.InstallUsersManage)
	tokens := h.holder(t, authz.InstallTokensManage)

	a := h.send("POST", api+"/tokens", `{"name":"laptop","expires_in_days":30}`, alice.bearer()...)
	wantStatus(t, "mint", a, http.StatusCreated)
	minted := decodeAs[tokenAnswer](t, a)
	if minted.Token.Kind != identity.TokenDelegated || minted.Token.OwnerID != alice.userID || minted.Token.ExpiresAt == nil ||
		!strings.HasPrefix(minted.Secret, minted.Token.ID+".") || a.header.Get("Cache-Control") != "no-store" {
		t.Errorf("minted = %s (Cache-Control %q)", a.body, a.header.Get("Cache-Control"))
	}
	if d := time.Until(*minted.Token.ExpiresAt); d < 29*24*time.Hour || d > 31*24*time.Hour {
		t.Errorf("expires in %v", d)
	}

	// GET /tokens: own delegated tokens only, never a secret.
	own := decodeAs[list[tokenDTO]](t, h.send("GET", api+"/tokens", "", alice.bearer()...))
	var ownIDs []string
	for _, tk := range own.Items {
		ownIDs = append(ownIDs, tk.ID)
		if tk.OwnerID != alice.userID || tk.Kind != identity.TokenDelegated {
			t.Errorf("GET /tokens shows %+v", tk)
		}
	}
	if !slices.Contains(ownIDs, minted.Token.ID) || !slices.Contains(ownIDs, alice.tokenID) || len(ownIDs) != 2 {
		t.Errorf("alice's tokens = %v", ownIDs)
	}
	if a := h.send("GET", api+"/tokens", "", bob.bearer()...); bytes.Contains(a.body, []byte(minted.Token.ID)) || bytes.Contains(a.body, []byte(secretOf(minted.Secret))) {
		t.Errorf("bob sees alice's token: %s", a.body)
	}

	// Service tokens: minted and listed with install.tokens.manage.
	wantError(t, "service tokens without the verb", h.send("GET", api+"/tokens/service", "", alice.bearer()...), 403, errcode.PermVerbRequired)
	a = h.send("POST", api+"/tokens/service", `{"name":"ci"}`, tokens.bearer()...)
	wantStatus(t, "mint a service token", a, http.StatusCreated)
	svc := decodeAs[tokenAnswer](t, a)
	if svc.Token.Kind != identity.TokenService {
		t.Errorf("service token = %s", a.body)
	}
	l := h.send("GET", api+"/tokens/service", "", tokens.bearer()...)
	if !bytes.Contains(l.body, []byte(svc.Token.ID)) || bytes.Contains(l.body, []byte("secret")) {
		t.Errorf("GET /tokens/service = %s", l.body)
	}
	if a := h.send("GET", api+"/tokens", "", tokens.bearer()...); bytes.Contains(a.body, []byte(svc.Token.ID)) {
		t.Errorf("GET /tokens lists a service token: %s", a.body)
	}
	svcP := &principal{token: svc.Secret}
	wantError(t, "a service token holds nothing by itself", h.send("GET", api+"/users", "", svcP.bearer()...), 403, errcode.PermVerbRequired)
	wantError(t, "a service token minting a delegated token", h.send("POST", api+"/tokens", `{"name":"x"}`, svcP.bearer()...), 403, errcode.PermDenied)

	// Revocation rules. (Tokens just used are revoked once their use is
	// recorded: TestRevokingATokenJustUsed covers the race.)
	waitTouched(t, h, svc.Token.ID)
	waitTouched(t, h, bob.tokenID)
	del := func(p *principal, id string) answer { return h.send("DELETE", api+"/tokens/"+id, "", p.bearer()...) }
	wantError(t, "bob revokes alice's token", del(bob, minted.Token.ID), 403, errcode.PermVerbRequired)
	wantError(t, "holder of install.tokens.manage revokes alice's token", del(tokens, minted.Token.ID), 403, errcode.PermVerbRequired)
	wantError(t, "holder of install.users.manage revokes a service token", del(users, svc.Token.ID), 403, errcode.PermVerbRequired)
	wantError(t, "bob revokes an unknown token", del(bob, "tok_01M7ZVAA7HN5NZE25AZ701FBCF"), 403, errcode.PermVerbRequired)
	wantError(t, "bob revokes a malformed token ID", del(bob, "nope"), 403, errcode.PermVerbRequired)
	// A token that does not exist could have been a service token: the
	// holder of install.users.manage alone is told the other verb.
	if e := wantError(t, "holder of install.users.manage revokes an unknown token", del(users, "tok_01M7ZVAA7HN5NZE25AZ701FBCF"), 403, errcode.PermVerbRequired); e.Details["verb"] != string(authz.InstallTokensManage) {
		t.Errorf("details = %v", e.Details)
	}
	wantStatus(t, "holder of install.users.manage revokes alice's token", del(users, minted.Token.ID), http.StatusNoContent)
	wantError(t, "the revoked token", h.send("GET", api+"/me", "", "Authorization", "Bearer "+minted.Secret), 401, errcode.AuthTokenInvalid)
	wantStatus(t, "holder of install.tokens.manage revokes the service token", del(tokens, svc.Token.ID), http.StatusNoContent)
	wantStatus(t, "bob revokes his own token with itself", del(bob, bob.tokenID), http.StatusNoContent)
	wantError(t, "bob's revoked token", h.send("GET", api+"/me", "", bob.bearer()...), 401, errcode.AuthTokenInvalid)
	wantError(t, "an unknown token", h.send("DELETE", api+"/tokens/tok_01M7ZVAA7HN5NZE25AZ701FBCF", ""), 404, errcode.NotFound)
	wantError(t, "a malformed token ID", h.send("DELETE", api+"/tokens/nope", ""), 404, errcode.NotFound)

	// Bad requests and the lifetime cap of host policy.
	for _, body := range []string{`{"name":""}`, `{"name":"x","expires_in_days":0}`, `{"name":"x","expires_in_days":3651}`, `{"name":"` + strings.Repeat("n", 101) + `"}`} {
		wantError(t, body, h.send("POST", api+"/tokens", body, alice.bearer()...), 400, errcode.ValidInvalid)
	}
	if a := h.send("PUT", api+"/policy", `{"policy":{"max_token_lifetime_days":7}}`); a.status != http.StatusOK {
		t.Fatalf("policy: %d %s", a.status, a.body)
	}
	e := wantError(t, "longer than policy allows", h.send("POST", api+"/tokens", `{"name":"x","expires_in_days":8}`, alice.bearer()...), 403, errcode.PolicyTokenLifetime)
	if e.Details["max_token_lifetime_days"] == nil {
		t.Errorf("details = %v", e.Details)
	}
	a = h.send("POST", api+"/tokens", `{"name":"capped"}`, alice.bearer()...)
	if tk := decodeAs[tokenAnswer](t, a).Token; tk.ExpiresAt == nil || time.Until(*tk.ExpiresAt) > 7*24*time.Hour {
		t.Errorf("a token without expiry under a 7-day cap: %s", a.body)
	}
}

func TestPolicyEndpoints(t *testing.T) {
	h := newHarness(t)
	a := h.send("GET", api+"/policy", "")
	got := decodeAs[map[string]json.RawMessage](t, a)
	if string(got["fixed"]) != `["public_sharing"]` || !bytes.Contains(got["policy"], []byte(`"public_sharing":"none"`)) {
		t.Errorf("GET /policy = %s", a.body)
	}

	before := h.auditEntries(t)
	e := wantError(t, "change a fixed setting", h.send("PUT", api+"/policy", `{"policy":{"public_sharing":"allowed"}}`), 409, errcode.StateInvalid)
	if jsonOf(e.Details["fixed"]) != `["public_sharing"]` {
		t.Errorf("details = %v, want fixed [public_sharing]", e.Details)
	}
	wantStatus(t, "the fixed setting with its fixed value", h.send("PUT", api+"/policy", `{"policy":{"public_sharing":"none"}}`), http.StatusOK)
	if got := newEntries(before, h.auditEntries(t)); len(got) != 0 {
		t.Errorf("refused or unchanged PUTs wrote %v", actionsOf(got))
	}

	eventsBefore := len(h.allEvents(t))
	a = h.send("PUT", api+"/policy", `{"policy":{"public_sharing":"none","max_token_lifetime_days":30,"disabled_verbs":["app.exec"]}}`)
	wantStatus(t, "change", a, http.StatusOK)
	p := decodeAs[policyDTO](t, a)
	if p.Policy.MaxTokenLifetimeDays != 30 || !slices.Equal(p.Policy.DisabledVerbs, []string{"app.exec"}) || p.Policy.PublicSharing != "none" || !slices.Equal(p.Fixed, []string{"public_sharing"}) {
		t.Errorf("PUT answer = %s", a.body)
	}
	if got := newEntries(before, h.auditEntries(t)); len(got) != 1 || got[0].Action != "policy.update" {
		t.Errorf("the change wrote %v, want one policy.update", actionsOf(got))
	} else if changed, _ := got[0].Details["changed"].([]any); len(changed) != 2 {
		t.Errorf("policy.update details = %v", got[0].Details)
	}
	evs := h.allEvents(t)[eventsBefore:]
	if len(evs) != 1 || evs[0].Type != "policy.updated" {
		t.Errorf("events after the change: %+v, want one policy.updated", evs)
	}
	// PUT replaces: a setting left out returns to its default.
	a = h.send("PUT", api+"/policy", `{"policy":{}}`)
	if p := decodeAs[policyDTO](t, a); p.Policy.MaxTokenLifetimeDays != 0 || len(p.Policy.DisabledVerbs) != 0 || p.Policy.PublicSharing != "none" {
		t.Errorf("PUT {} = %s", a.body)
	}

	for body, field := range map[string]string{
		`{"policy":{"max_token_lifetime_days":"soon"}}`: "policy.max_token_lifetime_days",
		`{"policy":{"no_such_setting":1}}`:              "policy.no_such_setting",
		`{"policy":{"min_build_isolation":"castle"}}`:   "policy.min_build_isolation",
		`{"policy":[]}`: "policy",
		`{}`:            "policy",
	} {
		e := wantError(t, "PUT "+body, h.send("PUT", api+"/policy", body), 400, errcode.ValidInvalid)
		if e.Details["field"] != field {
			t.Errorf("PUT %s: details.field = %v, want %s", body, e.Details["field"], field)
		}
		e = wantError(t, "preview "+body, h.send("POST", api+"/policy/preview", body), 400, errcode.ValidInvalid)
		if e.Details["field"] != field {
			t.Errorf("preview %s: details.field = %v, want %s", body, e.Details["field"], field)
		}
	}

	before = h.auditEntries(t)
	a = h.send("POST", api+"/policy/preview", `{"policy":{"min_runtime_isolation":"vm"}}`)
	if a.status != http.StatusOK || string(bytes.TrimSpace(a.body)) != `{"blocked":[]}` {
		t.Errorf("preview = %d %s", a.status, a.body)
	}
	wantError(t, "preview of a fixed setting", h.send("POST", api+"/policy/preview", `{"policy":{"public_sharing":"allowed"}}`), 409, errcode.StateInvalid)
	if got := newEntries(before, h.auditEntries(t)); len(got) != 0 {
		t.Errorf("preview wrote %v", actionsOf(got))
	}
	if p := decodeAs[policyDTO](t, h.send("GET", api+"/policy", "")); p.Policy.MinRuntimeIsolation != "none" {
		t.Errorf("preview changed the policy: %+v", p.Policy)
	}
}

func TestAuditEndpoint(t *testing.T) {
	h := newHarness(t)
	u := h.account(t, "subject", nil, true)
	// Three actions of u's own, then two of the administrator's on u.
	for i := range 3 {
		h.send("PATCH", api+"/users/"+u.userID, jsonOf(map[string]string{"display_name": "Name " + string(rune('A'+i))}), u.bearer()...)
	}
	mid := time.Now().UTC()
	time.Sleep(2 * time.Millisecond)
	h.send("PUT", api+"/users/"+u.userID+"/role", `{"role_id":"role_member"}`)
	h.send("POST", api+"/users/"+u.userID+"/password", `{"password":"reset-password-123"}`)

	query := func(q string) []audit.Entry {
		t.Helper()
		a := h.send("GET", api+"/audit?"+q, "")
		if a.status != http.StatusOK {
			t.Fatalf("GET /audit?%s: %d %s", q, a.status, a.body)
		}
		return decodeAs[auditDTO](t, a).Items
	}
	check := func(q string, want int, ok func(audit.Entry) bool) {
		t.Helper()
		got := query(q)
		if len(got) != want {
			t.Errorf("?%s: %d entries %v, want %d", q, len(got), actionsOf(got), want)
		}
		for i, e := range got {
			if !ok(e) {
				t.Errorf("?%s: entry %+v does not match", q, e)
			}
			if i > 0 && got[i-1].ID <= e.ID {
				t.Errorf("?%s: not newest first", q)
			}
		}
	}
	is := func(p *string, s string) bool { return p != nil && *p == s }
	check("principal_id="+u.tokenID, 3, func(e audit.Entry) bool { return e.PrincipalID == u.tokenID && e.Action == "user.update" })
	check("action=user.&target_id="+u.userID, 6, func(e audit.Entry) bool { return is(e.TargetID, u.userID) && strings.HasPrefix(e.Action, "user.") })
	check("action=user.password&involving="+u.userID, 1, func(e audit.Entry) bool { return e.Action == "user.password.reset" })
	check("involving="+u.tokenID, 4, func(e audit.Entry) bool { return e.PrincipalID == u.tokenID || is(e.TargetID, u.tokenID) })
	check("target_kind=user&principal_kind=token&since="+url.QueryEscape(mid.Format(time.RFC3339Nano)), 2, func(e audit.Entry) bool { return !e.Time.Before(mid) })
	check("target_id="+u.userID+"&until="+url.QueryEscape(mid.Format(time.RFC3339Nano)), 4, func(e audit.Entry) bool { return e.Time.Before(mid) })
	// The harness and the test set up through the service: system entries.
	system := 0
	for _, e := range h.auditEntries(t) {
		if e.PrincipalKind == "system" {
			system++
		}
	}
	check("principal_kind=system", system, func(e audit.Entry) bool { return e.PrincipalKind == "system" && e.RequestID == "" })
	check("action=nothing.like.this", 0, func(audit.Entry) bool { return false })

	// Paging with before, newest first, no overlap, to the end.
	all := query("limit=500")
	var paged []string
	before := ""
	for range 100 {
		q := "limit=3"
		if before != "" {
			q += "&before=" + before
		}
		a := h.send("GET", api+"/audit?"+q, "")
		page := decodeAs[auditDTO](t, a)
		for _, e := range page.Items {
			paged = append(paged, e.ID)
		}
		if page.NextBefore == "" {
			break
		}
		if page.NextBefore != page.Items[len(page.Items)-1].ID {
			t.Errorf("next_before %s is not the last entry of the page", page.NextBefore)
		}
		before = page.NextBefore
	}
	var want []string
	for _, e := range all {
		want = append(want, e.ID)
	}
	if !slices.Equal(paged, want) {
		t.Errorf("paging with before gave %d entries, the whole log has %d", len(paged), len(want))
	}

	for _, q := range []string{"nope=1", "principal_kind=robot", "since=yesterday", "limit=0", "before=usr_01M7ZVAA7HN5NZE25AZ701FBCF", "action=a&action=b", "involving="} {
		e := wantError(t, "GET /audit?"+q, h.send("GET", api+"/audit?"+q, ""), 400, errcode.ValidInvalid)
		if e.Details["field"] == nil {
			t.Errorf("?%s: no details.field: %v", q, e.Details)
		}
	}
}

// waitTouched waits until a token's use is recorded (last_used_at), which
// the identity service writes in the background after a token's first use.
func waitTouched(t *testing.T, h *harness, tokenID string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tk, _, ok := identity.Tokens.Get(h.store.Read(), tokenID)
		if !ok || tk.LastUsedAt != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the use of %s was never recorded", tokenID)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRevokingATokenJustUsed: revoking a token is refused 409 STATE_INVALID
// ("changed concurrently; retry") when it races the background write that
// records the token's use, which every first use of a token (and every use
// an hour after the last) starts. The caller did nothing concurrent: the
// revocation must not depend on the service's own bookkeeping.
func TestRevokingATokenJustUsed(t *testing.T) {
	h := newHarness(t)
	u := h.account(t, "owner", nil, false)
	const rounds = 30
	var refused []string
	for i := range rounds {
		secret := h.delegatedToken(t, u.userID, false)
		id := tokenIDOf(secret)
		var a answer
		if i%2 == 0 {
			// Revoke with the token itself, on its first use.
			a = h.send("DELETE", api+"/tokens/"+id, "", "Authorization", "Bearer "+secret)
		} else {
			// Use it, then the administrator revokes it.
			h.send("GET", api+"/me", "", "Authorization", "Bearer "+secret)
			a = h.send("DELETE", api+"/tokens/"+id, "")
		}
		if a.status != http.StatusNoContent {
			how := "by the administrator after a use"
			if i%2 == 0 {
				how = "by itself on its first use"
			}
			refused = append(refused, fmt.Sprintf("%s: %d %s", how, a.status, codeOf(a)))
		}
		if g := h.send("GET", api+"/me", "", "Authorization", "Bearer "+secret); a.status == http.StatusNoContent && codeOf(g) != errcode.AuthTokenInvalid {
			t.Errorf("round %d: the revoked token still answers %d", i, g.status)
		}
	}
	if len(refused) > 0 {
		t.Errorf("%d of %d revocations of a token just used were refused: %v", len(refused), rounds, refused)
	}
}

// TestRefusalSaysWhenPolicyTakesTheVerb: a caller who holds a verb that
// host policy turns off is told so, with the setting and a remedy; one who
// never held it is told only that the verb is needed.
func TestRefusalSaysWhenPolicyTakesTheVerb(t *testing.T) {
	h := newHarness(t)
	wantStatus(t, "policy", h.send("PUT", api+"/policy", `{"policy":{"agent_disabled_verbs":["install.audit.read"],"disabled_verbs":["install.view"]}}`), http.StatusOK)
	agent := &principal{token: h.delegatedToken(t, h.adminID, true)}
	e := wantError(t, "an agent reading the audit log", h.send("GET", api+"/audit", "", agent.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
	if !strings.Contains(e.Message, "agent_disabled_verbs") || !strings.Contains(e.Remedy, "PUT /api/v1/policy") || e.Details["policy"] != "agent_disabled_verbs" {
		t.Errorf("agent refusal = %+v; want it to name agent_disabled_verbs with a remedy", e)
	}
	e = wantError(t, "anyone listing users", h.send("GET", api+"/users", ""), http.StatusForbidden, errcode.PermVerbRequired)
	if e.Details["policy"] != "disabled_verbs" {
		t.Errorf("disabled verb refusal = %+v; want it to name disabled_verbs", e)
	}
	member := h.account(t, "plain-member", nil, true)
	e = wantError(t, "a member reading the audit log", h.send("GET", api+"/audit", "", member.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
	if e.Details["policy"] != nil || strings.Contains(e.Message, "policy") {
		t.Errorf("a member who never held the verb is told about policy: %+v", e)
	}
}
