package e2e

import (
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// consolePolicy is the Content-Security-Policy every console answer must
// carry: nothing inline, nothing from elsewhere, never framed.
const consolePolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// TestConsoleSetupSignInSignOut: on a fresh installation (no
// SVC_ADMIN_PASSWORD) the console at / sends the browser to /setup, whose
// form creates the administrator and signs it in, landing on the launcher
// with its empty state; signing out lands on /login, where a wrong
// password shows the API's AUTH_INVALID and the right one the launcher
// again; /setup then says the installation is set up. Every page answers
// with the console's Content-Security-Policy, reports no violation of it,
// and calls nothing but /api/v1 on its own origin; axe-core finds no
// serious violation on setup, sign-in and the empty launcher.
func TestConsoleSetupSignInSignOut(t *testing.T) {
	p := newProc(t, "console-setup", []string{
		"SVC_SERVER_ADDR=127.0.0.1:0",
		"SVC_SERVER_WORK_DIR=" + filepath.Join(t.TempDir(), "work"),
		"SVC_ADMIN_PASSWORD=",
	})
	base := p.startServing()
	res, err := http.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Security-Policy") != consolePolicy || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /login: %d %q, policy %q", res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Content-Security-Policy"))
	}

	tab := consoleTab(t, browse(t))
	tab.Go(base + "/")
	waitURL(t, tab, "a fresh installation", func(a string) bool { return a == base+"/setup" })
	waitFor(t, tab, "the setup form", `document.querySelector('input[name="display_name"]') && !document.querySelector('button[type=submit]').disabled`)
	accessible(t, tab, "setup")
	screenshots(t, tab, "setup")
	fill(t, tab, map[string]string{"username": "ada", "display_name": "Ada Lovelace", "password": "analytical-engine-1843"}, "username", "display_name", "password")
	waitURL(t, tab, "after setup", func(a string) bool { return a == base+"/" })
	waitText(t, tab, "No apps yet")
	waitText(t, tab, "svc launch samples/go-hello")
	waitText(t, tab, "Ada Lovelace")
	accessible(t, tab, "the empty launcher")
	screenshots(t, tab, "launcher-empty")

	click(t, tab, ".person button")
	waitURL(t, tab, "signing out", func(a string) bool { return a == base+"/login" })
	tab.Go(base + "/")
	waitURL(t, tab, "signed out, the launcher", func(a string) bool { return a == base+"/login" })
	waitFor(t, tab, "the sign-in form", `document.querySelector('input[name="password"]')`)
	fill(t, tab, map[string]string{"username": "ada", "password": "not-the-password-at-all"}, "username", "password")
	waitText(t, tab, "AUTH_INVALID")
	accessible(t, tab, "sign-in with an error")
	screenshots(t, tab, "login-error")
	fill(t, tab, map[string]string{"username": "ada", "password": "analytical-engine-1843"}, "username", "password")
	waitURL(t, tab, "signing in", func(a string) bool { return a == base+"/" })
	waitText(t, tab, "No apps yet")

	tab.Go(base + "/setup")
	waitText(t, tab, "svc is set up")
	noProblems(t, tab)
	onlyAPI(t, tab, base)
}

// TestConsoleLauncherAndPages, on a server with apps (port mode, the
// console at http://svc.localhost:<port>):
//   - next: a member whose account must change its password opens an app
//     shared with them; the edge sends the browser to /login?next=<the
//     handoff>; signing in leads to the forced password change (the API
//     refuses the launcher meanwhile), and changing it follows next to the
//     app, which receives the member's assertion. A next elsewhere
//     (https://evil.example/, //evil.example, /\evil.example) is refused
//     with a notice, and signing in lands on the launcher.
//   - the launcher lists the apps shared with the member (and the one
//     shared with everyone behind a passcode) as tiles, with their images; a favorite and a section (with an app filed through
//     the tile's menu, and collapsed) survive a reload; search narrows the
//     tiles; a tile opens its app.
//   - the passcode page of an app shared behind a passcode refuses a
//     wrong passcode with the API's message and admits the right one,
//     landing on the app; for an app without a passcode it shows NOT_FOUND.
//
// All through, the console calls only /api/v1 on its own origin and reports
// no problem; axe-core finds no serious violation on each page.
func TestConsoleLauncherAndPages(t *testing.T) {
	s := startWebServer(t, "port", "SVC_RUNTIME_ISOLATION=none")
	notes, guarded := s.app(t, "notes"), s.app(t, "guarded")
	s.must(t, "POST", "/apps/"+guarded.id+"/grants", map[string]any{"plane": "data", "principal_kind": "anonymous", "passcode": "open-sesame-42"}, http.StatusCreated, nil)
	var mia struct {
		User struct{ ID string } `json:"user"`
	}
	s.must(t, "POST", "/users", map[string]any{"username": "mia", "display_name": "Mia Member", "password": "first-password-for-mia", "must_change_password": true}, http.StatusCreated, &mia)
	shared := map[string]string{"notes": notes.id}
	for _, name := range []string{"Alpha Wiki", "Beta Board", "Gamma Graphs"} {
		shared[name] = s.createApp(t, name)
	}
	for _, id := range shared {
		s.must(t, "POST", "/apps/"+id+"/grants", map[string]any{"plane": "data", "principal_kind": "user", "principal_id": mia.User.ID}, http.StatusCreated, nil)
	}
	unshared := s.createApp(t, "Secret Admin Thing")

	b := browse(t)
	tab := consoleTab(t, b)
	page := notes.url + "page?x=1"
	tab.Go(page)
	if !strings.HasPrefix(tab.URL(), s.console+"/login?next=") {
		t.Fatalf("not signed in, the app's page ended at %s; want the console's sign-in page", tab.URL())
	}
	waitFor(t, tab, "the sign-in form", `document.querySelector('input[name="password"]')`)
	accessible(t, tab, "sign-in")
	screenshots(t, tab, "login")
	fill(t, tab, map[string]string{"username": "mia", "password": "first-password-for-mia"}, "username", "password")
	waitURL(t, tab, "signing in with a password to change", func(a string) bool { return strings.HasPrefix(a, s.console+"/account/password?next=") })
	waitText(t, tab, "Choose a new password")
	accessible(t, tab, "the forced password change")
	screenshots(t, tab, "password-forced")
	fill(t, tab, map[string]string{"current_password": "first-password-for-mia", "new_password": "second-password-for-mia", "new_password_again": "second-password-for-mia"}, "current_password", "new_password", "new_password_again")
	waitURL(t, tab, "after the password change, next", func(a string) bool { return a == page })
	if h := s.hostile.hits(notes.id, "/page"); len(h) == 0 || h[len(h)-1].UserID != mia.User.ID || !h[len(h)-1].Assertion {
		t.Errorf("the app got %+v; want mia's assertion", h)
	}

	// The launcher, as mia.
	tab = consoleTab(t, b)
	tab.Go(s.console + "/")
	waitFor(t, tab, "the launcher's tiles", `document.querySelectorAll('[data-group="other"] .tile').length === 5`)
	var names []string
	tab.MustEval(`[...document.querySelectorAll('.tile .name')].map((e) => e.textContent).sort()`, &names)
	if strings.Join(names, ",") != "Alpha Wiki,Beta Board,Gamma Graphs,guarded,notes" {
		t.Errorf("mia's launcher shows %v; want the four apps shared with her and the one shared with everyone", names)
	}
	// Each tile shows its app's image from the API, but the app behind a
	// passcode mia has not given (the API does not show her its image yet),
	// which shows its initial.
	waitFor(t, tab, "the tiles' images", `[...document.querySelectorAll('.tile')].every((t) => t.dataset.app === `+strconv.Quote(guarded.id)+` ? t.querySelector('.letter') : t.querySelector('img') && t.querySelector('img').complete && t.querySelector('img').naturalWidth > 0)`)
	accessible(t, tab, "the launcher")

	tile := func(id string) string { return `.tile[data-app="` + id + `"]` }
	click(t, tab, `[data-group="other"] `+tile(shared["Beta Board"])+` button.fav`)
	waitFor(t, tab, "Beta Board in favorites", `document.querySelector('[data-group="favorites"] `+tile(shared["Beta Board"])+`')`)
	fill(t, tab, map[string]string{"new-section": "Work"}, "new-section")
	waitFor(t, tab, "the section Work", `[...document.querySelectorAll('.group h2')].some((h) => h.textContent.startsWith("Work"))`)
	click(t, tab, `[data-group="other"] `+tile(shared["Alpha Wiki"])+` button.more`)
	waitFor(t, tab, "the tile's menu, focused", `document.activeElement && document.activeElement.getAttribute("role") === "menuitemradio"`)
	accessible(t, tab, "the launcher with a tile's menu open")
	screenshots(t, tab, "launcher-menu")
	tab.MustEval(`[...document.querySelectorAll('.menu button')].find((b) => b.textContent === "Work").click()`, nil)
	waitFor(t, tab, "Alpha Wiki filed in Work", `[...document.querySelectorAll('.group')].some((g) => g.querySelector('h2').textContent.startsWith("Work") && g.querySelector('`+tile(shared["Alpha Wiki"])+`'))`)
	screenshots(t, tab, "launcher")

	tab.Go(s.console + "/")
	waitFor(t, tab, "the launcher after a reload", `document.querySelector('[data-group="favorites"] `+tile(shared["Beta Board"])+`') && [...document.querySelectorAll('.group')].some((g) => g.querySelector('h2').textContent.startsWith("Work") && g.querySelector('`+tile(shared["Alpha Wiki"])+`'))`)
	tab.MustEval(`[...document.querySelectorAll('.group h2 button.disclosure')].find((b) => b.textContent.startsWith("Work")).click()`, nil)
	tab.Go(s.console + "/")
	waitFor(t, tab, "Work collapsed after a reload", `[...document.querySelectorAll('.group h2 button.disclosure')].some((b) => b.textContent.startsWith("Work") && b.getAttribute("aria-expanded") === "false") && document.querySelectorAll('.tile').length > 0`)
	if n := 0; true {
		tab.MustEval(`document.querySelectorAll('`+tile(shared["Alpha Wiki"])+`').length`, &n)
		if n != 0 {
			t.Errorf("the collapsed section still shows its tile")
		}
	}

	tab.MustEval(`(() => { const i = document.getElementById("search"); i.value = "gam"; i.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, nil)
	waitFor(t, tab, "the search for gam", `[...document.querySelectorAll('.tile .name')].map((e) => e.textContent).join() === "Gamma Graphs"`)
	screenshots(t, tab, "launcher-search")
	tab.MustEval(`(() => { const i = document.getElementById("search"); i.value = "zzz"; i.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, nil)
	waitText(t, tab, "No app matches")
	tab.MustEval(`(() => { const i = document.getElementById("search"); i.value = ""; i.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, nil)
	var hasUnshared bool
	tab.MustEval(`!!document.querySelector('`+tile(unshared)+`')`, &hasUnshared)
	if hasUnshared {
		t.Errorf("mia's launcher shows an app not shared with her")
	}
	noProblems(t, tab)
	onlyAPI(t, tab, s.console)
	// A tile opens its app.
	click(t, tab, tile(notes.id)+` a.open`)
	waitURL(t, tab, "the notes tile", func(a string) bool { return a == notes.url })

	// A next elsewhere is refused: signing in lands on the launcher.
	for _, next := range []string{"https://evil.example/", "//evil.example", `/\evil.example`} {
		ev := consoleTab(t, browse(t))
		ev.Go(s.console + "/login?next=" + url.QueryEscape(next))
		waitText(t, ev, "The next address is not followed")
		fill(t, ev, map[string]string{"username": "mia", "password": "second-password-for-mia"}, "username", "password")
		waitURL(t, ev, "signed in with next="+next, func(a string) bool { return a == s.console+"/" })
		noProblems(t, ev)
	}

	// The passcode page.
	pc := consoleTab(t, browse(t))
	pc.Go(guarded.url)
	if !strings.HasPrefix(pc.URL(), s.console+"/passcode/"+guarded.id+"?next=") {
		t.Fatalf("a passcode app sent the browser to %s", pc.URL())
	}
	waitText(t, pc, "guarded")
	waitFor(t, pc, "the passcode form", `!document.querySelector('button[type=submit]').disabled`)
	accessible(t, pc, "the passcode page")
	screenshots(t, pc, "passcode")
	fill(t, pc, map[string]string{"passcode": "not-the-passcode"}, "passcode")
	waitFor(t, pc, "a wrong passcode refused", `document.querySelector('[role=alert] .code')`)
	var code string
	pc.MustEval(`document.querySelector('[role=alert] .code code').textContent`, &code)
	if !strings.HasPrefix(code, "PERM_") && !strings.HasPrefix(code, "AUTH_") {
		t.Errorf("a wrong passcode shows the code %q", code)
	}
	fill(t, pc, map[string]string{"passcode": "open-sesame-42"}, "passcode")
	waitURL(t, pc, "the right passcode", func(a string) bool { return a == guarded.url })
	other := consoleTab(t, browse(t))
	other.Go(s.console + "/passcode/" + notes.id)
	waitText(t, other, "NOT_FOUND")
	noProblems(t, other)
}
