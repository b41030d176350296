package e2e

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/browsertest"
)

// The console's security page of an app, its idle setting and the
// installation's upgrade page, in a real Chromium against the real
// binary. Run them with:
//
//	go test -count=1 -run 'TestConsoleSecurity' ./internal/e2e/

// securityView is GET …/security's "security", as far as the test reads it.
type securityView struct {
	State    string `json:"state"`
	Score    *int   `json:"score"`
	Findings []struct {
		Severity string  `json:"severity"`
		Title    string  `json:"title"`
		Path     *string `json:"path"`
		Fixable  bool    `json:"fixable"`
	} `json:"findings"`
	Basis []struct {
		Scanner string `json:"scanner"`
	} `json:"basis"`
}

func (s *webServer) security(t *testing.T, appID string) securityView {
	t.Helper()
	var out struct {
		Security securityView `json:"security"`
	}
	s.must(t, "GET", "/apps/"+appID+"/security", nil, http.StatusOK, &out)
	return out.Security
}

// viewerTab gives the account vera the viewer role on the app and signs
// it in on a tab of its own.
func (s *webServer) viewerTab(t *testing.T, appID string) *browsertest.Tab {
	t.Helper()
	viewer, _ := s.member(t, "vera")
	s.must(t, "POST", "/apps/"+appID+"/grants", map[string]any{"plane": "control", "principal_kind": "user", "principal_id": viewer, "role_id": "role_viewer"}, http.StatusCreated, nil)
	vtab := consoleTab(t, browse(t))
	s.signInTab(t, vtab, "vera", "vera-password-93d1")
	return vtab
}

// leakyTree writes a static site whose config.js commits a GitHub token
// (random characters of the token's shape, made at run time so that no
// secret sits in this file) and returns the directory and the token.
func leakyTree(t *testing.T) (string, string) {
	t.Helper()
	token := "gh" + "p_" + (rand.Text() + rand.Text())[:36]
	dir := t.TempDir()
	for name, body := range map[string]string{"index.html": "<h1>hello</h1>\n", "config.js": "const github = '" + token + "';\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, token
}

// TestConsoleSecurity, on a server in port mode whose host policy sets
// min_security_score 90, with an app whose uploaded source commits a
// GitHub token and whose static spec is pinned (never deployed):
//   - the app's Security tab, before any scan, shows the empty state
//     saying what a scan does and that deploys are refused under a
//     minimum, the minimum 90 and the app below it, without shifting its
//     layout as the answers arrive;
//   - Scan now starts a scan (the API's security.scan audit entry) and the
//     page follows it to its end: the score the API has, out of 100,
//     below the minimum, the basis, and the planted token as a high,
//     fixable finding at config.js, whose value the page never shows;
//     the app's header shows the new score at once;
//   - read again, the scanned page does not shift as it arrives, and the
//     app's header shows the score, linking to the page;
//   - an account with the viewer role on the app sees the score but no
//     Scan now, and is told which verb scanning needs.
//
// All through, the console calls only /api/v1 on its own origin and
// reports no problem; axe-core finds no serious violation in the light
// and dark themes; screenshots go to SVC_SCREENSHOTS.
func TestConsoleSecurity(t *testing.T) {
	s := startWebServer(t, "port", "SVC_RUNTIME_ISOLATION=none")
	dir, token := leakyTree(t)
	app := s.createApp(t, "leaky")
	s.must(t, "POST", "/apps/"+app+"/source", dirTarGz(t, dir), http.StatusAccepted, nil)
	rev := s.newRevision(t, app, specDoc{"workloads": map[string]any{"web": map[string]any{"build": map[string]any{"kind": "static", "context": "."}}}})
	s.must(t, "POST", "/apps/"+app+"/specs/"+strconv.Itoa(rev)+"/pin", nil, http.StatusOK, nil)
	var pol struct {
		Policy map[string]any `json:"policy"`
	}
	s.must(t, "GET", "/policy", nil, http.StatusOK, &pol)
	pol.Policy["min_security_score"] = 90
	s.must(t, "PUT", "/policy", map[string]any{"policy": pol.Policy}, http.StatusOK, nil)

	tab := consoleTab(t, browse(t))
	watchLayoutShift(tab)
	s.signInTab(t, tab, "admin", adminPassword)
	openSecurity := func() {
		t.Helper()
		tab.Go(s.console + "/apps/" + app)
		waitFor(t, tab, "the overview", `document.querySelector('[data-table="usage"], .overview .muted') && document.querySelector('.app-facts code')`)
		tab.MustEval(`new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(() => { window.__cls = 0; r(true); }, 100))))`, nil)
		click(t, tab, `nav.tabs a[href$="/security"]`)
		waitFor(t, tab, "the security page", `document.querySelector('[data-minimum="90"]') && document.querySelector('.sec-number[data-score]') && document.querySelector('[data-state]').dataset.state !== ""`)
	}

	// Never scanned: the empty state, the minimum, the app below it.
	openSecurity()
	waitFor(t, tab, "the empty state", `document.querySelector('[data-empty]')`)
	noLayoutShift(t, tab, "the security page of a never-scanned app")
	for _, want := range []string{"Not scanned yet", "committed secrets", "deploys are refused", "The host minimum is 90", "not scanned yet"} {
		waitText(t, tab, want)
	}
	var below string
	tab.MustEval(`document.querySelector('[data-minimum]').dataset.below`, &below)
	if below != "true" {
		t.Errorf("a never-scanned app under a minimum of 90 is shown below it: %q; want true", below)
	}
	accessible(t, tab, "the security page of a never-scanned app")
	screenshots(t, tab, "security-never")

	// Scan now: the page follows the scan to its end.
	clickButton(t, tab, ".sec-actions", "Scan now")
	waitForAPI(t, "the scan request audited", func() bool { return s.audited(t, "security.scan", app) })
	waitFor(t, tab, "the scan's end", `document.querySelector('[data-state="done"], [data-state="failed"]')`)
	v := s.security(t, app)
	if v.State != "done" || v.Score == nil {
		t.Fatalf("after Scan now the API has %+v; want a finished scan with a score", v)
	}
	if *v.Score >= 90 {
		t.Errorf("the score with a committed token is %d; want below 90", *v.Score)
	}
	planted := false
	for _, f := range v.Findings {
		if f.Severity == "high" && f.Fixable && f.Path != nil && strings.HasPrefix(*f.Path, "config.js") {
			planted = true
		}
	}
	if !planted {
		t.Errorf("the API's findings %+v lack the planted token (high, fixable, in config.js)", v.Findings)
	}
	var shown struct {
		Score   string   `json:"score"`
		Below   string   `json:"below"`
		High    []string `json:"high"`
		Basis   int      `json:"basis"`
		Counted string   `json:"counted"`
		Text    string   `json:"text"`
	}
	tab.MustEval(`({
  score: document.querySelector('.sec-number').dataset.score,
  below: document.querySelector('[data-minimum]').dataset.below,
  high: [...document.querySelectorAll('[data-table="findings-high"] tbody tr')].map((r) => r.innerText),
  basis: document.querySelectorAll('[data-basis] dt').length,
  counted: document.querySelector('[data-counts] [data-severity="high"] .sec-count').innerText,
  text: document.body.innerText,
})`, &shown)
	if shown.Score != strconv.Itoa(*v.Score) || !strings.Contains(shown.Text, strconv.Itoa(*v.Score)+" / 100") {
		t.Errorf("the page shows the score %q; the API has %d (out of 100)", shown.Score, *v.Score)
	}
	if shown.Below != "true" || !strings.Contains(shown.Text, "PLAN_SECURITY_BELOW_THRESHOLD") {
		t.Errorf("a score of %d under a minimum of 90 is not shown as refusing deploys (below %q)", *v.Score, shown.Below)
	}
	row := strings.Join(shown.High, "\n")
	if !strings.Contains(row, "config.js") || !strings.Contains(row, "yes") {
		t.Errorf("the high findings shown are %q; want the planted token at config.js, fixable", shown.High)
	}
	if shown.Basis != len(v.Basis) || shown.Basis == 0 {
		t.Errorf("the page shows %d basis lines; the API has %d", shown.Basis, len(v.Basis))
	}
	if n, _ := strconv.Atoi(shown.Counted); n == 0 {
		t.Errorf("the count of high findings shown is %q", shown.Counted)
	}
	if strings.Contains(shown.Text, token) {
		t.Errorf("the page shows the committed token's value")
	}
	waitFor(t, tab, "the header's score, as soon as the scan ended", `document.querySelector('.app-facts [data-score-badge="`+strconv.Itoa(*v.Score)+`"]')`)
	accessible(t, tab, "the security page of a scanned app")
	screenshots(t, tab, "security-scanned")

	// Read again: the scanned page does not shift as it arrives.
	openSecurity()
	waitFor(t, tab, "the findings", `document.querySelector('[data-table="findings-high"] tbody tr')`)
	noLayoutShift(t, tab, "the security page of a scanned app")
	waitFor(t, tab, "the score in the app's header", `document.querySelector('.app-facts [data-score-badge="`+strconv.Itoa(*v.Score)+`"]')`)
	noProblems(t, tab)
	onlyAPI(t, tab, s.console)

	// A viewer sees the result, and no Scan now.
	vtab := s.viewerTab(t, app)
	vtab.Go(s.console + "/apps/" + app + "/security")
	waitFor(t, vtab, "the viewer's security page", `document.querySelector('[data-no-scan]') && document.querySelector('.sec-number').dataset.score === `+strconv.Quote(strconv.Itoa(*v.Score)))
	var buttons int
	vtab.MustEval(`document.querySelectorAll('[data-scan]').length + [...document.querySelectorAll('button')].filter((b) => b.innerText.includes("Scan")).length`, &buttons)
	if buttons != 0 {
		t.Errorf("a viewer is offered Scan now (%d buttons)", buttons)
	}
	waitText(t, vtab, "app.deploy")
	accessible(t, vtab, "a viewer's security page")
	screenshots(t, vtab, "security-viewer")
	noProblems(t, vtab)
	onlyAPI(t, vtab, s.console)
}

// lifecycleOf reads the latest revision's number and its lifecycle.
func (s *webServer) lifecycleOf(t *testing.T, appID string) (int, any) {
	t.Helper()
	var list struct {
		Items []struct {
			Revision int `json:"revision"`
		} `json:"items"`
	}
	s.must(t, "GET", "/apps/"+appID+"/specs?limit=1", nil, http.StatusOK, &list)
	if len(list.Items) == 0 {
		t.Fatalf("app %s has no revision", appID)
	}
	n := list.Items[0].Revision
	var one struct {
		Spec struct {
			Spec specDoc `json:"spec"`
		} `json:"spec"`
	}
	s.must(t, "GET", "/apps/"+appID+"/specs/"+strconv.Itoa(n), nil, http.StatusOK, &one)
	return n, one.Spec.Spec["lifecycle"]
}

// TestConsoleSecurityIdle: the "When idle" control of an app's settings
// page, on an app with one revision and no lifecycle:
//   - it says the latest revision never stops the app for idleness, and
//     the page does not shift as that arrives;
//   - 14 days, stop, saved, writes revision 2 whose lifecycle is
//     {idle_days: 14, idle_action: stop} (GET …/specs), the rest of the
//     document unchanged, and the page names the revision;
//   - delete is warned on the page and asks for confirmation: cancelled,
//     no revision is written; confirmed, revision 3 has {idle_days: 30,
//     idle_action: delete};
//   - emptied (never), revision 4 has no lifecycle;
//   - a viewer of the app is told saving needs app.spec.edit, and the
//     API's refusal shows when they try; no revision is written.
//
// The console calls only /api/v1, reports no problem, and passes axe-core
// in both themes; screenshots go to SVC_SCREENSHOTS.
func TestConsoleSecurityIdle(t *testing.T) {
	s := startWebServer(t, "port", "SVC_RUNTIME_ISOLATION=none")
	app := s.createApp(t, "sleepy")
	doc := specDoc{"workloads": map[string]any{"web": map[string]any{"build": map[string]any{"kind": "static", "context": "."}}}, "env": map[string]any{"GREETING": "hello"}}
	s.newRevision(t, app, doc)

	tab := consoleTab(t, browse(t))
	watchLayoutShift(tab)
	s.signInTab(t, tab, "admin", adminPassword)
	tab.Go(s.console + "/apps/" + app)
	waitFor(t, tab, "the overview", `document.querySelector('.app-facts code')`)
	tab.MustEval(`new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(() => { window.__cls = 0; r(true); }, 100))))`, nil)
	click(t, tab, `nav.tabs a[href$="/settings"]`)
	waitText(t, tab, "Revision 1 (the latest) says: never stopped or deleted for idleness")
	noLayoutShift(t, tab, "the settings page with When idle")

	saveIdle := func(days, action string) {
		t.Helper()
		setValue(t, tab, `input[name="idle_days"]`, days)
		if action != "" {
			click(t, tab, `input[name="idle_action"][value="`+action+`"]`)
		}
		clickButton(t, tab, ".idle-settings", "Save as a new revision")
	}
	saved := func(rev int) {
		t.Helper()
		waitFor(t, tab, "revision "+strconv.Itoa(rev)+" saved", `document.querySelector('[data-idle-saved="`+strconv.Itoa(rev)+`"]')`)
	}

	saveIdle("14", "stop")
	saved(2)
	waitText(t, tab, "Saved as revision 2: stopped after 14 days without a request")
	if n, lc := s.lifecycleOf(t, app); n != 2 || !jsonEqual(lc, map[string]any{"idle_days": 14, "idle_action": "stop"}) {
		t.Errorf("after saving 14 days, stop: revision %d has lifecycle %v", n, lc)
	}
	var one, two struct {
		Spec struct {
			Spec specDoc `json:"spec"`
		} `json:"spec"`
	}
	s.must(t, "GET", "/apps/"+app+"/specs/1", nil, http.StatusOK, &one)
	s.must(t, "GET", "/apps/"+app+"/specs/2", nil, http.StatusOK, &two)
	delete(two.Spec.Spec, "lifecycle")
	if !jsonEqual(two.Spec.Spec, one.Spec.Spec) {
		t.Errorf("revision 2 is %v; want revision 1's document %v with only the lifecycle added", two.Spec.Spec, one.Spec.Spec)
	}
	accessible(t, tab, "the settings page with When idle")
	screenshots(t, tab, "idle-settings")

	// Delete: warned, confirmed.
	setValue(t, tab, `input[name="idle_days"]`, "30")
	click(t, tab, `input[name="idle_action"][value="delete"]`)
	waitText(t, tab, "It cannot be undone")
	clickButton(t, tab, ".idle-settings", "Save as a new revision")
	waitFor(t, tab, "the confirmation", `document.querySelector('dialog.confirm[open]')`)
	var asks string
	tab.MustEval(`document.querySelector('dialog.confirm[open]').innerText`, &asks)
	if !strings.Contains(asks, "deleted, not stopped") || !strings.Contains(asks, "Delete after 30 idle days") {
		t.Errorf("the confirmation says %q; want it to say the app is deleted after 30 days", asks)
	}
	accessible(t, tab, "the confirmation of delete when idle")
	screenshots(t, tab, "idle-confirm")
	clickButton(t, tab, "dialog.confirm[open]", "Cancel")
	waitFor(t, tab, "the dialog closed", `!document.querySelector('dialog.confirm[open]')`)
	if n, _ := s.lifecycleOf(t, app); n != 2 {
		t.Errorf("a cancelled delete setting wrote revision %d", n)
	}
	clickButton(t, tab, ".idle-settings", "Save as a new revision")
	clickButton(t, tab, "dialog.confirm[open]", "Delete after 30 idle days")
	saved(3)
	if n, lc := s.lifecycleOf(t, app); n != 3 || !jsonEqual(lc, map[string]any{"idle_days": 30, "idle_action": "delete"}) {
		t.Errorf("after confirming 30 days, delete: revision %d has lifecycle %v", n, lc)
	}

	// Never.
	saveIdle("", "")
	saved(4)
	if n, lc := s.lifecycleOf(t, app); n != 4 || lc != nil {
		t.Errorf("after emptying the days: revision %d has lifecycle %v; want none", n, lc)
	}
	noProblems(t, tab)
	onlyAPI(t, tab, s.console)

	// A viewer is told, and refused.
	vtab := s.viewerTab(t, app)
	vtab.Go(s.console + "/apps/" + app + "/settings")
	waitFor(t, vtab, "the viewer's note", `document.querySelector('[data-no-edit]') && document.querySelector('[data-idle-now]').innerText.includes("Revision 4")`)
	setValue(t, vtab, `input[name="idle_days"]`, "7")
	clickButton(t, vtab, ".idle-settings", "Save as a new revision")
	waitFor(t, vtab, "the refusal", `document.querySelector('#idle-error .code')`)
	var code string
	vtab.MustEval(`document.querySelector('#idle-error .code').innerText`, &code)
	if !strings.HasPrefix(code, "PERM_") {
		t.Errorf("a viewer's save shows %q; want the API's PERM_ refusal", code)
	}
	if n, _ := s.lifecycleOf(t, app); n != 4 {
		t.Errorf("a viewer's save wrote revision %d", n)
	}
	noProblems(t, vtab)
}

// jsonEqual compares two values as JSON has them.
func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// TestConsoleSecurityStopped: an app that svc itself stopped says why on
// its overview. The leaky site is deployed and scanned (80, below 90);
// then host policy sets min_security_score 90, insecure_action stop and
// insecure_grace_hours 0, and the leader's check (every minute) marks it
// below the minimum and, at its next pass, stops it. Its overview then
// says it was stopped for its security score, and the note's Start,
// confirmed, starts it again (the API's desired state is running). An app
// stopped by a person shows no such note. (An idle stop is the same note
// with the reason idle; idle days cannot pass in this test.)
func TestConsoleSecurityStopped(t *testing.T) {
	s := startWebServer(t, "port", "SVC_RUNTIME_ISOLATION=none")
	dir, _ := leakyTree(t)
	app := s.createApp(t, "leaky")
	s.must(t, "POST", "/apps/"+app+"/source", dirTarGz(t, dir), http.StatusAccepted, nil)
	rev := s.newRevision(t, app, specDoc{"workloads": map[string]any{"web": map[string]any{"build": map[string]any{"kind": "static", "context": "."}}}})
	s.must(t, "POST", "/apps/"+app+"/specs/"+strconv.Itoa(rev)+"/pin", nil, http.StatusOK, nil)
	s.deployed(t, app, 0)
	s.waitDeployed(t, app)
	s.must(t, "POST", "/apps/"+app+"/security/scan", nil, http.StatusAccepted, nil)
	waitForAPI(t, "the scan's end", func() bool { return s.security(t, app).State == "done" })
	var pol struct {
		Policy map[string]any `json:"policy"`
	}
	s.must(t, "GET", "/policy", nil, http.StatusOK, &pol)
	pol.Policy["min_security_score"] = 90
	pol.Policy["insecure_action"] = "stop"
	pol.Policy["insecure_grace_hours"] = 0
	s.must(t, "PUT", "/policy", map[string]any{"policy": pol.Policy}, http.StatusOK, nil)
	var because *string
	desired := func() string {
		var got struct {
			App struct {
				DesiredState   string  `json:"desired_state"`
				StoppedBecause *string `json:"stopped_because"`
			} `json:"app"`
		}
		s.must(t, "GET", "/apps/"+app, nil, http.StatusOK, &got)
		because = got.App.StoppedBecause
		return got.App.DesiredState
	}
	// Two passes of the leader's minute-long check: below, then stopped.
	deadline := time.Now().Add(scaled(4 * time.Minute))
	for desired() != "stopped" {
		if time.Now().After(deadline) {
			t.Fatalf("the app below the minimum was not stopped after %s", scaled(4*time.Minute))
		}
		time.Sleep(time.Second)
	}
	if because == nil || *because != "insecure" {
		t.Fatalf("the app svc stopped for its score: stopped_because %v, want insecure", because)
	}

	tab := consoleTab(t, browse(t))
	s.signInTab(t, tab, "admin", adminPassword)
	tab.Go(s.console + "/apps/" + app)
	waitFor(t, tab, "the note", `document.querySelector('[data-stopped-because="insecure"]')`)
	waitText(t, tab, "Stopped for its security score")
	accessible(t, tab, "the overview of an app stopped for its score")
	screenshots(t, tab, "stopped-insecure")
	clickButton(t, tab, ".stopped-because", "Start")
	clickButton(t, tab, "dialog.confirm[open]", "Start leaky")
	waitForAPI(t, "the app meant to run again", func() bool { return desired() == "running" })
	if because != nil {
		t.Errorf("the app started again: stopped_because %q, want null", *because)
	}

	// Stopped by a person: no note.
	s.must(t, "POST", "/apps/"+app+"/stop", nil, http.StatusOK, nil)
	tab.Go(s.console + "/apps/" + app)
	waitText(t, tab, "Meant to be stopped")
	waitFor(t, tab, "the usage read", `document.querySelector('#usage-h') && !document.querySelector('.overview [aria-busy="true"]')`)
	var notes int
	tab.MustEval(`new Promise((r) => setTimeout(() => r(document.querySelectorAll('[data-stopped-because]').length), 500))`, &notes)
	if notes != 0 {
		t.Errorf("an app a person stopped shows %d notes of why svc stopped it", notes)
	}
	noProblems(t, tab)
	onlyAPI(t, tab, s.console)
}

// TestConsoleSecurityUpgrade: the installation's Upgrade page, listed in
// the admin side navigation, shows the running version GET /api/v1/upgrade
// reports and, to an administrator, the file picker for a new binary. No
// upgrade runs in the browser: internal/e2e/upgrade_test.go upgrades
// through the API the page calls.
func TestConsoleSecurityUpgrade(t *testing.T) {
	s := startWebServer(t, "port", "SVC_RUNTIME_ISOLATION=none")
	tab := consoleTab(t, browse(t))
	watchLayoutShift(tab)
	s.signInTab(t, tab, "admin", adminPassword)
	tab.Go(s.console + "/admin/")
	waitFor(t, tab, "the admin pages", `document.querySelector('nav.side a[href="/admin/upgrade"]')`)
	click(t, tab, `nav.side a[href="/admin/upgrade"]`)
	waitURL(t, tab, "the upgrade page", func(a string) bool { return a == s.console+"/admin/upgrade" })
	r := s.call(t, "GET", "/upgrade", nil)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.status != http.StatusOK {
		t.Fatalf("GET /api/v1/upgrade: %d %s", r.status, r.body)
	}
	var ans struct {
		Version string `json:"version"`
	}
	mustJSON(t, r.body, &ans)
	waitFor(t, tab, "the running version", `document.querySelector('[data-version]').dataset.version === `+strconv.Quote(ans.Version)+` && document.querySelector('#up-file')`)
	noLayoutShift(t, tab, "the upgrade page")
	accessible(t, tab, "the upgrade page")
	screenshots(t, tab, "upgrade")
	noProblems(t, tab)
	onlyAPI(t, tab, s.console)
}
