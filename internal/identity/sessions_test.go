package identity

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/password"
	"github.com/svchost/svc/raftstore"
)

// Sign-in.

func TestSignInOpensASession(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	bob := e.mkUser(t, "bob")
	m := e.mark()
	si, err := e.svc.SignIn(bg, "BOB", testPW, Client{IP: "198.51.100.4", UserAgent: strings.Repeat("é", 200)})
	must(t, "sign in with another case of the username", err)
	if si.User.ID != bob.ID {
		t.Errorf("signed in as %s, want bob", si.User.ID)
	}
	if !sessionCookieRE.MatchString(si.Cookie) {
		t.Errorf("cookie %q is not ses_<ULID>.<secret>", si.Cookie)
	}
	id, _, _ := splitCredential(ids.Session, si.Cookie)
	s, _, ok := Sessions.Get(e.store.Read(), id)
	if !ok {
		t.Fatal("no session row")
	}
	if s.UserID != bob.ID || s.ClientIP != "198.51.100.4" || !s.CreatedAt.Equal(e.now) || !s.ExpiresAt.Equal(e.now.Add(SessionIdle)) {
		t.Errorf("session = %+v", s)
	}
	if len(s.UserAgent) > 256 || !strings.HasPrefix(strings.Repeat("é", 200), s.UserAgent) {
		t.Errorf("user agent stored as %d bytes, not a whole-character prefix of at most 256", len(s.UserAgent))
	}

	ev := e.oneEvent(t, m, "user.signed_in")
	wantData(t, "user.signed_in", ev.Value.Data, map[string]any{
		"user_id": bob.ID, "via": "password", "adapter_id": nil, "target_kind": "session", "target_id": id,
	})
	if ev.Value.Actor.Kind != authz.KindUser || ev.Value.Actor.ID != bob.ID {
		t.Errorf("user.signed_in actor = %+v, want bob", ev.Value.Actor)
	}
	entry := e.oneAudit(t, m, "session.create")
	if entry.Meta.CreateIndex != ev.Meta.CreateIndex {
		t.Error("session.create entry and user.signed_in event are not in one write")
	}
	wantData(t, "session.create", entry.Value.Details, map[string]any{"via": "password", "client_ip": "198.51.100.4"})
	if n := len(e.eventsSince(m, "user.sign_in_failed")); n != 0 {
		t.Errorf("%d sign_in_failed events for a good sign-in", n)
	}
}

func TestSignInFailuresLookAlike(t *testing.T) {
	e := newTestEnv(t)
	h := &countingHasher{inner: cheapHasher}
	e.svc.d.Hasher = h
	admin, _ := e.setup(t)
	bob := e.mkUser(t, "bob")
	_, err := e.svc.UpdateUser(bg, e.userCaller(admin.ID), bob.ID, UserPatch{Status: ptr(StatusSuspended)})
	must(t, "suspend bob", err)

	long := strings.Repeat("x", 257)
	cases := []struct {
		name, username, pw, reason string
		target                     string
		verify, dummy              int64
	}{
		{"wrong password", "admin", "wrong-password-123", "wrong_password", admin.ID, 1, 0},
		{"unknown account", "nobody", testPW, "unknown_account", "", 0, 1},
		{"suspended account", "bob", testPW, "suspended", bob.ID, 1, 0},
		{"oversized password, known account", "admin", long, "too_long", admin.ID, 0, 1},
		{"oversized password, unknown account", "nobody", long, "too_long", "", 0, 1},
		{"oversized username", strings.Repeat("a", 65), testPW, "too_long", "", 0, 1},
	}
	var first *errcode.Error
	for i, tc := range cases {
		h.reset()
		m := e.mark()
		_, err := e.svc.SignIn(bg, tc.username, tc.pw, Client{IP: fmt.Sprintf("198.51.100.%d", i)})
		ce := wantCode(t, tc.name, err, errcode.AuthInvalid)
		if ce == nil {
			continue
		}
		if first == nil {
			first = ce
		} else if ce.Message != first.Message || ce.Remedy != first.Remedy || err.Error() != first.Error() || len(ce.Details) != 0 {
			t.Errorf("%s: error %q differs from %q", tc.name, err, first)
		}
		if v, d := h.verify.Load(), h.dummy.Load(); v != tc.verify || d != tc.dummy {
			t.Errorf("%s: hasher Verify %d Dummy %d times, want %d and %d", tc.name, v, d, tc.verify, tc.dummy)
		}
		if h.hash.Load() != 0 {
			t.Errorf("%s: a refused sign-in hashed a password", tc.name)
		}
		ev := e.oneEvent(t, m, "user.sign_in_failed")
		wantData(t, tc.name, ev.Value.Data, map[string]any{"reason": tc.reason, "adapter_id": nil})
		if tc.target != "" {
			wantData(t, tc.name, ev.Value.Data, map[string]any{"target_kind": "user", "target_id": tc.target})
		}
		entry := e.oneAudit(t, m, "session.create_failed")
		wantData(t, tc.name, entry.Value.Details, map[string]any{"reason": tc.reason})
		j, _ := json.Marshal([]any{ev.Value, entry.Value})
		if strings.Contains(string(j), tc.pw) {
			t.Errorf("%s: the attempted password is in the event or audit entry: %s", tc.name, j)
		}
		if n := len(e.eventsSince(m, "user.signed_in")); n != 0 {
			t.Errorf("%s: a signed_in event", tc.name)
		}
	}

	// A 256-byte password is not oversized: it is verified.
	h.reset()
	_, err = e.svc.SignIn(bg, "admin", strings.Repeat("y", 256), Client{IP: "198.51.100.200"})
	wantCode(t, "256-byte password", err, errcode.AuthInvalid)
	if h.verify.Load() != 1 {
		t.Errorf("a 256-byte password was not verified (Verify %d, Dummy %d)", h.verify.Load(), h.dummy.Load())
	}
}

// TestSignInThrottlesPerAccountAndAddress: ten failures lock the account
// for that address only; the rightful user elsewhere still signs in.
func TestSignInThrottlesPerAccountAndAddress(t *testing.T) {
	e := newTestEnv(t)
	h := &countingHasher{inner: cheapHasher}
	e.svc.d.Hasher = h
	e.setup(t)
	e.mkUser(t, "bob")
	c := Client{IP: "198.51.100.1"}
	for i := range 10 {
		_, err := e.svc.SignIn(bg, "admin", fmt.Sprintf("wrong-password-%02d", i), c)
		wantCode(t, fmt.Sprintf("failure %d", i+1), err, errcode.AuthInvalid)
	}
	h.reset()
	for _, name := range []string{"admin", "ADMIN"} {
		_, err := e.svc.SignIn(bg, name, testPW, c)
		if ce := wantCode(t, "correct password while throttled ("+name+")", err, errcode.RateLimited); ce != nil && (ce.RetryAfter < 1 || ce.RetryAfter > 900) {
			t.Errorf("RetryAfter = %d, want 1 to 900 seconds", ce.RetryAfter)
		}
	}
	if h.verify.Load()+h.dummy.Load() != 0 {
		t.Error("a throttled attempt checked the password")
	}
	if _, err := e.svc.SignIn(bg, "admin", testPW, Client{IP: "198.51.100.99"}); err != nil {
		t.Errorf("the account from another address: %v", err)
	}
	// An IPv6 client is one /64: another address in it is the same client.
	v6 := Client{IP: "2001:db8:7:7::1"}
	for i := range 10 {
		_, err := e.svc.SignIn(bg, "bob", fmt.Sprintf("wrong-password-%02d", i), v6)
		wantCode(t, fmt.Sprintf("v6 failure %d", i+1), err, errcode.AuthInvalid)
	}
	_, err := e.svc.SignIn(bg, "bob", testPW, Client{IP: "2001:db8:7:7:ffff::2"})
	wantCode(t, "another address of the same /64", err, errcode.RateLimited)
	// Another account is not throttled.
	if _, err := e.svc.SignIn(bg, "bob", testPW, c); err != nil {
		t.Errorf("another account from the same address: %v", err)
	}
	// The window passes.
	e.now = e.now.Add(15*time.Minute - time.Second)
	_, err = e.svc.SignIn(bg, "admin", testPW, c)
	wantCode(t, "a second before the window ends", err, errcode.RateLimited)
	e.now = e.now.Add(time.Second)
	if _, err := e.svc.SignIn(bg, "admin", testPW, c); err != nil {
		t.Fatalf("after the window: %v", err)
	}

	// A success resets the account's count: 9 failures, a success, 9 more
	// failures, and the tenth attempt still goes ahead.
	for round := range 2 {
		for i := range 9 {
			_, err := e.svc.SignIn(bg, "admin", fmt.Sprintf("wrong-password-%02d", i), c)
			wantCode(t, fmt.Sprintf("round %d failure %d", round, i+1), err, errcode.AuthInvalid)
		}
		if _, err := e.svc.SignIn(bg, "admin", testPW, c); err != nil {
			t.Fatalf("round %d: success after 9 failures: %v", round, err)
		}
	}
}

// TestSignInThrottlesPerAccountFromAnyAddress: many addresses together
// reach the account's looser limit (a hundred), after which a new address
// waits, but one that signed in to the account recently does not.
func TestSignInThrottlesPerAccountFromAnyAddress(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	home := Client{IP: "192.0.2.10"}
	if _, err := e.svc.SignIn(bg, "admin", testPW, home); err != nil {
		t.Fatal(err)
	}
	for a := range 10 {
		for i := range 10 {
			_, err := e.svc.SignIn(bg, "admin", fmt.Sprintf("wrong-password-%02d", i), Client{IP: fmt.Sprintf("203.0.113.%d", a)})
			wantCode(t, fmt.Sprintf("address %d failure %d", a, i+1), err, errcode.AuthInvalid)
		}
	}
	_, err := e.svc.SignIn(bg, "admin", testPW, Client{IP: "198.51.100.50"})
	if ce := wantCode(t, "a new address once the account is at its limit", err, errcode.RateLimited); ce != nil && ce.RetryAfter < 1 {
		t.Errorf("RetryAfter = %d", ce.RetryAfter)
	}
	if _, err := e.svc.SignIn(bg, "admin", testPW, home); err != nil {
		t.Errorf("the address the account signed in from: %v", err)
	}
	e.now = e.now.Add(15 * time.Minute)
	if _, err := e.svc.SignIn(bg, "admin", testPW, Client{IP: "198.51.100.50"}); err != nil {
		t.Errorf("a new address after the window: %v", err)
	}
}

func TestSignInThrottlesPerClientAddress(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	sprayer := Client{IP: "203.0.113.7"}
	for i := range 50 {
		_, err := e.svc.SignIn(bg, fmt.Sprintf("guess%02d", i), testPW, sprayer)
		wantCode(t, fmt.Sprintf("guess %d", i), err, errcode.AuthInvalid)
	}
	_, err := e.svc.SignIn(bg, "fresh-name", testPW, sprayer)
	if ce := wantCode(t, "51st attempt from the address", err, errcode.RateLimited); ce != nil && ce.RetryAfter < 1 {
		t.Errorf("RetryAfter = %d", ce.RetryAfter)
	}
	_, err = e.svc.SignIn(bg, "admin", testPW, sprayer)
	wantCode(t, "correct password from the throttled address", err, errcode.RateLimited)
	if _, err := e.svc.SignIn(bg, "admin", testPW, Client{IP: "203.0.113.8"}); err != nil {
		t.Errorf("another address: %v", err)
	}
	e.now = e.now.Add(15 * time.Minute)
	if _, err := e.svc.SignIn(bg, "admin", testPW, sprayer); err != nil {
		t.Errorf("after the window: %v", err)
	}
}

// Sessions.

func TestAuthenticateSession(t *testing.T) {
	e := newTestEnv(t)
	admin, si := e.setup(t)
	a, err := e.svc.Authenticate(bg, "", si.Cookie)
	must(t, "authenticate", err)
	id, secret, _ := splitCredential(ids.Session, si.Cookie)
	if a.Principal != userPrincipal(admin.ID) || a.SessionID != id || a.User == nil || a.User.ID != admin.ID || a.Token != nil {
		t.Errorf("authenticated = %+v", a)
	}

	anon, err := e.svc.Authenticate(bg, "", "")
	if err != nil || anon.Principal != (authz.Principal{Kind: authz.KindAnonymous}) {
		t.Errorf("no credential = %+v, %v; want the anonymous principal", anon, err)
	}

	other := []byte(secret)
	other[0] ^= 1
	if other[0] == secret[0] {
		t.Fatal("secret unchanged")
	}
	for name, cookie := range map[string]string{
		"wrong secret":          id + "." + string(other),
		"unknown session":       ids.New(ids.Session) + "." + secret,
		"no secret":             id,
		"empty secret":          id + ".",
		"short secret":          id + "." + secret[:42],
		"long secret":           si.Cookie + "A",
		"garbage":               "garbage",
		"token instead":         "tok_" + strings.TrimPrefix(si.Cookie, "ses_"),
		"lower-case ID":         strings.ToLower(id) + "." + secret,
		"leading space":         " " + si.Cookie,
		"another user's secret": id + "." + strings.Repeat("A", 43),
	} {
		_, err := e.svc.Authenticate(bg, "", cookie)
		wantCode(t, name, err, errcode.AuthRequired)
	}

	// A bearer token wins over the cookie, a bad one too.
	tok, tsecret := e.mkToken(t, e.userCaller(admin.ID), TokenDelegated, "cli")
	a, err = e.svc.Authenticate(bg, tsecret, si.Cookie)
	must(t, "bearer and cookie", err)
	if a.Principal.Kind != authz.KindToken || a.Principal.ID != tok.ID || a.SessionID != "" {
		t.Errorf("bearer and cookie authenticated as %+v", a.Principal)
	}
	_, err = e.svc.Authenticate(bg, "tok_bogus", si.Cookie)
	wantCode(t, "bad bearer with a good cookie", err, errcode.AuthTokenInvalid)
}

func TestSessionExpires(t *testing.T) {
	e := newTestEnv(t)
	_, si := e.setup(t)
	e.now = si.ExpiresAt.Add(-time.Nanosecond)
	if _, err := e.svc.Authenticate(bg, "", si.Cookie); err != nil {
		t.Fatalf("just before expiry: %v", err)
	}
	waitBackground(t, e.svc)
	// The refresh above may have extended it; read the expiry again.
	id, _, _ := splitCredential(ids.Session, si.Cookie)
	s, _, _ := Sessions.Get(e.store.Read(), id)
	e.now = s.ExpiresAt
	_, err := e.svc.Authenticate(bg, "", si.Cookie)
	wantCode(t, "at expiry", err, errcode.AuthRequired)
	e.now = s.ExpiresAt.Add(time.Hour)
	_, err = e.svc.Authenticate(bg, "", si.Cookie)
	wantCode(t, "after expiry", err, errcode.AuthRequired)

	// The leader loop removes expired sessions only.
	e.now = s.ExpiresAt.Add(-time.Hour)
	fresh := e.signIn(t, "admin")
	e.now = s.ExpiresAt
	must(t, "expire sessions", e.svc.ExpireSessions(bg))
	if e.sessionExists(id) {
		t.Error("ExpireSessions kept an expired session")
	}
	fid, _, _ := splitCredential(ids.Session, fresh.Cookie)
	if !e.sessionExists(fid) {
		t.Error("ExpireSessions removed a live session")
	}
}

func TestSessionOfSuspendedAccountEnds(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	e.mkUser(t, "bob")
	bob := e.signIn(t, "bob")

	// Even if a session row survived, a suspended account's session does
	// not authenticate.
	u := e.getUser(t, bob.User.ID)
	u.Status = StatusSuspended
	_, err := e.store.Apply(bg, Users.Put(&u))
	must(t, "suspend bob in the store", err)
	_, err = e.svc.Authenticate(bg, "", bob.Cookie)
	wantCode(t, "session of a suspended account", err, errcode.AuthRequired)

	// A deleted account's too.
	carol := e.mkUser(t, "carol")
	cs := e.signIn(t, "carol")
	id, _, _ := splitCredential(ids.Session, cs.Cookie)
	_, err = e.store.Apply(bg, Users.Delete(carol.ID))
	must(t, "delete carol in the store", err)
	if !e.sessionExists(id) {
		t.Fatal("session gone")
	}
	_, err = e.svc.Authenticate(bg, "", cs.Cookie)
	wantCode(t, "session of a deleted account", err, errcode.AuthRequired)
	_ = admin
}

func TestEverySignInGetsANewSession(t *testing.T) {
	e := newTestEnv(t)
	_, s0 := e.setup(t)
	s1 := e.signIn(t, "admin")
	s2 := e.signIn(t, "admin")
	seen := map[string]bool{}
	for _, si := range []SignedIn{s0, s1, s2} {
		id, _, _ := splitCredential(ids.Session, si.Cookie)
		if seen[id] {
			t.Errorf("session ID %s handed out twice", id)
		}
		seen[id] = true
		if _, err := e.svc.Authenticate(bg, "", si.Cookie); err != nil {
			t.Errorf("session %s: %v", id, err)
		}
	}
	if n := len(e.sessionsOf(s0.User.ID)); n != 3 {
		t.Errorf("%d sessions, want 3", n)
	}
}

func TestSessionStoresOnlyAHash(t *testing.T) {
	e := newTestEnv(t)
	_, si := e.setup(t)
	si2 := e.signIn(t, "admin")
	dump := e.dump(t)
	for _, c := range []string{si.Cookie, si2.Cookie} {
		id, secret, ok := splitCredential(ids.Session, c)
		if !ok {
			t.Fatalf("cookie %q does not parse", c)
		}
		if strings.Contains(dump, secret) {
			t.Errorf("the secret of session %s is stored", id)
		}
		s, _, _ := Sessions.Get(e.store.Read(), id)
		j, _ := json.Marshal(s)
		if strings.Contains(string(j), secret) {
			t.Errorf("session row holds its secret: %s", j)
		}
		if sum := sha256.Sum256([]byte(secret)); string(s.SecretHash) != string(sum[:]) {
			t.Errorf("session %s: stored hash is not SHA-256 of the secret", id)
		}
	}
}

func TestSignOutEndsOnlyThatSession(t *testing.T) {
	e := newTestEnv(t)
	_, s0 := e.setup(t)
	s1 := e.signIn(t, "admin")
	id0, secret0, _ := splitCredential(ids.Session, s0.Cookie)

	// Anything but the session's own cookie ends nothing.
	m := e.mark()
	for name, cookie := range map[string]string{
		"the session ID alone": id0,
		"a wrong secret":       id0 + "." + strings.Repeat("A", 43),
		"garbage":              "garbage",
		"empty":                "",
		"an unknown session":   ids.New(ids.Session) + "." + secret0,
	} {
		if err := e.svc.SignOut(bg, cookie); err != nil {
			t.Errorf("sign out with %s: %v", name, err)
		}
	}
	if e.mark() != m || !e.sessionExists(id0) {
		t.Fatal("signing out without the session's cookie ended or wrote something")
	}

	must(t, "sign out", e.svc.SignOut(bg, s0.Cookie))
	_, err := e.svc.Authenticate(bg, "", s0.Cookie)
	wantCode(t, "signed-out session", err, errcode.AuthRequired)
	if e.sessionExists(id0) {
		t.Error("session row kept")
	}
	if _, err := e.svc.Authenticate(bg, "", s1.Cookie); err != nil {
		t.Errorf("the other session ended too: %v", err)
	}
	entry := e.oneAudit(t, m, "session.delete")
	if *entry.Value.TargetID != id0 {
		t.Errorf("session.delete target %s", *entry.Value.TargetID)
	}
	m = e.mark()
	if err := e.svc.SignOut(bg, s0.Cookie); err != nil {
		t.Errorf("signing out twice: %v", err)
	}
	if e.mark() != m {
		t.Error("signing out an ended session wrote")
	}
}

func TestChangeOwnPassword(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	bob, generated, err := e.svc.CreateUser(bg, NewUser{Username: "bob"})
	must(t, "create bob", err)
	if !bob.MustChangePassword {
		t.Fatal("a generated password need not be changed")
	}
	var sess []SignedIn
	for range 3 {
		si, err := e.svc.SignIn(bg, "bob", generated, Client{IP: "192.0.2.7"})
		must(t, "sign in bob", err)
		sess = append(sess, si)
	}
	otherAdmin := e.signIn(t, "admin")
	cur, _, _ := splitCredential(ids.Session, sess[0].Cookie)
	c := e.userCaller(bob.ID)
	newPW := "a-brand-new-password"

	wantCode(t, "wrong current password", e.svc.ChangeOwnPassword(bg, c, Client{IP: "192.0.2.1"}, cur, "wrong-password-xyz", newPW), errcode.PermDenied)
	wantCode(t, "weak new password", e.svc.ChangeOwnPassword(bg, c, Client{IP: "192.0.2.1"}, cur, generated, "short"), errcode.ValidInvalid)
	wantCode(t, "new password is the username", e.svc.ChangeOwnPassword(bg, c, Client{IP: "192.0.2.1"}, cur, generated, "BOB"), errcode.ValidInvalid)
	wantCode(t, "new password too long", e.svc.ChangeOwnPassword(bg, c, Client{IP: "192.0.2.1"}, cur, generated, strings.Repeat("z", 257)), errcode.ValidInvalid)
	wantCode(t, "new password same as current", e.svc.ChangeOwnPassword(bg, c, Client{IP: "192.0.2.1"}, cur, generated, generated), errcode.ValidInvalid)
	if n := len(e.sessionsOf(bob.ID)); n != 3 {
		t.Fatalf("refused changes ended sessions: %d left", n)
	}
	svcTok := e.caller(authz.Principal{Kind: authz.KindToken, ID: ids.New(ids.Token)})
	wantCode(t, "a service token", e.svc.ChangeOwnPassword(bg, svcTok, Client{IP: "192.0.2.1"}, "", generated, newPW), errcode.PermDenied)

	m := e.mark()
	must(t, "change own password", e.svc.ChangeOwnPassword(bg, c, Client{IP: "192.0.2.1"}, cur, generated, newPW))
	if _, err := e.svc.Authenticate(bg, "", sess[0].Cookie); err != nil {
		t.Errorf("the current session ended: %v", err)
	}
	for i, si := range sess[1:] {
		_, err := e.svc.Authenticate(bg, "", si.Cookie)
		wantCode(t, fmt.Sprintf("other session %d", i+1), err, errcode.AuthRequired)
	}
	if _, err := e.svc.Authenticate(bg, "", otherAdmin.Cookie); err != nil {
		t.Errorf("another account's session ended: %v", err)
	}
	if u := e.getUser(t, bob.ID); u.MustChangePassword {
		t.Error("must_change_password still set")
	}
	_, err = e.svc.SignIn(bg, "bob", generated, Client{IP: "192.0.2.8"})
	wantCode(t, "old password", err, errcode.AuthInvalid)
	if _, err := e.svc.SignIn(bg, "bob", newPW, Client{IP: "192.0.2.8"}); err != nil {
		t.Errorf("new password: %v", err)
	}
	e.oneAudit(t, m, "user.password.change")
	if d := e.dump(t); strings.Contains(d, newPW) || strings.Contains(d, generated) {
		t.Error("a password is stored in clear")
	}
}

func TestResetPassword(t *testing.T) {
	e := newTestEnv(t)
	_, adminSess := e.setup(t)
	bob := e.mkUser(t, "bob")
	s1, s2 := e.signIn(t, "bob"), e.signIn(t, "bob")

	wantCode(t, "weak password", e.svc.ResetPassword(bg, bob.ID, "short", true), errcode.ValidInvalid)
	wantCode(t, "unknown account", e.svc.ResetPassword(bg, ids.New(ids.User), "a-fine-new-password", true), errcode.NotFound)
	if n := len(e.sessionsOf(bob.ID)); n != 2 {
		t.Fatalf("refused reset ended sessions: %d left", n)
	}

	m := e.mark()
	must(t, "reset", e.svc.ResetPassword(bg, bob.ID, "a-fine-new-password", true))
	for i, si := range []SignedIn{s1, s2} {
		_, err := e.svc.Authenticate(bg, "", si.Cookie)
		wantCode(t, fmt.Sprintf("bob's session %d after reset", i), err, errcode.AuthRequired)
	}
	if n := len(e.sessionsOf(bob.ID)); n != 0 {
		t.Errorf("%d sessions of bob left", n)
	}
	if _, err := e.svc.Authenticate(bg, "", adminSess.Cookie); err != nil {
		t.Errorf("the admin's session ended: %v", err)
	}
	if !e.getUser(t, bob.ID).MustChangePassword {
		t.Error("must_change_password not set")
	}
	entry := e.oneAudit(t, m, "user.password.reset")
	wantData(t, "user.password.reset", entry.Value.Details, map[string]any{"must_change_password": true})
	_, err := e.svc.SignIn(bg, "bob", testPW, Client{IP: "192.0.2.30"})
	wantCode(t, "old password after reset", err, errcode.AuthInvalid)
	if _, err := e.svc.SignIn(bg, "bob", "a-fine-new-password", Client{IP: "192.0.2.30"}); err != nil {
		t.Errorf("new password after reset: %v", err)
	}

	must(t, "reset without must_change", e.svc.ResetPassword(bg, bob.ID, "another-fine-password", false))
	if e.getUser(t, bob.ID).MustChangePassword {
		t.Error("must_change_password set although the reset said false")
	}
	if strings.Contains(e.dump(t), "another-fine-password") {
		t.Error("the reset password is stored in clear")
	}
}

func TestSessionSlidingRefresh(t *testing.T) {
	e := newTestEnv(t)
	_, si := e.setup(t)
	id, _, _ := splitCredential(ids.Session, si.Cookie)
	get := func() (Session, raftstore.Meta) {
		s, m, ok := Sessions.Get(e.store.Read(), id)
		if !ok {
			t.Fatal("session gone")
		}
		return s, m
	}
	s0, m0 := get()
	created := s0.CreatedAt

	// Use within the hour writes nothing.
	e.now = e.now.Add(59 * time.Minute)
	if _, err := e.svc.Authenticate(bg, "", si.Cookie); err != nil {
		t.Fatal(err)
	}
	waitBackground(t, e.svc)
	if _, m := get(); m.ModifyIndex != m0.ModifyIndex {
		t.Error("a session used within the hour was written")
	}

	// After more than an hour, use extends it.
	touch := func(what string) Session {
		t.Helper()
		want := minTime(e.now.Add(SessionIdle), created.Add(SessionMax))
		var s Session
		eventually(t, what, func() bool {
			if _, err := e.svc.Authenticate(bg, "", si.Cookie); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			s, _ = get()
			return s.RefreshedAt.Equal(e.now)
		})
		if !s.ExpiresAt.Equal(want) {
			t.Errorf("%s: expires at %v, want %v", what, s.ExpiresAt, want)
		}
		if s.ExpiresAt.After(created.Add(SessionMax)) {
			t.Errorf("%s: expires at %v, beyond the 30-day maximum %v", what, s.ExpiresAt, created.Add(SessionMax))
		}
		if !s.CreatedAt.Equal(created) {
			t.Errorf("%s: created_at moved", what)
		}
		return s
	}
	e.now = created.Add(61 * time.Minute)
	s := touch("refresh after 61 minutes")
	if !s.ExpiresAt.After(s0.ExpiresAt) {
		t.Error("the session was not extended")
	}

	// Keep using it every six days: it lives to the 30-day maximum and no
	// longer.
	for e.now.Add(6 * 24 * time.Hour).Before(created.Add(SessionMax)) {
		e.now = e.now.Add(6 * 24 * time.Hour)
		touch(fmt.Sprintf("use on day %.1f", e.now.Sub(created).Hours()/24))
	}
	if s, _ := get(); !s.ExpiresAt.Equal(created.Add(SessionMax)) {
		t.Errorf("after a month of use expires at %v, want the maximum %v", s.ExpiresAt, created.Add(SessionMax))
	}
	waitBackground(t, e.svc)
	e.now = created.Add(SessionMax)
	_, err := e.svc.Authenticate(bg, "", si.Cookie)
	wantCode(t, "30 days after sign-in", err, errcode.AuthRequired)
}

func TestSignInRehashesOldParameters(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	bob := e.mkUser(t, "bob")
	old := password.NewHasher(password.Params{Memory: 2048, Time: 2, Threads: 1, SaltLen: 16, KeyLen: 32}, 1)
	h, err := old.Hash(bg, testPW)
	must(t, "hash with old parameters", err)
	u := e.getUser(t, bob.ID)
	u.PasswordHash = h
	_, err = e.store.Apply(bg, Users.Put(&u))
	must(t, "store old hash", err)

	si := e.signIn(t, "bob")
	stored := e.getUser(t, bob.ID)
	if stored.PasswordHash == h || !strings.Contains(stored.PasswordHash, "m=1024,t=1,p=1") {
		t.Errorf("hash not upgraded: %s", stored.PasswordHash)
	}
	_, um, _ := Users.Get(e.store.Read(), bob.ID)
	sid, _, _ := splitCredential(ids.Session, si.Cookie)
	if _, sm, _ := Sessions.Get(e.store.Read(), sid); sm.CreateIndex != um.ModifyIndex {
		t.Error("the rehash is not part of the sign-in's write")
	}
	e.signIn(t, "bob") // the new hash verifies

	// A wrong password never replaces the hash.
	u = e.getUser(t, bob.ID)
	u.PasswordHash = h
	_, err = e.store.Apply(bg, Users.Put(&u))
	must(t, "store old hash again", err)
	_, err = e.svc.SignIn(bg, "bob", "wrong-password-123", Client{})
	wantCode(t, "wrong password", err, errcode.AuthInvalid)
	if e.getUser(t, bob.ID).PasswordHash != h {
		t.Error("a wrong password replaced the hash")
	}

	// An unreadable stored hash refuses like a wrong password.
	u.PasswordHash = "$argon2id$v=19$m=999999999,t=1,p=1$AAAA$AAAA"
	_, err = e.store.Apply(bg, Users.Put(&u))
	must(t, "store bad hash", err)
	m := e.mark()
	_, err = e.svc.SignIn(bg, "bob", testPW, Client{})
	wantCode(t, "unreadable hash", err, errcode.AuthInvalid)
	wantData(t, "sign_in_failed", e.oneEvent(t, m, "user.sign_in_failed").Value.Data, map[string]any{"reason": "bad_hash"})
}

// Accounts of an identity adapter have no local password.
func TestAdapterAccountsHaveNoLocalPassword(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	h := &countingHasher{inner: cheapHasher}
	e.svc.d.Hasher = h
	ext := User{ID: ids.New(ids.User), Username: "ext", DisplayName: "Ext", Status: StatusActive, Source: "adp_ldap", CreatedAt: e.now, UpdatedAt: e.now}
	_, err := e.store.Apply(bg, Users.Insert(&ext))
	must(t, "insert adapter account", err)

	_, err = e.svc.SignIn(bg, "ext", testPW, Client{})
	wantCode(t, "password sign-in of an adapter account", err, errcode.AuthInvalid)
	if h.dummy.Load() != 1 || h.verify.Load() != 0 {
		t.Errorf("hasher Verify %d Dummy %d, want a dummy verification", h.verify.Load(), h.dummy.Load())
	}
	wantCode(t, "reset", e.svc.ResetPassword(bg, ext.ID, "a-fine-new-password", true), errcode.StateInvalid)
	wantCode(t, "change own", e.svc.ChangeOwnPassword(bg, e.userCaller(ext.ID), Client{}, "", testPW, "a-fine-new-password"), errcode.StateInvalid)
	ac := e.userCaller(admin.ID)
	for name, p := range map[string]UserPatch{"username": {Username: ptr("ext2")}, "email": {Email: ptr("e@example.com")}} {
		_, err := e.svc.UpdateUser(bg, ac, ext.ID, p)
		if ce := wantCode(t, "change an adapter account's "+name, err, errcode.ValidInvalid); ce != nil && ce.Details["field"] != name {
			t.Errorf("details = %v", ce.Details)
		}
	}
	if _, err := e.svc.UpdateUser(bg, ac, ext.ID, UserPatch{DisplayName: ptr("External")}); err != nil {
		t.Errorf("display name of an adapter account: %v", err)
	}
}
