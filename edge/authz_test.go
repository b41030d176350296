package edge

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/policy"
)

// policyFunc is a host policy for a test.
type policyFunc func() policy.Policy

var _ PolicySource = policyFunc(nil)

func (f policyFunc) Current() policy.Policy { return f() }

// TestWhoOpensWhat runs every kind of caller against apps shared every
// way, over real HTTP in port mode: who reaches the app (and as whom), and
// what everyone else is answered, as API client and as browser.
func TestWhoOpensWhat(t *testing.T) {
	w := newWorld(t)
	alice, bob, carol, viewer := w.newPerson("alice"), w.newPerson("bob"), w.newPerson("carol"), w.newPerson("vera")
	eng := w.group("eng", bob)
	w.group("ops", bob)
	notes := w.addApp("notes", 9001)
	w.grant(notes.id, authz.KindUser, alice.user.ID)
	w.grant(notes.id, "group", eng.ID)
	w.grant(notes.id, authz.KindToken, carol.svcID)
	w.grant(notes.id, authz.KindUser, viewer.user.ID, authz.RoleViewer) // control plane only
	public := w.addApp("public", 9002)
	w.grant(public.id, authz.KindAnonymous, "")
	p := w.edge(edgeOpts{cfg: Config{ConsolePort: 8080}})
	notesURL := serve(t, p.PortHandler(9001))
	publicURL := serve(t, p.PortHandler(9002))
	nowhereURL := serve(t, p.PortHandler(9999)) // a port no app holds

	type want struct {
		status int
		code   string // the envelope's, when refused
		sub    string // the assertion's subject, when reached
		name   string
		groups []string
	}
	cases := []struct {
		name string
		url  string
		opts []reqOpt
		want want
	}{
		{"user grant, bearer token", notesURL, []reqOpt{bearer(alice.token)}, want{status: 200, sub: alice.user.ID, name: "Alice Example"}},
		{"user grant, app cookie", notesURL, []reqOpt{w.as(alice, notes)}, want{status: 200, sub: alice.user.ID}},
		{"group grant", notesURL, []reqOpt{w.as(bob, notes)}, want{status: 200, sub: bob.user.ID, groups: []string{"eng", "ops"}}},
		{"service token grant", notesURL, []reqOpt{bearer(carol.service)}, want{status: 200, sub: carol.svcID, name: "carol-robot"}},
		{"bearer wins over the cookie", notesURL, []reqOpt{bearer(alice.token), w.as(carol, notes)}, want{status: 200, sub: alice.user.ID}},
		{"a service token holds only what is shared with it", notesURL, []reqOpt{bearer(alice.service)}, want{status: 403, code: "PERM_DENIED"}},
		{"no grant: refused", notesURL, []reqOpt{w.as(carol, notes)}, want{status: 403, code: "PERM_DENIED"}},
		{"no grant, browser: no redirect", notesURL, []reqOpt{w.as(carol, notes), browser()}, want{status: 403, code: "PERM_DENIED"}},
		{"no such app, signed in", nowhereURL, []reqOpt{bearer(carol.token)}, want{status: 404, code: "NOT_FOUND"}},
		{"administrator without a data-plane grant", notesURL, []reqOpt{w.as(w.admin, notes)}, want{status: 403, code: "PERM_DENIED"}},
		{"administrator, no such app", nowhereURL, []reqOpt{bearer(w.admin.token)}, want{status: 404, code: "NOT_FOUND"}},
		{"management grant only", notesURL, []reqOpt{bearer(viewer.token)}, want{status: 403, code: "PERM_DENIED"}},
		{"anonymous", notesURL, nil, want{status: 401, code: "AUTH_REQUIRED"}},
		{"anonymous, no such app: the same", nowhereURL, nil, want{status: 401, code: "AUTH_REQUIRED"}},
		{"the console's session cookie is no credential", notesURL, []reqOpt{consoleSession(alice)}, want{status: 401, code: "AUTH_REQUIRED"}},
		{"nor under its TLS name", notesURL, []reqOpt{withCookie("__Host-svc_session", alice.cookie)}, want{status: 401, code: "AUTH_REQUIRED"}},
		{"an app cookie for another app", notesURL, []reqOpt{withCookie(appCookie(notes.id), w.appCookieFor(alice, public.id))}, want{status: 401, code: "AUTH_REQUIRED"}},
		{"another app's cookie", notesURL, []reqOpt{withCookie(appCookie(public.id), w.appCookieFor(alice, public.id))}, want{status: 401, code: "AUTH_REQUIRED"}},
		{"unknown token", notesURL, []reqOpt{bearer("tok_01JAAAAAAAAAAAAAAAAAAAAAAA.nope")}, want{status: 401, code: "AUTH_TOKEN_INVALID"}},
		{"an unknown app cookie", notesURL, []reqOpt{withCookie(appCookie(notes.id), "aps_01JAAAAAAAAAAAAAAAAAAAAAAA.nope")}, want{status: 401, code: "AUTH_REQUIRED"}},
		{"a POST from a browser is not redirected", notesURL, []reqOpt{browser()}, want{status: 401, code: "AUTH_REQUIRED"}},
		{"everyone, anonymous", publicURL, nil, want{status: 200, sub: AnonymousSubject}},
		{"everyone, a browser marked not signed in", publicURL, []reqOpt{browser(), withCookie(visitCookie(public.id), "anonymous")}, want{status: 200, sub: AnonymousSubject}},
		{"everyone, in a frame: no handoff", publicURL, []reqOpt{browser(), header("Sec-Fetch-Site", "same-site"), header("Sec-Fetch-Mode", "navigate"), header("Sec-Fetch-Dest", "iframe")}, want{status: 200, sub: AnonymousSubject}},
		{"a frame is not sent to sign in", notesURL, []reqOpt{browser(), header("Sec-Fetch-Site", "same-site"), header("Sec-Fetch-Mode", "navigate"), header("Sec-Fetch-Dest", "iframe")}, want{status: 401, code: "AUTH_REQUIRED"}},
		{"everyone, signed in: as oneself", publicURL, []reqOpt{w.as(carol, public)}, want{status: 200, sub: carol.user.ID}},
		{"everyone, a bad credential counts as none", publicURL, []reqOpt{bearer("tok_01JAAAAAAAAAAAAAAAAAAAAAAA.nope")}, want{status: 200, sub: AnonymousSubject}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := "GET"
			if strings.HasPrefix(tc.name, "a POST") {
				method = "POST"
			}
			res, body := do(t, method, tc.url+"/x", tc.opts...)
			if tc.want.status != 200 {
				refused(t, res, body, tc.want.status, tc.want.code)
				return
			}
			rep := reached(t, res, body)
			if rep.Claims["sub"] != tc.want.sub || rep.Header[HeaderUserID][0] != tc.want.sub {
				t.Errorf("sub = %v (header %q), want %s", rep.Claims["sub"], rep.Header[HeaderUserID], tc.want.sub)
			}
			if tc.want.name != "" && rep.Claims["name"] != tc.want.name {
				t.Errorf("name = %v, want %s", rep.Claims["name"], tc.want.name)
			}
			if tc.want.groups != nil {
				var got []string
				for _, g := range rep.Claims["groups"].([]any) {
					got = append(got, g.(string))
				}
				slices.Sort(got)
				if !slices.Equal(got, tc.want.groups) || rep.Header[HeaderGroups][0] != strings.Join(got, ",") {
					t.Errorf("groups = %v (header %q), want %v", got, rep.Header[HeaderGroups], tc.want.groups)
				}
			}
		})
	}

	// A browser's first page of an app shared with everyone goes through
	// the handoff (to be told as the person, if signed in).
	if res, _ := do(t, "GET", publicURL+"/", browser()); res.StatusCode != http.StatusSeeOther {
		t.Errorf("a browser's first visit to everyone's app: %d", res.StatusCode)
	}
	// A browser without an app cookie is sent to the console's handoff,
	// built from the configuration and the listener's address (the
	// console's port; loopback is localhost), never from Host.
	for _, opts := range [][]reqOpt{{browser()}, {browser(), hostHeader("evil.example:666")}, {browser(), consoleSession(alice)},
		{browser(), withCookie(appCookie(notes.id), "aps_01JAAAAAAAAAAAAAAAAAAAAAAA.nope")}} {
		res, _ := do(t, "GET", notesURL+"/page?q=1", opts...)
		loc, state := handoffLocation(t, res)
		if want := "http://localhost:8080" + HandoffEndpoint + "?next=" + url.QueryEscape("http://localhost:9001/page?q=1"); loc != want {
			t.Errorf("browser without an app cookie: %d Location %q; want 303 to %q&state=…", res.StatusCode, loc, want)
		}
		if state == nil || state.Path != handoffPath || !state.HttpOnly || state.SameSite != http.SameSiteLaxMode || state.Secure || state.MaxAge <= 0 {
			t.Errorf("the state cookie: %+v", state)
		}
	}
	// Behind an external URL, the console is there, and apps on its host.
	pe := w.edge(edgeOpts{cfg: Config{ExternalURL: "https://svc.example.com/"}})
	res, _ := do(t, "GET", serve(t, pe.PortHandler(9001))+"/", browser())
	if loc, _ := handoffLocation(t, res); loc != "https://svc.example.com"+HandoffEndpoint+"?next="+url.QueryEscape("http://svc.example.com:9001/") {
		t.Errorf("Location %q; want the external URL's handoff", loc)
	}
}

// TestPasscodes: an app shared with everyone behind a passcode admits a
// browser showing the admission cookie the passcode endpoint gives (the
// sharing service's), signed in or not, and nothing else; a new passcode
// ends earlier admissions; the cookie never reaches the app.
func TestPasscodes(t *testing.T) {
	w := newWorld(t)
	alice, carol := w.newPerson("alice"), w.newPerson("carol")
	app := w.addApp("secret", 9001)
	other := w.addApp("other", 9002)
	w.grant(app.id, authz.KindUser, alice.user.ID)
	admin := authz.Principal{Kind: authz.KindUser, ID: w.admin.user.ID, UserID: w.admin.user.ID}
	caller := authz.Caller{Principal: admin, Install: authz.InstallVerbs(identity.FactsOf(w.store.Read()), admin, authz.Floor{})}
	code := "open sesame"
	g, err := w.sharing.CreateGrant(bg, caller, app.id, identity.NewGrant{Plane: identity.PlaneData, PrincipalKind: authz.KindAnonymous, Passcode: &code})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.sharing.CreateGrant(bg, caller, other.id, identity.NewGrant{Plane: identity.PlaneData, PrincipalKind: authz.KindAnonymous, Passcode: &code}); err != nil {
		t.Fatal(err)
	}
	admit := func(appID string) string {
		a, err := w.sharing.EnterPasscode(bg, appID, code, identity.Client{IP: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		return a.Cookie
	}
	admission, otherAdmission := admit(app.id), admit(other.id)
	p := w.edge(edgeOpts{cfg: Config{ConsolePort: 8080}})
	srv := serve(t, p.PortHandler(9001))
	cookieName := PasscodeCookie(app.id)

	deny(t, srv+"/", 403, "PERM_PASSCODE_REQUIRED")
	env := deny(t, srv+"/", 403, "PERM_PASSCODE_REQUIRED", w.as(carol, app))
	if env.Details["app_id"] != app.id {
		t.Errorf("details %v, want the app's id for the passcode page", env.Details)
	}
	deny(t, srv+"/", 403, "PERM_PASSCODE_REQUIRED", withCookie(cookieName, otherAdmission))
	deny(t, srv+"/", 403, "PERM_PASSCODE_REQUIRED", withCookie(cookieName, admission+"x"))
	deny(t, srv+"/", 403, "PERM_PASSCODE_REQUIRED", withCookie(PasscodeCookie(other.id), otherAdmission))
	// A browser without an admission on the app's origin is sent to the
	// handoff, which carries it there.
	res, _ := do(t, "GET", srv+"/a?b=c", browser())
	if loc, _ := handoffLocation(t, res); !strings.HasPrefix(loc, "http://localhost:8080"+HandoffEndpoint+"?next=") {
		t.Errorf("browser without admission: %d %q; want 303 to the handoff", res.StatusCode, loc)
	}

	rep := open(t, srv+"/", withCookie(cookieName, admission), withCookie("keep", "1"))
	if rep.Claims["sub"] != AnonymousSubject {
		t.Errorf("admitted visitor: sub %v, want anonymous", rep.Claims["sub"])
	}
	if !slices.Equal(rep.Cookies, []string{"keep=1"}) {
		t.Errorf("cookies %q: the admission reached the app", rep.Cookies)
	}
	if rep = open(t, srv+"/", w.as(carol, app), withCookie(cookieName, admission)); rep.Claims["sub"] != carol.user.ID {
		t.Errorf("admitted and signed in: sub %v, want the user", rep.Claims["sub"])
	}
	if rep = open(t, srv+"/", w.as(alice, app)); rep.Claims["sub"] != alice.user.ID {
		t.Errorf("a user's own grant needs no passcode: sub %v", rep.Claims["sub"])
	}

	// A new passcode asks everyone again.
	fresh := "a new passcode"
	if _, err := w.sharing.UpdateGrant(bg, caller, app.id, g.ID, identity.GrantPatch{Passcode: &fresh}); err != nil {
		t.Fatal(err)
	}
	deny(t, srv+"/", 403, "PERM_PASSCODE_REQUIRED", withCookie(cookieName, admission))

	// Without a passcode checker nobody is admitted by passcode.
	pn := w.edge(edgeOpts{noPass: true})
	deny(t, serve(t, pn.PortHandler(9002))+"/", 403, "PERM_PASSCODE_REQUIRED", withCookie(PasscodeCookie(other.id), otherAdmission))
}

// TestHostPolicyNarrowsTheGrantToEveryone: public_sharing none admits
// nobody through the grant to everyone, passcode_only only through one
// with a passcode.
func TestHostPolicyNarrowsTheGrantToEveryone(t *testing.T) {
	w := newWorld(t)
	carol := w.newPerson("carol")
	app := w.addApp("public", 9001)
	w.grant(app.id, authz.KindAnonymous, "")
	for _, tc := range []struct {
		sharing string
		status  int
	}{{policy.SharingAllowed, 200}, {policy.SharingPasscodeOnly, 401}, {policy.SharingNone, 401}} {
		pol := policy.Default()
		pol.PublicSharing = tc.sharing
		p, err := New(Config{}, Deps{Routes: w.table, Identity: w.ident, AppSessions: w.ident, Store: w.store, Signer: w.signer, Policy: policyFunc(func() policy.Policy { return pol })})
		if err != nil {
			t.Fatal(err)
		}
		srv := serve(t, p.PortHandler(9001))
		res, body := do(t, "GET", srv+"/")
		if res.StatusCode != tc.status {
			t.Errorf("public_sharing %s, anonymous: %d, want %d: %s", tc.sharing, res.StatusCode, tc.status, body)
		}
		if tc.status != 200 {
			deny(t, srv+"/", 403, "PERM_DENIED", w.as(carol, app))
		}
	}
}

// handoffLocation reads the edge's redirect to the console's handoff: the
// Location without its state, and the state cookie set with it.
func handoffLocation(t *testing.T, res *http.Response) (string, *http.Cookie) {
	t.Helper()
	if res.StatusCode != http.StatusSeeOther {
		t.Errorf("status %d, want 303", res.StatusCode)
	}
	loc := res.Header.Get("Location")
	base, query, _ := strings.Cut(loc, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatalf("Location %q: %v", loc, err)
	}
	st, ok := identity.ParseHandoffState(q.Get("state"))
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if ok && c.Name == stateCookie(st.ID) && c.Value == st.Secret {
			cookie = c
		}
	}
	q.Del("state")
	return base + "?" + q.Encode(), cookie
}
