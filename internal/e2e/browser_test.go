package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/browsertest"
	"github.com/svchost/svc/internal/testserver"
)

// Real-browser tests: a headless Chromium (internal/browsertest) signed in
// to the real binary's console opens a hostile tenant's app, whose pages
// (served by hostileApp, which plays every app of the server) try what
// issue 14 found: calling the console's API with the visitor's authority,
// tossing a session cookie onto the console, and posting to another app as
// the visitor. Every attack must fail, checked where it would have had its
// effect (the API's state, what the other app's upstream received).
//
// Hosts are *.localhost: Chromium resolves them to loopback itself and
// treats them as secure contexts, like any https origin, and separate
// labels are separate sites (svc.localhost and apps.localhost share no
// cookies), so the tests see the cookie rules a real deployment sees.
//
// Run them with:
//
//	go test -count=1 -run 'TestBrowser' ./internal/e2e/
//
// (they skip without /usr/bin/chromium; SVC_REQUIRE_BROWSER=1 makes that a
// failure).

// webServer is a server of the browser tests: one routing mode, the
// console at an external URL on svc.localhost, every app served by one
// hostile upstream.
type webServer struct {
	*appServer
	mode    string
	console string // http://svc.localhost:<port>
	hostile *hostileApp
}

// startWebServer starts svc serve in mode with the console at
// http://svc.localhost:<a free port>; env adds settings.
func startWebServer(t *testing.T, mode string, env ...string) *webServer {
	t.Helper()
	first, err := testserver.FreePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	console := "http://svc.localhost:" + strconv.Itoa(first)
	hostile := startHostileApp(t)
	srv := startAppServer(t, "web-"+mode, append([]string{
		"SVC_SERVER_ADDR=127.0.0.1:" + strconv.Itoa(first),
		"SVC_SERVER_ROUTING_MODE=" + mode,
		"SVC_SERVER_EXTERNAL_URL=" + console,
		"SVC_SERVER_BASE_DOMAIN=svc.localhost",
		"SVC_SERVER_PROXY_UPSTREAM=" + hostile.srv.URL,
		"SVC_APP_PORT_START=" + strconv.Itoa(first+1),
		"SVC_APP_PORT_END=" + strconv.Itoa(first+3),
	}, env...)...)
	return &webServer{appServer: srv, mode: mode, console: console, hostile: hostile}
}

// webApp is an app of a webServer, deployed (so that it has a port in
// port mode).
type webApp struct {
	id, slug, url string
}

// app deploys the static sample (nothing to build) as an app.
func (s *webServer) app(t *testing.T, name string) webApp {
	t.Helper()
	return s.appOf(t, name, samples[3])
}

// appOf deploys a sample as an app.
func (s *webServer) appOf(t *testing.T, name string, sm sample) webApp {
	t.Helper()
	id, _ := s.onboard(t, name, sm.dir, sm.detector)
	s.deployed(t, id, 0)
	s.waitDeployed(t, id)
	var got struct {
		App struct {
			Slug string  `json:"slug"`
			URL  *string `json:"url"`
		} `json:"app"`
	}
	s.must(t, "GET", "/apps/"+id, nil, http.StatusOK, &got)
	if got.App.URL == nil {
		t.Fatalf("app %s has no url", id)
	}
	// The edge listens once its route table has the app (port mode).
	port := mustPort(t, *got.App.URL)
	deadline := time.Now().Add(scaled(30 * time.Second))
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens at %s: %v", *got.App.URL, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return webApp{id: id, slug: got.App.Slug, url: *got.App.URL}
}

// shareWithEveryone gives an app the grant to everyone (no passcode).
func (s *webServer) shareWithEveryone(t *testing.T, appID string) {
	t.Helper()
	s.must(t, "POST", "/apps/"+appID+"/grants", map[string]any{"plane": "data", "principal_kind": "anonymous"}, http.StatusCreated, nil)
}

// member creates an account and signs it in through the API, returning its
// session cookie's value (what an attacker has of their own account).
func (s *webServer) member(t *testing.T, name string) (userID, session string) {
	t.Helper()
	var created struct {
		User struct{ ID string } `json:"user"`
	}
	pw := name + "-password-93d1"
	s.must(t, "POST", "/users", map[string]any{"username": name, "display_name": name, "password": pw}, http.StatusCreated, &created)
	body, _ := json.Marshal(map[string]string{"username": name, "password": pw})
	res, err := http.Post(s.p.Base()+"/api/v1/sessions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if strings.HasSuffix(c.Name, "svc_session") && c.Value != "" {
			return created.User.ID, c.Value
		}
	}
	t.Fatalf("sign-in of %s set no session cookie: %v", name, res.Header["Set-Cookie"])
	return "", ""
}

// browse starts a browser.
func browse(t *testing.T) *browsertest.Browser {
	return browsertest.Start(t, browsertest.Options{})
}

// signInTab signs a tab in on the console as a person would (the console's
// page posting to the API from its own origin) and returns the status.
func (s *webServer) signInTab(t *testing.T, tab *browsertest.Tab, username, password string) {
	t.Helper()
	tab.Go(s.console + "/api/v1/setup")
	var status int
	body, _ := json.Marshal(map[string]string{"username": username, "password": password})
	tab.MustEval(`fetch('/api/v1/sessions', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: `+strconv.Quote(string(body))+`}).then(r => r.status)`, &status)
	if status != http.StatusOK {
		t.Fatalf("sign-in from the console's origin: %d", status)
	}
}

// whoAmI asks the console's API, from the console's own origin in tab (a
// page outside /api/v1, where a tossed cookie would be sent), who is
// signed in: the user's username, or the refusal's code.
func (s *webServer) whoAmI(t *testing.T, tab *browsertest.Tab) (status int, who string) {
	t.Helper()
	tab.Go(s.console + "/healthz")
	var out struct {
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
	}
	tab.MustEval(`fetch('/api/v1/me').then(async r => ({status: r.status, body: await r.json()}))`, &out)
	var me struct {
		User struct{ Username string } `json:"user"`
		Code string                    `json:"code"`
	}
	_ = json.Unmarshal(out.Body, &me)
	if me.User.Username != "" {
		return out.Status, me.User.Username
	}
	return out.Status, me.Code
}

// result awaits an attack page's window.__result.
func result(t *testing.T, tab *browsertest.Tab, out any) {
	t.Helper()
	tab.MustEval(`window.__result`, out)
}

// tokenNames lists the admin's own tokens by name.
func (s *webServer) tokenNames(t *testing.T) []string { return s.names(t, "/tokens", "name") }

// usernames lists every account.
func (s *webServer) usernames(t *testing.T) []string {
	return s.names(t, "/users?limit=100", "username")
}

// names reads one string field of every item of a list.
func (s *webServer) names(t *testing.T, path, field string) []string {
	t.Helper()
	var list struct {
		Items []map[string]any `json:"items"`
	}
	s.must(t, "GET", path, nil, http.StatusOK, &list)
	var out []string
	for _, it := range list.Items {
		v, _ := it[field].(string)
		out = append(out, v)
	}
	return out
}

// execAudited says whether a terminal was opened in the app (app.exec).
func (s *webServer) execAudited(t *testing.T, appID string) bool {
	t.Helper()
	var list struct {
		Items []struct{ Action string } `json:"items"`
	}
	s.must(t, "GET", "/audit?action=app.exec&app_id="+url.QueryEscape(appID), nil, http.StatusOK, &list)
	return len(list.Items) > 0
}

// TestBrowserPathModeAppsCannotUseTheConsole: in path mode an app's page
// is on the console's origin. Opened by a signed-in administrator, a
// hostile app's page calls POST /api/v1/tokens, POST /api/v1/users, GET
// /api/v1/me and opens the exec websocket into another app. Before the fix
// all four worked (same origin: the session cookie went along and every
// cross-origin check passed; the token and the user were created, /me
// answered the administrator and the terminal printed the command's
// output). Now the page has an opaque origin (the edge's CSP sandbox): the
// browser sends no cookie with its requests, the API's cross-origin checks
// refuse Origin: null, and nothing is created or opened.
func TestBrowserPathModeAppsCannotUseTheConsole(t *testing.T) {
	s := startWebServer(t, "path")
	evil := s.app(t, "evil")
	other := s.appOf(t, "other", samples[2]) // python-hello: a process to open a terminal in
	s.shareWithEveryone(t, evil.id)
	tab := browse(t).Tab()
	s.signInTab(t, tab, "admin", adminPassword)

	ws := "ws://svc.localhost:" + mustPort(t, s.console) + "/api/v1/apps/" + other.id + "/exec?command=echo&command=pwned-by-app"
	hops := tab.Go(evil.url + "attack-api?ws=" + url.QueryEscape(ws))
	if len(hops) == 0 || hops[len(hops)-1].Status != http.StatusOK {
		t.Fatalf("the hostile page did not load: %+v", hops)
	}
	var got struct {
		Origin  *string         `json:"origin"`
		Cookies string          `json:"cookies"`
		Token   json.RawMessage `json:"token"`
		User    json.RawMessage `json:"user"`
		Me      struct {
			Status int    `json:"status"`
			Body   string `json:"body"`
			Error  string `json:"error"`
		} `json:"me"`
		Exec struct {
			Opened  bool   `json:"opened"`
			Out     string `json:"out"`
			Code    int    `json:"code"`
			Timeout bool   `json:"timeout"`
			Error   string `json:"error"`
		} `json:"exec"`
	}
	result(t, tab, &got)
	origin := "(none)"
	if got.Origin != nil {
		origin = *got.Origin
	}
	t.Logf("the hostile page saw: origin %q, cookies %q, token %s, user %s, me %+v, exec %+v", origin, got.Cookies, got.Token, got.User, got.Me, got.Exec)

	if slices.Contains(s.tokenNames(t), "minted-by-a-hostile-app") {
		t.Error("the app's page minted a token as the administrator")
	}
	if slices.Contains(s.usernames(t), "planted-by-app") {
		t.Error("the app's page created an account as the administrator")
	}
	if got.Me.Status == http.StatusOK || strings.Contains(got.Me.Body, `"admin"`) {
		t.Errorf("the app's page read /api/v1/me: %+v", got.Me)
	}
	if got.Exec.Opened || strings.Contains(got.Exec.Out, "pwned-by-app") || s.execAudited(t, other.id) {
		t.Errorf("the app's page opened a terminal in another app: %+v", got.Exec)
	}
	if got.Origin != nil && *got.Origin != "null" {
		t.Errorf("the app's page runs with origin %q; want an opaque origin (null)", *got.Origin)
	}
}

// mustPort is the port of a URL.
func mustPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Port() == "" {
		t.Fatalf("%q has no port", raw)
	}
	return u.Port()
}

// TestBrowserCookieTossing: in port and subdomain modes an app's script
// sets svc_session for the console (the same host in port mode, cookies
// ignoring ports; Domain=<base domain> in subdomain mode) to the attacker's
// own session. Before the fix the victim's console then acted as the
// attacker (the API read the tossed cookie first: it has the longer path).
// Now a request carrying two session cookies is refused as ambiguous, and
// the refusal clears them, so the victim signs in again as themselves.
func TestBrowserCookieTossing(t *testing.T) {
	for _, mode := range []string{"port", "subdomain"} {
		t.Run(mode, func(t *testing.T) {
			s := startWebServer(t, mode)
			evil := s.app(t, "evil")
			s.shareWithEveryone(t, evil.id)
			_, malloryCookie := s.member(t, "mallory")
			tab := browse(t).Tab()
			s.signInTab(t, tab, "admin", adminPassword)
			if status, who := s.whoAmI(t, tab); who != "admin" {
				t.Fatalf("before: %d %s", status, who)
			}
			toss := evil.url + "toss?path=/api/v1&value=" + url.QueryEscape(malloryCookie)
			if mode == "subdomain" {
				toss += "&domain=svc.localhost"
			}
			tab.Go(toss)
			var tossed struct {
				Set, Error, Now string
			}
			result(t, tab, &tossed)
			t.Logf("the hostile page set %q (error %q; its document.cookie: %q)", tossed.Set, tossed.Error, tossed.Now)
			for _, c := range tab.Cookies(s.console + "/api/v1/me") {
				t.Logf("cookie for the console's /api/v1/me: %s=%.12s… domain %s path %s httpOnly %v", c.Name, c.Value, c.Domain, c.Path, c.HTTPOnly)
			}
			status, who := s.whoAmI(t, tab)
			if who == "mallory" {
				t.Fatalf("after the toss the victim's console acts as the attacker (%d)", status)
			}
			if status != http.StatusUnauthorized || who != "AUTH_INVALID" {
				t.Errorf("after the toss the console answered %d %s; want 401 AUTH_INVALID (ambiguous)", status, who)
			}
			// The refusal cleared both copies; signing in again works, as
			// oneself, and stays so.
			for _, c := range tab.Cookies(s.console + "/api/v1/me") {
				if strings.HasSuffix(c.Name, "svc_session") {
					t.Errorf("a session cookie left after the refusal: %s path %s domain %s", c.Name, c.Path, c.Domain)
				}
			}
			s.signInTab(t, tab, "admin", adminPassword)
			if status, who := s.whoAmI(t, tab); status != http.StatusOK || who != "admin" {
				t.Errorf("signed in again: %d %s", status, who)
			}
		})
	}
}

// TestBrowserCrossAppCSRF: the victim is signed in to app B (a private
// app of theirs); app A's page posts to B, with fetch and with a form.
// Before the fix both reached B's upstream with the victim's assertion
// (the session cookie went along, and the edge authenticated by it). Now
// B's upstream never receives an authenticated request from them.
func TestBrowserCrossAppCSRF(t *testing.T) {
	for _, mode := range []string{"port", "subdomain", "path"} {
		t.Run(mode, func(t *testing.T) {
			s := startWebServer(t, mode)
			evil := s.app(t, "evil")
			notes := s.app(t, "notes")
			s.shareWithEveryone(t, evil.id)
			tab := browse(t).Tab()
			s.signInTab(t, tab, "admin", adminPassword)
			// The victim opens B: it works, as them.
			hops := tab.Go(notes.url + "home")
			if opened := s.hostile.hits(notes.id, "/home"); len(opened) == 0 || opened[len(opened)-1].UserID == "" {
				t.Fatalf("the victim could not open their own app: %+v (hops %+v)", opened, hops)
			}
			tab.Go(evil.url + "csrf?target=" + url.QueryEscape(notes.url))
			var got map[string]any
			result(t, tab, &got)
			t.Logf("the hostile page reports %v", got)
			// B is private: anything of A's that reached it was let in as
			// the victim.
			for _, h := range append(s.hostile.hits(notes.id, "/fetch"), s.hostile.hits(notes.id, "/form")...) {
				t.Errorf("app B received %s %s as %q from app A's page", h.Method, h.Path, h.UserID)
			}
		})
	}
}

// TestBrowserHandoff: how a real browser opens apps, in each routing mode.
// Signed in on the console, opening a private app follows the handoff
// (app, console, app's /.svc/handoff, app) and ends on the app with the
// person's assertion and an app cookie of the app's own origin; not signed
// in, it stops at the console's sign-in page, and signing in there and
// following its next gets to the app; an app behind a passcode sends the
// browser to its passcode page, and the admission given there reaches the
// app's origin through the handoff; a handoff whose next is not one of
// this installation's apps is refused, whatever state it carries.
func TestBrowserHandoff(t *testing.T) {
	for _, mode := range []string{"port", "subdomain", "path"} {
		t.Run(mode, func(t *testing.T) {
			s := startWebServer(t, mode)
			notes := s.app(t, "notes")
			guarded := s.app(t, "guarded")
			s.must(t, "POST", "/apps/"+guarded.id+"/grants", map[string]any{"plane": "data", "principal_kind": "anonymous", "passcode": "open-sesame-42"}, http.StatusCreated, nil)
			b := browse(t)
			var me struct {
				User struct{ ID string } `json:"user"`
			}
			s.must(t, "GET", "/me", nil, http.StatusOK, &me)

			// Not signed in: to the console's sign-in page, then back.
			tab := b.Tab()
			hops := tab.Go(notes.url + "page?x=1")
			login := tab.URL()
			if !strings.HasPrefix(login, s.console+"/login?next=") || len(hops) < 3 || hops[0].Status != http.StatusSeeOther {
				t.Fatalf("not signed in, opening the app ended at %s: %+v", login, hops)
			}
			u, _ := url.Parse(login)
			next := u.Query().Get("next")
			if !strings.HasPrefix(next, "/api/v1/edge/handoff?") {
				t.Fatalf("the sign-in page's next is %q; want the handoff", next)
			}
			s.signInTab(t, tab, "admin", adminPassword)
			hops = tab.Go(s.console + next)
			if got := tab.URL(); got != notes.url+"page?x=1" {
				t.Fatalf("after signing in the handoff ended at %s, want the app page: %+v", got, hops)
			}
			last := s.hostile.hits(notes.id, "/page")
			if len(last) == 0 || last[len(last)-1].UserID != me.User.ID || !last[len(last)-1].Assertion {
				t.Fatalf("the app got %+v; want the administrator's assertion", last)
			}
			for _, h := range last {
				for _, c := range h.Cookies {
					if strings.Contains(strings.ToLower(c), "svc_") {
						t.Errorf("the app received svc's cookie %s", c)
					}
				}
			}
			var appCookie bool
			for _, c := range tab.Cookies(notes.url) {
				switch {
				case c.Name == "svc_app_"+notes.id:
					appCookie = true
					wantPath := "/"
					if mode == "path" {
						wantPath = "/apps/" + notes.slug + "/"
					}
					if !c.HTTPOnly || c.SameSite != "Lax" || strings.HasPrefix(c.Domain, ".") || c.Path != wantPath {
						t.Errorf("the app cookie: httpOnly %v sameSite %s domain %s path %s", c.HTTPOnly, c.SameSite, c.Domain, c.Path)
					}
				case strings.HasPrefix(c.Name, "svc_handoff_"):
					t.Errorf("the handoff's state cookie is left: %s", c.Name)
				case c.Name == "svc_session" && mode == "subdomain":
					t.Errorf("the console's session cookie reaches the app's subdomain: domain %s", c.Domain)
				}
			}
			if !appCookie {
				t.Errorf("no app cookie for %s", notes.url)
			}

			// Signed in: straight through, four answers.
			hops = tab.Go(notes.url + "again")
			if tab.URL() != notes.url+"again" || len(hops) != 1 {
				t.Errorf("with the app cookie: %+v", hops)
			}
			second := s.app(t, "second")
			hops = tab.Go(second.url)
			if tab.URL() != second.url || len(hops) != 4 {
				t.Errorf("signed in, a second app: ended at %s after %+v; want the handoff's three redirects and the app", tab.URL(), hops)
			}

			// A passcode app: to its passcode page, then through.
			pc := browse(t).Tab()
			pc.Go(guarded.url)
			page := pc.URL()
			if !strings.HasPrefix(page, s.console+"/passcode/"+guarded.id+"?next=") {
				t.Fatalf("a passcode app sent the browser to %s", page)
			}
			var status int
			pc.MustEval(`fetch('/api/v1/apps/`+guarded.id+`/passcode', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"passcode":"open-sesame-42"}'}).then(r => r.status)`, &status)
			if status != http.StatusNoContent {
				t.Fatalf("the passcode: %d", status)
			}
			u, _ = url.Parse(page)
			pc.Go(s.console + u.Query().Get("next"))
			if pc.URL() != guarded.url {
				t.Fatalf("after the passcode the handoff ended at %s", pc.URL())
			}
			if h := s.hostile.hits(guarded.id, "/"); len(h) == 0 || h[len(h)-1].UserID != "anonymous" || !h[len(h)-1].Assertion {
				t.Errorf("the passcode app got %+v; want an anonymous assertion", h)
			}

			// Open redirects: a handoff to anywhere but an app of this
			// installation is refused, on the console.
			state := "AAAAAAAAAAAAAAAA." + strings.Repeat("B", 43)
			for _, evil := range []string{
				"http://evil.localhost:" + mustPort(t, s.console) + "/",
				"http://evil.example/",
				"//evil.example/",
				"javascript:alert(1)",
				strings.Replace(notes.url, "http://", "http://user:pw@", 1),
				s.console + "/api/v1/me",
			} {
				hops := tab.Go(s.console + "/api/v1/edge/handoff?next=" + url.QueryEscape(evil) + "&state=" + state)
				// 400 (not an app's address), or 404 for the console's own
				// host in port mode (an apps' port no app holds): never a
				// redirect.
				if len(hops) != 1 || hops[0].Status < 400 || hops[0].Status > 404 || !strings.HasPrefix(tab.URL(), s.console+"/api/v1/edge/handoff") {
					t.Errorf("next=%s: %+v, ended at %s; want a refusal on the console", evil, hops, tab.URL())
				}
			}
		})
	}
}

// TestBrowserSeparateAppsDomain: with server.apps_domain on another site
// (apps.localhost beside the console's svc.localhost), an app's script
// cannot set any cookie the console receives, so a toss fails even for a
// visitor who is not signed in (whom ambiguity cannot protect: their
// console would hold only the attacker's cookie); the apps open through
// the handoff across the two sites; and in port mode an app asked for on
// the console's host is sent to the apps domain.
func TestBrowserSeparateAppsDomain(t *testing.T) {
	for _, mode := range []string{"port", "subdomain"} {
		t.Run(mode, func(t *testing.T) {
			s := startWebServer(t, mode, "SVC_SERVER_APPS_DOMAIN=apps.localhost")
			evil := s.app(t, "evil")
			notes := s.app(t, "notes")
			s.shareWithEveryone(t, evil.id)
			if u, _ := url.Parse(evil.url); !strings.HasSuffix(u.Hostname(), "apps.localhost") {
				t.Fatalf("the app's url %s is not on the apps domain", evil.url)
			}
			_, malloryCookie := s.member(t, "mallory")
			tab := browse(t).Tab()
			for _, domain := range []string{"", "svc.localhost", "localhost"} {
				tab.Go(evil.url + "toss?path=/&value=" + url.QueryEscape(malloryCookie) + "&domain=" + domain)
				var tossed struct{ Set, Error string }
				result(t, tab, &tossed)
			}
			for _, c := range tab.Cookies(s.console + "/api/v1/me") {
				t.Errorf("the app set a cookie the console receives: %s domain %s", c.Name, c.Domain)
			}
			if status, who := s.whoAmI(t, tab); who == "mallory" || status != http.StatusUnauthorized {
				t.Fatalf("a visitor not signed in, after the toss: %d %s", status, who)
			}
			s.signInTab(t, tab, "admin", adminPassword)
			tab.Go(notes.url + "x")
			if tab.URL() != notes.url+"x" {
				t.Fatalf("opening the app across sites ended at %s", tab.URL())
			}
			if mode == "port" {
				onConsoleHost := strings.Replace(notes.url, "apps.localhost", "svc.localhost", 1)
				hops := tab.Go(onConsoleHost + "y")
				if tab.URL() != notes.url+"y" || len(hops) == 0 || hops[0].Status != http.StatusPermanentRedirect {
					t.Errorf("the app on the console's host: %+v, ended at %s; want 308 to the apps domain", hops, tab.URL())
				}
				hops = tab.Go(strings.Replace(s.console, "svc.localhost", "apps.localhost", 1) + "/api/v1/setup")
				if len(hops) != 1 || hops[0].Status != http.StatusNotFound {
					t.Errorf("the console on the apps domain: %+v; want 404", hops)
				}
			}
		})
	}
}

// TestBrowserWhatAnAppPageCanDo measures, in Chromium, what a private
// app's page gets from the edge in each mode, as docs/security.md
// states it. Subdomain (and port) mode: everything a page does on its own
// origin is authenticated (same-origin). Path mode: the page itself loads
// with the person's assertion (a top-level navigation carries the
// SameSite=Lax app cookie), and so does a link to another of its pages;
// but the CSP sandbox gives the page an opaque origin, so the browser
// sends its fetches, images and scripts as cross-site requests without
// cookies, and its form posts without SameSite=Lax ones: the edge refuses
// them all (401), and the page cannot use the origin's storage.
func TestBrowserWhatAnAppPageCanDo(t *testing.T) {
	for _, mode := range []string{"subdomain", "path"} {
		t.Run(mode, func(t *testing.T) {
			s := startWebServer(t, mode)
			app := s.app(t, "private")
			tab := browse(t).Tab()
			s.signInTab(t, tab, "admin", adminPassword)
			tab.Go(app.url + "probe")
			if tab.URL() != app.url+"probe" {
				t.Fatalf("the page did not open: %s", tab.URL())
			}
			var got map[string]any
			result(t, tab, &got)
			authed := func(path string) bool {
				h := s.hostile.hits(app.id, path)
				return len(h) > 0 && h[len(h)-1].UserID != "" && h[len(h)-1].UserID != "anonymous"
			}
			sub := map[string]bool{"fetch": authed("/probe-fetch"), "image": authed("/probe-image"), "script": authed("/probe-script")}
			// A link the page follows (a navigation the page starts).
			tab.MustEval(`location.href = 'linked'; 'ok'`, nil)
			waitHit(t, s.hostile, app.id, "/linked")
			tab.Go(app.url + "selfpost")
			waitHit(t, s.hostile, "", "/submit")
			t.Logf("%s mode: the page's own subresources authenticated: %v (page saw %v); its form post: %v; a link it follows: %v",
				mode, sub, got, authed("/submit"), authed("/linked"))
			want := mode != "path"
			for what, ok := range sub {
				if ok != want {
					t.Errorf("%s mode: the page's %s authenticated %v, want %v", mode, what, ok, want)
				}
			}
			if authed("/submit") != want {
				t.Errorf("%s mode: the page's own form post authenticated %v, want %v", mode, authed("/submit"), want)
			}
			if !authed("/probe") || !authed("/linked") {
				t.Errorf("%s mode: the page itself (%v) or a link it follows (%v) was not authenticated", mode, authed("/probe"), authed("/linked"))
			}
			if storage := got["storage"]; (storage == "ok") != want {
				t.Errorf("%s mode: the page's storage: %v", mode, storage)
			}

			// An app shared with everyone: its subresources arrive, as
			// nobody in particular in path mode.
			public := s.app(t, "public")
			s.shareWithEveryone(t, public.id)
			tab.Go(public.url + "probe")
			result(t, tab, &got)
			for _, path := range []string{"/probe-fetch", "/probe-image", "/probe-script"} {
				h := s.hostile.hits(public.id, path)
				if len(h) == 0 || (mode == "path") != (h[len(h)-1].UserID == "anonymous") {
					t.Errorf("%s mode, everyone's app: %s reached it as %+v", mode, path, h)
				}
			}
		})
	}
}

// waitHit waits a little for a request the browser is making to reach the
// hostile app, or to be refused on the way (then it never does).
func waitHit(t *testing.T, h *hostileApp, appID, path string) {
	t.Helper()
	deadline := time.Now().Add(scaled(3 * time.Second))
	for len(h.hits(appID, path)) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBrowserTLSCookiePrefixes: served over TLS (an https external URL, a
// TLS-terminating proxy in front), the session cookie is
// __Host-svc_session, which no other host's script can plant (a browser
// refuses a __Host- cookie with a Domain), and the plain svc_session an
// app's script can still set for the parent domain is no credential: even
// a visitor who is not signed in is not made the attacker. The apps'
// cookies are __Host- too.
func TestBrowserTLSCookiePrefixes(t *testing.T) {
	var target atomic.Pointer[url.URL]
	front := httptest.NewUnstartedServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target.Load())
		pr.Out.Host = pr.In.Host
	}})
	front.StartTLS()
	t.Cleanup(front.Close)
	tlsPort := mustPort(t, front.URL)
	console := "https://svc.localhost:" + tlsPort
	hostile := startHostileApp(t)
	srv := startAppServer(t, "web-tls", "SVC_SERVER_ROUTING_MODE=subdomain", "SVC_SERVER_EXTERNAL_URL="+console,
		"SVC_SERVER_BASE_DOMAIN=svc.localhost", "SVC_SERVER_PROXY_UPSTREAM="+hostile.srv.URL)
	u, _ := url.Parse(srv.p.Base())
	target.Store(u)
	s := &webServer{appServer: srv, mode: "subdomain", console: console, hostile: hostile}
	evil := s.app(t, "evil")
	notes := s.app(t, "notes")
	s.shareWithEveryone(t, evil.id)
	if !strings.HasPrefix(evil.url, "https://evil.svc.localhost:"+tlsPort+"/") {
		t.Fatalf("the app's url %s", evil.url)
	}
	_, malloryCookie := s.member(t, "mallory")
	tab := browsertest.Start(t, browsertest.Options{IgnoreCertErrors: true}).Tab()
	for _, toss := range []string{
		"name=svc_session&domain=svc.localhost",
		"name=__Host-svc_session&domain=svc.localhost",
		"name=__Host-svc_session",
	} {
		tab.Go(evil.url + "toss?path=/&value=" + url.QueryEscape(malloryCookie) + "&" + toss)
		var tossed struct{ Set, Error string }
		result(t, tab, &tossed)
	}
	for _, c := range tab.Cookies(console + "/api/v1/me") {
		if c.Name == "__Host-svc_session" {
			t.Errorf("an app's script planted %s for the console (domain %s)", c.Name, c.Domain)
		}
	}
	if status, who := s.whoAmI(t, tab); who == "mallory" || status != http.StatusUnauthorized {
		t.Fatalf("a visitor not signed in, after the toss: %d %s", status, who)
	}
	// Signing in: the __Host- cookie beside the tossed plain one is
	// ambiguous; the console's next answer (whichever: here the page
	// whoAmI loads first) refuses it and clears both; signing in again
	// works.
	s.signInTab(t, tab, "admin", adminPassword)
	if status, who := s.whoAmI(t, tab); status != http.StatusUnauthorized || who == "mallory" || who == "admin" {
		t.Errorf("signed in beside the tossed cookie: %d %s; want the ambiguity refused", status, who)
	}
	for _, c := range tab.Cookies(console + "/api/v1/me") {
		if strings.HasSuffix(c.Name, "svc_session") {
			t.Errorf("a session cookie left after the refusal: %s domain %s", c.Name, c.Domain)
		}
	}
	s.signInTab(t, tab, "admin", adminPassword)
	if status, who := s.whoAmI(t, tab); status != http.StatusOK || who != "admin" {
		t.Fatalf("signed in again: %d %s", status, who)
	}
	tab.Go(notes.url + "x")
	if tab.URL() != notes.url+"x" {
		t.Fatalf("the app over TLS ended at %s", tab.URL())
	}
	var found bool
	for _, c := range tab.Cookies(notes.url) {
		if c.Name == "__Host-svc_app_"+notes.id {
			found = c.Secure && c.HTTPOnly && c.Path == "/" && !strings.HasPrefix(c.Domain, ".")
		}
	}
	if !found {
		t.Errorf("no __Host- app cookie over TLS: %v", tab.Cookies(notes.url))
	}
}
