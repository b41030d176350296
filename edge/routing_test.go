package edge

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/authz"
)

// apiStub stands for the API behind Front.
var apiStub = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Api", "1")
	_, _ = io.WriteString(w, "the API")
})

// isAPI GETs url and fails unless the API answered.
func isAPI(t *testing.T, url string, opts ...reqOpt) {
	t.Helper()
	res, body := do(t, "GET", url, opts...)
	if res.Header.Get("X-Api") != "1" {
		t.Fatalf("status %d, want the API's answer: %s", res.StatusCode, body)
	}
}

func TestSubdomainRouting(t *testing.T) {
	w := newWorld(t)
	alice := w.newPerson("alice")
	app := w.addApp("notes", 0)
	w.grant(app.id, authz.KindUser, alice.user.ID)
	p := w.edge(edgeOpts{cfg: Config{Mode: ModeSubdomain, BaseDomain: "Apps.Test"}})
	srv := serve(t, p.Front(apiStub))

	for _, host := range []string{"notes.apps.test", "NOTES.Apps.TEST:8443", "notes.apps.test.", "[notes.apps.test]"} {
		if host == "[notes.apps.test]" {
			continue // not a host name; net/http refuses such a Host
		}
		rep := open(t, srv+"/x?y=1", bearer(alice.token), hostHeader(host))
		if rep.Host != host || rep.Header["X-Forwarded-Host"][0] != host || rep.Path != "/x" || rep.Query != "y=1" {
			t.Errorf("Host %s: the app got host %q, X-Forwarded-Host %q, path %q, query %q", host, rep.Host, rep.Header["X-Forwarded-Host"], rep.Path, rep.Query)
		}
		if _, ok := rep.Header["X-Forwarded-Prefix"]; ok {
			t.Errorf("X-Forwarded-Prefix outside path mode: %q", rep.Header["X-Forwarded-Prefix"])
		}
	}
	for _, host := range []string{"apps.test", "apps.test:8080", "localhost", "notes.apps.test.evil", "xapps.test"} {
		isAPI(t, srv+"/api/v1/me", bearer(alice.token), hostHeader(host))
	}
	deny(t, srv+"/", 404, "NOT_FOUND", bearer(alice.token), hostHeader("nope.apps.test"))
	deny(t, srv+"/", 404, "NOT_FOUND", bearer(alice.token), hostHeader("a.notes.apps.test"))
	deny(t, srv+"/", 401, "AUTH_REQUIRED", hostHeader("nope.apps.test"))
	deny(t, srv+"/", 401, "AUTH_REQUIRED", hostHeader("notes.apps.test"))

	// A browser is sent to the console's handoff on the base domain, at
	// the console's port, whatever Host it sent.
	p = w.edge(edgeOpts{cfg: Config{Mode: ModeSubdomain, BaseDomain: "Apps.Test", ConsolePort: 8443}})
	srv = serve(t, p.Front(apiStub))
	res, _ := do(t, "GET", srv+"/", browser(), hostHeader("notes.apps.test:9999"))
	if loc, _ := handoffLocation(t, res); loc != "http://apps.test:8443"+HandoffEndpoint+"?next="+url.QueryEscape("http://notes.apps.test:8443/") {
		t.Errorf("Location %q", loc)
	}
}

func TestPathRouting(t *testing.T) {
	w := newWorld(t)
	alice := w.newPerson("alice")
	app := w.addApp("notes", 0)
	w.grant(app.id, authz.KindUser, alice.user.ID)
	p := w.edge(edgeOpts{cfg: Config{Mode: ModePath}})
	srv := serve(t, p.Front(apiStub))

	cases := []struct {
		path, wantPath, wantRaw, wantQuery string
	}{
		{"/apps/notes/", "/", "", ""},
		{"/apps/notes/a/b?q=1&r=2", "/a/b", "", "q=1&r=2"},
		{"/apps/NOTES/x", "/x", "", ""},
		{"/apps/notes/a%2Fb/c", "/a/b/c", "/a%2Fb/c", ""},
		{"/apps/notes/%7Euser", "/~user", "/%7Euser", ""}, // the escaping the client chose
		{"/apps/n%6Ftes/x", "/x", "", ""},
	}
	for _, tc := range cases {
		rep := open(t, srv+tc.path, bearer(alice.token), header("X-Forwarded-Prefix", "/evil"))
		if rep.Path != tc.wantPath || rep.RawPath != tc.wantRaw || rep.Query != tc.wantQuery {
			t.Errorf("%s: the app got path %q raw %q query %q; want %q %q %q", tc.path, rep.Path, rep.RawPath, rep.Query, tc.wantPath, tc.wantRaw, tc.wantQuery)
		}
		if got := rep.Header["X-Forwarded-Prefix"]; len(got) != 1 || (got[0] != "/apps/notes" && got[0] != "/apps/NOTES" && got[0] != "/apps/n%6Ftes") {
			t.Errorf("%s: X-Forwarded-Prefix %q", tc.path, got)
		}
	}
	// Without the slash: redirected to add it, for every slug alike.
	for _, path := range []string{"/apps/notes?q=1", "/apps/nope"} {
		res, _ := do(t, "GET", srv+path)
		want := map[string]string{"/apps/notes?q=1": "/apps/notes/?q=1", "/apps/nope": "/apps/nope/"}[path]
		if res.StatusCode != http.StatusPermanentRedirect || res.Header.Get("Location") != want {
			t.Errorf("%s: %d %q, want 308 to %s", path, res.StatusCode, res.Header.Get("Location"), want)
		}
	}
	deny(t, srv+"/apps/nope/", 404, "NOT_FOUND", bearer(alice.token))
	deny(t, srv+"/apps/", 404, "NOT_FOUND", bearer(alice.token))
	deny(t, srv+"/apps/nope/", 401, "AUTH_REQUIRED")
	deny(t, srv+"/apps/notes/", 401, "AUTH_REQUIRED")
	for _, path := range []string{"/", "/api/v1/apps", "/apps", "/login", "/.well-known/jwks.json"} {
		isAPI(t, srv+path, bearer(alice.token))
	}
	// The console's app pages, /apps/<app ID>/… (an ID has an underscore, a
	// slug never does), are the API's (the console's) whoever asks.
	for _, path := range []string{"/apps/" + app.id, "/apps/" + app.id + "/", "/apps/" + app.id + "/deploys", "/apps/app_x/logs?follow=1"} {
		isAPI(t, srv+path)
	}
}

func TestConsoleAppPage(t *testing.T) {
	for path, want := range map[string]bool{
		"/apps/app_01HZ":         true,
		"/apps/app_01HZ/":        true,
		"/apps/app_01HZ/deploys": true,
		"/apps/notes/app_x":      false,
		"/apps/notes/":           false,
		"/apps/":                 false,
		"/apps":                  false,
		"/app_x":                 false,
		"/admin/app_x":           false,
	} {
		if got := ConsoleAppPage(path); got != want {
			t.Errorf("ConsoleAppPage(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestPortModeLeavesTheMainListenerToTheAPI: in port mode Front adds
// nothing.
func TestPortModeLeavesTheMainListenerToTheAPI(t *testing.T) {
	w := newWorld(t)
	app := w.addApp("notes", 9001)
	w.grant(app.id, authz.KindAnonymous, "")
	p := w.edge(edgeOpts{})
	srv := serve(t, p.Front(apiStub))
	for _, path := range []string{"/apps/notes/", "/"} {
		isAPI(t, srv+path, hostHeader("notes.svc.localhost"))
	}
}

// TestAppURL: where each mode serves an app, as the API's url field says:
// built from the configuration and the address the connection came to
// (loopback and unspecified addresses are localhost), never from Host.
func TestAppURL(t *testing.T) {
	w := newWorld(t)
	ports := map[string]int{"notes": 9007}
	// req is a request that came to local (the listener's address) with
	// a Host header of its client's choosing.
	req := func(local string, tls bool) *http.Request {
		scheme := "http"
		if tls {
			scheme = "https"
		}
		r := httptest.NewRequest("GET", scheme+"://evil.example:666/api/v1/apps", nil)
		addr, err := net.ResolveTCPAddr("tcp", local)
		if err != nil {
			t.Fatal(err)
		}
		return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
	}
	cases := []struct {
		name string
		cfg  Config
		r    *http.Request
		slug string
		want string
	}{
		{"port", Config{ConsolePort: 8080}, req("192.0.2.10:8080", false), "notes", "http://192.0.2.10:9007/"},
		{"port, loopback", Config{}, req("127.0.0.1:8080", false), "notes", "http://localhost:9007/"},
		{"port, unspecified", Config{}, req("[::]:8080", false), "notes", "http://localhost:9007/"},
		{"port, IPv6", Config{}, req("[2001:db8::1]:8080", false), "notes", "http://[2001:db8::1]:9007/"},
		{"port, no port held", Config{}, req("192.0.2.10:8080", false), "draft", ""},
		{"port, external URL", Config{ExternalURL: "https://svc.example.com"}, req("10.0.0.1:8080", false), "notes", "http://svc.example.com:9007/"},
		{"port, apps domain", Config{ExternalURL: "https://svc.example.com", AppsDomain: "Apps.Example.NET"}, req("10.0.0.1:8080", false), "notes", "http://apps.example.net:9007/"},
		{"subdomain", Config{Mode: ModeSubdomain, BaseDomain: "svc.localhost", ConsolePort: 8080}, req("127.0.0.1:8080", false), "notes", "http://notes.svc.localhost:8080/"},
		{"subdomain, TLS", Config{Mode: ModeSubdomain, BaseDomain: "apps.example.com", ConsolePort: 443}, req("192.0.2.1:443", true), "draft", "https://draft.apps.example.com/"},
		{"subdomain, external URL", Config{Mode: ModeSubdomain, BaseDomain: "apps.example.com", ExternalURL: "https://svc.example.com:8443/"}, req("127.0.0.1:8080", false), "notes", "https://notes.apps.example.com:8443/"},
		{"subdomain, apps domain", Config{Mode: ModeSubdomain, BaseDomain: "svc.example.com", AppsDomain: "apps.example.net", ExternalURL: "https://svc.example.com/"}, req("127.0.0.1:8080", false), "Notes", "https://notes.apps.example.net/"},
		{"path", Config{Mode: ModePath, ConsolePort: 8080}, req("127.0.0.1:8080", false), "notes", "http://localhost:8080/apps/notes/"},
		{"path, external URL", Config{Mode: ModePath, ExternalURL: "https://svc.example.com/"}, req("127.0.0.1:8080", false), "draft", "https://svc.example.com/apps/draft/"},
	}
	for _, tc := range cases {
		p := w.edge(edgeOpts{cfg: tc.cfg})
		if got := p.AppURL(tc.r, tc.slug, ports[strings.ToLower(tc.slug)]); got != tc.want {
			t.Errorf("%s: AppURL = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestNewRefusesABadConfiguration(t *testing.T) {
	w := newWorld(t)
	d := Deps{Routes: w.table, Identity: w.ident, AppSessions: w.ident, Store: w.store, Signer: w.signer}
	for name, cfg := range map[string]Config{
		"mode":               {Mode: "host"},
		"subdomain, no base": {Mode: ModeSubdomain},
		"external URL":       {ExternalURL: "svc.example.com"},
		"proxy upstream":     {ProxyUpstream: "ftp://router"},
	} {
		if _, err := New(cfg, d); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	if _, err := New(Config{}, Deps{Routes: w.table, Identity: w.ident, Store: w.store}); err == nil {
		t.Error("New accepted an edge without a signer")
	}
}
