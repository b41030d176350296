package identity

import (
	"slices"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
)

func TestCreateGroup(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	m := e.mark()
	g, err := e.svc.CreateGroup(bg, "Developers")
	must(t, "create", err)
	if !ids.Valid(ids.Group, g.ID) || g.Source != SourceLocal || g.RoleID != nil || g.MemberIDs == nil || len(g.MemberIDs) != 0 {
		t.Errorf("group = %+v", g)
	}
	stored := e.getGroup(t, g.ID)
	if stored.Name != "Developers" {
		t.Errorf("stored = %+v", stored)
	}
	entry := e.oneAudit(t, m, "group.create")
	wantData(t, "group.create", entry.Value.Details, map[string]any{"name": "Developers"})

	for _, name := range []string{"Developers", "developers", "DEVELOPERS"} {
		_, err := e.svc.CreateGroup(bg, name)
		if ce := wantCode(t, "duplicate "+name, err, errcode.StateInvalid); ce != nil && ce.Details["field"] != "name" {
			t.Errorf("details = %v", ce.Details)
		}
	}
	for _, name := range []string{"", " lead", "trail ", "a\x01b", strings.Repeat("g", 101), "\xff"} {
		_, err := e.svc.CreateGroup(bg, name)
		if ce := wantCode(t, "name "+name, err, errcode.ValidInvalid); ce != nil && ce.Details["field"] != "name" {
			t.Errorf("details = %v", ce.Details)
		}
	}
	if _, err := e.svc.CreateGroup(bg, strings.Repeat("ü", 100)); err != nil {
		t.Errorf("100-character name: %v", err)
	}
	list, more := e.svc.Groups("", 0)
	if len(list) != 2 || more {
		t.Errorf("listed %d groups (more %v), want 2", len(list), more)
	}
}

func TestSetMembers(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	bob, carol := e.mkUser(t, "bob"), e.mkUser(t, "carol")
	g := e.mkGroup(t, "team", nil)

	ghost := ids.New(ids.User)
	_, err := e.svc.SetMembers(bg, g.ID, []string{bob.ID, ghost})
	if ce := wantCode(t, "unknown member", err, errcode.ValidInvalid); ce != nil {
		if ce.Details["user_id"] != ghost || ce.Details["field"] != "user_ids" || !strings.Contains(ce.Message, ghost) {
			t.Errorf("refusal does not name %s: %q %v", ghost, ce.Message, ce.Details)
		}
	}
	if got := e.getGroup(t, g.ID).MemberIDs; len(got) != 0 {
		t.Errorf("a refused member list was stored: %v", got)
	}

	m := e.mark()
	got, err := e.svc.SetMembers(bg, g.ID, []string{bob.ID, carol.ID, bob.ID, carol.ID})
	must(t, "set with duplicates", err)
	if want := []string{bob.ID, carol.ID}; !slices.Equal(got.MemberIDs, want) || !slices.Equal(e.getGroup(t, g.ID).MemberIDs, want) {
		t.Errorf("members = %v, want %v", got.MemberIDs, want)
	}
	e.oneAudit(t, m, "group.members.set")

	got, err = e.svc.SetMembers(bg, g.ID, []string{carol.ID})
	must(t, "replace", err)
	if !slices.Equal(got.MemberIDs, []string{carol.ID}) {
		t.Errorf("members = %v", got.MemberIDs)
	}
	got, err = e.svc.SetMembers(bg, g.ID, []string{})
	must(t, "empty", err)
	if len(e.getGroup(t, g.ID).MemberIDs) != 0 {
		t.Errorf("members = %v", got.MemberIDs)
	}
	_, err = e.svc.SetMembers(bg, "grp_nosuch", []string{bob.ID})
	wantCode(t, "unknown group", err, errcode.NotFound)
	_, err = e.svc.SetMembers(bg, g.ID, make([]string, MaxGroupMembers+1))
	wantCode(t, "too many members", err, errcode.ValidInvalid)
}

func TestAddAndRemoveMembers(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	bob, carol := e.mkUser(t, "bob"), e.mkUser(t, "carol")
	g := e.mkGroup(t, "team", nil)

	m := e.mark()
	got, err := e.svc.AddMember(bg, g.ID, bob.ID)
	must(t, "add bob", err)
	if !slices.Equal(got.MemberIDs, []string{bob.ID}) {
		t.Errorf("members = %v", got.MemberIDs)
	}
	entry := e.oneAudit(t, m, "group.member.add")
	wantData(t, "group.member.add", entry.Value.Details, map[string]any{"user_id": bob.ID})
	got, err = e.svc.AddMember(bg, g.ID, bob.ID)
	must(t, "add bob again", err)
	if !slices.Equal(e.getGroup(t, g.ID).MemberIDs, []string{bob.ID}) {
		t.Errorf("adding twice gave %v", got.MemberIDs)
	}
	_, err = e.svc.AddMember(bg, g.ID, carol.ID)
	must(t, "add carol", err)
	_, err = e.svc.AddMember(bg, g.ID, ids.New(ids.User))
	wantCode(t, "add unknown account", err, errcode.NotFound)
	_, err = e.svc.AddMember(bg, "grp_nosuch", bob.ID)
	wantCode(t, "add to unknown group", err, errcode.NotFound)

	m = e.mark()
	got, err = e.svc.RemoveMember(bg, g.ID, bob.ID)
	must(t, "remove bob", err)
	if !slices.Equal(got.MemberIDs, []string{carol.ID}) || !slices.Equal(e.getGroup(t, g.ID).MemberIDs, []string{carol.ID}) {
		t.Errorf("members = %v", got.MemberIDs)
	}
	e.oneAudit(t, m, "group.member.remove")
	_, err = e.svc.RemoveMember(bg, g.ID, bob.ID)
	wantCode(t, "remove a non-member", err, errcode.NotFound)
	_, err = e.svc.RemoveMember(bg, "grp_nosuch", bob.ID)
	wantCode(t, "remove from unknown group", err, errcode.NotFound)
}

func TestGroupRoleGivesEveryMemberItsVerbs(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	bob, carol, dave := e.mkUser(t, "bob"), e.mkUser(t, "carol"), e.mkUser(t, "dave")
	g := e.mkGroup(t, "team", nil, bob.ID, carol.ID)
	verbs := func(u User) authz.Set { return e.verbsOf(userPrincipal(u.ID)) }
	auditor, _ := authz.BuiltinRole(authz.RoleAuditor)

	_, err := e.svc.SetGroupRole(bg, g.ID, ptr(authz.RoleDeveloper))
	if ce := wantCode(t, "app role on a group", err, errcode.ValidInvalid); ce != nil && ce.Details["field"] != "role_id" {
		t.Errorf("details = %v", ce.Details)
	}
	_, err = e.svc.SetGroupRole(bg, g.ID, ptr("role_nosuch"))
	wantCode(t, "unknown role on a group", err, errcode.NotFound)
	if e.getGroup(t, g.ID).RoleID != nil {
		t.Fatal("a refused role was stored")
	}

	m := e.mark()
	got, err := e.svc.SetGroupRole(bg, g.ID, ptr(authz.RoleAuditor))
	must(t, "auditor", err)
	if got.RoleID == nil || *got.RoleID != authz.RoleAuditor {
		t.Errorf("role = %v", got.RoleID)
	}
	for _, u := range []User{bob, carol} {
		if v := verbs(u); v != authz.SetOf(auditor.Verbs...) {
			t.Errorf("%s holds %v, want the auditor's verbs", u.Username, v.Verbs())
		}
	}
	if v := verbs(dave); v != 0 {
		t.Errorf("non-member holds %v", v.Verbs())
	}
	ev := e.oneEvent(t, m, "grant.created")
	wantData(t, "grant.created", ev.Value.Data, map[string]any{
		"plane": PlaneControl, "role_id": authz.RoleAuditor, "principal_kind": "group", "principal_id": g.ID, "passcode": false,
		"target_kind": "group", "target_id": g.ID,
	})
	entry := e.oneAudit(t, m, "group.role.set")
	if entry.Meta.CreateIndex != ev.Meta.CreateIndex {
		t.Error("group.role.set and grant.created not in one write")
	}

	// A new member holds it at once; a removed one no longer.
	_, err = e.svc.AddMember(bg, g.ID, dave.ID)
	must(t, "add dave", err)
	if !verbs(dave).Has(authz.InstallAuditRead) {
		t.Error("a new member does not hold the group's role")
	}
	_, err = e.svc.RemoveMember(bg, g.ID, carol.ID)
	must(t, "remove carol", err)
	if v := verbs(carol); v != 0 {
		t.Errorf("a removed member holds %v", v.Verbs())
	}
	// Own role and group role add up.
	_, err = e.svc.SetUserRole(bg, bob.ID, ptr(authz.RoleMember))
	must(t, "bob member", err)
	if v := verbs(bob); !v.Has(authz.AppCreate) || !v.Has(authz.InstallView) {
		t.Errorf("bob holds %v, want member's and auditor's verbs", v.Verbs())
	}

	m = e.mark()
	_, err = e.svc.SetGroupRole(bg, g.ID, ptr(authz.RoleMember))
	must(t, "change to member", err)
	ev = e.oneEvent(t, m, "grant.role_changed")
	wantData(t, "grant.role_changed", ev.Value.Data, map[string]any{"role_id": authz.RoleMember, "target_id": g.ID})
	if v := verbs(dave); v != authz.SetOf(authz.AppCreate) {
		t.Errorf("dave holds %v, want app.create only", v.Verbs())
	}

	m = e.mark()
	_, err = e.svc.SetGroupRole(bg, g.ID, nil)
	must(t, "remove the role", err)
	ev = e.oneEvent(t, m, "grant.deleted")
	wantData(t, "grant.deleted", ev.Value.Data, map[string]any{"scope": "install", "target_kind": "group", "target_id": g.ID})
	e.oneAudit(t, m, "group.role.remove")
	if v := verbs(dave); v != 0 {
		t.Errorf("dave holds %v after the group's role was removed", v.Verbs())
	}
	if e.getGroup(t, g.ID).RoleID != nil {
		t.Error("role still stored")
	}

	// A custom installation role on a group; a custom app role refused.
	custom, err := e.svc.CreateRole(bg, "viewers", authz.ScopeInstall, []authz.Verb{authz.InstallView})
	must(t, "custom", err)
	_, err = e.svc.SetGroupRole(bg, g.ID, &custom.ID)
	must(t, "custom role on group", err)
	if v := verbs(dave); v != authz.SetOf(authz.InstallView) {
		t.Errorf("dave holds %v", v.Verbs())
	}
	appCustom, err := e.svc.CreateRole(bg, "app-viewers", authz.ScopeApp, []authz.Verb{authz.AppView})
	must(t, "custom app role", err)
	_, err = e.svc.SetGroupRole(bg, g.ID, &appCustom.ID)
	wantCode(t, "custom app role on a group", err, errcode.ValidInvalid)
	_, err = e.svc.SetGroupRole(bg, "grp_nosuch", ptr(authz.RoleMember))
	wantCode(t, "unknown group", err, errcode.NotFound)
}

func TestDeleteGroup(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	bob := e.mkUser(t, "bob")
	g := e.mkGroup(t, "team", ptr(authz.RoleAuditor), bob.ID)
	other := e.mkGroup(t, "other", nil, bob.ID)
	ctl := e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneControl, PrincipalKind: "group", PrincipalID: g.ID, RoleID: ptr(authz.RoleViewer)})
	data := e.putGrant(t, Grant{AppID: "app_2", Plane: PlaneData, PrincipalKind: "group", PrincipalID: g.ID})
	keepGroup := e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneData, PrincipalKind: "group", PrincipalID: other.ID})
	keepUser := e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: ptr(authz.RoleDeveloper)})

	if v := authz.AppVerbs(FactsOf(e.store.Read()), userPrincipal(bob.ID), "app_1", authz.Floor{}); !v.Has(authz.AppView) {
		t.Fatal("bob does not hold the group's app role")
	}
	m := e.mark()
	must(t, "delete", e.svc.DeleteGroup(bg, g.ID))
	if _, _, ok := Groups.Get(e.store.Read(), g.ID); ok {
		t.Error("group still stored")
	}
	for _, gr := range []Grant{ctl, data} {
		if e.grantExists(gr.ID) {
			t.Errorf("grant %s to the deleted group kept", gr.ID)
		}
	}
	for _, gr := range []Grant{keepGroup, keepUser} {
		if !e.grantExists(gr.ID) {
			t.Errorf("grant %s to %s removed", gr.ID, gr.PrincipalID)
		}
	}
	entry := e.oneAudit(t, m, "group.delete")
	wantData(t, "group.delete", entry.Value.Details, map[string]any{"name": "team", "grants_removed": 2})
	// Members keep what they hold another way.
	if !e.userExists(bob.ID) || !slices.Contains(e.getGroup(t, other.ID).MemberIDs, bob.ID) {
		t.Error("deleting a group touched its members")
	}
	if v := e.verbsOf(userPrincipal(bob.ID)); v != 0 {
		t.Errorf("bob still holds %v from the deleted group", v.Verbs())
	}
	f := FactsOf(e.store.Read())
	dev, _ := authz.BuiltinRole(authz.RoleDeveloper)
	if v := authz.AppVerbs(f, userPrincipal(bob.ID), "app_1", authz.Floor{}); v != authz.SetOf(dev.Verbs...) {
		t.Errorf("bob holds %v on app_1, want his own developer grant", v.Verbs())
	}
	wantCode(t, "delete twice", e.svc.DeleteGroup(bg, g.ID), errcode.NotFound)
}
