package edge

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/identity"
)

// consoleStub plays the API's side of the handoff as server.getHandoff
// does: the caller is whom the console's session cookie names (anonymous
// when none works), Handoff says where to go. Anything else is 404.
func (w *world) consoleStub(p *Proxy) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != HandoffEndpoint {
			writeError(rw, r, errcode.New(errcode.NotFound, "the console stub serves the handoff only"))
			return
		}
		caller := identity.Authenticated{Principal: authz.Principal{Kind: authz.KindAnonymous}}
		bearer := bearerOf(r.Header)
		cookie := ""
		if c, err := r.Cookie("svc_session"); err == nil {
			cookie = c.Value
		}
		if a, err := w.ident.Authenticate(r.Context(), bearer, cookie); err == nil {
			caller = a
		}
		to, err := p.Handoff(r, caller)
		if err != nil {
			writeError(rw, r, asCoded(err))
			return
		}
		redirectTo(rw, to, http.StatusSeeOther)
	})
}

// browserClient is a client with a cookie jar that dials every address
// at the server of its host:port in routes (the edge builds addresses from
// configuration, not from where the test servers listen), and records
// the redirects it follows.
type browserClient struct {
	*http.Client
	hops []string
}

func newBrowserClient(t *testing.T, routes map[string]string) *browserClient {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &browserClient{}
	dial := (&net.Dialer{}).DialContext
	b.Client = &http.Client{
		Jar: jar,
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			for host, to := range routes {
				if strings.EqualFold(host, addr) || strings.HasPrefix(host, "*.") && strings.HasSuffix(strings.ToLower(addr), strings.ToLower(host[1:])) {
					return dial(ctx, network, to)
				}
			}
			return nil, errors.New("the test routes no " + addr)
		}},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			b.hops = append(b.hops, req.URL.String())
			if len(via) > 10 {
				return errors.New("too many redirects")
			}
			return nil
		},
	}
	return b
}

// page GETs a page as a browser asking for HTML, following redirects.
func (b *browserClient) page(t *testing.T, u string) *http.Response {
	t.Helper()
	b.hops = nil
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Accept", "text/html")
	res, err := b.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v (after %q)", u, err, b.hops)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// hostOf is the host:port of a test server's URL.
func hostOf(u string) string { return strings.TrimPrefix(u, "http://") }

// TestHandoffFlow follows the handoff as a browser with a cookie jar, in
// each routing mode: not signed in, it stops at the console's sign-in
// page with the handoff as next; signed in on the console, the chain app →
// console handoff → the app's /.svc/handoff → the app ends on the app as
// the person, with an app cookie of the app's origin (and the state cookie
// gone); the next request goes straight through.
func TestHandoffFlow(t *testing.T) {
	for _, mode := range []string{ModePort, ModeSubdomain, ModePath} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t)
			alice := w.newPerson("alice")
			app := w.addApp("notes", 9001)
			w.grant(app.id, authz.KindUser, alice.user.ID)
			cfg := Config{Mode: mode, ConsolePort: 8080, BaseDomain: "apps.test"}
			p := w.edge(edgeOpts{cfg: cfg})
			console := serve(t, p.Front(w.consoleStub(p)))
			routes := map[string]string{"localhost:8080": hostOf(console), "*.apps.test:8080": hostOf(console), "apps.test:8080": hostOf(console)}
			appURL, consoleURL := map[string]string{
				ModePort:      "http://localhost:9001/",
				ModeSubdomain: "http://notes.apps.test:8080/",
				ModePath:      "http://localhost:8080/apps/notes/",
			}[mode], map[string]string{ModeSubdomain: "http://apps.test:8080"}[mode]
			if consoleURL == "" {
				consoleURL = "http://localhost:8080"
			}
			if mode == ModePort {
				routes["localhost:9001"] = hostOf(serve(t, p.PortHandler(9001)))
			}

			anon := newBrowserClient(t, routes)
			res := anon.page(t, appURL+"page?x=1")
			if res.StatusCode != http.StatusNotFound || len(anon.hops) != 2 || !strings.HasPrefix(anon.hops[1], consoleURL+"/login?next="+url.QueryEscape(HandoffEndpoint+"?next=")) {
				t.Fatalf("not signed in: %d after %q; want the console's sign-in page", res.StatusCode, anon.hops)
			}

			b := newBrowserClient(t, routes)
			cu, _ := url.Parse(consoleURL + "/")
			b.Jar.SetCookies(cu, []*http.Cookie{{Name: "svc_session", Value: alice.cookie, Path: "/"}})
			res = b.page(t, appURL+"page?x=1")
			rep := reached(t, res, readAll(res))
			if rep.Claims["sub"] != alice.user.ID || rep.Path != "/page" || rep.Query != "x=1" {
				t.Fatalf("after the handoff the app got %v %s?%s", rep.Claims["sub"], rep.Path, rep.Query)
			}
			if len(b.hops) != 3 || !strings.HasPrefix(b.hops[0], consoleURL+HandoffEndpoint+"?") ||
				!strings.HasPrefix(b.hops[1], strings.TrimSuffix(appURL, "/")+handoffPath+"?code=aps_") || b.hops[2] != appURL+"page?x=1" {
				t.Fatalf("the handoff's hops: %q", b.hops)
			}
			au, _ := url.Parse(appURL)
			var names []string
			for _, c := range b.Jar.Cookies(au) {
				if c.Name != "svc_session" || mode == ModeSubdomain { // the same host in the other modes: the edge ignores it
					names = append(names, c.Name)
				}
			}
			if !slices.Equal(names, []string{appCookie(app.id)}) {
				t.Errorf("cookies for the app: %q; want the app cookie (the state cookie gone)", names)
			}
			if mode == ModeSubdomain && slices.Contains(names, "svc_session") {
				t.Errorf("the console's session cookie is sent to the app's origin")
			}
			if !slices.Contains(rep.Cookies, "svc_session="+alice.cookie) && len(rep.CookieLine) > 0 {
				for _, c := range rep.Cookies {
					if strings.Contains(strings.ToLower(c), "svc_") {
						t.Errorf("the app received %s", c)
					}
				}
			}
			res = b.page(t, appURL+"again")
			if reached(t, res, readAll(res)); len(b.hops) != 0 {
				t.Errorf("with the app cookie: redirected %q", b.hops)
			}

			// An app shared with everyone: a browser signed in on the
			// console is told to it as the person; one that is not goes
			// through once, and is then let in anonymously for a while.
			public := w.addApp("public", 9002)
			w.grant(public.id, authz.KindAnonymous, "")
			if mode == ModePort {
				routes["localhost:9002"] = hostOf(serve(t, p.PortHandler(9002)))
			}
			publicURL := strings.Replace(strings.Replace(appURL, "notes", "public", 1), "9001", "9002", 1)
			res = b.page(t, publicURL)
			if rep := reached(t, res, readAll(res)); rep.Claims["sub"] != alice.user.ID || len(b.hops) != 3 {
				t.Errorf("signed in, everyone's app: %v after %q", rep.Claims["sub"], b.hops)
			}
			for range 2 {
				res = anon.page(t, publicURL+"x")
				if rep := reached(t, res, readAll(res)); rep.Claims["sub"] != AnonymousSubject {
					t.Errorf("not signed in, everyone's app: %v after %q", rep.Claims["sub"], anon.hops)
				}
			}
			if len(anon.hops) != 0 {
				t.Errorf("the second anonymous visit went through the handoff again: %q", anon.hops)
			}
		})
	}
}

func readAll(res *http.Response) []byte {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return []byte(b.String())
		}
	}
}

// handoffWorld is a port-mode world with a console and three apps: notes
// (alice's), public (everyone's), guarded (everyone's behind a passcode).
type handoffWorld struct {
	*world
	p                      *Proxy
	console                string
	alice, carol           *person
	notes, public, guarded *testApp
	notesSrv, guardedSrv   string
	passcode, admission    string
	stateOK                identity.HandoffState
	routes                 map[string]string
}

func newHandoffWorld(t *testing.T) *handoffWorld {
	t.Helper()
	w := newWorld(t)
	h := &handoffWorld{world: w, alice: w.newPerson("alice"), carol: w.newPerson("carol")}
	h.notes, h.public, h.guarded = w.addApp("notes", 9001), w.addApp("public", 9002), w.addApp("guarded", 9003)
	w.grant(h.notes.id, authz.KindUser, h.alice.user.ID)
	w.grant(h.public.id, authz.KindAnonymous, "")
	admin := authz.Principal{Kind: authz.KindUser, ID: w.admin.user.ID, UserID: w.admin.user.ID}
	caller := authz.Caller{Principal: admin, Install: authz.InstallVerbs(identity.FactsOf(w.store.Read()), admin, authz.Floor{})}
	h.passcode = "open sesame"
	if _, err := w.sharing.CreateGrant(bg, caller, h.guarded.id, identity.NewGrant{Plane: identity.PlaneData, PrincipalKind: authz.KindAnonymous, Passcode: &h.passcode}); err != nil {
		t.Fatal(err)
	}
	a, err := w.sharing.EnterPasscode(bg, h.guarded.id, h.passcode, identity.Client{IP: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	h.admission = a.Cookie
	h.p = w.edge(edgeOpts{cfg: Config{ConsolePort: 8080}})
	h.console = serve(t, w.consoleStub(h.p))
	h.notesSrv, h.guardedSrv = serve(t, h.p.PortHandler(9001)), serve(t, h.p.PortHandler(9003))
	h.stateOK = identity.NewHandoffState()
	return h
}

// handoff asks the console's handoff, without following its redirect.
func (h *handoffWorld) handoff(t *testing.T, query string, opts ...reqOpt) (*http.Response, []byte) {
	t.Helper()
	return do(t, "GET", h.console+HandoffEndpoint+"?"+query, opts...)
}

func q(next string, state ...string) string {
	v := url.Values{"next": {next}}
	if len(state) > 0 {
		v.Set("state", state[0])
	}
	return v.Encode()
}

// TestHandoffDecisions: what the console's handoff answers each caller and
// each next. Only an address of one of this installation's apps is ever a
// destination; codes go only to the app's own origin.
func TestHandoffDecisions(t *testing.T) {
	h := newHandoffWorld(t)
	st := h.stateOK.String()
	notes, public, guarded := "http://localhost:9001/x?y=1", "http://localhost:9002/", "http://localhost:9003/"
	signIn := func(p *person) reqOpt { return consoleSession(p) }
	navigate := func(r *http.Request) {
		r.Header.Set("Sec-Fetch-Site", "cross-site")
		r.Header.Set("Sec-Fetch-Mode", "navigate")
		r.Header.Set("Sec-Fetch-Dest", "document")
	}
	for _, tc := range []struct {
		name     string
		query    string
		opts     []reqOpt
		status   int
		code     string // the refusal's
		location string // a prefix of the redirect's
	}{
		{"signed in, may open: a code to the app's origin", q(notes, st), []reqOpt{signIn(h.alice)}, 303, "", "http://localhost:9001" + handoffPath + "?code=aps_"},
		{"a navigation from another site", q(notes, st), []reqOpt{signIn(h.alice), navigate}, 303, "", "http://localhost:9001" + handoffPath + "?code=aps_"},
		{"not signed in: to sign in, and back here", q(notes, st), nil, 303, "", "http://localhost:8080/login?next=" + url.QueryEscape(HandoffEndpoint+"?"+q(notes, st))},
		{"an ended session: the same", q(notes, st), []reqOpt{withCookie("svc_session", "ses_01JAAAAAAAAAAAAAAAAAAAAAAA.nope")}, 303, "", "http://localhost:8080/login?next="},
		{"not signed in, no such app: the same", q("http://localhost:9999/", st), nil, 303, "", "http://localhost:8080/login?next="},
		{"signed in, no such app", q("http://localhost:9999/", st), []reqOpt{signIn(h.alice)}, 404, "NOT_FOUND", ""},
		{"signed in, not shared", q(notes, st), []reqOpt{signIn(h.carol)}, 403, "PERM_DENIED", ""},
		{"an administrator without a data-plane grant", q(notes, st), []reqOpt{signIn(h.admin)}, 403, "PERM_DENIED", ""},
		{"everyone's app, anonymous: back, marked not signed in", q(public, st), nil, 303, "", "http://localhost:9002" + handoffPath + "?next=" + url.QueryEscape(public)},
		{"everyone's app, signed in: a code (identified)", q(public, st), []reqOpt{signIn(h.carol)}, 303, "", "http://localhost:9002" + handoffPath + "?code="},
		{"a passcode app: to its passcode page", q(guarded, st), nil, 303, "", "http://localhost:8080/passcode/" + h.guarded.id + "?next=" + url.QueryEscape(HandoffEndpoint+"?")},
		{"a passcode app, admitted on the console", q(guarded, st), []reqOpt{withCookie(PasscodeCookie(h.guarded.id), h.admission)}, 303, "", "http://localhost:9003" + handoffPath + "?code="},
		{"a passcode app, signed in without a grant: its passcode page", q(guarded, st), []reqOpt{signIn(h.carol)}, 303, "", "http://localhost:8080/passcode/" + h.guarded.id + "?next="},
		{"a passcode app, signed in and admitted", q(guarded, st), []reqOpt{signIn(h.carol), withCookie(PasscodeCookie(h.guarded.id), h.admission)}, 303, "", "http://localhost:9003" + handoffPath + "?code="},
		{"a passcode app, another app's admission", q(notes, st), []reqOpt{withCookie(PasscodeCookie(h.notes.id), h.admission)}, 303, "", "http://localhost:8080/login?next="},
		{"no state: back to the app, which starts one", q(notes), []reqOpt{signIn(h.alice)}, 303, "", notes},
		{"a malformed state", q(notes, "x.y"), []reqOpt{signIn(h.alice)}, 400, "VALID_INVALID", ""},
		{"a token", q(notes, st), []reqOpt{bearer(h.alice.token)}, 400, "VALID_INVALID", ""},
		{"a fetch, not a navigation", q(notes, st), []reqOpt{signIn(h.alice), header("Sec-Fetch-Site", "same-origin"), header("Sec-Fetch-Mode", "cors"), header("Sec-Fetch-Dest", "empty")}, 403, "PERM_DENIED", ""},
		{"a frame", q(notes, st), []reqOpt{signIn(h.alice), header("Sec-Fetch-Site", "same-site"), header("Sec-Fetch-Mode", "navigate"), header("Sec-Fetch-Dest", "iframe")}, 403, "PERM_DENIED", ""},
		{"no next", "state=" + st, []reqOpt{signIn(h.alice)}, 400, "VALID_INVALID", ""},
		{"two nexts", q(notes, st) + "&next=" + url.QueryEscape(public), []reqOpt{signIn(h.alice)}, 400, "VALID_INVALID", ""},
		{"next elsewhere", q("http://evil.example/", st), []reqOpt{signIn(h.alice)}, 400, "VALID_INVALID", ""},
		{"next on the console's host name, another scheme", q("https://localhost:9001/", st), []reqOpt{signIn(h.alice)}, 400, "VALID_INVALID", ""},
		{"next with credentials", q("http://user:pw@localhost:9001/", st), []reqOpt{signIn(h.alice)}, 400, "VALID_INVALID", ""},
		{"next relative", q("/x", st), []reqOpt{signIn(h.alice)}, 400, "VALID_INVALID", ""},
		{"next scheme-relative", q("//evil.example/", st), []reqOpt{signIn(h.alice)}, 400, "VALID_INVALID", ""},
		{"next javascript", q("javascript:alert(1)", st), []reqOpt{signIn(h.alice)}, 400, "VALID_INVALID", ""},
		{"next at the Host the client sent", q("http://evil.example:9001/", st), []reqOpt{signIn(h.alice), hostHeader("evil.example:8080")}, 400, "VALID_INVALID", ""},
		{"a forged Host changes nothing", q(notes, st), nil, 303, "", "http://localhost:8080/login?next="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if tc.name == "a forged Host changes nothing" {
				opts = append(opts, hostHeader("evil.example:666"))
			}
			res, body := h.handoff(t, tc.query, opts...)
			if tc.status != http.StatusSeeOther {
				refused(t, res, body, tc.status, tc.code)
				return
			}
			if loc := res.Header.Get("Location"); res.StatusCode != tc.status || !strings.HasPrefix(loc, tc.location) {
				t.Fatalf("%d to %q; want %d to %q…: %s", res.StatusCode, loc, tc.status, tc.location, body)
			}
		})
	}
}

// code gets a code from the console's handoff for p and the app at next,
// for the browser holding state.
func (h *handoffWorld) code(t *testing.T, p *person, next string, state identity.HandoffState) string {
	t.Helper()
	res, body := h.handoff(t, q(next, state.String()), consoleSession(p))
	loc, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusSeeOther || err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("no code: %d %s %s", res.StatusCode, res.Header.Get("Location"), body)
	}
	return loc.Query().Get("code")
}

// TestRedeemChecks: the app's /.svc/handoff redeems a code only for the
// browser that holds its state, once, for its app, and sends the browser
// only to that app; it sets the app cookie as it should.
func TestRedeemChecks(t *testing.T) {
	h := newHandoffWorld(t)
	next := "http://localhost:9001/x"
	st := h.stateOK
	withState := withCookie(stateCookie(st.ID), st.Secret)
	redeem := func(srv, code, next string, opts ...reqOpt) (*http.Response, []byte) {
		return do(t, "GET", srv+handoffPath+"?"+url.Values{"code": {code}, "next": {next}}.Encode(), opts...)
	}
	code := h.code(t, h.alice, next, st)
	for _, tc := range []struct {
		name   string
		srv    string
		code   string
		next   string
		opts   []reqOpt
		status int
		ecode  string
	}{
		{"no state cookie", h.notesSrv, code, next, nil, 401, "AUTH_INVALID"},
		{"another state's cookie", h.notesSrv, code, next, []reqOpt{withCookie(stateCookie(identity.NewHandoffState().ID), st.Secret)}, 401, "AUTH_INVALID"},
		{"the wrong secret", h.notesSrv, code, next, []reqOpt{withCookie(stateCookie(st.ID), identity.NewHandoffState().Secret)}, 401, "AUTH_INVALID"},
		{"a forged code", h.notesSrv, code[:len(code)-2] + "AA", next, []reqOpt{withState}, 401, "AUTH_INVALID"},
		{"at another app", h.guardedSrv, code, "http://localhost:9003/", []reqOpt{withState}, 401, "AUTH_INVALID"},
		{"next at another app", h.notesSrv, code, "http://localhost:9002/", []reqOpt{withState}, 400, "VALID_INVALID"},
		{"next elsewhere", h.notesSrv, code, "http://evil.example/", []reqOpt{withState}, 400, "VALID_INVALID"},
		{"a fetch", h.notesSrv, code, next, []reqOpt{withState, header("Sec-Fetch-Site", "cross-site"), header("Sec-Fetch-Mode", "cors"), header("Sec-Fetch-Dest", "empty")}, 403, "PERM_DENIED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := redeem(tc.srv, tc.code, tc.next, tc.opts...)
			refused(t, res, body, tc.status, tc.ecode)
		})
	}
	// None of those spent it.
	res, body := redeem(h.notesSrv, code, next, withState, hostHeader("evil.example"))
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != next || res.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("redeem: %d %q: %s", res.StatusCode, res.Header.Get("Location"), body)
	}
	var app, cleared *http.Cookie
	for _, c := range res.Cookies() {
		switch c.Name {
		case appCookie(h.notes.id):
			app = c
		case stateCookie(st.ID):
			cleared = c
		}
	}
	if app == nil || !app.HttpOnly || app.SameSite != http.SameSiteLaxMode || app.Path != "/" || app.Domain != "" || app.Secure || app.MaxAge <= 0 {
		t.Fatalf("the app cookie: %+v", app)
	}
	if cleared == nil || cleared.MaxAge >= 0 || cleared.Path != handoffPath {
		t.Errorf("the state cookie is not cleared: %+v", cleared)
	}
	if rep := open(t, h.notesSrv+"/x", withCookie(app.Name, app.Value)); rep.Claims["sub"] != h.alice.user.ID {
		t.Errorf("the app cookie opens the app as %v", rep.Claims["sub"])
	}
	// Once: again, it is refused, unless the browser already holds a
	// working app cookie (a reload), which is sent on.
	res, body = redeem(h.notesSrv, code, next, withState)
	refused(t, res, body, 401, "AUTH_INVALID")
	res, _ = redeem(h.notesSrv, code, next, withState, withCookie(app.Name, app.Value))
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != next {
		t.Errorf("a reload with the cookie: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	// An admission carried over admits as the passcode does.
	res, _ = h.handoff(t, q("http://localhost:9003/", st.String()), withCookie(PasscodeCookie(h.guarded.id), h.admission))
	loc, _ := url.Parse(res.Header.Get("Location"))
	res, body = redeem(h.guardedSrv, loc.Query().Get("code"), "http://localhost:9003/", withState)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("redeem an admission: %d %s", res.StatusCode, body)
	}
	admitted := res.Cookies()[0]
	if rep := open(t, h.guardedSrv+"/", withCookie(admitted.Name, admitted.Value)); rep.Claims["sub"] != AnonymousSubject {
		t.Errorf("an admission's app cookie: sub %v", rep.Claims["sub"])
	}
	// A person signed in and admitted by the passcode is told as themselves.
	res, _ = h.handoff(t, q("http://localhost:9003/", st.String()), consoleSession(h.carol), withCookie(PasscodeCookie(h.guarded.id), h.admission))
	loc, _ = url.Parse(res.Header.Get("Location"))
	res, body = redeem(h.guardedSrv, loc.Query().Get("code"), "http://localhost:9003/", withState)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("redeem a person's admission: %d %s", res.StatusCode, body)
	}
	both := res.Cookies()[0]
	if rep := open(t, h.guardedSrv+"/", withCookie(both.Name, both.Value)); rep.Claims["sub"] != h.carol.user.ID {
		t.Errorf("a person admitted by passcode: sub %v", rep.Claims["sub"])
	}
}

// TestCookieIsolationAtTheEdge: an app cookie authenticates only requests
// of the app's own origin and top-level navigations; a request another
// origin's page makes (another app's form post, fetch, image or frame) is
// treated as not signed in.
func TestCookieIsolationAtTheEdge(t *testing.T) {
	h := newHandoffWorld(t)
	publicSrv := serve(t, h.p.PortHandler(9002))
	notesCookie := h.as(h.alice, h.notes)
	publicCookie := h.as(h.alice, h.public)
	meta := func(site, mode, dest string) reqOpt {
		return func(r *http.Request) {
			r.Header.Set("Sec-Fetch-Site", site)
			r.Header.Set("Sec-Fetch-Mode", mode)
			r.Header.Set("Sec-Fetch-Dest", dest)
		}
	}
	for _, tc := range []struct {
		name   string
		method string
		opts   []reqOpt
		sub    string // "" when refused (notes) or anonymous (public)
	}{
		{"the app's own fetch", "POST", []reqOpt{meta("same-origin", "cors", "empty")}, h.alice.user.ID},
		{"a typed address", "GET", []reqOpt{meta("none", "navigate", "document")}, h.alice.user.ID},
		{"a link from another app", "GET", []reqOpt{meta("same-site", "navigate", "document")}, h.alice.user.ID},
		{"a form post from another app", "POST", []reqOpt{meta("same-site", "navigate", "document"), header("Origin", "http://localhost:9666")}, ""},
		{"a fetch from another app", "POST", []reqOpt{meta("same-site", "no-cors", "empty")}, ""},
		{"a read from another app", "GET", []reqOpt{meta("cross-site", "cors", "empty")}, ""},
		{"an image from another site", "GET", []reqOpt{meta("cross-site", "no-cors", "image")}, ""},
		{"a frame in another app", "GET", []reqOpt{meta("same-site", "navigate", "iframe")}, ""},
		{"a sandboxed page (path mode)", "GET", []reqOpt{meta("cross-site", "cors", "empty"), header("Origin", "null")}, ""},
		{"no fetch metadata, another origin", "POST", []reqOpt{header("Origin", "http://localhost:9666")}, ""},
		{"no fetch metadata, Origin null", "POST", []reqOpt{header("Origin", "null")}, ""},
		{"no fetch metadata, no Origin (not a browser)", "POST", nil, h.alice.user.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := do(t, tc.method, h.notesSrv+"/x", append(tc.opts, notesCookie)...)
			if tc.sub == "" {
				refused(t, res, body, 401, "AUTH_REQUIRED")
			} else if rep := reached(t, res, body); rep.Claims["sub"] != tc.sub {
				t.Errorf("sub %v, want %s", rep.Claims["sub"], tc.sub)
			}
			// An app shared with everyone still opens, as nobody in particular.
			res, body = do(t, tc.method, publicSrv+"/x", append(tc.opts, publicCookie)...)
			want := tc.sub
			if want == "" {
				want = AnonymousSubject
			}
			if rep := reached(t, res, body); rep.Claims["sub"] != want {
				t.Errorf("everyone's app: sub %v, want %s", rep.Claims["sub"], want)
			}
		})
	}
	// A bearer token is no ambient credential: no isolation.
	if rep := open(t, h.notesSrv+"/x", bearer(h.alice.token), meta("cross-site", "cors", "empty")); rep.Claims["sub"] != h.alice.user.ID {
		t.Errorf("a token from a cross-site request: %v", rep.Claims["sub"])
	}
	// An admission cookie obeys the same rule.
	deny(t, h.guardedSrv+"/", 403, "PERM_PASSCODE_REQUIRED", withCookie(PasscodeCookie(h.guarded.id), h.admission), meta("same-site", "no-cors", "empty"))
	open(t, h.guardedSrv+"/", withCookie(PasscodeCookie(h.guarded.id), h.admission), meta("same-origin", "cors", "empty"))
}

// TestAmbiguousAppCookies: two cookies of the app (one tossed by another
// app on the same host, at another path or spelling) are refused, never
// chosen between, and the answer clears them.
func TestAmbiguousAppCookies(t *testing.T) {
	h := newHandoffWorld(t)
	mine, theirs := h.appCookieFor(h.alice, h.notes.id), h.appCookieFor(h.carol, h.notes.id)
	for name, line := range map[string]string{
		"the attacker's first":  appCookie(h.notes.id) + "=" + theirs + "; " + appCookie(h.notes.id) + "=" + mine,
		"two spellings":         "__Host-" + appCookie(h.notes.id) + "=" + theirs + "; " + appCookie(h.notes.id) + "=" + mine,
		"the same value twice":  appCookie(h.notes.id) + "=" + mine + "; " + appCookie(h.notes.id) + "=" + mine,
		"one of them is broken": appCookie(h.notes.id) + "=x; " + appCookie(h.notes.id) + "=" + mine,
	} {
		t.Run(name, func(t *testing.T) {
			res, body := do(t, "GET", h.notesSrv+"/deep/path", header("Cookie", line), browser())
			env := refused(t, res, body, 401, "AUTH_INVALID")
			if !strings.Contains(env.Message, "ambiguous") {
				t.Errorf("message %q", env.Message)
			}
			cleared := map[string]bool{}
			for _, c := range res.Cookies() {
				if c.MaxAge < 0 {
					cleared[c.Name+" "+c.Path] = true
				}
			}
			for _, want := range []string{appCookie(h.notes.id) + " /", appCookie(h.notes.id) + " /deep", appCookie(h.notes.id) + " /deep/path", "__Host-" + appCookie(h.notes.id) + " /"} {
				if !cleared[want] {
					t.Errorf("not cleared: %s", want)
				}
			}
		})
	}
	open(t, h.notesSrv+"/x", withCookie(appCookie(h.notes.id), mine))
}

// TestPathModeSandbox: in path mode every answer on the console's origin
// carries the sandbox policy, beside (never instead of) the app's own, and
// an app cannot widen its service worker's scope or clear the origin's
// data; in the other modes nothing is added.
func TestPathModeSandbox(t *testing.T) {
	w := newWorld(t)
	alice := w.newPerson("alice")
	app := w.addApp("notes", 0)
	w.grant(app.id, authz.KindUser, alice.user.ID)
	path := serve(t, w.edge(edgeOpts{cfg: Config{Mode: ModePath}}).Front(apiStub))
	res, _ := do(t, "GET", path+"/apps/notes/own-headers", bearer(alice.token))
	if csp := res.Header.Values("Content-Security-Policy"); !slices.Equal(csp, []string{sandboxPolicy, "default-src 'self'"}) {
		t.Errorf("CSP %q, want the sandbox and the app's own", csp)
	}
	if res.Header.Get("Service-Worker-Allowed") != "" || res.Header.Get("Clear-Site-Data") != "" {
		t.Errorf("the app's Service-Worker-Allowed %q and Clear-Site-Data %q reached the browser", res.Header.Get("Service-Worker-Allowed"), res.Header.Get("Clear-Site-Data"))
	}
	for _, u := range []string{path + "/apps/notes/x", path + "/apps/nope/"} {
		res, _ = do(t, "GET", u)
		if csp := res.Header.Values("Content-Security-Policy"); !slices.Equal(csp, []string{sandboxPolicy}) {
			t.Errorf("the edge's own answer at %s: CSP %q", u, csp)
		}
	}
	if res, _ := do(t, "GET", path+"/api/v1/me"); res.Header.Get("Content-Security-Policy") != "" {
		t.Error("the console's own answers got the apps' sandbox")
	}
	sub := serve(t, w.edge(edgeOpts{cfg: Config{Mode: ModeSubdomain, BaseDomain: "apps.test"}}).Front(apiStub))
	res, _ = do(t, "GET", sub+"/own-headers", bearer(alice.token), hostHeader("notes.apps.test"))
	if csp := res.Header.Values("Content-Security-Policy"); !slices.Equal(csp, []string{"default-src 'self'"}) || res.Header.Get("Service-Worker-Allowed") != "/" {
		t.Errorf("subdomain mode changed the app's headers: %v", res.Header)
	}
}

// TestSeparateAppsDomain: with server.apps_domain, apps are served under
// it only (port mode: an app asked for on another host is sent there, or
// refused), and the console is never served on it.
func TestSeparateAppsDomain(t *testing.T) {
	w := newWorld(t)
	alice := w.newPerson("alice")
	app := w.addApp("notes", 9001)
	w.grant(app.id, authz.KindUser, alice.user.ID)

	sub := serve(t, w.edge(edgeOpts{cfg: Config{Mode: ModeSubdomain, BaseDomain: "svc.example.com", AppsDomain: "Apps.Example.NET", ExternalURL: "https://svc.example.com"}}).Front(apiStub))
	open(t, sub+"/", bearer(alice.token), hostHeader("notes.apps.example.net"))
	isAPI(t, sub+"/api/v1/me", hostHeader("notes.svc.example.com")) // the base domain's subdomains are no apps'
	isAPI(t, sub+"/api/v1/me", hostHeader("svc.example.com"))
	deny(t, sub+"/api/v1/me", 404, "NOT_FOUND", hostHeader("apps.example.net"))

	pe := w.edge(edgeOpts{cfg: Config{AppsDomain: "apps.example.net", ExternalURL: "https://svc.example.com"}})
	port := serve(t, pe.PortHandler(9001))
	open(t, port+"/x", bearer(alice.token), hostHeader("apps.example.net:9001"))
	res, _ := do(t, "GET", port+"/x?y=1", bearer(alice.token), hostHeader("svc.example.com:9001"))
	if res.StatusCode != http.StatusPermanentRedirect || res.Header.Get("Location") != "http://apps.example.net:9001/x?y=1" {
		t.Errorf("on the console's host: %d %q; want 308 to the apps domain", res.StatusCode, res.Header.Get("Location"))
	}
	res, body := do(t, "POST", port+"/x", bearer(alice.token), hostHeader("svc.example.com:9001"))
	refused(t, res, body, 404, "NOT_FOUND")
	front := serve(t, pe.Front(apiStub))
	deny(t, front+"/", 404, "NOT_FOUND", hostHeader("apps.example.net:8080"))
	isAPI(t, front+"/", hostHeader("svc.example.com"))
	// Apps and console on one host name: nothing is refused.
	same := w.edge(edgeOpts{cfg: Config{AppsDomain: "svc.example.com", ExternalURL: "https://svc.example.com"}})
	open(t, serve(t, same.PortHandler(9001))+"/", bearer(alice.token), hostHeader("svc.example.com:9001"))
	isAPI(t, serve(t, same.Front(apiStub))+"/", hostHeader("svc.example.com"))
}

// FuzzAddressed: whatever next a handoff is given, it accepts only an
// address on an app's origin as the edge builds it (scheme, host, port,
// and in path mode the prefix).
func FuzzAddressed(f *testing.F) {
	for _, s := range []string{"http://localhost:9001/x", "http://notes.apps.test:8080/", "http://localhost:8080/apps/notes/x",
		"//evil", "http://evil/", "http://user@localhost:9001/", "HTTP://LOCALHOST:9001/", "http://localhost:8080/apps/%6eotes/",
		"http://localhost:8080/apps//", "http://[::1]:9001/", "http://notes.apps.test.:8080/", "http://localhost:80/apps/x/"} {
		f.Add(s)
	}
	table := NewTable()
	table.Replace([]Route{{AppID: "app_01JAAAAAAAAAAAAAAAAAAAAAAA", Slug: "notes", Port: 9001}})
	var proxies []*Proxy
	for _, mode := range []string{ModePort, ModeSubdomain, ModePath} {
		p := &Proxy{cfg: Config{Mode: mode, ConsolePort: 8080, BaseDomain: "apps.test"}, d: Deps{Routes: table}, base: "apps.test"}
		if mode == ModeSubdomain {
			p.apps = "apps.test"
		}
		proxies = append(proxies, p)
	}
	r := (&http.Request{Method: "GET", URL: &url.URL{Path: "/"}, Host: "evil.example", Header: http.Header{}}).WithContext(
		context.WithValue(context.Background(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}))
	f.Fuzz(func(t *testing.T, next string) {
		for _, p := range proxies {
			tg, err := p.addressed(r, next)
			if err != nil {
				if e, ok := errcode.As(err); !ok || e.Code != errcode.ValidInvalid {
					t.Fatalf("%s: %q: %v", p.cfg.Mode, next, err)
				}
				continue
			}
			u, _ := url.Parse(next)
			origin, prefix := p.appOrigin(r, tg)
			o, _ := url.Parse(origin)
			if u.User != nil || u.Scheme != o.Scheme || !strings.EqualFold(u.Hostname(), o.Hostname()) || portOf(u) != portOf(o) ||
				(p.cfg.Mode == ModePath && !strings.HasPrefix(u.EscapedPath(), prefix+"/")) {
				t.Fatalf("%s: %q accepted, but the app is at %s%s", p.cfg.Mode, next, origin, prefix)
			}
		}
	})
}
