package edge

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/authz"
)

// TestSpoofedHeadersAndCookiesNeverReachTheApp sends, as raw bytes (so
// that no client library tidies them), requests carrying forged X-Svc-*
// headers in every spelling a server could read as one, forged forwarding
// headers, and svc_* cookies hidden every way a Cookie header allows. The
// app must receive exactly the edge's headers with the edge's values, and
// none of the marker EVIL.
func TestSpoofedHeadersAndCookiesNeverReachTheApp(t *testing.T) {
	w := newWorld(t)
	alice := w.newPerson("alice")
	w.group("eng", alice)
	app := w.addApp("notes", 9001)
	other := w.addApp("other", 9002)
	w.grant(app.id, authz.KindUser, alice.user.ID)
	p := w.edge(edgeOpts{})
	srv := serve(t, p.PortHandler(9001))
	addr := strings.TrimPrefix(srv, "http://")

	// A real assertion, for another app: replaying it here must not work.
	foreign, err := w.signer.Assertion(bg, Claims{Subject: alice.user.ID, Audience: other.id})
	if err != nil {
		t.Fatal(err)
	}
	auth := "Authorization: Bearer " + alice.token + "\r\n"
	cookieAuth := "Cookie: " + appCookie(app.id) + "=" + w.appCookieFor(alice, app.id) + "\r\n"
	cases := []struct {
		name    string
		headers string // header lines, each ending in CRLF
		// keep lists cookies the app must still receive.
		keep []string
		// markerIn names the one header allowed to carry the marker (a
		// folded line, which is that header's value, not a header).
		markerIn string
	}{
		{name: "forged assertion", headers: auth + "X-Svc-Assertion: EVIL.forged.jwt\r\n"},
		{name: "lower case", headers: auth + "x-svc-assertion: EVIL\r\n"},
		{name: "upper case", headers: auth + "X-SVC-ASSERTION: EVIL\r\n"},
		{name: "underscores", headers: auth + "X_Svc_Assertion: EVIL\r\n"},
		{name: "underscores lower case", headers: auth + "x_svc_email: EVIL@evil.test\r\n"},
		{name: "underscores upper case", headers: auth + "X_SVC_USER_ID: usr_EVIL\r\n"},
		{name: "mixed separators", headers: auth + "X-Svc_Email: EVIL\r\n"},
		{name: "duplicates", headers: auth + "X-Svc-Email: EVIL1\r\nX-Svc-Email: EVIL2\r\nx-svc-email: EVIL3\r\n"},
		{name: "user id", headers: auth + "X-Svc-User-Id: usr_EVIL\r\n"},
		{name: "groups", headers: auth + "X-Svc-Groups: admins,EVIL\r\n"},
		{name: "name", headers: auth + "X-Svc-Name: EVIL\r\n"},
		{name: "app id", headers: auth + "X-Svc-App-Id: app_EVIL\r\n"},
		{name: "an X-Svc header the edge does not set", headers: auth + "X-Svc-Role: EVIL\r\n"},
		{name: "bare prefix", headers: auth + "X-Svc-: EVIL\r\n"},
		{name: "empty forged assertion", headers: auth + "X-Svc-Assertion:\r\n"},
		{name: "folded value", headers: auth + "X-Svc-Email: EVIL\r\n EVIL-continued\r\n"},
		{name: "a header folded into another", headers: auth + "X-Note: fine\r\n X-Svc-Email: EVIL\r\n", markerIn: "X-Note"},
		{name: "hop-by-hop trick", headers: auth + "Connection: X-Svc-Assertion, X-Svc-Email\r\nX-Svc-Assertion: EVIL\r\n"},
		{name: "replayed assertion of another app", headers: auth + "X-Svc-Assertion: " + foreign + "\r\n"},
		{name: "forwarded", headers: auth + "Forwarded: for=EVIL;host=EVIL;proto=EVIL\r\n"},
		{name: "forwarded host", headers: auth + "X-Forwarded-Host: EVIL.test\r\n"},
		{name: "forwarded proto", headers: auth + "X-Forwarded-Proto: EVIL\r\n"},
		{name: "forwarded prefix", headers: auth + "X-Forwarded-Prefix: /EVIL\r\n"},
		{name: "forwarded host, underscores", headers: auth + "X_Forwarded_Host: EVIL\r\nx_forwarded_proto: EVIL\r\n"},
		{name: "session cookie among others", headers: auth + "Cookie: svc_session=EVIL; a=1\r\n", keep: []string{"a=1"}},
		{name: "admission cookie in the middle", headers: auth + "Cookie: a=1; svc_passcode_" + app.id + "=EVIL; b=2\r\n", keep: []string{"a=1", "b=2"}},
		{name: "two Cookie headers", headers: auth + "Cookie: a=1\r\nCookie: svc_x=EVIL\r\n", keep: []string{"a=1"}},
		{name: "cookie names in other cases", headers: auth + "Cookie: SVC_SESSION=EVIL; Svc_Other=EVIL; c=3\r\n", keep: []string{"c=3"}},
		{name: "quoted cookie value", headers: auth + "Cookie: svc_x=\"EVIL;svc_y=EVIL\"; c=3\r\n", keep: []string{"c=3"}},
		{name: "spaced cookie", headers: auth + "Cookie:  svc_y = EVIL ;d=4\r\n", keep: []string{"d=4"}},
		{name: "cookie without a value", headers: auth + "Cookie: svc_flagEVIL; e=5\r\n", keep: []string{"e=5"}},
		{name: "cookies without spaces", headers: auth + "Cookie: a=1;svc_z=EVIL;b=2\r\n", keep: []string{"a=1", "b=2"}},
		{name: "signed in by cookie, svc cookie hidden after it", headers: cookieAuth + "Cookie: svc_passcode_x=EVIL\r\n"},
		{name: "prefixed svc cookies", headers: auth + "Cookie: __Host-svc_session=EVIL; __secure-SVC_app_x=EVIL; __Host-app=1\r\n", keep: []string{"__Host-app=1"}},
		{name: "the app cookie", headers: cookieAuth + "Cookie: f=6\r\n", keep: []string{"f=6"}},
		{name: "X-Real-IP", headers: auth + "X-Real-IP: 6.6.6.6-EVIL\r\nx_real_ip: EVIL\r\n"},
		{name: "CDN client addresses", headers: auth + "True-Client-IP: EVIL\r\nCF-Connecting-IP: EVIL\r\nFastly-Client-IP: EVIL\r\nX-Cluster-Client-IP: EVIL\r\n"},
		{name: "other client addresses", headers: auth + "X-Client-IP: EVIL\r\nClient-IP: EVIL\r\nX-Original-Forwarded-For: EVIL\r\nForwarded-For: EVIL\r\nX-Forwarded: for=EVIL\r\n"},
		{name: "forwarded server, port and scheme", headers: auth + "X-Forwarded-Server: EVIL\r\nX-Forwarded-Port: EVIL\r\nX-Forwarded-Ssl: EVIL\r\nX-Forwarded-Scheme: EVIL\r\nFront-End-Https: EVIL\r\nX-Url-Scheme: EVIL\r\n"},
		{name: "path and host overrides", headers: auth + "X-Original-URL: /EVIL\r\nX-Rewrite-URL: /EVIL\r\nX-Original-Host: EVIL\r\nX-Host: EVIL\r\n"},
		{name: "lower-case bearer scheme", headers: "authorization: bearer " + alice.token + "\r\nX-Svc-Email: EVIL\r\n"},
	}
	want := map[string]string{
		AssertionHeader: "", // checked by the app's verification
		HeaderUserID:    alice.user.ID,
		HeaderEmail:     "alice@example.test",
		HeaderName:      "Alice Example",
		HeaderGroups:    "eng",
		HeaderAppID:     app.id,
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, body := raw(t, addr, "GET /spoof HTTP/1.1\r\nHost: notes.test:9001\r\n"+tc.headers+"\r\n")
			rep := reached(t, res, body)
			got := svcHeaders(rep)
			if !slices.Equal(sortedKeys(got), sortedKeys(toLists(want))) {
				t.Fatalf("X-Svc-* headers received: %v; want exactly %v", got, sortedKeys(toLists(want)))
			}
			for k, v := range want {
				if len(got[k]) != 1 || (v != "" && got[k][0] != v) {
					t.Errorf("%s = %q, want one value %q", k, got[k], v)
				}
			}
			if a := got[AssertionHeader]; len(a) == 1 && a[0] == foreign {
				t.Error("the app received the other app's assertion")
			}
			if rep.Claims["sub"] != alice.user.ID || rep.Claims["email"] != "alice@example.test" {
				t.Errorf("claims %v", rep.Claims)
			}
			for k, v := range rep.Header {
				if k != tc.markerIn && strings.Contains(strings.Join(v, "\n"), "EVIL") {
					t.Errorf("the marker reached the app in %s: %q", k, v)
				}
				if k != "X-Forwarded-For" && (strings.Contains(k, "Forwarded") || strings.Contains(k, "Ip")) && k != "X-Forwarded-Host" && k != "X-Forwarded-Proto" {
					t.Errorf("forwarding header %s = %q reached the app", k, v)
				}
			}
			if rep.Header["X-Forwarded-Host"][0] != "notes.test:9001" || rep.Header["X-Forwarded-Proto"][0] != "http" {
				t.Errorf("forwarding headers %v", rep.Header)
			}
			for _, line := range rep.CookieLine {
				if containsFold(line, "svc_") || strings.Contains(line, "EVIL") {
					t.Errorf("Cookie line %q reached the app", line)
				}
			}
			if !slices.Equal(rep.Cookies, tc.keep) {
				t.Errorf("cookies received %q, want %q", rep.Cookies, tc.keep)
			}
			if _, ok := rep.Header["Authorization"]; ok {
				t.Errorf("Authorization reached the app: %q", rep.Header["Authorization"])
			}
		})
	}

	// Header names a server would not parse are refused by net/http
	// before the edge sees them.
	for _, bad := range []string{"X-Svc-Email : EVIL\r\n", "X-Svc-Email\t: EVIL\r\n", " X-Svc-Email: EVIL\r\n"} {
		res, body := raw(t, addr, "GET /spoof HTTP/1.1\r\nHost: notes.test\r\n"+bad+auth+"\r\n")
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: status %d, want 400: %s", bad, res.StatusCode, body)
		}
	}
	if n := app.hits.Load(); n != int64(len(cases)) {
		t.Errorf("the app saw %d requests, want %d", n, len(cases))
	}
}

func toLists(m map[string]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range m {
		out[k] = []string{v}
	}
	return out
}

// TestCredentialsNeverReachTheApp: svc's token and session are taken out;
// what belongs to the app (its own Authorization scheme, its cookies)
// passes.
func TestCredentialsNeverReachTheApp(t *testing.T) {
	w := newWorld(t)
	alice := w.newPerson("alice")
	app := w.addApp("notes", 9001)
	w.grant(app.id, authz.KindUser, alice.user.ID)
	p := w.edge(edgeOpts{})
	srv := serve(t, p.PortHandler(9001))

	rep := open(t, srv+"/", bearer(alice.token))
	if _, ok := rep.Header["Authorization"]; ok {
		t.Errorf("svc's bearer token reached the app: %q", rep.Header["Authorization"])
	}
	rep = open(t, srv+"/", w.as(alice, app), consoleSession(alice), withCookie("theme", "dark"), header("Authorization", "Basic dXNlcjpwdw=="))
	if got := rep.Header["Authorization"]; len(got) != 1 || got[0] != "Basic dXNlcjpwdw==" {
		t.Errorf("the app's own Authorization = %q, want it passed through", got)
	}
	if !slices.Equal(rep.Cookies, []string{"theme=dark"}) {
		t.Errorf("cookies %q, want only the app's", rep.Cookies)
	}
	b, _ := json.Marshal(rep)
	for _, secret := range []string{alice.token, alice.cookie, alice.service} {
		if strings.Contains(string(b), secret) {
			t.Error("an svc credential reached the app")
		}
	}
	// A bearer token of the app's own (not svc's shape) is the app's.
	w.grant(app.id, authz.KindAnonymous, "")
	rep = open(t, srv+"/", bearer("app-own-token"))
	if got := rep.Header["Authorization"]; len(got) != 1 || got[0] != "Bearer app-own-token" {
		t.Errorf("the app's own bearer token = %q, want it passed through", got)
	}
}

// TestAnAppCannotSetSvcCookies: an app's Set-Cookie of an svc_* cookie
// (a planted session, a forged admission) is dropped from its answer.
func TestAnAppCannotSetSvcCookies(t *testing.T) {
	w := newWorld(t)
	alice := w.newPerson("alice")
	app := w.addApp("notes", 9001)
	w.grant(app.id, authz.KindUser, alice.user.ID)
	srv := serve(t, w.edge(edgeOpts{}).PortHandler(9001))
	res, _ := do(t, "GET", srv+"/set-cookie", bearer(alice.token))
	if got := res.Header.Values("Set-Cookie"); !slices.Equal(got, []string{"app_pref=dark; Path=/"}) {
		t.Errorf("Set-Cookie = %q, want only the app's own cookie", got)
	}
}
