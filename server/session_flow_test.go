package server

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/websec"
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

// TestSessionCookieOverTLS: served over TLS (an external URL, which says
// TLS ends in front of svc, or a request that came over TLS) the session
// cookie is __Host-svc_session,
// Secure: a browser takes it only from a secure origin, host-only, at
// Path=/, so no app's script (another host, or this host at another port
// over plain HTTP) can plant one. The plain spelling is then no credential.
func TestSessionCookieOverTLS(t *testing.T) {
	t.Run("with an https external URL", func(t *testing.T) {
		h := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, env: []string{"SVC_SERVER_EXTERNAL_URL=https://svc.example.com"}})
		a := h.send("POST", api+"/sessions", `{"username":"admin","password":"`+adminPassword+`"}`, "Authorization", "")
		ck := cookieNamed(a, websec.HostSessionCookie)
		if ck == nil || !ck.Secure || ck.Path != "/" || ck.Domain != "" || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || cookieNamed(a, cookieSession) != nil {
			t.Fatalf("over an https external URL: %v", a.header.Values("Set-Cookie"))
		}
		host := websec.HostSessionCookie + "=" + ck.Value
		me := h.send("GET", api+"/me", "", "Authorization", "", "Cookie", host, "Sec-Fetch-Site", "same-origin")
		wantStatus(t, "the __Host- cookie", me, http.StatusOK)
		wantError(t, "the plain spelling alone", h.send("GET", api+"/me", "", "Authorization", "", "Cookie", cookieSession+"="+ck.Value, "Sec-Fetch-Site", "same-origin"),
			http.StatusUnauthorized, errcode.AuthRequired)
		wantError(t, "both spellings", h.send("GET", api+"/me", "", "Authorization", "", "Cookie", host+"; "+cookieSession+"="+ck.Value, "Sec-Fetch-Site", "same-origin"),
			http.StatusUnauthorized, errcode.AuthInvalid)
		out := h.send("DELETE", api+"/sessions", "", "Authorization", "", "Cookie", host, "Sec-Fetch-Site", "same-origin")
		if c := cookieNamed(out, websec.HostSessionCookie); c == nil || !c.Secure || c.MaxAge >= 0 {
			t.Errorf("the clearing cookie: %v", out.header.Values("Set-Cookie"))
		}
		// The external URL is the console's origin: trusted for cookie requests.
		a = h.send("POST", api+"/sessions", `{"username":"admin","password":"`+adminPassword+`"}`, "Authorization", "")
		host = websec.HostSessionCookie + "=" + cookieNamed(a, websec.HostSessionCookie).Value
		a = h.send("POST", api+"/tokens", `{"name":"console"}`, "Authorization", "", "Cookie", host, "Origin", "https://svc.example.com")
		wantStatus(t, "POST from the external URL's origin", a, http.StatusCreated)
	})
	t.Run("over TLS", func(t *testing.T) {
		h := newHarness(t)
		a := h.send("POST", "https://example.com"+api+"/sessions", `{"username":"admin","password":"`+adminPassword+`"}`, "Authorization", "")
		if ck := cookieNamed(a, websec.HostSessionCookie); ck == nil || !ck.Secure {
			t.Fatalf("cookie not __Host- and Secure over TLS: %d %v", a.status, a.header.Values("Set-Cookie"))
		}
	})
	t.Run("with an http external URL", func(t *testing.T) {
		// The specification: an external URL (set when TLS ends in front
		// of svc) makes the cookie Secure, whatever its scheme; the
		// configuration warns of an http one (internal/config).
		h := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, env: []string{"SVC_SERVER_EXTERNAL_URL=http://svc.example.com"}})
		a := h.send("POST", api+"/sessions", `{"username":"admin","password":"`+adminPassword+`"}`, "Authorization", "")
		if ck := cookieNamed(a, websec.HostSessionCookie); ck == nil || !ck.Secure {
			t.Fatalf("over an http external URL: %v", a.header.Values("Set-Cookie"))
		}
	})
}

// TestAmbiguousSessionCookies: a request carrying more than one session
// cookie (one tossed beside the rightful one, at another path or for a
// parent domain, or the other spelling) is refused, never read as either;
// the refusal clears every copy it can, and a public route still answers.
func TestAmbiguousSessionCookies(t *testing.T) {
	h := newHarness(t)
	victim := h.account(t, "victim", nil, false)
	attacker := h.account(t, "attacker", nil, false)
	_, mine := h.signIn(victim.username, victim.password)
	_, theirs := h.signIn(attacker.username, attacker.password)
	for name, cookies := range map[string]string{
		"the attacker's first": cookieSession + "=" + theirs + "; " + cookieSession + "=" + mine,
		"the victim's first":   cookieSession + "=" + mine + "; " + cookieSession + "=" + theirs,
		"the same one twice":   cookieSession + "=" + mine + "; " + cookieSession + "=" + mine,
		"both spellings":       websec.HostSessionCookie + "=" + theirs + "; " + cookieSession + "=" + mine,
	} {
		t.Run(name, func(t *testing.T) {
			hdr := []string{"Authorization", "", "Sec-Fetch-Site", "same-origin", "Cookie", cookies}
			a := h.send("GET", api+"/me", "", hdr...)
			e := wantError(t, "GET /me", a, http.StatusUnauthorized, errcode.AuthInvalid)
			if !strings.Contains(e.Message, "ambiguous") || !strings.Contains(e.Remedy, "sign in again") {
				t.Errorf("refusal %+v", e)
			}
			cleared := map[string]bool{}
			for _, c := range (&http.Response{Header: a.header}).Cookies() {
				if c.MaxAge < 0 && c.Value == "" {
					cleared[c.Name+" "+c.Path] = true
				}
			}
			for _, want := range []string{"svc_session /", "svc_session /api/v1", "svc_session /api/v1/me", "__Host-svc_session /"} {
				if !cleared[want] {
					t.Errorf("not cleared: %s (cleared %v)", want, cleared)
				}
			}
			wantError(t, "a state change", h.send("POST", api+"/tokens", `{"name":"tossed"}`, hdr...), http.StatusUnauthorized, errcode.AuthInvalid)
			wantStatus(t, "a public route", h.send("GET", api+"/setup", "", hdr...), http.StatusOK)
		})
	}
	wantStatus(t, "one cookie", h.send("GET", api+"/me", "", withCookie(mine)...), http.StatusOK)
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
	// Sign-out is state-changing too.
	wantError(t, "cross-site sign-out", h.send("DELETE", api+"/sessions", "", "Authorization", "", "Cookie", ck, "Sec-Fetch-Site", "cross-site"), http.StatusForbidden, errcode.PermDenied)
	// A read by another origin's page (an app's, a sandboxed one) does not
	// count as the signed-in person's; following a link does.
	for name, hdr := range map[string][]string{
		"cross-site fetch":           {"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "empty"},
		"same-site fetch":            {"Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "empty"},
		"cross-site frame":           {"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "iframe"},
		"a sandboxed page, no SFS":   {"Origin", "null"},
		"another origin, no SFS":     {"Origin", "http://app.example.com:9001"},
		"same-site websocket":        {"Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "websocket", "Sec-Fetch-Dest", "websocket"},
		"cross-site image (no-cors)": {"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "image"},
	} {
		a := h.send("GET", api+"/me", "", append([]string{"Authorization", "", "Cookie", ck}, hdr...)...)
		wantError(t, name, a, http.StatusForbidden, errcode.PermDenied)
	}
	wantStatus(t, "cross-site navigation", h.send("GET", api+"/me", "", "Authorization", "", "Cookie", ck, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"), http.StatusOK)
	wantStatus(t, "a public route from another origin", h.send("GET", api+"/setup", "", "Authorization", "", "Cookie", ck, "Sec-Fetch-Site", "cross-site"), http.StatusOK)
	// A sandboxed page's POST (Origin: null) is refused by the
	// cross-origin check before anything else.
	wantError(t, "Origin null", post("Authorization", "", "Cookie", ck, "Origin", "null"), http.StatusForbidden, errcode.PermDenied)
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
