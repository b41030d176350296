package identity

import (
	"fmt"
	"slices"
	"testing"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

func roleIDs(rs []authz.Role) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func TestRolesListing(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	inst, err := e.svc.CreateRole(bg, "ops", authz.ScopeInstall, []authz.Verb{authz.InstallView, authz.AppRestart})
	must(t, "install role", err)
	app, err := e.svc.CreateRole(bg, "deployer", authz.ScopeApp, []authz.Verb{authz.AppDeploy})
	must(t, "app role", err)

	for scope, want := range map[string][]string{
		"install": {authz.RoleAdmin, authz.RoleAuditor, authz.RoleMember, inst.ID},
		"app":     {authz.RoleOwner, authz.RoleDeveloper, authz.RoleViewer, app.ID},
		"all":     {authz.RoleAdmin, authz.RoleAuditor, authz.RoleMember, authz.RoleOwner, authz.RoleDeveloper, authz.RoleViewer, inst.ID, app.ID},
	} {
		got, _, err := e.svc.Roles(scope, "", 0)
		must(t, "roles "+scope, err)
		if !slices.Equal(roleIDs(got), want) {
			t.Errorf("Roles(%q) = %v, want %v (built-in first)", scope, roleIDs(got), want)
		}
		for _, r := range got {
			_, builtin := authz.BuiltinRole(r.ID)
			if r.Builtin != builtin {
				t.Errorf("role %s builtin = %v", r.ID, r.Builtin)
			}
		}
	}
	// The default scope (installation) is the server's: the service wants
	// one of the three.
	for _, scope := range []string{"", "bogus", "INSTALL"} {
		_, _, err := e.svc.Roles(scope, "", 0)
		wantCode(t, "scope "+scope, err, errcode.ValidInvalid)
	}
	// The admin role holds every verb; the listing hands out copies.
	got, _, _ := e.svc.Roles("install", "", 0)
	if len(got[0].Verbs) != len(authz.All()) {
		t.Errorf("admin holds %d verbs, want all %d", len(got[0].Verbs), len(authz.All()))
	}
	got[0].Verbs[0] = "mutated"
	again, _, _ := e.svc.Roles("install", "", 0)
	if again[0].Verbs[0] == "mutated" {
		t.Error("a caller can change a built-in role through the listing")
	}
}

func TestCreateRole(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	m := e.mark()
	r, err := e.svc.CreateRole(bg, "Release managers", authz.ScopeApp, []authz.Verb{authz.AppDeploy, authz.AppView, authz.AppDeploy})
	must(t, "create", err)
	if !ids.Valid(ids.Role, r.ID) || r.Builtin || r.Scope != authz.ScopeApp || !slices.Equal(r.Verbs, []authz.Verb{authz.AppDeploy, authz.AppView}) {
		t.Errorf("role = %+v (duplicate verbs should collapse)", r)
	}
	if stored, _, ok := Roles.Get(e.store.Read(), r.ID); !ok || stored.Name != "Release managers" {
		t.Errorf("stored = %+v", stored)
	}
	entry := e.oneAudit(t, m, "role.create")
	wantData(t, "role.create", entry.Value.Details, map[string]any{"name": "Release managers", "scope": "app"})

	inst, err := e.svc.CreateRole(bg, "ops", authz.ScopeInstall, []authz.Verb{authz.AppCreate, authz.InstallView, authz.AppExec})
	must(t, "an installation role may hold app verbs and app.create", err)
	if inst.Scope != authz.ScopeInstall {
		t.Errorf("scope = %s", inst.Scope)
	}

	for _, tc := range []struct {
		name  string
		rname string
		scope authz.Scope
		verbs []authz.Verb
		code  errcode.Code
		field string
	}{
		{"unknown verb", "x1", authz.ScopeInstall, []authz.Verb{"install.everything"}, errcode.ValidInvalid, "verbs"},
		{"unknown verb among known", "x2", authz.ScopeApp, []authz.Verb{authz.AppView, "app.fly"}, errcode.ValidInvalid, "verbs"},
		{"app.create in an app role", "x3", authz.ScopeApp, []authz.Verb{authz.AppCreate}, errcode.ValidInvalid, "verbs"},
		{"install verb in an app role", "x4", authz.ScopeApp, []authz.Verb{authz.AppView, authz.InstallUsersManage}, errcode.ValidInvalid, "verbs"},
		{"no verbs", "x5", authz.ScopeInstall, nil, errcode.ValidInvalid, "verbs"},
		{"no scope", "x6", "", []authz.Verb{authz.AppView}, errcode.ValidInvalid, "scope"},
		{"unknown scope", "x7", "global", []authz.Verb{authz.AppView}, errcode.ValidInvalid, "scope"},
		{"empty name", "", authz.ScopeApp, []authz.Verb{authz.AppView}, errcode.ValidInvalid, "name"},
		{"padded name", " ops", authz.ScopeApp, []authz.Verb{authz.AppView}, errcode.ValidInvalid, "name"},
		{"duplicate name", "OPS", authz.ScopeApp, []authz.Verb{authz.AppView}, errcode.StateInvalid, "name"},
		{"duplicate name other case", "release MANAGERS", authz.ScopeInstall, []authz.Verb{authz.AppView}, errcode.StateInvalid, "name"},
		{"built-in name", "admin", authz.ScopeInstall, []authz.Verb{authz.AppView}, errcode.StateInvalid, "name"},
		{"built-in name other case", "Owner", authz.ScopeApp, []authz.Verb{authz.AppView}, errcode.StateInvalid, "name"},
		{"built-in name of other scope", "viewer", authz.ScopeInstall, []authz.Verb{authz.InstallView}, errcode.StateInvalid, "name"},
	} {
		_, err := e.svc.CreateRole(bg, tc.rname, tc.scope, tc.verbs)
		if ce := wantCode(t, tc.name, err, tc.code); ce != nil && ce.Details["field"] != tc.field {
			t.Errorf("%s: details = %v, want field %s", tc.name, ce.Details, tc.field)
		}
	}
	if n := Roles.Count(e.store.Read()); n != 2 {
		t.Errorf("%d custom roles stored, want 2", n)
	}
}

// The store itself keeps custom roles custom.
func TestStoreRefusesRolesThatAreNotCustom(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	for name, r := range map[string]authz.Role{
		"built-in ID":              {ID: authz.RoleAdmin, Name: "mine", Scope: authz.ScopeInstall, Verbs: []authz.Verb{authz.InstallView}},
		"marked built-in":          {ID: ids.New(ids.Role), Name: "mine2", Scope: authz.ScopeInstall, Builtin: true, Verbs: []authz.Verb{authz.InstallView}},
		"install verb in app role": {ID: ids.New(ids.Role), Name: "mine3", Scope: authz.ScopeApp, Verbs: []authz.Verb{authz.InstallView}},
	} {
		_, err := e.store.Apply(bg, Roles.Insert(&r))
		if !raftstore.IsReason(err, raftstore.ReasonRejected) {
			t.Errorf("%s: store accepted it (%v)", name, err)
		}
	}
}

func TestDeleteRole(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	for _, b := range authz.BuiltinRoles() {
		err := e.svc.DeleteRole(bg, b.ID)
		if ce := wantCode(t, "delete built-in "+b.Name, err, errcode.StateInvalid); ce != nil && ce.Details["protected"] != b.ID {
			t.Errorf("details = %v", ce.Details)
		}
	}
	wantCode(t, "unknown role", e.svc.DeleteRole(bg, "role_nosuch"), errcode.NotFound)

	inst, err := e.svc.CreateRole(bg, "ops", authz.ScopeInstall, []authz.Verb{authz.InstallView})
	must(t, "install role", err)
	app, err := e.svc.CreateRole(bg, "deployer", authz.ScopeApp, []authz.Verb{authz.AppDeploy})
	must(t, "app role", err)
	bob := e.mkUserWithRole(t, "bob", inst.ID)
	carol := e.mkUserWithRole(t, "carol", authz.RoleMember)
	g := e.mkGroup(t, "team", &inst.ID, carol.ID)
	g2 := e.mkGroup(t, "other", ptr(authz.RoleAuditor))
	grApp := e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneControl, PrincipalKind: "user", PrincipalID: carol.ID, RoleID: &app.ID})
	grKeep := e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: ptr(authz.RoleViewer)})
	if !e.verbsOf(userPrincipal(carol.ID)).Has(authz.InstallView) {
		t.Fatal("carol does not hold the group's custom role")
	}

	m := e.mark()
	must(t, "delete install role", e.svc.DeleteRole(bg, inst.ID))
	if e.getUser(t, bob.ID).RoleID != nil {
		t.Error("account keeps the deleted role")
	}
	if e.getGroup(t, g.ID).RoleID != nil {
		t.Error("group keeps the deleted role")
	}
	if r := e.getGroup(t, g2.ID).RoleID; r == nil || *r != authz.RoleAuditor {
		t.Error("another group's role changed")
	}
	if r := e.getUser(t, carol.ID).RoleID; r == nil || *r != authz.RoleMember {
		t.Error("another account's role changed")
	}
	if v := e.verbsOf(userPrincipal(bob.ID)); v != 0 {
		t.Errorf("bob holds %v", v.Verbs())
	}
	if v := e.verbsOf(userPrincipal(carol.ID)); v != authz.SetOf(authz.AppCreate) {
		t.Errorf("carol holds %v", v.Verbs())
	}
	entry := e.oneAudit(t, m, "role.delete")
	wantData(t, "role.delete", entry.Value.Details, map[string]any{"name": "ops", "accounts": 1, "groups": 1, "grants": 0})

	must(t, "delete app role", e.svc.DeleteRole(bg, app.ID))
	if e.grantExists(grApp.ID) {
		t.Error("app grant of the deleted role kept")
	}
	if !e.grantExists(grKeep.ID) {
		t.Error("another grant removed")
	}
	if _, _, ok := Roles.Get(e.store.Read(), app.ID); ok {
		t.Error("role still stored")
	}
	got, _, _ := e.svc.Roles("all", "", 0)
	if slices.Contains(roleIDs(got), app.ID) || slices.Contains(roleIDs(got), inst.ID) {
		t.Error("deleted roles still listed")
	}
	// The accounts and groups it was taken from can still be changed.
	if _, err := e.svc.UpdateUser(bg, e.userCaller(bob.ID), bob.ID, UserPatch{DisplayName: ptr("Bob")}); err != nil {
		t.Errorf("change an account whose role was deleted: %v", err)
	}
	if _, err := e.svc.AddMember(bg, g.ID, bob.ID); err != nil {
		t.Errorf("change a group whose role was deleted: %v", err)
	}
}

// A role given while its deletion is under way: the deletion read nobody
// holding it, and the grant committed before the deletion did. The
// deletion is built again and takes the role from its new holder too:
// nobody may hold a role that no longer exists (a dangling role_id makes
// every later write of the account or group fail its validation).
func TestDeleteRoleRacingAGrantOfIt(t *testing.T) {
	for name, give := range map[string]func(e *env, roleID, userID, groupID string) error{
		"to an account": func(e *env, roleID, userID, _ string) error {
			_, err := e.svc.SetUserRole(bg, userID, &roleID)
			return err
		},
		"to a group": func(e *env, roleID, _, groupID string) error {
			_, err := e.svc.SetGroupRole(bg, groupID, &roleID)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t)
			e.setup(t)
			role, err := e.svc.CreateRole(bg, "ops", authz.ScopeInstall, []authz.Verb{authz.InstallView})
			must(t, "role", err)
			bob := e.mkUser(t, "bob")
			g := e.mkGroup(t, "team", nil, bob.ID)
			racing := e.withService(t, Deps{Store: &hookStore{Store: e.store, before: func() {
				must(t, "give the role meanwhile", give(e, role.ID, bob.ID, g.ID))
			}}})
			delErr := racing.DeleteRole(bg, role.ID)
			_, _, roleExists := Roles.Get(e.store.Read(), role.ID)
			u, gr := e.getUser(t, bob.ID), e.getGroup(t, g.ID)
			dangling := !roleExists && ((u.RoleID != nil && *u.RoleID == role.ID) || (gr.RoleID != nil && *gr.RoleID == role.ID))
			if dangling {
				t.Errorf("DeleteRole = %v; the role is gone but account role %q, group role %q still name it", delErr, strOf(u.RoleID), strOf(gr.RoleID))
			}
			if delErr != nil || roleExists {
				t.Errorf("DeleteRole = %v (role still stored: %v); a role given meanwhile is taken away too", delErr, roleExists)
			}
			// Whatever happened, bob's account can still be changed.
			if _, err := e.svc.UpdateUser(bg, e.userCaller(bob.ID), bob.ID, UserPatch{DisplayName: ptr("Bob")}); err != nil {
				t.Errorf("change bob afterwards: %v", err)
			}
			if _, err := e.svc.RemoveMember(bg, g.ID, bob.ID); err != nil {
				t.Errorf("change the group afterwards: %v", err)
			}
		})
	}
}

func strOf(p *string) string {
	if p == nil {
		return "<none>"
	}
	return *p
}

// TestRolesPages: pages of every size walk the built-in roles, then the
// custom ones by ID, each once; a page that ends with the last role says
// no more follow.
func TestRolesPages(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	walk := func(scope string, limit int) []string {
		var out []string
		after := ""
		for range 50 {
			page, more, err := e.svc.Roles(scope, after, limit)
			must(t, "roles", err)
			if len(page) > limit || (more && len(page) < limit) {
				t.Fatalf("Roles(%s, %q, %d) = %v, more %v", scope, after, limit, roleIDs(page), more)
			}
			out = append(out, roleIDs(page)...)
			if !more {
				return out
			}
			after = page[len(page)-1].ID
		}
		t.Fatalf("Roles(%s) pages do not end", scope)
		return nil
	}
	builtins, _, _ := e.svc.Roles("install", "", 0)
	if got := walk("install", len(builtins)); !slices.Equal(got, roleIDs(builtins)) {
		t.Errorf("only built-in roles, a page of exactly them: %v", got)
	}
	for i := range 4 {
		_, err := e.svc.CreateRole(bg, fmt.Sprintf("install-%d", i), authz.ScopeInstall, []authz.Verb{authz.InstallView})
		must(t, "role", err)
		_, err = e.svc.CreateRole(bg, fmt.Sprintf("app-%d", i), authz.ScopeApp, []authz.Verb{authz.AppView})
		must(t, "role", err)
	}
	for _, scope := range []string{"install", "app", "all"} {
		all, _, _ := e.svc.Roles(scope, "", 0)
		for limit := 1; limit <= len(all)+1; limit++ {
			if got := walk(scope, limit); !slices.Equal(got, roleIDs(all)) {
				t.Errorf("%s by %d: %v, want %v", scope, limit, got, roleIDs(all))
			}
		}
	}
}
