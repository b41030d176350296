package identity

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/password"
)

func TestCreateUserGeneratesAPassword(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	m := e.mark()
	u, generated, err := e.svc.CreateUser(bg, NewUser{Username: "bob", DisplayName: "Bob", Email: "bob@example.com"})
	must(t, "create", err)
	if n := utf8.RuneCountInString(generated); n < 18 || n > 22 {
		t.Errorf("generated password %d characters, want 18 to 22", n)
	}
	if err := password.Check(generated, "bob"); err != nil {
		t.Errorf("generated password breaks the rules: %v", err)
	}
	stored := e.getUser(t, u.ID)
	if !stored.MustChangePassword || !u.MustChangePassword {
		t.Error("an account with a generated password need not change it")
	}
	if stored.RoleID != nil {
		t.Errorf("a new account holds role %s", *stored.RoleID)
	}
	if v := e.verbsOf(userPrincipal(u.ID)); v != 0 {
		t.Errorf("a new account holds %v", v.Verbs())
	}
	if !ids.Valid(ids.User, u.ID) || stored.Status != StatusActive || stored.Source != SourceLocal || stored.Email != "bob@example.com" || stored.DisplayName != "Bob" {
		t.Errorf("account = %+v", stored)
	}
	if !strings.HasPrefix(stored.PasswordHash, "$argon2id$") {
		t.Errorf("password hash %q is not Argon2id", stored.PasswordHash)
	}
	if _, err := e.svc.SignIn(bg, "bob", generated, Client{}); err != nil {
		t.Errorf("sign in with the generated password: %v", err)
	}
	if strings.Contains(e.dump(t), generated) {
		t.Error("the generated password is stored, audited or evented")
	}
	entry := e.oneAudit(t, m, "user.create")
	wantData(t, "user.create", entry.Value.Details, map[string]any{"username": "bob", "via": "api"})
	ev := e.oneEvent(t, m, "user.created")
	wantData(t, "user.created", ev.Value.Data, map[string]any{"via": "api", "adapter_id": nil, "target_id": u.ID})
	if entry.Meta.CreateIndex != ev.Meta.CreateIndex {
		t.Error("user.create and user.created not in one write")
	}
	if n := len(e.eventsSince(m, "grant.created")); n != 0 {
		t.Errorf("%d grant.created events for an account without a role", n)
	}

	// A role asked for is ignored: new accounts hold none.
	u2, gen2, err := e.svc.CreateUser(bg, NewUser{Username: "carol", Password: testPW, RoleID: ptr(authz.RoleAdmin)})
	must(t, "create carol", err)
	if gen2 != "" || u2.MustChangePassword || e.getUser(t, u2.ID).RoleID != nil {
		t.Errorf("carol = %+v, generated %q", u2, gen2)
	}
	u3, _, err := e.svc.CreateUser(bg, NewUser{Username: "dave", Password: testPW, MustChangePassword: true})
	must(t, "create dave", err)
	if !e.getUser(t, u3.ID).MustChangePassword {
		t.Error("must_change_password asked for, not kept")
	}
	if u2.DisplayName != "carol" {
		t.Errorf("display name defaults to %q, want the username", u2.DisplayName)
	}
}

func TestCreateUserValidation(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	for _, tc := range []struct {
		name  string
		n     NewUser
		field string
	}{
		{"empty username", NewUser{Username: ""}, "username"},
		{"username starts with a dot", NewUser{Username: ".bob"}, "username"},
		{"username starts with a dash", NewUser{Username: "-bob"}, "username"},
		{"username with a space", NewUser{Username: "bo b"}, "username"},
		{"username with @", NewUser{Username: "bob@example.com"}, "username"},
		{"username with a non-ASCII letter", NewUser{Username: "bób"}, "username"},
		{"65-character username", NewUser{Username: strings.Repeat("b", 65)}, "username"},
		{"username with a newline", NewUser{Username: "bob\n"}, "username"},
		{"display name with a control character", NewUser{Username: "bob", DisplayName: "B\tob"}, "display_name"},
		{"blank display name", NewUser{Username: "bob", DisplayName: "   "}, "display_name"},
		{"129-character display name", NewUser{Username: "bob", DisplayName: strings.Repeat("é", 129)}, "display_name"},
		{"email without @", NewUser{Username: "bob", Email: "bob.example.com"}, "email"},
		{"email with a name", NewUser{Username: "bob", Email: "Bob <bob@example.com>"}, "email"},
		{"email without domain", NewUser{Username: "bob", Email: "bob@"}, "email"},
		{"email with spaces", NewUser{Username: "bob", Email: " bob@example.com"}, "email"},
		{"too long email", NewUser{Username: "bob", Email: strings.Repeat("b", 250) + "@example.com"}, "email"},
		{"short password", NewUser{Username: "bob", Password: "short"}, "password"},
		{"password is the username", NewUser{Username: "bobby-the-builder", Password: "Bobby-The-Builder"}, "password"},
		{"whitespace password", NewUser{Username: "bob", Password: strings.Repeat(" ", 20)}, "password"},
		{"257-byte password", NewUser{Username: "bob", Password: strings.Repeat("p", 257)}, "password"},
	} {
		_, _, err := e.svc.CreateUser(bg, tc.n)
		if ce := wantCode(t, tc.name, err, errcode.ValidInvalid); ce != nil && ce.Details["field"] != tc.field {
			t.Errorf("%s: details %v, want field %s", tc.name, ce.Details, tc.field)
		}
	}
	if n := Users.Count(e.store.Read()); n != 1 {
		t.Errorf("%d accounts after refused creations, want 1", n)
	}
	for _, name := range []string{"a", "7", "Bob.Smith_1-2", strings.Repeat("z", 64)} {
		if _, _, err := e.svc.CreateUser(bg, NewUser{Username: name, Password: testPW}); err != nil {
			t.Errorf("username %q refused: %v", name, err)
		}
	}
	if _, _, err := e.svc.CreateUser(bg, NewUser{Username: "withmail", Password: testPW, Email: "first.last+tag@sub.example.org"}); err != nil {
		t.Errorf("valid email refused: %v", err)
	}
}

func TestUsernamesAreUniqueIgnoringCase(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	alice := e.mkUser(t, "alice")
	for _, name := range []string{"alice", "ALICE", "Alice", "Admin"} {
		_, _, err := e.svc.CreateUser(bg, NewUser{Username: name, Password: testPW})
		if ce := wantCode(t, "create "+name, err, errcode.StateInvalid); ce != nil && ce.Details["field"] != "username" {
			t.Errorf("create %s: details %v, want field username", name, ce.Details)
		}
	}
	admin := e.getUserByName(t, "admin")
	ac := e.userCaller(admin.ID)
	_, err := e.svc.UpdateUser(bg, ac, alice.ID, UserPatch{Username: ptr("ADMIN")})
	if ce := wantCode(t, "rename to another's name", err, errcode.StateInvalid); ce != nil && ce.Details["field"] != "username" {
		t.Errorf("rename: details %v", ce.Details)
	}
	// Changing only the case of one's own name is fine.
	u, err := e.svc.UpdateUser(bg, ac, alice.ID, UserPatch{Username: ptr("Alice")})
	must(t, "rename alice to Alice", err)
	if u.Username != "Alice" {
		t.Errorf("username %q", u.Username)
	}
}

func (e *env) getUserByName(t *testing.T, name string) User {
	t.Helper()
	u, _, ok := Users.First(e.store.Read(), "username", strings.ToLower(name))
	if !ok {
		t.Fatalf("no account %s", name)
	}
	return u
}

func TestReadingAnAccount(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	bob := e.mkUser(t, "bob")
	auditor := e.mkUserWithRole(t, "auditor", authz.RoleAuditor)

	if u, err := e.svc.User(e.userCaller(bob.ID), bob.ID); err != nil || u.ID != bob.ID {
		t.Errorf("own account without a verb = %v, %v", u.ID, err)
	}
	// Without install.view another's account is refused for the verb,
	// whether or not it exists (API.md: installation resources are guarded
	// by installation verbs alone; visibility is an app-level notion).
	_, err := e.svc.User(e.userCaller(bob.ID), admin.ID)
	wantVerb(t, "another's account without install.view", err, authz.InstallView)
	_, err = e.svc.User(e.userCaller(bob.ID), ids.New(ids.User))
	wantVerb(t, "unknown account without install.view", err, authz.InstallView)
	_, err = e.svc.User(e.userCaller(bob.ID), "not-an-id")
	wantVerb(t, "malformed ID without install.view", err, authz.InstallView)
	if _, err := e.svc.User(e.userCaller(auditor.ID), bob.ID); err != nil {
		t.Errorf("with install.view: %v", err)
	}
	_, err = e.svc.User(e.userCaller(auditor.ID), ids.New(ids.User))
	wantCode(t, "unknown account", err, errcode.NotFound)

	// Through a delegated token: the owner's own account.
	_, cred := e.mkToken(t, e.userCaller(bob.ID), TokenDelegated, "t")
	a, err := e.svc.Authenticate(bg, cred, "")
	must(t, "authenticate", err)
	if _, err := e.svc.User(e.caller(a.Principal), bob.ID); err != nil {
		t.Errorf("own account through a delegated token: %v", err)
	}
	// A service token is nobody's account.
	svc := e.caller(authz.Principal{Kind: authz.KindToken, ID: ids.New(ids.Token)})
	_, err = e.svc.User(svc, bob.ID)
	wantVerb(t, "service token", err, authz.InstallView)
}

func TestUpdateUserPermissions(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	bob := e.mkUser(t, "bob")
	carol := e.mkUser(t, "carol")
	auditor := e.mkUserWithRole(t, "auditor", authz.RoleAuditor)
	bc := e.userCaller(bob.ID)

	// Own display name and email: no verb.
	m := e.mark()
	u, err := e.svc.UpdateUser(bg, bc, bob.ID, UserPatch{DisplayName: ptr("Robert"), Email: ptr("robert@example.com")})
	must(t, "own display name and email", err)
	if u.DisplayName != "Robert" || u.Email != "robert@example.com" {
		t.Errorf("answer = %+v", u)
	}
	if s := e.getUser(t, bob.ID); s.DisplayName != "Robert" || s.Email != "robert@example.com" || s.PasswordHash == "" {
		t.Errorf("stored = %+v", s)
	}
	entry := e.oneAudit(t, m, "user.update")
	wantData(t, "user.update", entry.Value.Details, map[string]any{"display_name": true, "email": true})

	// Own username and status: the verb.
	for name, p := range map[string]UserPatch{
		"own username":               {Username: ptr("robert")},
		"own status":                 {Status: ptr(StatusSuspended)},
		"own display name and login": {DisplayName: ptr("Bobby"), Username: ptr("bobby")},
	} {
		_, err := e.svc.UpdateUser(bg, bc, bob.ID, p)
		if ce := wantCode(t, name, err, errcode.PermVerbRequired); ce != nil && ce.Details["verb"] != string(authz.InstallUsersManage) {
			t.Errorf("%s: details = %v", name, ce.Details)
		}
	}
	if s := e.getUser(t, bob.ID); s.Username != "bob" || s.DisplayName != "Robert" || s.Status != StatusActive {
		t.Errorf("a refused update changed the account: %+v", s)
	}

	// Another's account: install.users.manage, whether or not it exists;
	// with the verb an unknown account is NOT_FOUND.
	_, err = e.svc.UpdateUser(bg, bc, carol.ID, UserPatch{DisplayName: ptr("x")})
	wantVerb(t, "another's display name without any verb", err, authz.InstallUsersManage)
	_, err = e.svc.UpdateUser(bg, e.userCaller(auditor.ID), carol.ID, UserPatch{DisplayName: ptr("x")})
	wantVerb(t, "another's display name with install.view", err, authz.InstallUsersManage)
	_, err = e.svc.UpdateUser(bg, bc, ids.New(ids.User), UserPatch{DisplayName: ptr("x")})
	wantVerb(t, "unknown account without the verb", err, authz.InstallUsersManage)
	_, err = e.svc.UpdateUser(bg, e.userCaller(admin.ID), ids.New(ids.User), UserPatch{DisplayName: ptr("x")})
	wantCode(t, "unknown account with the verb", err, errcode.NotFound)

	// With install.users.manage.
	ac := e.userCaller(admin.ID)
	u, err = e.svc.UpdateUser(bg, ac, bob.ID, UserPatch{Username: ptr("robert")})
	must(t, "admin renames bob", err)
	if u.Username != "robert" {
		t.Errorf("username = %q", u.Username)
	}
	if _, err := e.svc.SignIn(bg, "robert", testPW, Client{}); err != nil {
		t.Errorf("sign in with the new username: %v", err)
	}
	if _, err := e.svc.UpdateUser(bg, ac, admin.ID, UserPatch{Username: ptr("root")}); err != nil {
		t.Errorf("admin renames itself: %v", err)
	}
	for name, tc := range map[string]struct {
		p     UserPatch
		field string
	}{
		"bad username":     {UserPatch{Username: ptr("no spaces allowed")}, "username"},
		"bad email":        {UserPatch{Email: ptr("nope")}, "email"},
		"bad display name": {UserPatch{DisplayName: ptr("")}, "display_name"},
		"unknown status":   {UserPatch{Status: ptr("deleted")}, "status"},
		"empty status":     {UserPatch{Status: ptr("")}, "status"},
	} {
		_, err := e.svc.UpdateUser(bg, ac, carol.ID, tc.p)
		if ce := wantCode(t, name, err, errcode.ValidInvalid); ce != nil && ce.Details["field"] != tc.field {
			t.Errorf("%s: details = %v", name, ce.Details)
		}
	}
	// Clearing the email is allowed.
	if u, err := e.svc.UpdateUser(bg, bc, bob.ID, UserPatch{Email: ptr("")}); err != nil || u.Email != "" {
		t.Errorf("clear own email = %q, %v", u.Email, err)
	}

	// No change writes nothing.
	m = e.mark()
	if _, err := e.svc.UpdateUser(bg, ac, carol.ID, UserPatch{DisplayName: ptr("carol"), Status: ptr(StatusActive)}); err != nil {
		t.Errorf("no-op update: %v", err)
	}
	if e.mark() != m {
		t.Error("an update changing nothing wrote")
	}
}

func TestSuspensionEndsSessions(t *testing.T) {
	e := newTestEnv(t)
	admin, adminSess := e.setup(t)
	bob := e.mkUser(t, "bob")
	s1, s2 := e.signIn(t, "bob"), e.signIn(t, "bob")
	ac := e.userCaller(admin.ID)

	m := e.mark()
	u, err := e.svc.UpdateUser(bg, ac, bob.ID, UserPatch{Status: ptr(StatusSuspended)})
	must(t, "suspend", err)
	if u.Status != StatusSuspended {
		t.Errorf("status = %s", u.Status)
	}
	if n := len(e.sessionsOf(bob.ID)); n != 0 {
		t.Errorf("%d sessions of a suspended account left", n)
	}
	for _, si := range []SignedIn{s1, s2} {
		_, err := e.svc.Authenticate(bg, "", si.Cookie)
		wantCode(t, "session after suspension", err, errcode.AuthRequired)
	}
	if _, err := e.svc.Authenticate(bg, "", adminSess.Cookie); err != nil {
		t.Errorf("admin's session ended: %v", err)
	}
	entry := e.oneAudit(t, m, "user.update")
	wantData(t, "user.update", entry.Value.Details, map[string]any{"status": map[string]any{"from": "active", "to": "suspended"}})
	if e.userExists(bob.ID) == false {
		t.Error("suspension deleted the account")
	}
	_, err = e.svc.SignIn(bg, "bob", testPW, Client{})
	wantCode(t, "suspended account signing in", err, errcode.AuthInvalid)

	_, err = e.svc.UpdateUser(bg, ac, bob.ID, UserPatch{Status: ptr(StatusActive)})
	must(t, "reactivate", err)
	if _, err := e.svc.SignIn(bg, "bob", testPW, Client{}); err != nil {
		t.Errorf("sign in after reactivation: %v", err)
	}
}

func TestDeleteUserRemovesWhatExistsOnlyForIt(t *testing.T) {
	e := newTestEnv(t)
	admin, adminSess := e.setup(t)
	bob := e.mkUser(t, "bob")
	carol := e.mkUser(t, "carol")
	bs1, bs2 := e.signIn(t, "bob"), e.signIn(t, "bob")
	bc := e.userCaller(bob.ID)
	delegated, delegatedCred := e.mkToken(t, bc, TokenDelegated, "bob-cli")
	svcTok, svcCred := e.mkToken(t, bc, TokenService, "bob-ci")
	carolTok, _ := e.mkToken(t, e.userCaller(carol.ID), TokenDelegated, "carol-cli")
	g1 := e.mkGroup(t, "one", nil, bob.ID, carol.ID)
	g2 := e.mkGroup(t, "two", ptr(authz.RoleAuditor), bob.ID)
	g3 := e.mkGroup(t, "three", nil, carol.ID)
	grBobCtl := e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: ptr(authz.RoleOwner)})
	grBobData := e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneData, PrincipalKind: "user", PrincipalID: bob.ID})
	grCarol := e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneControl, PrincipalKind: "user", PrincipalID: carol.ID, RoleID: ptr(authz.RoleViewer)})
	grGroup := e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneData, PrincipalKind: "group", PrincipalID: g1.ID})
	grSvc := e.putGrant(t, Grant{AppID: "app_2", Plane: PlaneControl, PrincipalKind: "token", PrincipalID: svcTok.ID, RoleID: ptr(authz.RoleDeveloper)})

	m := e.mark()
	must(t, "delete bob", e.svc.DeleteUser(bg, bob.ID))
	if e.userExists(bob.ID) {
		t.Error("account still stored")
	}
	if n := len(e.sessionsOf(bob.ID)); n != 0 {
		t.Errorf("%d sessions left", n)
	}
	for _, si := range []SignedIn{bs1, bs2} {
		_, err := e.svc.Authenticate(bg, "", si.Cookie)
		wantCode(t, "session of a deleted account", err, errcode.AuthRequired)
	}
	// Its delegated tokens end with it and say why (specification,
	// Authentication rule 3).
	_, err := e.svc.Authenticate(bg, delegatedCred, "")
	wantCode(t, "delegated token of a deleted account", err, errcode.AuthTokenOrphaned)
	if got, _ := e.svc.OwnTokens(bc, "", 0); len(got) != 1 || got[0].ID != delegated.ID {
		t.Errorf("the deleted account's tokens = %v", got)
	}
	if _, _, ok := Tokens.Get(e.store.Read(), svcTok.ID); !ok {
		t.Error("service token removed with its creator")
	}
	if _, err := e.svc.Authenticate(bg, svcCred, ""); err != nil {
		t.Errorf("service token after its creator's deletion: %v", err)
	}
	if _, _, ok := Tokens.Get(e.store.Read(), carolTok.ID); !ok {
		t.Error("another account's token removed")
	}
	if g := e.getGroup(t, g1.ID); !slices.Equal(g.MemberIDs, []string{carol.ID}) {
		t.Errorf("group one members = %v, want carol only", g.MemberIDs)
	}
	if g := e.getGroup(t, g2.ID); len(g.MemberIDs) != 0 || g.RoleID == nil {
		t.Errorf("group two = %+v, want empty and keeping its role", g)
	}
	if g := e.getGroup(t, g3.ID); !slices.Equal(g.MemberIDs, []string{carol.ID}) {
		t.Errorf("group three = %v", g.MemberIDs)
	}
	for _, gr := range []Grant{grBobCtl, grBobData} {
		if e.grantExists(gr.ID) {
			t.Errorf("grant %s (%s) to the deleted account kept", gr.ID, gr.Plane)
		}
	}
	for _, gr := range []Grant{grCarol, grGroup, grSvc} {
		if !e.grantExists(gr.ID) {
			t.Errorf("grant %s to %s %s removed", gr.ID, gr.PrincipalKind, gr.PrincipalID)
		}
	}
	if _, err := e.svc.Authenticate(bg, "", adminSess.Cookie); err != nil {
		t.Errorf("admin's session: %v", err)
	}

	ev := e.oneEvent(t, m, "user.deleted")
	wantData(t, "user.deleted", ev.Value.Data, map[string]any{"username": "bob", "target_kind": "user", "target_id": bob.ID})
	entry := e.oneAudit(t, m, "user.delete")
	wantData(t, "user.delete", entry.Value.Details, map[string]any{"username": "bob"})
	if entry.Meta.CreateIndex != ev.Meta.CreateIndex {
		t.Error("user.delete and user.deleted not in one write")
	}

	wantCode(t, "delete twice", e.svc.DeleteUser(bg, bob.ID), errcode.NotFound)
	// The username is free again.
	if _, _, err := e.svc.CreateUser(bg, NewUser{Username: "bob", Password: testPW}); err != nil {
		t.Errorf("reuse the username: %v", err)
	}
	_ = admin
}

func TestSetUserRole(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	bob := e.mkUser(t, "bob")

	_, err := e.svc.SetUserRole(bg, bob.ID, ptr("role_nosuch"))
	wantCode(t, "unknown role", err, errcode.NotFound)
	_, err = e.svc.SetUserRole(bg, bob.ID, ptr(authz.RoleOwner))
	if ce := wantCode(t, "app role", err, errcode.ValidInvalid); ce != nil && ce.Details["field"] != "role_id" {
		t.Errorf("details = %v", ce.Details)
	}
	_, err = e.svc.SetUserRole(bg, ids.New(ids.User), ptr(authz.RoleAdmin))
	wantCode(t, "unknown account", err, errcode.NotFound)
	appRole, err := e.svc.CreateRole(bg, "app-custom", authz.ScopeApp, []authz.Verb{authz.AppView})
	must(t, "custom app role", err)
	_, err = e.svc.SetUserRole(bg, bob.ID, &appRole.ID)
	wantCode(t, "custom app role", err, errcode.ValidInvalid)

	steps := []struct {
		role   *string
		action string
		event  string
		data   map[string]any
		has    authz.Verb
	}{
		{ptr(authz.RoleAuditor), "user.role.set", "grant.created", map[string]any{"plane": PlaneControl, "role_id": authz.RoleAuditor, "principal_kind": "user", "principal_id": bob.ID, "passcode": false}, authz.InstallView},
		{ptr(authz.RoleMember), "user.role.set", "grant.role_changed", map[string]any{"role_id": authz.RoleMember}, authz.AppCreate},
		{nil, "user.role.remove", "grant.deleted", map[string]any{"scope": "install"}, ""},
	}
	for _, st := range steps {
		m := e.mark()
		u, err := e.svc.SetUserRole(bg, bob.ID, st.role)
		must(t, st.action, err)
		if !ptrEq(u.RoleID, st.role) || !ptrEq(e.getUser(t, bob.ID).RoleID, st.role) {
			t.Errorf("%s: role = %v", st.action, u.RoleID)
		}
		v := e.verbsOf(userPrincipal(bob.ID))
		if st.has != "" && (!v.Has(st.has) || len(v.Verbs()) == 0) || st.has == "" && v != 0 {
			t.Errorf("%s: bob holds %v", st.action, v.Verbs())
		}
		entry := e.oneAudit(t, m, st.action)
		ev := e.oneEvent(t, m, st.event)
		wantData(t, st.event, ev.Value.Data, st.data)
		wantData(t, st.event, ev.Value.Data, map[string]any{"target_kind": "user", "target_id": bob.ID})
		if entry.Meta.CreateIndex != ev.Meta.CreateIndex {
			t.Errorf("%s: entry and event not in one write", st.action)
		}
	}
	m := e.mark()
	if _, err := e.svc.SetUserRole(bg, bob.ID, nil); err != nil {
		t.Errorf("removing no role: %v", err)
	}
	if e.mark() != m {
		t.Error("setting the role an account already has wrote")
	}
}

func TestUserListing(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	for i := range 5 {
		e.mkUser(t, fmt.Sprintf("u%d", i))
	}
	var all []User
	after := ""
	for {
		page, more := e.svc.Users(after, 2)
		all = append(all, page...)
		if !more {
			break
		}
		after = page[len(page)-1].ID
	}
	if len(all) != 6 {
		t.Errorf("paged through %d accounts, want 6", len(all))
	}
	if !slices.IsSortedFunc(all, func(a, b User) int { return strings.Compare(a.ID, b.ID) }) {
		t.Error("accounts not listed by ID")
	}
}
