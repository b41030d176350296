package identity

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
)

var sessionCookieRE = regexp.MustCompile(`^ses_[0-9A-HJKMNP-TV-Z]{26}\.[A-Za-z0-9_-]{43}$`)

func TestSetupCreatesAdministratorAndSignsIn(t *testing.T) {
	e := newTestEnv(t)
	si, err := e.svc.Setup(bg, "Root", "The Root", testPW, Client{IP: "192.0.2.1", UserAgent: "browser"})
	must(t, "setup", err)

	u := e.getUser(t, si.User.ID)
	if !ids.Valid(ids.User, u.ID) {
		t.Errorf("account ID %q is not a usr_ ID", u.ID)
	}
	if u.RoleID == nil || *u.RoleID != authz.RoleAdmin {
		t.Errorf("first account's role = %v, want %s", u.RoleID, authz.RoleAdmin)
	}
	if u.Username != "Root" || u.DisplayName != "The Root" || u.Status != StatusActive || u.Source != SourceLocal || u.MustChangePassword {
		t.Errorf("first account = %+v", u)
	}
	if !e.verbsOf(userPrincipal(u.ID)).Has(authz.InstallUsersManage) {
		t.Error("the first administrator cannot manage accounts")
	}

	if !sessionCookieRE.MatchString(si.Cookie) {
		t.Errorf("cookie %q is not ses_<ULID>.<43 base64url characters>", si.Cookie)
	}
	sessions := e.sessionsOf(u.ID)
	if len(sessions) != 1 {
		t.Fatalf("%d sessions after setup, want 1", len(sessions))
	}
	if id, _, _ := splitCredential(ids.Session, si.Cookie); sessions[0].ID != id {
		t.Errorf("session row %s, cookie names %s", sessions[0].ID, id)
	}
	if !si.ExpiresAt.Equal(e.now.Add(SessionIdle)) {
		t.Errorf("session expires at %v, want %v", si.ExpiresAt, e.now.Add(SessionIdle))
	}
	a, err := e.svc.Authenticate(bg, "", si.Cookie)
	must(t, "authenticate with the setup cookie", err)
	if a.Principal != userPrincipal(u.ID) {
		t.Errorf("principal = %+v, want the administrator", a.Principal)
	}
	if e.svc.SetupRequired() {
		t.Error("setup still required")
	}
}

func TestSetupRefusedOnceAnyAccountExists(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	m := e.mark()
	_, err := e.svc.Setup(bg, "intruder", "", testPW, Client{IP: "192.0.2.9"})
	wantCode(t, "a second setup", err, errcode.StateInvalid)
	if _, _, ok := Users.First(e.store.Read(), "username", "intruder"); ok {
		t.Error("a second setup created an account")
	}
	if n := len(e.auditSince(m, "user.create")); n != 0 {
		t.Errorf("refused setup wrote %d user.create entries", n)
	}

	// An account that is not an administrator also ends setup.
	e2 := newTestEnv(t)
	created, err := e2.svc.FirstRun(bg, testPW)
	must(t, "first run", err)
	if !created {
		t.Fatal("first run created nothing")
	}
	_, err = e2.svc.Setup(bg, "other", "", testPW, Client{})
	wantCode(t, "setup after first run", err, errcode.StateInvalid)
}

func TestSetupValidatesItsInput(t *testing.T) {
	for _, tc := range []struct {
		name, username, display, pw, field string
	}{
		{"no password", "admin", "", "", "password"},
		{"short password", "admin", "", "short", "password"},
		{"password is the username", "administrator", "", "Administrator", "password"},
		{"bad username", "-admin", "", testPW, "username"},
		{"empty username", "", "", testPW, "username"},
		{"control character in display name", "admin", "a\x00b", testPW, "display_name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			_, err := e.svc.Setup(bg, tc.username, tc.display, tc.pw, Client{})
			if ce := wantCode(t, tc.name, err, errcode.ValidInvalid); ce != nil && ce.Details["field"] != tc.field {
				t.Errorf("details = %v, want field %s", ce.Details, tc.field)
			}
			if !e.svc.SetupRequired() {
				t.Error("a refused setup ended setup")
			}
		})
	}
}

func TestSetupConcurrentExactlyOneSucceeds(t *testing.T) {
	e := newTestEnv(t)
	const n = 8
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = e.svc.Setup(bg, fmt.Sprintf("admin%d", i), "", testPW, Client{IP: fmt.Sprintf("192.0.2.%d", i+10)})
		}()
	}
	close(start)
	wg.Wait()
	ok := 0
	for i, err := range errs {
		if err == nil {
			ok++
			continue
		}
		wantCode(t, fmt.Sprintf("setup %d", i), err, errcode.StateInvalid)
	}
	if ok != 1 {
		t.Errorf("%d setups succeeded, want exactly 1", ok)
	}
	r := e.store.Read()
	if c := Users.Count(r); c != 1 {
		t.Errorf("%d accounts after concurrent setups, want 1", c)
	}
	if c := Sessions.Count(r); c != 1 {
		t.Errorf("%d sessions after concurrent setups, want 1", c)
	}
}

func TestSetupWritesAccountEntryAndEventsInOneWrite(t *testing.T) {
	e := newTestEnv(t)
	m := e.mark()
	admin, si := e.setup(t)
	_, um, _ := Users.Get(e.store.Read(), admin.ID)

	entry := e.oneAudit(t, m, "user.create")
	if entry.Meta.CreateIndex != um.CreateIndex {
		t.Errorf("user.create entry at index %d, account at %d: not one write", entry.Meta.CreateIndex, um.CreateIndex)
	}
	if entry.Value.TargetKind == nil || *entry.Value.TargetKind != "user" || *entry.Value.TargetID != admin.ID {
		t.Errorf("user.create target = %v/%v", entry.Value.TargetKind, entry.Value.TargetID)
	}
	if entry.Value.PrincipalKind != authz.KindAnonymous {
		t.Errorf("setup is audited as %q, want anonymous", entry.Value.PrincipalKind)
	}
	wantData(t, "user.create details", entry.Value.Details, map[string]any{"username": "admin", "via": "setup"})

	created := e.oneEvent(t, m, "user.created")
	if created.Meta.CreateIndex != um.CreateIndex {
		t.Errorf("user.created at index %d, account at %d", created.Meta.CreateIndex, um.CreateIndex)
	}
	wantData(t, "user.created", created.Value.Data, map[string]any{"via": "setup", "adapter_id": nil, "target_kind": "user", "target_id": admin.ID})

	grant := e.oneEvent(t, m, "grant.created")
	if grant.Meta.CreateIndex != um.CreateIndex {
		t.Errorf("grant.created at index %d, account at %d", grant.Meta.CreateIndex, um.CreateIndex)
	}
	wantData(t, "grant.created", grant.Value.Data, map[string]any{
		"plane": PlaneControl, "role_id": authz.RoleAdmin, "principal_kind": "user", "principal_id": admin.ID, "passcode": false,
	})

	// The session it opens, with its user.signed_in event, is part of the
	// same write; the request is audited once.
	sid, _, _ := splitCredential(ids.Session, si.Cookie)
	signedIn := e.oneEvent(t, m, "user.signed_in")
	if signedIn.Meta.CreateIndex != um.CreateIndex {
		t.Errorf("user.signed_in at index %d, account at %d", signedIn.Meta.CreateIndex, um.CreateIndex)
	}
	wantData(t, "user.signed_in", signedIn.Value.Data, map[string]any{"user_id": admin.ID, "via": "password", "adapter_id": nil, "target_kind": "session", "target_id": sid})
	if _, sm, ok := Sessions.Get(e.store.Read(), sid); !ok || sm.CreateIndex != um.CreateIndex {
		t.Errorf("session at index %d (exists %v), account at %d", sm.CreateIndex, ok, um.CreateIndex)
	}
	if all := e.auditSince(m, ""); len(all) != 1 {
		t.Errorf("setup wrote %d audit entries, want 1", len(all))
	}
	if n := len(e.eventsSince(m, "")); n != 3 {
		t.Errorf("setup wrote %d events, want 3 (user.created, grant.created, user.signed_in)", n)
	}
}

func TestFirstRunCreatesAdminOnce(t *testing.T) {
	e := newTestEnv(t)
	created, err := e.svc.FirstRun(bg, "")
	if err != nil || created {
		t.Fatalf("FirstRun without a password = %v, %v; want false, nil", created, err)
	}
	if !e.svc.SetupRequired() {
		t.Fatal("FirstRun without a password created an account")
	}

	m := e.mark()
	created, err = e.svc.FirstRun(bg, testPW)
	must(t, "first run", err)
	if !created {
		t.Fatal("first run created nothing")
	}
	admin, um, ok := Users.First(e.store.Read(), "username", "admin")
	if !ok {
		t.Fatal("no account admin after first run")
	}
	if admin.RoleID == nil || *admin.RoleID != authz.RoleAdmin || admin.Status != StatusActive || admin.DisplayName != "Administrator" {
		t.Errorf("first-run admin = %+v", admin)
	}
	if _, err := e.svc.SignIn(bg, "admin", testPW, Client{}); err != nil {
		t.Errorf("sign in with SVC_ADMIN_PASSWORD: %v", err)
	}
	entry := e.oneAudit(t, m, "user.create")
	wantData(t, "user.create", entry.Value.Details, map[string]any{"via": "admin_password", "username": "admin"})
	if entry.Value.PrincipalKind != authz.KindSystem {
		t.Errorf("first run audited as %q, want system", entry.Value.PrincipalKind)
	}
	ev := e.oneEvent(t, m, "user.created")
	wantData(t, "user.created", ev.Value.Data, map[string]any{"via": "admin_password", "adapter_id": nil})
	gr := e.oneEvent(t, m, "grant.created")
	wantData(t, "grant.created", gr.Value.Data, map[string]any{"role_id": authz.RoleAdmin, "principal_id": admin.ID})
	for _, idx := range []uint64{entry.Meta.CreateIndex, ev.Meta.CreateIndex, gr.Meta.CreateIndex} {
		if idx != um.CreateIndex {
			t.Errorf("first run wrote at indexes %d, %d, %d and the account at %d: not one write",
				entry.Meta.CreateIndex, ev.Meta.CreateIndex, gr.Meta.CreateIndex, um.CreateIndex)
			break
		}
	}

	// Later runs write nothing, whatever happened to the accounts since.
	again := func(what string) {
		t.Helper()
		m := e.mark()
		created, err := e.svc.FirstRun(bg, "another-long-password")
		if err != nil || created {
			t.Errorf("%s: FirstRun = %v, %v; want false, nil", what, created, err)
		}
		if e.mark() != m {
			t.Errorf("%s: FirstRun wrote something", what)
		}
	}
	again("second run")
	other := e.mkUserWithRole(t, "other", authz.RoleAdmin)
	must(t, "delete admin", e.svc.DeleteUser(bg, admin.ID))
	again("after the admin account was deleted")
	if _, _, ok := Users.First(e.store.Read(), "username", "admin"); ok {
		t.Error("first run recreated admin")
	}
	_ = other

	// After setup, too.
	e2 := newTestEnv(t)
	e2.setup(t)
	m2 := e2.mark()
	if created, err := e2.svc.FirstRun(bg, testPW); created || err != nil {
		t.Errorf("FirstRun after setup = %v, %v", created, err)
	}
	if e2.mark() != m2 {
		t.Error("FirstRun after setup wrote something")
	}
}

func TestFirstRunRefusesAWeakPassword(t *testing.T) {
	for _, pw := range []string{"short", "admin", "            ", string(make([]byte, 300))} {
		e := newTestEnv(t)
		created, err := e.svc.FirstRun(bg, pw)
		if created {
			t.Errorf("FirstRun(%q) created an account", pw)
		}
		wantCode(t, fmt.Sprintf("FirstRun(%.10q)", pw), err, errcode.ValidInvalid)
		if !e.svc.SetupRequired() {
			t.Errorf("FirstRun(%q) left an account", pw)
		}
	}
}

// TestExpectAdminClosesSetupUntilApplied: a node started with
// SVC_ADMIN_PASSWORD answers as set up and refuses setup from before the
// account is written; a refused password keeps it so (fail closed), and
// FirstRun opens nothing once done.
func TestExpectAdminClosesSetupUntilApplied(t *testing.T) {
	e := newTestEnv(t)
	logs := &lockedBuffer{}
	e.svc.d.Logger = slog.New(slog.NewTextHandler(logs, nil))
	e.svc.ExpectAdmin()
	if e.svc.SetupRequired() || !e.svc.AdminPending() {
		t.Fatalf("before FirstRun: SetupRequired %v, AdminPending %v; want false, true", e.svc.SetupRequired(), e.svc.AdminPending())
	}
	m := e.mark()
	_, err := e.svc.Setup(bg, "claimer", "", testPW, Client{IP: "203.0.113.66"})
	wantCode(t, "setup before the administrator is written", err, errcode.StateInvalid)
	if e.mark() != m {
		t.Error("a refused setup wrote something")
	}
	if !strings.Contains(logs.String(), "setup refused") || !strings.Contains(logs.String(), "203.0.113.66") {
		t.Errorf("the refused setup is not logged with the client's address: %s", logs)
	}

	_, err = e.svc.FirstRun(bg, "short")
	wantCode(t, "a password the rules refuse", err, errcode.ValidInvalid)
	if e.svc.SetupRequired() || !e.svc.AdminPending() {
		t.Error("a refused SVC_ADMIN_PASSWORD opened setup")
	}
	created, err := e.svc.FirstRun(bg, testPW)
	if err != nil || !created || e.svc.AdminPending() || e.svc.SetupRequired() {
		t.Fatalf("FirstRun = %v, %v; AdminPending %v, SetupRequired %v", created, err, e.svc.AdminPending(), e.svc.SetupRequired())
	}
	if _, err := e.svc.SignIn(bg, "admin", testPW, Client{IP: "192.0.2.1"}); err != nil {
		t.Errorf("admin signs in once FirstRun returned: %v", err)
	}

	// A later run: this node's copy already says the installation is set
	// up, and FirstRun answers at once.
	e.svc.ExpectAdmin()
	if created, err := e.svc.FirstRun(bg, "another-long-password"); created || err != nil || e.svc.AdminPending() {
		t.Errorf("FirstRun on a later run = %v, %v, AdminPending %v", created, err, e.svc.AdminPending())
	}
}
