package identity

import (
	"testing"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/ids"
)

func builtinVerbs(id string) authz.Set {
	r, _ := authz.BuiltinRole(id)
	return authz.SetOf(r.Verbs...)
}

func TestAppVerbsThroughGrants(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	bob := e.mkUser(t, "bob")
	carol := e.mkUser(t, "carol")
	dave := e.mkUser(t, "dave")
	auditor := e.mkUserWithRole(t, "auditor", authz.RoleAuditor)
	g := e.mkGroup(t, "team", nil, carol.ID)
	svcTok, svcCred := e.mkToken(t, e.userCaller(admin.ID), TokenService, "ci")
	otherSvc, _ := e.mkToken(t, e.userCaller(admin.ID), TokenService, "other")
	_, bobCred := e.mkToken(t, e.userCaller(bob.ID), TokenDelegated, "bob-cli")
	custom, err := e.svc.CreateRole(bg, "log-readers", authz.ScopeApp, []authz.Verb{authz.AppLogsRead})
	must(t, "custom app role", err)

	e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: ptr(authz.RoleDeveloper)})
	e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneControl, PrincipalKind: "group", PrincipalID: g.ID, RoleID: ptr(authz.RoleViewer)})
	e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneControl, PrincipalKind: "token", PrincipalID: svcTok.ID, RoleID: ptr(authz.RoleOwner)})
	e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneData, PrincipalKind: "user", PrincipalID: dave.ID})
	e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneData, PrincipalKind: "user", PrincipalID: dave.ID, RoleID: ptr(authz.RoleOwner)})
	e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneData, PrincipalKind: "anonymous"})
	e.putGrant(t, Grant{AppID: "app_2", Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: &custom.ID})
	e.putGrant(t, Grant{AppID: "app_2", Plane: PlaneControl, PrincipalKind: "user", PrincipalID: carol.ID, RoleID: ptr("role_deleted")})

	bobTok, err := e.svc.Authenticate(bg, bobCred, "")
	must(t, "bob's token", err)
	svcAuth, err := e.svc.Authenticate(bg, svcCred, "")
	must(t, "service token", err)
	f := FactsOf(e.store.Read())
	appOnly := authz.SetOf(authz.Verbs(authz.ScopeApp)...)
	for _, tc := range []struct {
		name string
		p    authz.Principal
		app  string
		want authz.Set
	}{
		{"grant to the account", userPrincipal(bob.ID), "app_1", builtinVerbs(authz.RoleDeveloper)},
		{"grant to the account, through its delegated token", bobTok.Principal, "app_1", builtinVerbs(authz.RoleDeveloper)},
		{"grant to the account, other app", userPrincipal(bob.ID), "app_3", 0},
		{"custom app role", userPrincipal(bob.ID), "app_2", authz.SetOf(authz.AppLogsRead)},
		{"grant to a group of the account", userPrincipal(carol.ID), "app_1", builtinVerbs(authz.RoleViewer)},
		{"grant of a role that does not exist", userPrincipal(carol.ID), "app_2", 0},
		{"grant to the service token", svcAuth.Principal, "app_1", builtinVerbs(authz.RoleOwner)},
		{"another service token", authz.Principal{Kind: authz.KindToken, ID: otherSvc.ID}, "app_1", 0},
		{"data-plane grants", userPrincipal(dave.ID), "app_1", 0},
		{"anonymous", authz.Principal{Kind: authz.KindAnonymous}, "app_1", 0},
		{"installation role: admin on any app", userPrincipal(admin.ID), "app_9", appOnly},
		{"installation role: auditor on any app", userPrincipal(auditor.ID), "app_9", authz.SetOf(authz.AppView)},
		{"admin's service token on an app not shared with it", authz.Principal{Kind: authz.KindToken, ID: svcTok.ID}, "app_9", 0},
	} {
		if got := authz.AppVerbs(f, tc.p, tc.app, authz.Floor{}); got != tc.want {
			t.Errorf("%s: holds %v, want %v", tc.name, got.Verbs(), tc.want.Verbs())
		}
	}
	// A token ID does not reach grants to an account or group.
	if got := authz.AppVerbs(f, authz.Principal{Kind: authz.KindToken, ID: bob.ID}, "app_1", authz.Floor{}); got != 0 {
		t.Errorf("a token principal with an account's ID holds %v", got.Verbs())
	}
	// The account's grant doesn't reach a principal of another kind with the same ID.
	if got := authz.AppVerbs(f, authz.Principal{Kind: authz.KindToken, ID: g.ID}, "app_1", authz.Floor{}); got != 0 {
		t.Errorf("a token principal with a group's ID holds %v", got.Verbs())
	}
}

func TestSuspendedAccountHoldsNothing(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	bob := e.mkUserWithRole(t, "bob", authz.RoleAdmin)
	e.mkGroup(t, "team", ptr(authz.RoleAuditor), bob.ID)
	e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneControl, PrincipalKind: "user", PrincipalID: bob.ID, RoleID: ptr(authz.RoleOwner)})
	_, cred := e.mkToken(t, e.userCaller(bob.ID), TokenDelegated, "t")
	a, err := e.svc.Authenticate(bg, cred, "")
	must(t, "authenticate", err)

	_, err = e.svc.UpdateUser(bg, e.userCaller(admin.ID), bob.ID, UserPatch{Status: ptr(StatusSuspended)})
	must(t, "suspend", err)
	f := FactsOf(e.store.Read())
	for _, p := range []authz.Principal{userPrincipal(bob.ID), a.Principal} {
		if v := authz.InstallVerbs(f, p, authz.Floor{}); v != 0 {
			t.Errorf("%s: suspended account holds %v", p.Kind, v.Verbs())
		}
		if v := authz.AppVerbs(f, p, "app_1", authz.Floor{}); v != 0 {
			t.Errorf("%s: suspended account holds %v on app_1", p.Kind, v.Verbs())
		}
	}
	if roles := f.InstallRoles(bob.ID); len(roles) != 0 {
		t.Errorf("InstallRoles of a suspended account = %v", roles)
	}
	// A deleted (unknown) account holds nothing either.
	ghost := userPrincipal(ids.New(ids.User))
	if v := authz.AppVerbs(f, ghost, "app_1", authz.Floor{}); v != 0 {
		t.Errorf("unknown account holds %v", v.Verbs())
	}
}

func TestPolicyFloorRemovesVerbs(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	_, cred, err := e.svc.CreateToken(bg, e.userCaller(admin.ID), TokenDelegated, NewToken{Name: "agent", Agent: true})
	must(t, "agent token", err)
	a, err := e.svc.Authenticate(bg, cred, "")
	must(t, "authenticate", err)
	svcTok, _ := e.mkToken(t, e.userCaller(admin.ID), TokenService, "svc")
	svcAgent, svcAgentCred, err := e.svc.CreateToken(bg, e.userCaller(admin.ID), TokenService, NewToken{Name: "svc-agent", Agent: true})
	must(t, "service agent token", err)
	sa, err := e.svc.Authenticate(bg, svcAgentCred, "")
	must(t, "authenticate", err)
	e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneControl, PrincipalKind: "token", PrincipalID: svcTok.ID, RoleID: ptr(authz.RoleOwner)})
	e.putGrant(t, Grant{AppID: "app_1", Plane: PlaneControl, PrincipalKind: "token", PrincipalID: svcAgent.ID, RoleID: ptr(authz.RoleOwner)})

	floor := authz.Floor{
		Disabled:      []authz.Verb{authz.AppExec, authz.InstallBackupManage},
		AgentDisabled: []authz.Verb{authz.AppDelete, authz.InstallUsersManage},
	}
	f := FactsOf(e.store.Read())
	person := userPrincipal(admin.ID)
	pi := authz.InstallVerbs(f, person, floor)
	ai := authz.InstallVerbs(f, a.Principal, floor)
	pa := authz.AppVerbs(f, person, "app_1", floor)
	aa := authz.AppVerbs(f, a.Principal, "app_1", floor)
	sv := authz.AppVerbs(f, authz.Principal{Kind: authz.KindToken, ID: svcTok.ID}, "app_1", floor)
	sav := authz.AppVerbs(f, sa.Principal, "app_1", floor)

	for name, tc := range map[string]struct {
		set  authz.Set
		verb authz.Verb
		want bool
	}{
		"person: disabled install verb":    {pi, authz.InstallBackupManage, false},
		"person: agent-disabled verb kept": {pi, authz.InstallUsersManage, true},
		"person: other verb":               {pi, authz.InstallView, true},
		"agent: disabled install verb":     {ai, authz.InstallBackupManage, false},
		"agent: agent-disabled verb":       {ai, authz.InstallUsersManage, false},
		"agent: other verb":                {ai, authz.InstallView, true},
		"person on app: disabled":          {pa, authz.AppExec, false},
		"person on app: agent-disabled":    {pa, authz.AppDelete, true},
		"agent on app: disabled":           {aa, authz.AppExec, false},
		"agent on app: agent-disabled":     {aa, authz.AppDelete, false},
		"agent on app: other":              {aa, authz.AppDeploy, true},
		"service token: disabled":          {sv, authz.AppExec, false},
		"service token: agent-disabled":    {sv, authz.AppDelete, true},
		"agent service token: agent-dis.":  {sav, authz.AppDelete, false},
		"agent service token: other":       {sav, authz.AppRestart, true},
	} {
		if tc.set.Has(tc.verb) != tc.want {
			t.Errorf("%s: has %s = %v, want %v", name, tc.verb, !tc.want, tc.want)
		}
	}
}
