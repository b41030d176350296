package e2e

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/browsertest"
)

// The console's app pages (/apps, /apps/<app ID>/…) in a real Chromium
// against the real binary. Run them with:
//
//	go test -count=1 -run 'TestConsoleApps' ./internal/e2e/

// TestConsoleAppsPages, on a server in port mode with a deployed app (the
// Python sample) and a draft:
//   - the app list (/apps) shows both with their state, the deployed one
//     with its address; "New app" leads to /new, and the CLI's way is named;
//   - the overview shows the workload running and passing, the app's URL,
//     and usage, without shifting its layout as they arrive; Restart asks
//     for confirmation and the API records the restart;
//   - the deploys page shows the history; Deploy (of a revision whose
//     workload takes seconds to start) shows the deploy's first log line
//     before the deploy finished (by the server's finished_at), then the
//     outcome succeeded, with every line the API's stream has;
//   - a revision asking for an approval (deploy.approvals: 1) deployed from
//     the page waits for approval; its asker's Approve shows the API's
//     PERM_DENIED; another administrator, in a second browser, approves it,
//     and both pages see it succeed; a second such deploy is rejected with
//     a reason, which the page shows;
//   - Roll back, confirmed, ships the release before the current one again
//     (redeploys: that deploy) and succeeds;
//   - the logs page reads the workload's output and, following it, shows
//     the line a request to the app writes; for a draft it shows the API's
//     refusal (message, remedy, code), and following shows the same; the
//     draft's deploys page says there are none yet, and Deploy shows the
//     API's refusal;
//   - Stop and Start, each confirmed, and the page follows the app's state.
//
// All through, the console calls only /api/v1 on its own origin (the
// deploy's log as an EventSource) and reports no problem (no CSP
// violation); axe-core finds no serious violation on each page, in the
// light and dark themes; screenshots of each go to SVC_SCREENSHOTS.
func TestConsoleAppsPages(t *testing.T) {
	s := startWebServer(t, "port", "SVC_RUNTIME_ISOLATION=none")
	notes := s.appOf(t, "notes", samples[2]) // python-hello: a process with output of its own
	draft := s.createApp(t, "Draft Thing")
	var one struct {
		Spec struct {
			Spec specDoc `json:"spec"`
		} `json:"spec"`
	}
	s.must(t, "GET", "/apps/"+notes.id+"/specs/1", nil, http.StatusOK, &one)
	// A revision whose workload takes seconds to start listening: its
	// deploy runs long enough for the page to show its log while it runs.
	slow := clone(t, one.Spec.Spec)
	run := slow["workloads"].(map[string]any)["web"].(map[string]any)["run"].(map[string]any)
	run["command"] = append([]any{"sh", "-c", "echo warming up; sleep 3; exec \"$@\"", "sh"}, run["command"].([]any)...)
	slowRev := s.newRevision(t, notes.id, slow)

	tab := consoleTab(t, browse(t))
	watchLayoutShift(tab)
	s.signInTab(t, tab, "admin", adminPassword)

	// The app list.
	tab.Go(s.console + "/apps")
	row := func(id string) string { return `tr[data-app="` + id + `"]` }
	waitFor(t, tab, "both apps listed", `document.querySelector('`+row(notes.id)+`') && document.querySelector('`+row(draft)+`')`)
	var cells []string
	tab.MustEval(`[...document.querySelectorAll('`+row(notes.id)+` td')].map((c) => c.innerText.trim())`, &cells)
	if len(cells) != 4 || cells[0] != "notes" || cells[1] != notes.slug || cells[2] != "running" || cells[3] != notes.url {
		t.Errorf("the list's row of notes: %q; want its name, slug, state running and address %s", cells, notes.url)
	}
	tab.MustEval(`[...document.querySelectorAll('`+row(draft)+` td')].map((c) => c.innerText.trim())`, &cells)
	if len(cells) != 4 || cells[2] != "draft" || cells[3] != "none yet" {
		t.Errorf("the list's row of the draft: %q", cells)
	}
	waitFor(t, tab, "New app leading to /new", `document.querySelector('.toolbar a.primary[href="/new"]')`)
	waitText(t, tab, "svc launch ./my-app")
	accessible(t, tab, "the app list")
	screenshots(t, tab, "apps-list")

	// The overview.
	tab.MustEval(`window.__cls = 0`, nil)
	click(t, tab, row(notes.id)+` a`)
	waitURL(t, tab, "the app's overview", func(a string) bool { return a == s.console+"/apps/"+notes.id })
	waitFor(t, tab, "the workload running and passing", `(() => { const r = document.querySelector('[data-table="workloads"] tbody tr'); return r && r.innerText.includes("running") && r.innerText.includes("passing"); })()`)
	waitFor(t, tab, "the usage table", `document.querySelector('[data-table="usage"]')`)
	noLayoutShift(t, tab, "the overview")
	var open string
	tab.MustEval(`document.querySelector('a.open-link').getAttribute('href')`, &open)
	if open != notes.url {
		t.Errorf("the overview's open link goes to %q; want %s", open, notes.url)
	}
	waitFor(t, tab, "the title", `document.title === "notes · svc"`)
	accessible(t, tab, "the overview")
	screenshots(t, tab, "app-overview")
	clickButton(t, tab, ".overview .actions", "Restart")
	waitFor(t, tab, "the confirmation", `document.querySelector('dialog.confirm[open]')`)
	accessible(t, tab, "the overview's confirmation")
	screenshots(t, tab, "app-restart-confirm")
	clickButton(t, tab, "dialog.confirm", "Restart notes")
	waitFor(t, tab, "the dialog closed", `!document.querySelector('dialog.confirm')`)
	waitForAPI(t, "the restart recorded in the audit log", func() bool { return s.audited(t, "app.restart", notes.id) })

	// The deploys page: history, then a deploy whose log streams live.
	tab.MustEval(`window.__cls = 0`, nil)
	click(t, tab, `nav.tabs a[href$="/deploys"]`)
	waitFor(t, tab, "the history", `document.querySelectorAll('[data-table="deploys"] tbody tr').length === 1`)
	noLayoutShift(t, tab, "the deploys page")
	depURL, depID := s.deployStreamed(t, tab, notes.id, func() {
		fill(t, tab, map[string]string{"revision": strconv.Itoa(slowRev)}, "revision")
	})
	waitFor(t, tab, "two deploys in the history", `document.querySelectorAll('[data-table="deploys"] tbody tr').length === 2`)
	accessible(t, tab, "the deploys page with a deploy's log")
	screenshots(t, tab, "app-deploy-log")

	// A revision asking for an approval.
	doc := one.Spec.Spec
	doc["deploy"] = map[string]any{"approvals": 1}
	rev2 := s.newRevision(t, notes.id, doc)
	fill(t, tab, map[string]string{"revision": strconv.Itoa(rev2)}, "revision")
	heldURL := waitURL(t, tab, "the held deploy's page", func(a string) bool {
		return strings.HasPrefix(a, s.console+"/apps/"+notes.id+"/deploys/dep_") && a != depURL
	})
	waitText(t, tab, "This deploy waits for approval")
	accessible(t, tab, "a deploy waiting for approval")
	screenshots(t, tab, "app-deploy-held")
	clickButton(t, tab, ".approval", "Approve")
	waitFor(t, tab, "the asker's approval refused", `document.querySelector('.deploy-detail [role=alert] .code')`)
	var refusal string
	tab.MustEval(`document.querySelector('.deploy-detail [role=alert]').innerText`, &refusal)
	if !strings.Contains(refusal, "PERM_DENIED") || !strings.Contains(refusal, "another person") {
		t.Errorf("approving one's own deploy shows %q; want PERM_DENIED saying another person approves", refusal)
	}
	var bob struct {
		User struct{ ID string } `json:"user"`
	}
	s.must(t, "POST", "/users", map[string]any{"username": "bob", "display_name": "Bob Approver", "password": "bob-password-4242-x"}, http.StatusCreated, &bob)
	s.must(t, "PUT", "/users/"+bob.User.ID+"/role", map[string]string{"role_id": "role_admin"}, http.StatusOK, nil)
	bobTab := consoleTab(t, browse(t))
	s.signInTab(t, bobTab, "bob", "bob-password-4242-x")
	bobTab.Go(heldURL)
	waitText(t, bobTab, "This deploy waits for approval")
	clickButton(t, bobTab, ".approval", "Approve")
	waitFor(t, bobTab, "the approved deploy's outcome", `document.querySelector('.outcome').dataset.outcome === "succeeded"`)
	waitFor(t, tab, "the asker's page sees it succeed", `document.querySelector('.outcome').dataset.outcome === "succeeded" && document.querySelector('.facts').innerText.includes("1 of 1")`)
	noProblems(t, bobTab)
	onlyAPI(t, bobTab, s.console)

	// Another deploy of it, rejected with a reason.
	fill(t, tab, map[string]string{"revision": strconv.Itoa(rev2)}, "revision")
	rejURL := waitURL(t, tab, "the second held deploy's page", func(a string) bool {
		return strings.HasPrefix(a, s.console+"/apps/"+notes.id+"/deploys/dep_") && a != depURL && a != heldURL
	})
	waitText(t, tab, "This deploy waits for approval")
	fill(t, tab, map[string]string{"reject_reason": "not today, the demo is at noon"}, "reject_reason")
	waitFor(t, tab, "the rejected deploy", `document.querySelector('.outcome').dataset.outcome === "rejected"`)
	waitText(t, tab, "Rejected: not today, the demo is at noon")
	screenshots(t, tab, "app-deploy-rejected")

	// Roll back.
	clickButton(t, tab, ".deploys .actions", "Roll back")
	waitFor(t, tab, "the rollback's confirmation", `document.querySelector('dialog.confirm[open]')`)
	accessible(t, tab, "the rollback's confirmation")
	clickButton(t, tab, "dialog.confirm", "Roll back")
	rbURL := waitURL(t, tab, "the rollback's page", func(a string) bool {
		return strings.HasPrefix(a, s.console+"/apps/"+notes.id+"/deploys/dep_") && a != depURL && a != heldURL && a != rejURL
	})
	waitFor(t, tab, "the rollback's outcome", `document.querySelector('.outcome').dataset.outcome === "succeeded"`)
	var rb struct {
		Deployment struct {
			Revision  int
			Redeploys *string
		}
	}
	s.must(t, "GET", "/apps/"+notes.id+"/deployments/"+rbURL[strings.LastIndex(rbURL, "/")+1:], nil, http.StatusOK, &rb)
	if rb.Deployment.Revision != slowRev || rb.Deployment.Redeploys == nil || *rb.Deployment.Redeploys != depID {
		t.Errorf("the rollback ships revision %d (redeploys set: %t); want revision %d again, the deploy %s", rb.Deployment.Revision, rb.Deployment.Redeploys != nil, slowRev, depID)
	}
	waitText(t, tab, "rollback of "+depID)
	screenshots(t, tab, "app-deploy-rollback")

	// The logs page.
	click(t, tab, `nav.tabs a[href$="/logs"]`)
	waitURL(t, tab, "the logs page", func(a string) bool { return a == s.console+"/apps/"+notes.id+"/logs" })
	waitFor(t, tab, "the log read", `!document.querySelector('.log').innerText.includes("Reading the log")`)
	clickButton(t, tab, ".logs .actions", "Follow")
	waitText(t, tab, "Following: new lines appear as they are written.")
	// A request to the app writes a line, which the page shows as it comes.
	marker := "/console-follow-" + randomHex(t)
	if _, _, err := hit("GET", s.waitRunning(t, notes.id), marker); err != nil {
		t.Fatal(err)
	}
	waitText(t, tab, "GET "+marker)
	accessible(t, tab, "the logs page")
	screenshots(t, tab, "app-logs")
	clickButton(t, tab, ".logs .actions", "Stop following")

	// A draft has no output: the page shows the API's refusal (message,
	// remedy, code), and so does following it (the stream's refusal, read
	// from the same answer).
	tab.Go(s.console + "/apps/" + draft + "/logs")
	waitFor(t, tab, "the draft's logs refused", `document.querySelector('.logs [role=alert] .code')`)
	var refused, followRefused string
	tab.MustEval(`[...document.querySelectorAll('.logs [role=alert] .msg, .logs [role=alert] .remedy, .logs [role=alert] .code code')].map((e) => e.innerText).join(" | ")`, &refused)
	clickButton(t, tab, ".logs .actions", "Follow")
	waitText(t, tab, "Follow") // the follow ended at once
	waitFor(t, tab, "the draft's follow refused", `document.querySelector('.logs [role=alert] .code') && document.querySelector('.logs .actions button[aria-pressed="false"]')`)
	tab.MustEval(`[...document.querySelectorAll('.logs [role=alert] .msg, .logs [role=alert] .remedy, .logs [role=alert] .code code')].map((e) => e.innerText).join(" | ")`, &followRefused)
	if !strings.HasSuffix(refused, " | STATE_INVALID") || followRefused != refused {
		t.Errorf("the draft's logs page shows %q, and after Follow %q; want the API's refusal both times", refused, followRefused)
	}
	accessible(t, tab, "the logs page with a refusal")
	screenshots(t, tab, "app-logs-refused")

	// The draft's deploys page: no deploys yet, and Deploy shows the API's
	// refusal (nothing to deploy).
	click(t, tab, `nav.tabs a[href$="/deploys"]`)
	waitText(t, tab, "No deploys yet")
	click(t, tab, `.deploys form.inline-form button[type=submit]`)
	waitFor(t, tab, "the draft's deploy refused", `document.querySelector('.deploys [role=alert] .code')`)
	accessible(t, tab, "the deploys page, empty, with a refusal")
	screenshots(t, tab, "app-deploys-empty")

	// Stop and start, each confirmed: the page follows the app's state.
	tab.Go(s.console + "/apps/" + notes.id)
	waitFor(t, tab, "the overview", `document.querySelector('[data-table="workloads"]')`)
	clickButton(t, tab, ".overview .actions", "Stop")
	clickButton(t, tab, "dialog.confirm", "Stop notes")
	waitFor(t, tab, "the app stopped", `document.querySelector('.app-facts').innerText.includes("stopped") && !document.querySelector('[data-table="workloads"] tbody tr .pill-ok')`)
	screenshots(t, tab, "app-overview-stopped")
	clickButton(t, tab, ".overview .actions", "Start")
	clickButton(t, tab, "dialog.confirm", "Start notes")
	waitFor(t, tab, "the app running again", `document.querySelector('.app-facts').innerText.includes("running") && document.querySelector('[data-table="workloads"] tbody tr').innerText.includes("passing")`)
	if !s.audited(t, "app.stop", notes.id) || !s.audited(t, "app.start", notes.id) {
		t.Errorf("the audit log lacks the stop or the start")
	}

	noProblems(t, tab)
	onlyAPI(t, tab, s.console)
	var streamed bool
	for _, r := range tab.Requests() {
		if r.Type == "EventSource" && strings.HasSuffix(r.URL, "/deployments/"+depID+"/logs") {
			streamed = true
		}
	}
	if !streamed {
		t.Errorf("the deploy's log was not read as an EventSource")
	}
}

// TestConsoleAppsPathMode: in path routing mode the console's app pages
// (/apps/<app ID>/…, an ID with an underscore) and the app list (/apps)
// are the console's (before, the edge took every /apps/… and sent the
// browser to sign in to an app that does not exist), while /apps/<slug>/
// still reaches the app. Also: a member who manages no app sees the app
// list's empty state; after a failed deploy the overview shows the
// status's problem (code and message, and remedy when it has one) and links
// to the failed deploy, whose page shows its log and outcome.
func TestConsoleAppsPathMode(t *testing.T) {
	s := startWebServer(t, "path", "SVC_RUNTIME_ISOLATION=none")
	notes := s.appOf(t, "notes", samples[2])
	if notes.url != s.console+"/apps/"+notes.slug+"/" {
		t.Fatalf("in path mode the app's address is %s", notes.url)
	}
	tab := consoleTab(t, browse(t))
	s.signInTab(t, tab, "admin", adminPassword)
	hops := tab.Go(s.console + "/apps/" + notes.id + "/deploys")
	if len(hops) != 1 || hops[0].Status != http.StatusOK {
		t.Fatalf("the console's deploys page in path mode: %+v", hops)
	}
	waitFor(t, tab, "the deploys page", `document.querySelectorAll('[data-table="deploys"] tbody tr').length === 1`)
	tab.Go(s.console + "/apps/" + notes.id)
	waitFor(t, tab, "the overview", `(() => { const r = document.querySelector('[data-table="workloads"] tbody tr'); return r && r.innerText.includes("running"); })()`)
	tab.Go(s.console + "/apps")
	waitFor(t, tab, "the app list", `document.querySelector('tr[data-app="`+notes.id+`"]')`)
	noProblems(t, tab)
	onlyAPI(t, tab, s.console)

	// A member who manages no app sees the list's empty state.
	var mia struct {
		User struct{ ID string } `json:"user"`
	}
	s.must(t, "POST", "/users", map[string]any{"username": "mia", "display_name": "Mia Member", "password": "mia-password-5150-x"}, http.StatusCreated, &mia)
	miaTab := consoleTab(t, browse(t))
	s.signInTab(t, miaTab, "mia", "mia-password-5150-x")
	miaTab.Go(s.console + "/apps")
	waitText(t, miaTab, "No apps to manage yet")
	waitText(t, miaTab, "svc launch ./my-app")
	accessible(t, miaTab, "the empty app list")
	screenshots(t, miaTab, "apps-empty")
	noProblems(t, miaTab)

	// A deploy that fails: the overview shows the problem, with its code
	// and remedy, as GET …/status has it.
	var one struct {
		Spec struct {
			Spec specDoc `json:"spec"`
		} `json:"spec"`
	}
	s.must(t, "GET", "/apps/"+notes.id+"/specs/1", nil, http.StatusOK, &one)
	broken := one.Spec.Spec
	broken["workloads"].(map[string]any)["web"].(map[string]any)["run"].(map[string]any)["command"] = []string{"sh", "-c", "echo this build is broken; exit 3"}
	d := s.deploy(t, notes.id, s.newRevision(t, notes.id, broken))
	if _, end := s.follow(t, notes.id, d.ID); end.State != "failed" {
		t.Fatalf("the broken revision's deploy ended %s", end.State)
	}
	var st struct {
		Problem *struct{ Code, Message, Remedy string } `json:"problem"`
	}
	s.must(t, "GET", "/apps/"+notes.id+"/status", nil, http.StatusOK, &st)
	if st.Problem == nil {
		t.Fatalf("after a failed deploy the status has no problem")
	}
	tab.Go(s.console + "/apps/" + notes.id)
	waitFor(t, tab, "the problem shown", `document.querySelector('.overview .problem .code')`)
	var shown []string
	tab.MustEval(`[...document.querySelectorAll('.overview .problem p')].map((p) => p.innerText)`, &shown)
	if len(shown) < 2 || shown[len(shown)-1] != st.Problem.Code || !strings.Contains(strings.ToLower(shown[0]), strings.ToLower(strings.TrimSuffix(st.Problem.Message, "."))) {
		t.Errorf("the overview shows the problem as %q; the status has %+v", shown, *st.Problem)
	}
	if st.Problem.Remedy != "" && (len(shown) != 3 || !strings.Contains(strings.ToLower(shown[1]), strings.ToLower(strings.TrimSuffix(st.Problem.Remedy, ".")))) {
		t.Errorf("the overview shows %q without the problem's remedy %q", shown, st.Problem.Remedy)
	}
	click(t, tab, `.overview a[href$="/deploys/`+d.ID+`"]`)
	waitFor(t, tab, "the failed deploy's outcome", `document.querySelector('.outcome').dataset.outcome === "failed"`)
	waitText(t, tab, "this build is broken")
	tab.Go(s.console + "/apps/" + notes.id)
	waitFor(t, tab, "the problem shown again", `document.querySelector('.overview .problem .code')`)
	accessible(t, tab, "the overview with a problem")
	screenshots(t, tab, "app-overview-problem")

	before := len(s.hostile.hits(notes.id, "/"))
	tab.Go(notes.url + "page")
	waitURL(t, tab, "the app's page", func(a string) bool { return a == notes.url+"page" })
	if h := s.hostile.hits(notes.id, "/page"); len(h) == 0 || len(s.hostile.hits(notes.id, "/")) <= before {
		t.Errorf("the app at /apps/%s/ was not reached: %+v", notes.slug, h)
	}
}

// clickButton clicks the button inside the element matching scope whose
// text is label.
func clickButton(t *testing.T, tab *browsertest.Tab, scope, label string) {
	t.Helper()
	var ok bool
	tab.MustEval(`(() => { const b = [...document.querySelectorAll(`+strconv.Quote(scope+" button")+`)].find((b) => b.innerText.trim() === `+strconv.Quote(label)+` && !b.disabled); if (!b) return false; b.click(); return true; })()`, &ok)
	if !ok {
		waitFor(t, tab, "the button "+label+" in "+scope, `[...document.querySelectorAll(`+strconv.Quote(scope+" button")+`)].some((b) => b.innerText.trim() === `+strconv.Quote(label)+` && !b.disabled)`)
		clickButton(t, tab, scope, label)
	}
}

// watchLayoutShift makes the tab's pages add up their layout shifts
// (those not caused by the person's input) in window.__cls.
func watchLayoutShift(tab *browsertest.Tab) {
	tab.OnNewDocument(`window.__cls = 0; new PerformanceObserver((l) => { for (const e of l.getEntries()) if (!e.hadRecentInput) window.__cls += e.value; }).observe({type: "layout-shift", buffered: true});`)
}

// noLayoutShift fails the test when the page moved as its data arrived
// since window.__cls was last reset: a cumulative layout shift of 0.02 or
// more (0.1 is the web's "good" bound; the console aims for none).
func noLayoutShift(t *testing.T, tab *browsertest.Tab, page string) {
	t.Helper()
	// Let the last frames be painted and their shifts reported.
	tab.MustEval(`new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(() => r(true), 100))))`, nil)
	var cls float64
	tab.MustEval(`window.__cls`, &cls)
	t.Logf("cumulative layout shift of %s: %.4f", page, cls)
	if cls >= 0.02 {
		t.Errorf("%s shifted its layout as data arrived: cumulative layout shift %.4f", page, cls)
	}
}

// clone copies a spec document.
func clone(t *testing.T, doc specDoc) specDoc {
	t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var out specDoc
	mustJSON(t, b, &out)
	return out
}

// audited says whether the audit log has an entry of action on the app.
func (s *webServer) audited(t *testing.T, action, appID string) bool {
	t.Helper()
	var list struct {
		Items []struct{ Action string } `json:"items"`
	}
	s.must(t, "GET", "/audit?action="+action+"&app_id="+appID, nil, http.StatusOK, &list)
	return len(list.Items) > 0
}

// waitForAPI waits until cond holds.
func waitForAPI(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := scaled(30 * time.Second)
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
