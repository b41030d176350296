package identity

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// sessionIDOf is the ID part of a session cookie's value.
func sessionIDOf(cookie string) string { id, _, _ := strings.Cut(cookie, "."); return id }

// handoff is one browser's handoff: its state and the code minted for it.
type handoff struct {
	state HandoffState
	code  string
}

// stateOf answers a redemption's question about the browser's state
// cookies: this browser holds only its own.
func (h handoff) stateOf(id string) string {
	if id == h.state.ID {
		return h.state.Secret
	}
	return ""
}

func (e *shareEnv) beginFor(t *testing.T, appID string, sessionCookie string) handoff {
	t.Helper()
	h := handoff{state: NewHandoffState()}
	code, err := e.svc.BeginAppSession(bg, NewAppSession{AppID: appID, State: h.state, SessionID: sessionIDOf(sessionCookie)})
	must(t, "begin an app session", err)
	h.code = code
	return h
}

func (e *shareEnv) redeem(t *testing.T, appID string, h handoff) string {
	t.Helper()
	c, err := e.svc.RedeemAppSession(bg, appID, h.code, h.stateOf)
	must(t, "redeem", err)
	if c.StateID != h.state.ID || !c.ExpiresAt.After(e.now) || !strings.HasPrefix(c.Value, "aps_") || c.Value == h.code {
		t.Fatalf("redeemed %+v", c)
	}
	return c.Value
}

// TestHandoffCodeChecks: a code opens one app, once, within its minute, for
// the browser that began the handoff; anything else is the one
// AUTH_INVALID, and a refused try does not spend the code.
func TestHandoffCodeChecks(t *testing.T) {
	e := newShareEnv(t)
	alice := e.mkUser(t, "alice")
	in := e.signIn(t, "alice")
	notes, other := e.app(t, "Notes", alice.ID), e.app(t, "Other", alice.ID)
	h := e.beginFor(t, notes, in.Cookie)
	id, secret, _ := strings.Cut(h.code, ".")
	flip := func(s string) string {
		b := []byte(s)
		b[len(b)-1] ^= 1
		return string(b)
	}
	for _, tc := range []struct {
		name  string
		app   string
		code  string
		state func(string) string
	}{
		{"another app", other, h.code, h.stateOf},
		{"another browser (no state cookie)", notes, h.code, func(string) string { return "" }},
		{"another browser (another state)", notes, h.code, func(string) string { return NewHandoffState().Secret }},
		{"a forged secret", notes, id + "." + flip(secret), h.stateOf},
		{"an unknown ID", notes, ids.New(ids.AppSession) + "." + secret, h.stateOf},
		{"a session cookie", notes, in.Cookie, h.stateOf},
		{"no secret", notes, id, h.stateOf},
		{"empty", notes, "", h.stateOf},
		{"garbage", notes, "aps_x.y.z", h.stateOf},
	} {
		_, err := e.svc.RedeemAppSession(bg, tc.app, tc.code, tc.state)
		if e := wantCode(t, tc.name, err, errcode.AuthInvalid); e != nil && (e.Remedy == "" || (tc.code != "" && strings.Contains(e.Message, tc.code))) {
			t.Errorf("%s: %+v", tc.name, e)
		}
	}
	if _, err := e.svc.AuthenticateApp(bg, notes, h.code); errcode.CodeOf(err) != errcode.AuthRequired {
		t.Errorf("a pending code used as the cookie: %v", err)
	}
	cookie := e.redeem(t, notes, h)
	got, err := e.svc.AuthenticateApp(bg, notes, cookie)
	must(t, "authenticate", err)
	if got.Principal != (authz.Principal{Kind: authz.KindUser, ID: alice.ID, UserID: alice.ID}) || got.User == nil || got.SessionID != sessionIDOf(in.Cookie) || got.Admitted {
		t.Errorf("the app cookie authenticates %+v", got)
	}
	_, err = e.svc.RedeemAppSession(bg, notes, h.code, h.stateOf)
	wantCode(t, "the code a second time", err, errcode.AuthInvalid)
	for name, c := range map[string]string{"another app": "", "the code after redemption": h.code, "a forged cookie": flip(cookie)} {
		app := notes
		if name == "another app" {
			app, c = other, cookie
		}
		if _, err := e.svc.AuthenticateApp(bg, app, c); errcode.CodeOf(err) != errcode.AuthRequired {
			t.Errorf("%s: %v, want AUTH_REQUIRED", name, err)
		}
	}

	late := e.beginFor(t, notes, in.Cookie)
	e.now = e.now.Add(HandoffCodeTTL)
	_, err = e.svc.RedeemAppSession(bg, notes, late.code, late.stateOf)
	wantCode(t, "a code a minute old", err, errcode.AuthInvalid)
	if _, err := e.svc.AuthenticateApp(bg, notes, cookie); err != nil {
		t.Errorf("the cookie ended with the code's minute: %v", err)
	}
	// Nothing secret reaches the log.
	if logs := e.logs.String(); strings.Contains(logs, secret) {
		t.Errorf("a code's secret was logged: %s", logs)
	}
}

// TestAppCookieEndsWithItsSession: sign-out, a password reset, a
// suspension and the session's expiry each end the app cookies the
// session gave, at once.
func TestAppCookieEndsWithItsSession(t *testing.T) {
	e := newShareEnv(t)
	bob := e.mkUser(t, "bob")
	app := e.app(t, "Notes", bob.ID)
	open := func() (SignedIn, string) {
		in := e.signIn(t, "bob")
		return in, e.redeem(t, app, e.beginFor(t, app, in.Cookie))
	}
	alive := func(cookie string) bool {
		_, err := e.svc.AuthenticateApp(bg, app, cookie)
		return err == nil
	}
	in, cookie := open()
	_, other := open()
	must(t, "sign out", e.svc.SignOut(bg, in.Cookie))
	if alive(cookie) {
		t.Error("sign-out left the app cookie working")
	}
	if !alive(other) {
		t.Error("signing one session out ended another's app cookie")
	}
	must(t, "reset the password", e.svc.ResetPassword(bg, bob.ID, testPW, false))
	if alive(other) {
		t.Error("a password reset left the app cookie working")
	}
	_, cookie = open()
	suspended := StatusSuspended
	_, err := e.svc.UpdateUser(bg, e.adminCaller(), bob.ID, UserPatch{Status: &suspended})
	must(t, "suspend", err)
	if alive(cookie) {
		t.Error("a suspension left the app cookie working")
	}
	active := StatusActive
	_, err = e.svc.UpdateUser(bg, e.adminCaller(), bob.ID, UserPatch{Status: &active})
	must(t, "reactivate", err)
	_, cookie = open()
	e.now = e.now.Add(SessionIdle)
	if alive(cookie) {
		t.Error("the app cookie outlived its session's expiry")
	}
	// A session that has ended gives no code.
	_, err = e.svc.BeginAppSession(bg, NewAppSession{AppID: app, State: NewHandoffState(), SessionID: sessionIDOf(in.Cookie)})
	wantCode(t, "begin for an ended session", err, errcode.AuthRequired)
}

// TestAppCookieByPasscode: an admission carried to the app's origin
// admits as the admission does, and ends with it (a new passcode, its
// day).
func TestAppCookieByPasscode(t *testing.T) {
	e := newShareEnv(t)
	app, grant := e.passcodeApp(t, "Guarded", firstCode)
	other, _ := e.passcodeApp(t, "Other", firstCode)
	adm := e.enter(t, app, firstCode)
	if _, ok := e.sh.Admission(other, adm.Cookie); ok {
		t.Fatal("an admission names itself for another app")
	}
	ref, ok := e.sh.Admission(app, adm.Cookie)
	if !ok || ref.GrantID != grant || ref.Generation != 1 || !ref.ExpiresAt.Equal(adm.ExpiresAt) {
		t.Fatalf("Admission = %+v %v", ref, ok)
	}
	begin := func() handoff {
		h := handoff{state: NewHandoffState()}
		code, err := e.svc.BeginAppSession(bg, NewAppSession{AppID: app, State: h.state, Admission: &ref})
		must(t, "begin", err)
		h.code = code
		return h
	}
	cookie := e.redeem(t, app, begin())
	got, err := e.svc.AuthenticateApp(bg, app, cookie)
	must(t, "authenticate", err)
	if !got.Admitted || got.Principal.Kind != authz.KindAnonymous || got.User != nil {
		t.Errorf("an admission's app cookie = %+v", got)
	}
	if _, err := e.svc.AuthenticateApp(bg, other, cookie); err == nil {
		t.Error("an admission's app cookie opens another app")
	}
	second := e.redeem(t, app, begin())
	e.now = adm.ExpiresAt
	if _, err := e.svc.AuthenticateApp(bg, app, second); err == nil {
		t.Error("the app cookie outlived its admission's day")
	}
	e.now = adm.ExpiresAt.Add(-time.Hour)
	code := secondCode
	_, err = e.sh.UpdateGrant(bg, e.adminCaller(), app, grant, GrantPatch{Passcode: &code})
	must(t, "a new passcode", err)
	if _, err := e.svc.AuthenticateApp(bg, app, cookie); err == nil {
		t.Error("a new passcode left the old admission's app cookie working")
	}
	_, err = e.svc.BeginAppSession(bg, NewAppSession{AppID: app, State: NewHandoffState(), Admission: &ref})
	wantCode(t, "begin for an ended admission", err, errcode.PermPasscodeRequired)

	// A person signed in, let in by the passcode: the cookie says who they
	// are, and that they are admitted while the admission holds.
	u := e.mkUser(t, "frank")
	in := e.signIn(t, "frank")
	fresh := e.enter(t, app, secondCode)
	ref, _ = e.sh.Admission(app, fresh.Cookie)
	h := handoff{state: NewHandoffState()}
	h.code, err = e.svc.BeginAppSession(bg, NewAppSession{AppID: app, State: h.state, SessionID: sessionIDOf(in.Cookie), Admission: &ref})
	must(t, "begin for a person admitted by passcode", err)
	both := e.redeem(t, app, h)
	got, err = e.svc.AuthenticateApp(bg, app, both)
	must(t, "authenticate", err)
	if got.Principal.ID != u.ID || !got.Admitted {
		t.Errorf("a person admitted by passcode: %+v", got)
	}
	third := "canary-passcode-three-5d2f"
	_, err = e.sh.UpdateGrant(bg, e.adminCaller(), app, grant, GrantPatch{Passcode: &third})
	must(t, "another passcode", err)
	if got, err = e.svc.AuthenticateApp(bg, app, both); err != nil || got.Principal.ID != u.ID || got.Admitted {
		t.Errorf("after a new passcode the person is still signed in, no longer admitted: %+v %v", got, err)
	}
}

// TestHandoffRedeemedOnceUnderConcurrency: sixteen redemptions of one code
// at once give one cookie.
func TestHandoffRedeemedOnceUnderConcurrency(t *testing.T) {
	e := newShareEnv(t)
	u := e.mkUser(t, "carol")
	app := e.app(t, "Notes", u.ID)
	h := e.beginFor(t, app, e.signIn(t, "carol").Cookie)
	var wins, refusals atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.svc.RedeemAppSession(bg, app, h.code, h.stateOf)
			switch {
			case err == nil:
				wins.Add(1)
			case errcode.CodeOf(err) == errcode.AuthInvalid:
				refusals.Add(1)
			default:
				t.Errorf("redeem: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || refusals.Load() != 15 {
		t.Errorf("%d redemptions won, %d refused; want 1 and 15", wins.Load(), refusals.Load())
	}
}

// TestAppSessionRowsAreKeptHonestByTheFSM: the store refuses a redeemed
// row changed again, a pending row with a cookie secret, a row bound to
// nothing.
func TestAppSessionRowsAreKeptHonestByTheFSM(t *testing.T) {
	e := newShareEnv(t)
	u := e.mkUser(t, "dave")
	app := e.app(t, "Notes", u.ID)
	in := e.signIn(t, "dave")
	h := e.beginFor(t, app, in.Cookie)
	e.redeem(t, app, h)
	id, _, _ := strings.Cut(h.code, ".")
	row, meta, _ := AppSessions.Get(e.store.Read(), id)
	again := row
	again.SecretHash = hashOf("another secret")
	if _, err := e.store.Apply(bg, AppSessions.PutIf(&again, meta.ModifyIndex)); errcode.CodeOf(err) != errcode.StateInvalid {
		t.Errorf("a redeemed row changed again: %v", err)
	}
	now := e.now
	for name, bad := range map[string]AppSession{
		"bound to nothing": {ID: ids.New(ids.AppSession), AppID: app, StateID: h.state.ID, StateHash: hashOf("s"), CodeHash: hashOf("c")},
		"bound to a malformed admission": {ID: ids.New(ids.AppSession), AppID: app, StateID: h.state.ID, StateHash: hashOf("s"), CodeHash: hashOf("c"),
			Admission: &AdmissionRef{GrantID: "gr_x", Generation: 1, ExpiresAt: now}},
		"pending with a cookie secret": {ID: ids.New(ids.AppSession), AppID: app, SessionID: row.SessionID, UserID: u.ID, StateID: h.state.ID,
			StateHash: hashOf("s"), CodeHash: hashOf("c"), SecretHash: hashOf("x")},
		"born redeemed": {ID: ids.New(ids.AppSession), AppID: app, SessionID: row.SessionID, UserID: u.ID, StateID: h.state.ID,
			StateHash: hashOf("s"), SecretHash: hashOf("x"), RedeemedAt: &now},
	} {
		if _, err := e.store.Apply(bg, AppSessions.Insert(&bad)); errcode.CodeOf(err) != errcode.ValidInvalid {
			t.Errorf("%s: %v, want VALID_INVALID", name, err)
		}
	}
}

// TestExpireAppSessions removes what can no longer authenticate and keeps
// the rest.
func TestExpireAppSessions(t *testing.T) {
	e := newShareEnv(t)
	u := e.mkUser(t, "erin")
	app := e.app(t, "Notes", u.ID)
	in := e.signIn(t, "erin")
	live := e.redeem(t, app, e.beginFor(t, app, in.Cookie))
	pending := e.beginFor(t, app, in.Cookie)
	gone := e.signIn(t, "erin")
	ended := e.redeem(t, app, e.beginFor(t, app, gone.Cookie))
	must(t, "sign out", e.svc.SignOut(bg, gone.Cookie))
	e.now = e.now.Add(HandoffCodeTTL)
	must(t, "expire", e.svc.ExpireAppSessions(bg))
	left := map[string]bool{}
	items, _ := AppSessions.List(e.store.Read(), raftstore.Query{})
	for _, it := range items {
		left[it.Value.ID] = true
	}
	idOf := func(s string) string { id, _, _ := strings.Cut(s, "."); return id }
	if !left[idOf(live)] || left[idOf(pending.code)] || left[idOf(ended)] || len(left) != 1 {
		t.Errorf("left %v; want only the live one %s", left, idOf(live))
	}
}

func TestHandoffState(t *testing.T) {
	s := NewHandoffState()
	if p, ok := ParseHandoffState(s.String()); !ok || p != s || len(s.ID) != handoffStateIDLen {
		t.Fatalf("round trip %q: %+v %v", s, p, ok)
	}
	for _, bad := range []string{"", ".", s.ID, s.ID + ".", "." + s.Secret, s.ID + "." + s.Secret + "x", s.ID + "!." + s.Secret[1:], strings.Repeat("a", 16) + "." + strings.Repeat("=", 43)} {
		if _, ok := ParseHandoffState(bad); ok {
			t.Errorf("ParseHandoffState(%q) accepted", bad)
		}
	}
}

func FuzzHandoffState(f *testing.F) {
	f.Add(NewHandoffState().String())
	f.Add("aaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	f.Add("..")
	f.Fuzz(func(t *testing.T, s string) {
		h, ok := ParseHandoffState(s)
		if ok && h.String() != s {
			t.Fatalf("accepted %q as %q", s, h)
		}
	})
}
