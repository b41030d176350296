package server

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

func TestSessionCookie(t *testing.T) {
	h := newHarness(t)
	u := h.account(t, "browser", nil, false)

	a, cookie := h.signIn(u.username, u.password)
	wantStatus(t, "sign in", a, http.StatusOK)
	ck := cookieNamed(a, cookieSession)
	if ck == nil {
		t.Fatalf("no %s cookie: %v", cookieSession, a.header)
	}
	if !strings.HasPrefix(cookie, "ses_") || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Secure {
		t.Errorf("cookie = %q HttpOnly %v SameSite %v Path %q Secure %v; want ses_…, HttpOnly, Lax, /, not Secure", ck.Value, ck.HttpOnly, ck.SameSite, ck.Path, ck.Secure)
	}
	if ck.MaxAge <= 0 || ck.Expires.IsZero() {
		t.Errorf("cookie lifetime: Max-Age %d, Expires %v", ck.MaxAge, ck.Expires)
	}
	answerUser := decodeAs[userAnswer](t, a)
	if answerUser.User.ID != u.userID || answerUser.Password != "" {
		t.Errorf("sign-in answer = %s", a.body)
	}

	// A new session ID at every sign-in.
	_, again := h.signIn(u.username, u.password)
	if tokenIDOf(again) == tokenIDOf(cookie) || again == "" {
		t.Errorf("two sign-ins gave the session IDs %q and %q", tokenIDOf(cookie), tokenIDOf(again))
	}

	me := h.send("GET", api+"/me", "", withCookie(cookie)...)
	if got := decodeAs[meDTO](t, me); got.User == nil || got.User.ID != u.userID || got.Token != nil {
		t.Errorf("GET /me with the cookie = %s", me.body)
	}

	// Signing out ends this session only, and clears the cookie.
	out := h.send("DELETE", api+"/sessions", "", withCookie(cookie)...)
	wantStatus(t, "sign out", out, http.StatusNoContent)
	if c := cookieNamed(out, cookieSession); c == nil || c.Value != "" || c.MaxAge >= 0 {
		t.Errorf("sign-out does not clear the cookie: %v", out.header.Values("Set-Cookie"))
	}
	wantError(t, "the ended session", h.send("GET", api+"/me", "", withCookie(cookie)...), http.StatusUnauthorized, errcode.AuthRequired)
	wantStatus(t, "the other session", h.send("GET", api+"/me", "", withCookie(again)...), http.StatusOK)

	// A tampered secret, an unknown session and garbage all answer AUTH_REQUIRED.
	for _, bad := range []string{tokenIDOf(again) + "." + strings.Repeat("A", 43), "ses_nope.x", "garbage", again + "x"} {
		wantError(t, "cookie "+bad, h.send("GET", api+"/me", "", withCookie(bad)...), http.StatusUnauthorized, errcode.AuthRequired)
	}
}

func TestSessionCookieIsSecure(t *testing.T) {
	t.Run("with SVC_SERVER_EXTERNAL_URL", func(t *testing.T) {
		h := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, env: []string{"SVC_SERVER_EXTERNAL_URL=https://svc.example.com"}})
		a, cookie := h.signIn("admin", adminPassword)
		if ck := cookieNamed(a, cookieSession); ck == nil || !ck.Secure {
			t.Fatalf("cookie not Secure with an external URL: %v", a.header.Values("Set-Cookie"))
		}
		out := h.send("DELETE", api+"/sessions", "", withCookie(cookie)...)
		if ck := cookieNamed(out, cookieSession); ck == nil || !ck.Secure {
			t.Errorf("the clearing cookie is not Secure: %v", out.header.Values("Set-Cookie"))
		}
		// The external URL is the console's origin: trusted for cookie requests.
		_, cookie = h.signIn("admin", adminPassword)
		a = h.send("POST", api+"/tokens", `{"name":"console"}`, "Authorization", "", "Cookie", cookieSession+"="+cookie, "Origin", "https://svc.example.com")
		wantStatus(t, "POST from the external URL's origin", a, http.StatusCreated)
	})
	t.Run("over TLS", func(t *testing.T) {
		h := newHarness(t)
		a := h.send("POST", "https://example.com"+api+"/sessions", `{"username":"admin","password":"`+adminPassword+`"}`, "Authorization", "")
		if ck := cookieNamed(a, cookieSession); ck == nil || !ck.Secure {
			t.Fatalf("cookie not Secure over TLS: %d %v", a.status, a.header.Values("Set-Cookie"))
		}
	})
}

func TestBearerTokenWinsOverCookie(t *testing.T) {
	h := newHarness(t)
	u := h.account(t, "browser", nil, true)
	_, cookie := h.signIn(u.username, u.password)

	a := h.send("GET", api+"/me", "", "Authorization", "Bearer "+h.token, "Cookie", cookieSession+"="+cookie)
	me := decodeAs[meDTO](t, a)
	if me.User == nil || me.User.ID != h.adminID || me.Token == nil || me.Token.ID != tokenIDOf(h.token) {
		t.Errorf("token and cookie: GET /me = %s; want the token's principal", a.body)
	}
	// An invalid token is not passed over for a valid cookie.
	a = h.send("GET", api+"/me", "", "Authorization", "Bearer tok_01M7ZVAA7HN5NZE25AZ701FBCF."+strings.Repeat("A", 43), "Cookie", cookieSession+"="+cookie)
	wantError(t, "invalid token and a valid cookie", a, http.StatusUnauthorized, errcode.AuthTokenInvalid)
	// A scheme other than Bearer is a credential that is not valid.
	a = h.send("GET", api+"/me", "", "Authorization", "Basic YWRtaW46eA==", "Cookie", cookieSession+"="+cookie)
	wantError(t, "Basic and a valid cookie", a, http.StatusUnauthorized, errcode.AuthInvalid)
}

func TestCrossOriginProtection(t *testing.T) {
	h := newHarness(t)
	u := h.account(t, "browser", nil, true)
	_, cookie := h.signIn(u.username, u.password)
	post := func(header ...string) answer {
		return h.send("POST", api+"/tokens", `{"name":"x"}`, header...)
	}
	ck := cookieSession + "=" + cookie
	for _, c := range []struct {
		name   string
		header []string
	}{
		{"Sec-Fetch-Site cross-site", []string{"Sec-Fetch-Site", "cross-site"}},
		{"Sec-Fetch-Site same-site", []string{"Sec-Fetch-Site", "same-site"}},
		{"Origin of another site", []string{"Origin", "https://evil.example"}},
	} {
		a := post(append([]string{"Authorization", "", "Cookie", ck}, c.header...)...)
		wantError(t, "cookie, "+c.name, a, http.StatusForbidden, errcode.PermDenied)
		// The same with a bearer token: not a browser's ambient credential.
		a = post(append(u.bearer(), c.header...)...)
		wantStatus(t, "bearer, "+c.name, a, http.StatusCreated)
	}
	wantStatus(t, "cookie, same-origin", post("Authorization", "", "Cookie", ck, "Sec-Fetch-Site", "same-origin"), http.StatusCreated)
	wantStatus(t, "cookie, Origin of this host", post("Authorization", "", "Cookie", ck, "Origin", "http://example.com"), http.StatusCreated)
	// Sign-out is state-changing too; a read is not refused.
	wantError(t, "cross-site sign-out", h.send("DELETE", api+"/sessions", "", "Authorization", "", "Cookie", ck, "Sec-Fetch-Site", "cross-site"), http.StatusForbidden, errcode.PermDenied)
	wantStatus(t, "cross-site read", h.send("GET", api+"/me", "", "Authorization", "", "Cookie", ck, "Sec-Fetch-Site", "cross-site"), http.StatusOK)
}

func TestMustChangePassword(t *testing.T) {
	h := newHarness(t)
	a := h.send("POST", api+"/users", `{"username":"newcomer"}`)
	wantStatus(t, "create without a password", a, http.StatusCreated)
	created := decodeAs[userAnswer](t, a)
	if created.Password == "" || !created.User.MustChangePassword {
		t.Fatalf("create without a password: %s", a.body)
	}
	in, cookie := h.signIn("newcomer", created.Password)
	wantStatus(t, "sign in with the generated password", in, http.StatusOK)
	_, other := h.signIn("newcomer", created.Password)
	c := withCookie(cookie)

	wantStatus(t, "GET /me before the change", h.send("GET", api+"/me", "", c...), http.StatusOK)
	wantStatus(t, "GET own account before the change", h.send("GET", api+"/users/"+created.User.ID, "", c...), http.StatusOK)
	for _, r := range []struct{ method, path, body string }{
		{"GET", api + "/tokens", ""},
		{"POST", api + "/tokens", `{"name":"escape"}`},
		{"GET", api + "/reference", ""},
		{"PATCH", api + "/users/" + created.User.ID, `{"display_name":"Me"}`},
	} {
		wantError(t, r.method+" "+r.path+" before the change", h.send(r.method, r.path, r.body, c...), http.StatusForbidden, errcode.PermDenied)
	}
	change := jsonOf(map[string]string{"current_password": created.Password, "new_password": "my-own-password-1"})
	wantError(t, "a wrong current password", h.send("POST", api+"/me/password", `{"current_password":"wrong-password-123","new_password":"my-own-password-1"}`, c...), http.StatusForbidden, errcode.PermDenied)
	wantStatus(t, "change the password", h.send("POST", api+"/me/password", change, c...), http.StatusNoContent)
	wantStatus(t, "GET /tokens after the change", h.send("GET", api+"/tokens", "", c...), http.StatusOK)
	// The change ends every other session.
	wantError(t, "the other session after the change", h.send("GET", api+"/me", "", withCookie(other)...), http.StatusUnauthorized, errcode.AuthRequired)
	if a, _ := h.signIn("newcomer", created.Password); a.status != http.StatusUnauthorized {
		t.Errorf("the generated password still signs in: %d", a.status)
	}
	if a, _ := h.signIn("newcomer", "my-own-password-1"); a.status != http.StatusOK || decodeAs[userAnswer](t, a).User.MustChangePassword {
		t.Errorf("sign in with the new password: %d %s", a.status, a.body)
	}
}

func TestSignInRefusalsLookAlike(t *testing.T) {
	h := newHarness(t)
	u := h.account(t, "known", nil, false)
	s := h.account(t, "suspended", nil, false)
	if a := h.send("PATCH", api+"/users/"+s.userID, `{"status":"suspended"}`); a.status != http.StatusOK {
		t.Fatalf("suspend: %d %s", a.status, a.body)
	}
	cases := []struct{ name, username, password string }{
		{"wrong password", u.username, "wrong-password-123"},
		{"unknown user", "nobody-here", "wrong-password-123"},
		{"suspended user, right password", s.username, s.password},
		{"username in other case, wrong password", strings.ToUpper(u.username), "wrong-password-123"},
	}
	var first envelope
	for i, c := range cases {
		a, cookie := h.signIn(c.username, c.password)
		e := wantError(t, c.name, a, http.StatusUnauthorized, errcode.AuthInvalid)
		if cookie != "" {
			t.Errorf("%s: a cookie was set", c.name)
		}
		e.RequestID = ""
		if i == 0 {
			first = e
			continue
		}
		if e.Message != first.Message || e.Remedy != first.Remedy || jsonOf(e.Details) != jsonOf(first.Details) {
			t.Errorf("%s answers %+v; the wrong password %+v", c.name, e, first)
		}
	}
}

func TestSignInThrottling(t *testing.T) {
	h := newHarness(t)
	u := h.account(t, "target", nil, false)
	for i := range 10 {
		if a, _ := h.signIn(u.username, "wrong-password-123"); a.status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d %s", i+1, a.status, a.body)
		}
	}
	for _, pw := range []string{"wrong-password-123", u.password} {
		a, cookie := h.signIn(u.username, pw)
		wantError(t, "after ten failures", a, http.StatusInternalServerError, errcode.RateLimited)
		if n, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || n < 1 {
			t.Errorf("Retry-After = %q", a.header.Get("Retry-After"))
		}
		if cookie != "" {
			t.Error("a throttled sign-in set a cookie")
		}
	}
	// Another account from the same client is not throttled by this one.
	other := h.account(t, "bystander", nil, false)
	a, _ := h.signIn(other.username, other.password)
	wantStatus(t, "another account", a, http.StatusOK)
}
