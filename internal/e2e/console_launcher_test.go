package e2e

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/browsertest"
)

// The launcher's filing (/): drag and drop, and the keyboard. Run it with:
//
//	go test -count=1 -run 'TestConsoleLauncherFiling' ./internal/e2e/

// TestConsoleLauncherFiling, as the administrator of a fresh installation:
//   - with no app, the launcher says so and links to /new (the person
//     holds app.create); a member without app.create gets no such link;
//   - the launcher's data (GET /api/v1/me/apps) is asked for before the
//     answer to who is signed in (GET /api/v1/me) has arrived: in parallel;
//   - with three apps and a section Work: a tile dragged with the mouse
//     (the browser's own HTML5 drag and drop, from real mouse events
//     through the DevTools protocol; no synthetic DragEvent) onto Work is
//     filed there, also after a reload and by the API; dragged onto Other
//     apps it leaves the section; dragged onto Favorites it is pinned;
//   - with the keyboard alone (Tab to reach each control, Enter, Space,
//     arrows and typing through the browser's input): create a section,
//     pin an app, file an app into the section through its menu, rename
//     the section, collapse and expand it, search; each change is checked
//     through the API (collapsing, kept in this browser, after a reload).
//
// All through, the console calls only /api/v1, loads nothing of the
// terminal's (xterm.js is the terminal page's chunk), and reports no problem;
// axe-core finds no serious violation; screenshots go to SVC_SCREENSHOTS.
func TestConsoleLauncherFiling(t *testing.T) {
	s := startWebServer(t, "port")
	tab := consoleTab(t, browse(t))
	s.signInTab(t, tab, "admin", adminPassword)

	// Empty: the way to /new.
	tab.Go(s.console + "/")
	waitFor(t, tab, "the empty launcher's link to /new", `document.querySelector('.empty-state a[href="/new"]')`)
	accessible(t, tab, "the empty launcher")
	screenshots(t, tab, "launcher-empty")
	click(t, tab, `.empty-state a[href="/new"]`)
	waitURL(t, tab, "the new-app page", func(a string) bool { return a == s.console+"/new" })

	_, _ = s.member(t, "eve")
	et := consoleTab(t, browse(t))
	s.signInTab(t, et, "eve", "eve-password-93d1")
	et.Go(s.console + "/")
	waitFor(t, et, "eve's empty launcher", `document.querySelector('.empty-next') && document.querySelector('.empty-next').getAttribute('aria-busy') === "false"`)
	var eve struct {
		Link  bool     `json:"link"`
		Verbs []string `json:"verbs"`
	}
	et.MustEval(`fetch('/api/v1/me').then((r) => r.json()).then((m) => ({verbs: m.verbs, link: !!document.querySelector('.empty-state a[href="/new"]')}))`, &eve)
	creates := false
	for _, v := range eve.Verbs {
		creates = creates || v == "app.create"
	}
	if eve.Link != creates {
		t.Errorf("eve (verbs %v) is shown the link to /new: %v; want it exactly when she holds app.create", eve.Verbs, eve.Link)
	}
	noProblems(t, et)

	ids := map[string]string{}
	for _, name := range []string{"Alpha", "Beta", "Gamma"} {
		ids[name] = s.createApp(t, name)
	}
	var work struct {
		Section struct{ ID string } `json:"section"`
	}
	s.must(t, "POST", "/me/sections", map[string]string{"name": "Work"}, http.StatusCreated, &work)

	tab.Go(s.console + "/")
	waitFor(t, tab, "three tiles", `document.querySelectorAll('[data-group="other"] .tile').length === 3`)
	// /me/apps left before /me's answer came.
	var timing struct{ Me, Apps, MeEnd float64 }
	tab.MustEval(`(() => { const e = performance.getEntriesByType("resource"), f = (p) => e.find((x) => new URL(x.name).pathname === p);
  const me = f("/api/v1/me"), apps = f("/api/v1/me/apps");
  return {me: me.startTime, meEnd: me.responseEnd, apps: apps.startTime}; })()`, &timing)
	t.Logf("GET /me from %.1f to %.1f ms; GET /me/apps from %.1f ms (since navigation)", timing.Me, timing.MeEnd, timing.Apps)
	if timing.Apps >= timing.MeEnd {
		t.Errorf("GET /me/apps started at %.1f ms, after GET /me's answer (%.1f ms): not in parallel", timing.Apps, timing.MeEnd)
	}

	tile := func(id string) string { return `.tile[data-app="` + id + `"]` }
	group := func(id string) string { return `[data-group="` + id + `"]` }
	inGroup := func(g, app string) string { return `document.querySelector('` + group(g) + ` ` + tile(app) + `')` }

	// Drag and drop, with the mouse.
	tab.Drag(group("other")+" "+tile(ids["Alpha"])+" .name", group(work.Section.ID))
	waitFor(t, tab, "Alpha dropped into Work", inGroup(work.Section.ID, ids["Alpha"]))
	waitForAPI(t, "Alpha in Work, by the API", func() bool { return s.launcherEntry(t, ids["Alpha"]).SectionID == work.Section.ID })
	tab.Go(s.console + "/")
	waitFor(t, tab, "Alpha still in Work after a reload", inGroup(work.Section.ID, ids["Alpha"])+` && !`+inGroup("other", ids["Alpha"]))
	screenshots(t, tab, "launcher-filed")
	tab.Drag(group(work.Section.ID)+" "+tile(ids["Alpha"])+" .name", group("other"))
	waitFor(t, tab, "Alpha dropped back into Other apps", inGroup("other", ids["Alpha"])+` && !`+inGroup(work.Section.ID, ids["Alpha"]))
	waitForAPI(t, "Alpha in no section, by the API", func() bool { return s.launcherEntry(t, ids["Alpha"]).SectionID == "" })
	tab.Drag(group("other")+" "+tile(ids["Beta"])+" .name", group(work.Section.ID))
	waitFor(t, tab, "Beta dropped into Work", inGroup(work.Section.ID, ids["Beta"]))
	tab.Drag(group(work.Section.ID)+" "+tile(ids["Beta"])+" .name", group("other"))
	waitFor(t, tab, "Beta back in Other apps", inGroup("other", ids["Beta"]))
	// Favorites shows once something is pinned (by keyboard, below).

	// The keyboard alone.
	tabTo(t, tab, "#new-section")
	tab.Press("Play"+browsertest.KeyEnter, false)
	waitFor(t, tab, "the section Play", `[...document.querySelectorAll('.group h2')].some((h) => h.textContent.startsWith("Play"))`)
	play := s.sectionID(t, "Play")
	if play == "" {
		t.Fatalf("the API has no section Play")
	}
	tabTo(t, tab, group("other")+" "+tile(ids["Gamma"])+" button.fav")
	tab.Press(browsertest.KeyEnter, false)
	waitFor(t, tab, "Gamma in Favorites", inGroup("favorites", ids["Gamma"]))
	waitForAPI(t, "Gamma a favorite, by the API", func() bool { return s.launcherEntry(t, ids["Gamma"]).Favorite })
	tabTo(t, tab, group("other")+" "+tile(ids["Gamma"])+" button.more")
	tab.Press(browsertest.KeyEnter, false)
	waitFor(t, tab, "the menu, its first item focused", `document.activeElement && document.activeElement.getAttribute("role") === "menuitemradio"`)
	for i := 0; i < 3; i++ {
		var label string
		tab.MustEval(`document.activeElement.textContent`, &label)
		if label == "Play" {
			break
		}
		tab.Press(browsertest.KeyArrowDown, false)
	}
	focused(t, tab, "the menu's item Play", `document.activeElement.textContent === "Play"`)
	tab.Press(browsertest.KeyEnter, false)
	waitFor(t, tab, "Gamma filed in Play", inGroup(play, ids["Gamma"]))
	waitForAPI(t, "Gamma in Play, by the API", func() bool { return s.launcherEntry(t, ids["Gamma"]).SectionID == play })
	focused(t, tab, "the focus back on the tile's menu button", `document.activeElement.matches('`+tile(ids["Gamma"])+` button.more')`)

	tabTo(t, tab, group(play)+" .group-actions button:first-child")
	tab.Press(browsertest.KeyEnter, false)
	focused(t, tab, "the section's name, to rename", `document.activeElement.id === "group-`+play+`-name"`)
	tab.Press("Games"+browsertest.KeyEnter, false)
	waitFor(t, tab, "the section renamed Games", `document.querySelector('`+group(play)+` h2').textContent.startsWith("Games")`)
	waitForAPI(t, "Games, by the API", func() bool { return s.sectionID(t, "Games") == play })

	tabTo(t, tab, group(play)+" button.disclosure")
	tab.Press(browsertest.KeySpace, false)
	waitFor(t, tab, "Games collapsed", `document.querySelector('`+group(play)+` button.disclosure').getAttribute("aria-expanded") === "false" && !`+inGroup(play, ids["Gamma"]))
	tab.Go(s.console + "/")
	waitFor(t, tab, "Games still collapsed after a reload", `document.querySelector('`+group(play)+` button.disclosure') && document.querySelector('`+group(play)+` button.disclosure').getAttribute("aria-expanded") === "false"`)
	tabTo(t, tab, group(play)+" button.disclosure")
	tab.Press(browsertest.KeyEnter, false)
	waitFor(t, tab, "Games expanded", inGroup(play, ids["Gamma"]))

	// Favorites shows now: a tile dragged onto it is pinned.
	tab.Drag(group("other")+" "+tile(ids["Beta"])+" .name", group("favorites"))
	waitFor(t, tab, "Beta dropped into Favorites", inGroup("favorites", ids["Beta"]))
	waitForAPI(t, "Beta a favorite, by the API", func() bool { return s.launcherEntry(t, ids["Beta"]).Favorite })

	tabTo(t, tab, "#search")
	tab.Press("alp", false)
	waitFor(t, tab, "the search for alp", `[...document.querySelectorAll('.tile .name')].map((e) => e.textContent).join() === "Alpha"`)
	screenshots(t, tab, "launcher-keyboard")
	accessible(t, tab, "the launcher, searched")
	for _, r := range tab.Requests() {
		if strings.Contains(r.URL, "/assets/terminal-screen-") || strings.Contains(r.URL, "/assets/xterm-") {
			t.Errorf("the launcher loaded the terminal's %s", r.URL)
		}
	}
	noProblems(t, tab)
	onlyAPI(t, tab, s.console)
}

// tabTo presses Tab (at most 100 times) until the element matching the
// CSS selector has the focus: it is reachable with the keyboard.
func tabTo(t *testing.T, tab *browsertest.Tab, selector string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		var there bool
		tab.MustEval(`!!document.activeElement && document.activeElement.matches(`+strconv.Quote(selector)+`)`, &there)
		if there {
			return
		}
		tab.Press(browsertest.KeyTab, false)
	}
	var at string
	tab.MustEval(`document.activeElement ? document.activeElement.outerHTML.slice(0, 200) : "nothing"`, &at)
	t.Fatalf("Tab never reached %s (the focus is on %s)", selector, at)
}

// focused waits until the expression about document.activeElement holds.
func focused(t *testing.T, tab *browsertest.Tab, what, js string) {
	t.Helper()
	waitFor(t, tab, what, `document.activeElement && (`+js+`)`)
}

// launcherItem is an app of GET /me/apps.
type launcherItem struct {
	Favorite  bool   `json:"favorite"`
	SectionID string `json:"section_id"`
}

// launcherEntry is the app's entry in the administrator's launcher.
func (s *webServer) launcherEntry(t *testing.T, appID string) launcherItem {
	t.Helper()
	var page struct {
		Items []struct {
			App struct{ ID string } `json:"app"`
			launcherItem
		} `json:"items"`
	}
	s.must(t, "GET", "/me/apps?limit=500", nil, http.StatusOK, &page)
	for _, it := range page.Items {
		if it.App.ID == appID {
			return it.launcherItem
		}
	}
	t.Fatalf("the launcher has no app %s", appID)
	return launcherItem{}
}

// sectionID is the ID of the administrator's section named name, or "".
func (s *webServer) sectionID(t *testing.T, name string) string {
	t.Helper()
	var page struct {
		Sections []struct{ ID, Name string } `json:"sections"`
	}
	s.must(t, "GET", "/me/apps?limit=1", nil, http.StatusOK, &page)
	for _, sec := range page.Sections {
		if sec.Name == name {
			return sec.ID
		}
	}
	return ""
}
