package identity

import (
	"testing"
	"time"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
)

func TestATokenCannotMintOneThatOutlivesIt(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	parent, _, err := e.svc.CreateToken(bg, e.userCaller(admin.ID), TokenDelegated, NewToken{Name: "short", ExpiresInDays: ptr(2)})
	must(t, "parent", err)
	viaToken := e.caller(authz.Principal{Kind: authz.KindToken, ID: parent.ID, UserID: admin.ID})
	for _, days := range []*int{nil, ptr(30)} {
		child, _, err := e.svc.CreateToken(bg, viaToken, TokenDelegated, NewToken{Name: "child", ExpiresInDays: days})
		must(t, "child", err)
		if child.ExpiresAt == nil || child.ExpiresAt.After(*parent.ExpiresAt) {
			t.Errorf("child (asked %v days) expires %v, after its parent's %v", days, child.ExpiresAt, parent.ExpiresAt)
		}
	}
	child, _, err := e.svc.CreateToken(bg, viaToken, TokenDelegated, NewToken{Name: "sooner", ExpiresInDays: ptr(1)})
	must(t, "child expiring sooner", err)
	if want := e.now.Add(24 * time.Hour); !child.ExpiresAt.Equal(want) {
		t.Errorf("a child asking for less keeps it: %v, want %v", child.ExpiresAt, want)
	}
}

func TestWrongCurrentPasswordsAreThrottled(t *testing.T) {
	e := newTestEnv(t)
	admin, si := e.setup(t)
	c := e.userCaller(admin.ID)
	for i := range 10 {
		err := e.svc.ChangeOwnPassword(bg, c, Client{IP: "192.0.2.1"}, si.Cookie, "not-the-password-"+string(rune('a'+i)), "a-brand-new-password")
		wantCode(t, "wrong current password", err, errcode.PermDenied)
	}
	err := e.svc.ChangeOwnPassword(bg, c, Client{IP: "192.0.2.1"}, si.Cookie, testPW, "a-brand-new-password")
	if e := wantCode(t, "the right password while throttled", err, errcode.RateLimited); e != nil && e.RetryAfter < 1 {
		t.Errorf("RetryAfter = %d", e.RetryAfter)
	}
	e.now = e.now.Add(16 * time.Minute)
	must(t, "after the window", e.svc.ChangeOwnPassword(bg, c, Client{IP: "192.0.2.1"}, si.Cookie, testPW, "a-brand-new-password"))
}

func TestRemovalsEmitGrantDeleted(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	bob := e.mkUser(t, "bob")
	member := authz.RoleMember
	g := e.mkGroup(t, "crew", &member, bob.ID)
	gr := e.putGrant(t, Grant{AppID: "app_01M80000000000000000000000", Plane: PlaneControl, PrincipalKind: "group", PrincipalID: g.ID, RoleID: ptr(authz.RoleViewer)})
	m := e.mark()
	must(t, "delete group", e.svc.DeleteGroup(bg, g.ID))
	evs := e.eventsSince(m, "grant.deleted")
	if len(evs) != 2 {
		t.Fatalf("grant.deleted events after deleting a group with a role and an app grant: %d, want 2", len(evs))
	}
	scopes := map[string]bool{}
	for _, ev := range evs {
		scopes[ev.Value.Data["scope"].(string)] = true
		if ev.Value.Data["scope"] == "app" && (ev.Value.App == nil || ev.Value.App.ID != gr.AppID) {
			t.Errorf("the app grant's event names app %+v", ev.Value.App)
		}
	}
	if !scopes["install"] || !scopes["app"] {
		t.Errorf("scopes = %v, want install and app", scopes)
	}
}

func TestRevokingAServiceTokenRemovesWhatWasSharedWithIt(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	tok, _ := e.mkToken(t, e.userCaller(admin.ID), TokenService, "ci")
	gr := e.putGrant(t, Grant{AppID: "app_01M80000000000000000000000", Plane: PlaneControl, PrincipalKind: authz.KindToken, PrincipalID: tok.ID, RoleID: ptr(authz.RoleDeveloper)})
	must(t, "revoke", e.svc.RevokeToken(bg, e.userCaller(admin.ID), tok.ID))
	if e.grantExists(gr.ID) {
		t.Error("the revoked token's grant remains")
	}
}

func TestResendingOnesOwnUsernameNeedsNoVerb(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	bob := e.mkUser(t, "bob")
	c := e.userCaller(bob.ID)
	name := "Bob B."
	if _, err := e.svc.UpdateUser(bg, c, bob.ID, UserPatch{Username: ptr("bob"), DisplayName: &name}); err != nil {
		t.Errorf("a patch repeating the current username: %v", err)
	}
	_, err := e.svc.UpdateUser(bg, c, bob.ID, UserPatch{Username: ptr("robert")})
	wantCode(t, "an actual rename", err, errcode.PermVerbRequired)
}
