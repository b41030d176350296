package e2e

import (
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/browsertest"
)

// The console's spec revision, plan and volume pages in a real Chromium
// against the real binary. Run them with:
//
//	go test -count=1 -run 'TestConsoleSpecPages' ./internal/e2e/

// TestConsoleSpecPages, on a server in port mode with a deployed app (the
// static sample, revision 1 pinned) and a second revision written through
// the API:
//   - the revisions page lists both, newest first, revision 1 marked
//     pinned, without shifting its layout as they arrive;
//   - a revision's page shows its document as YAML (what GET …/specs/1
//     has);
//   - Edit starts from that revision's YAML; a mistake (a volume of size 0)
//     saved shows the server's message under the editor naming the field
//     (volumes.data.size_bytes) and its line, marks that line in the
//     gutter and selects it in the textarea; fixed, Save writes revision
//     3, which the API has with the volume, unpinned, and which the list
//     then shows;
//   - comparing 1 with 3 through the picker shows each change with the
//     classification GET …/specs/1/diff/3 answers (env restarts);
//   - Pin, confirmed (the dialog says it becomes the reconciler's target
//     and the next deploy's), pins revision 3 by the API, and the page
//     links to deploying it;
//   - the plan of a revision naming a runtime that is not configured shows
//     the refusal (PLAN_ADAPTER_NOT_CONFIGURED, message and remedy) and no
//     Deploy; the plan of the pinned revision is clean, shows its steps
//     and warnings, and its Deploy deploys revision 3, which succeeds;
//   - the volumes page lists the pinned revision's volume (size, not
//     mounted); declaring one (2 GiB at /uploads) says which revision it
//     wrote, neither pinned nor deployed, and the API has that revision
//     with the volume and the primary workload's mount, the pin unchanged;
//   - with 22 revisions the list shows 20, and the rest on asking;
//   - an account with the viewer role on the app sees the pages, and
//     saving a revision, pinning and declaring a volume each show the
//     API's PERM_ refusal; the API's pin and latest revision are unchanged.
//
// All through, the console calls only /api/v1 on its own origin and
// reports no problem; axe-core finds no serious violation on each page in
// the light and dark themes; screenshots of each go to SVC_SCREENSHOTS.
func TestConsoleSpecPages(t *testing.T) {
	s := startWebServer(t, "port", "SVC_RUNTIME_ISOLATION=none")
	site := s.app(t, "shelf")
	var one struct {
		Spec struct {
			Spec specDoc `json:"spec"`
		} `json:"spec"`
	}
	s.must(t, "GET", "/apps/"+site.id+"/specs/1", nil, http.StatusOK, &one)
	if _, ok := one.Spec.Spec["env"]; ok {
		t.Fatalf("the static sample's revision has env already: %v", one.Spec.Spec)
	}
	two := clone(t, one.Spec.Spec)
	two["deploy"] = map[string]any{"approvals": 0}
	if rev := s.newRevision(t, site.id, two); rev != 2 {
		t.Fatalf("the second revision is %d", rev)
	}
	base := s.console + "/apps/" + site.id + "/spec"

	tab := consoleTab(t, browse(t))
	watchLayoutShift(tab)
	s.signInTab(t, tab, "admin", adminPassword)

	// The list, reached from the overview's tabs.
	tab.Go(s.console + "/apps/" + site.id)
	waitFor(t, tab, "the overview", `document.querySelector('[data-table="workloads"]') && document.querySelector('[data-table="usage"]') && document.querySelector('.app-facts code')`)
	// The overview's own shifts are reported a frame late: let them be,
	// then count from zero.
	tab.MustEval(`new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(() => { window.__cls = 0; r(true); }, 100))))`, nil)
	click(t, tab, `nav.tabs a[href$="/spec"]`)
	waitFor(t, tab, "the revisions", `document.querySelectorAll('[data-table="revisions"] tbody tr').length === 2`)
	noLayoutShift(t, tab, "the revisions page")
	var listed []string
	tab.MustEval(`[...document.querySelectorAll('[data-table="revisions"] tbody tr')].map((r) => r.dataset.revision + (r.querySelector('.badge') ? " pinned" : ""))`, &listed)
	if !reflect.DeepEqual(listed, []string{"2", "1 pinned"}) {
		t.Errorf("the revisions page lists %q; want 2, then 1 pinned", listed)
	}
	waitText(t, tab, "Revision 1 is pinned")
	accessible(t, tab, "the revisions page")
	screenshots(t, tab, "spec-list")

	// One revision, as YAML.
	click(t, tab, `[data-table="revisions"] tr[data-revision="1"] th a`)
	waitURL(t, tab, "revision 1's page", func(a string) bool { return a == base+"/1" })
	waitFor(t, tab, "the document", `document.querySelector('pre[data-yaml]')`)
	var yaml string
	tab.MustEval(`document.querySelector('pre[data-yaml]').innerText`, &yaml)
	if !strings.Contains(yaml, "workloads:\n  web:\n") || !strings.Contains(yaml, "kind: static") {
		t.Errorf("revision 1 shown as %q; want its document as YAML", yaml)
	}
	waitText(t, tab, "nothing: no lifecycle.idle_days")
	accessible(t, tab, "a revision's page")
	screenshots(t, tab, "spec-revision")

	// Edit: a mistake, shown at its field and line; then fixed.
	clickLink(t, tab, ".spec-view .actions", "Edit")
	waitURL(t, tab, "the editor", func(a string) bool { return a == base+"/1/edit" })
	waitFor(t, tab, "the editor filled", `document.querySelector('#spec-yaml').value.includes("kind: static")`)
	var start string
	tab.MustEval(`document.querySelector('#spec-yaml').value`, &start)
	if strings.TrimSpace(start) != strings.TrimSpace(yaml) {
		t.Errorf("the editor starts from %q; want revision 1's YAML %q", start, yaml)
	}
	wrong := strings.TrimRight(start, "\n") + "\nenv:\n  GREETING: hello\nvolumes:\n  data:\n    size_bytes: 0\n"
	badLine := 0
	for i, l := range strings.Split(wrong, "\n") {
		if strings.Contains(l, "size_bytes: 0") {
			badLine = i + 1
		}
	}
	typeYAML(t, tab, wrong)
	clickButton(t, tab, ".spec-edit .actions", "Save as a new revision")
	waitFor(t, tab, "the problem at its field", `document.querySelector('.spec-problems li[data-field="volumes.data.size_bytes"]')`)
	var at struct {
		Line      string
		Text      string
		Marked    []int
		Selected  string
		Invalid   string
		Described string
	}
	tab.MustEval(`(() => { const li = document.querySelector('.spec-problems li[data-field="volumes.data.size_bytes"]'); const ta = document.querySelector('#spec-yaml');
  return {Line: li.dataset.line, Text: li.innerText,
    Marked: [...document.querySelectorAll('.yaml-editor .gutter span')].map((s, i) => s.classList.contains('bad') ? i + 1 : 0).filter((n) => n),
    Selected: ta.value.slice(ta.selectionStart, ta.selectionEnd), Invalid: ta.getAttribute('aria-invalid'), Described: ta.getAttribute('aria-describedby')}; })()`, &at)
	if at.Line != strconv.Itoa(badLine) || !strings.Contains(at.Text, "Line "+strconv.Itoa(badLine)) || !strings.Contains(at.Text, "volumes.data.size_bytes") || !strings.Contains(at.Text, "size_bytes above 0") {
		t.Errorf("the problem shown: %q at line %s; want the server's message naming volumes.data.size_bytes at line %d", at.Text, at.Line, badLine)
	}
	if !reflect.DeepEqual(at.Marked, []int{badLine}) || strings.TrimSpace(at.Selected) != "size_bytes: 0" || at.Invalid != "true" || at.Described != "spec-problems" {
		t.Errorf("the editor marks lines %v and selects %q (aria-invalid %s, described by %s); want line %d marked and selected", at.Marked, at.Selected, at.Invalid, at.Described, badLine)
	}
	waitFor(t, tab, "the refusal's code", `document.querySelector('.spec-edit [role=alert] .code')`)
	accessible(t, tab, "the editor with a problem")
	screenshots(t, tab, "spec-edit-problem")
	// A YAML syntax mistake is shown as it is typed, before any save.
	typeYAML(t, tab, wrong+"oops: [\n")
	waitFor(t, tab, "the syntax problem", `[...document.querySelectorAll('.spec-problems li')].some((li) => li.innerText.startsWith("Line ") && li.innerText.includes("YAML"))`)
	typeYAML(t, tab, strings.Replace(wrong, "size_bytes: 0", "size_bytes: 1073741824", 1)+"lifecycle:\n  idle_days: 30\n")
	waitFor(t, tab, "no problem left", `!document.querySelector('.spec-problems li')`)
	clickButton(t, tab, ".spec-edit .actions", "Save as a new revision")
	waitURL(t, tab, "revision 3's page", func(a string) bool { return a == base+"/3" })
	var three struct {
		Spec struct {
			Pinned bool    `json:"pinned"`
			Spec   specDoc `json:"spec"`
		} `json:"spec"`
	}
	s.must(t, "GET", "/apps/"+site.id+"/specs/3", nil, http.StatusOK, &three)
	if three.Spec.Pinned || !reflect.DeepEqual(three.Spec.Spec["volumes"], map[string]any{"data": map[string]any{"size_bytes": float64(1 << 30)}}) ||
		!reflect.DeepEqual(three.Spec.Spec["env"], map[string]any{"GREETING": "hello"}) ||
		!reflect.DeepEqual(three.Spec.Spec["lifecycle"], map[string]any{"idle_days": float64(30)}) {
		t.Errorf("revision 3 by the API: pinned %t, %v; want the edited document, unpinned", three.Spec.Pinned, three.Spec.Spec)
	}
	waitText(t, tab, "stopped until somebody starts it after 30 days without a request")
	waitText(t, tab, "Not pinned")
	click(t, tab, `.spec-view .crumb a`)
	waitFor(t, tab, "three revisions", `document.querySelectorAll('[data-table="revisions"] tbody tr').length === 3 && document.querySelector('[data-table="revisions"] tbody tr').dataset.revision === "3"`)

	// The diff of 1 and 3, chosen with the picker.
	tab.MustEval(`(() => { for (const [id, v] of [["diff-from", "1"], ["diff-to", "3"]]) { const s = document.getElementById(id); s.value = v; s.dispatchEvent(new Event("change", {bubbles: true})); } return true; })()`, nil)
	clickButton(t, tab, ".diff-picker", "Compare")
	waitURL(t, tab, "the diff", func(a string) bool { return a == base+"/1/diff/3" })
	waitFor(t, tab, "the changes", `document.querySelector('[data-table="diff"] tbody tr')`)
	var diff struct {
		Effect  string `json:"effect"`
		Changes []struct {
			Path   string `json:"path"`
			Effect string `json:"effect"`
		} `json:"changes"`
	}
	s.must(t, "GET", "/apps/"+site.id+"/specs/1/diff/3", nil, http.StatusOK, &diff)
	var want, shown []string
	for _, c := range diff.Changes {
		want = append(want, c.Path+" "+c.Effect)
	}
	tab.MustEval(`[...document.querySelectorAll('[data-table="diff"] tbody tr')].map((r) => r.dataset.path + " " + r.dataset.effect)`, &shown)
	if !reflect.DeepEqual(shown, want) || diff.Effect != "restart" || !strings.Contains(strings.Join(want, ","), "env.GREETING restart") {
		t.Errorf("the diff page shows %q; the API classifies %q (effect %s), and env.GREETING should restart", shown, want, diff.Effect)
	}
	var effect string
	tab.MustEval(`document.querySelector('[data-effect]:not(tr)').dataset.effect + " | " + document.querySelector('.diff-summary').innerText`, &effect)
	if !strings.HasPrefix(effect, "restart | ") || !strings.Contains(effect, "workloads restart; nothing is built again") {
		t.Errorf("the diff's summary: %q", effect)
	}
	accessible(t, tab, "the diff page")
	screenshots(t, tab, "spec-diff")

	// Pin revision 3, confirmed.
	tab.Go(base + "/3")
	waitFor(t, tab, "revision 3", `document.querySelector('pre[data-yaml]')`)
	clickButton(t, tab, ".spec-view .actions", "Pin")
	waitFor(t, tab, "the confirmation", `document.querySelector('dialog.confirm[open]')`)
	var says string
	tab.MustEval(`document.querySelector('dialog.confirm').innerText`, &says)
	if !strings.Contains(says, "reconciler’s target") || !strings.Contains(says, "next deploy ships") {
		t.Errorf("the pin's confirmation says %q", says)
	}
	accessible(t, tab, "the pin's confirmation")
	screenshots(t, tab, "spec-pin-confirm")
	clickButton(t, tab, "dialog.confirm", "Pin revision 3")
	waitText(t, tab, "Revision 3 is pinned.")
	if p := s.pinned(t, site.id); p != 3 {
		t.Errorf("after Pin the API's app has revision %d pinned; want 3", p)
	}
	waitFor(t, tab, "the link to deploy", `document.querySelector('.notice a[href="/apps/`+site.id+`/deploys"]')`)

	// A plan that refuses: a runtime this installation does not have.
	away := clone(t, one.Spec.Spec)
	away["runtime"] = map[string]any{"adapter": "elsewhere"}
	awayRev := s.newRevision(t, site.id, away)
	var refused struct {
		Deployable bool `json:"deployable"`
		Refusals   []struct{ Code, Message, Remedy string }
	}
	s.must(t, "POST", "/apps/"+site.id+"/plan", map[string]any{"revision": awayRev}, http.StatusOK, &refused)
	if refused.Deployable || len(refused.Refusals) != 1 || refused.Refusals[0].Code != "PLAN_ADAPTER_NOT_CONFIGURED" {
		t.Fatalf("the API's plan of revision %d: %+v", awayRev, refused)
	}
	tab.Go(s.console + "/apps/" + site.id + "/plan?revision=" + strconv.Itoa(awayRev))
	waitFor(t, tab, "the refused plan", `document.querySelector('[data-deployable="false"] li[data-code="PLAN_ADAPTER_NOT_CONFIGURED"]')`)
	var reason []string
	tab.MustEval(`[...document.querySelectorAll('li[data-code="PLAN_ADAPTER_NOT_CONFIGURED"] p')].map((p) => p.innerText)`, &reason)
	r := refused.Refusals[0]
	if len(reason) != 3 || !strings.Contains(strings.ToLower(reason[0]), strings.ToLower(r.Message)) || !strings.Contains(strings.ToLower(reason[1]), strings.ToLower(r.Remedy)) || reason[2] != r.Code {
		t.Errorf("the plan page shows the refusal as %q; the API has %+v", reason, r)
	}
	var deployButtons int
	tab.MustEval(`[...document.querySelectorAll('.plan button')].filter((b) => b.innerText.startsWith("Deploy")).length`, &deployButtons)
	if deployButtons != 0 {
		t.Errorf("the refused plan offers Deploy")
	}
	accessible(t, tab, "a refused plan")
	screenshots(t, tab, "plan-refused")

	// The pinned revision's plan: clean, and deployed from the page.
	tab.MustEval(`(() => { const s = document.getElementById("plan-revision"); s.value = ""; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, nil)
	clickButton(t, tab, ".plan-form", "Plan")
	waitFor(t, tab, "the clean plan", `document.querySelector('[data-deployable="true"][data-planned="3"]')`)
	var plan struct {
		Warnings []struct{ Code string }
	}
	s.must(t, "POST", "/apps/"+site.id+"/plan", map[string]any{}, http.StatusOK, &plan)
	var warned []string
	tab.MustEval(`[...document.querySelectorAll('.plan-warnings li')].map((l) => l.dataset.code)`, &warned)
	var codes []string
	for _, w := range plan.Warnings {
		codes = append(codes, w.Code)
	}
	if !reflect.DeepEqual(warned, codes) {
		t.Errorf("the clean plan shows the warnings %q; the API's plan has %q", warned, codes)
	}
	waitFor(t, tab, "the plan's steps", `document.querySelector('[data-table="plan-actions"] tbody tr')`)
	accessible(t, tab, "a clean plan")
	screenshots(t, tab, "plan-clean")
	clickButton(t, tab, ".plan .actions", "Deploy revision 3")
	waitURL(t, tab, "the deploy's page", func(a string) bool { return strings.HasPrefix(a, s.console+"/apps/"+site.id+"/deploys/dep_") })
	waitFor(t, tab, "the deploy's outcome", `document.querySelector('.outcome').dataset.outcome === "succeeded"`)
	var st struct {
		Revision *int `json:"revision"`
	}
	s.must(t, "GET", "/apps/"+site.id+"/status", nil, http.StatusOK, &st)
	if st.Revision == nil || *st.Revision != 3 {
		t.Errorf("after the plan's Deploy the app runs revision %v; want 3", st.Revision)
	}

	// The volumes: the pinned revision's, then one declared.
	click(t, tab, `nav.tabs a[href$="/volumes"]`)
	waitFor(t, tab, "the volumes", `document.querySelector('[data-table="volumes"] tr[data-volume="data"]')`)
	var vrow string
	tab.MustEval(`document.querySelector('tr[data-volume="data"]').innerText`, &vrow)
	if !strings.Contains(vrow, "1.0 GiB") || !strings.Contains(vrow, "not mounted") {
		t.Errorf("the volume's row: %q", vrow)
	}
	waitFor(t, tab, "the workloads offered", `document.querySelector('#volume-workload option[value="web"]')`)
	accessible(t, tab, "the volumes page")
	screenshots(t, tab, "volumes")
	tab.MustEval(`(() => { const s = document.getElementById("volume-unit"); s.value = "GiB"; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, nil)
	fill(t, tab, map[string]string{"volume_name": "uploads", "volume_size": "2", "volume_path": "/uploads"}, "volume_name", "volume_size", "volume_path")
	waitText(t, tab, "declares uploads; it is neither pinned nor deployed")
	var notice string
	tab.MustEval(`document.querySelector('.volumes .notice').innerText`, &notice)
	newRev := awayRev + 1
	if !strings.Contains(notice, "Revision "+strconv.Itoa(newRev)+" declares uploads") {
		t.Errorf("the declaration says %q; want revision %d", notice, newRev)
	}
	var declared struct {
		Spec struct {
			Pinned bool    `json:"pinned"`
			Spec   specDoc `json:"spec"`
		} `json:"spec"`
	}
	s.must(t, "GET", "/apps/"+site.id+"/specs/"+strconv.Itoa(newRev), nil, http.StatusOK, &declared)
	vols, _ := declared.Spec.Spec["volumes"].(map[string]any)
	mounts := declared.Spec.Spec["workloads"].(map[string]any)["web"].(map[string]any)["mounts"]
	if declared.Spec.Pinned || !reflect.DeepEqual(vols["uploads"], map[string]any{"size_bytes": float64(2 << 30)}) ||
		!reflect.DeepEqual(mounts, []any{map[string]any{"volume": "uploads", "path": "/uploads"}}) {
		t.Errorf("revision %d by the API: pinned %t, volumes %v, web's mounts %v; want uploads of 2 GiB at /uploads, unpinned", newRev, declared.Spec.Pinned, vols, mounts)
	}
	if p := s.pinned(t, site.id); p != 3 {
		t.Errorf("declaring a volume changed the pinned revision to %d", p)
	}
	for _, href := range []string{"/spec/" + strconv.Itoa(newRev), "/plan?revision=" + strconv.Itoa(newRev)} {
		var ok bool
		tab.MustEval(`!!document.querySelector('.volumes .notice a[href="/apps/`+site.id+href+`"]')`, &ok)
		if !ok {
			t.Errorf("the declaration does not link to %s", href)
		}
	}
	accessible(t, tab, "the volumes page after a declaration")
	screenshots(t, tab, "volumes-declared")

	// The list is paged: 20 revisions, then the older ones on asking.
	for n := newRev + 1; n <= 22; n++ {
		s.newRevision(t, site.id, two)
	}
	tab.Go(base)
	waitFor(t, tab, "the first page of revisions", `document.querySelectorAll('[data-table="revisions"] tbody tr').length === 20`)
	clickButton(t, tab, ".specs", "Show older revisions")
	waitFor(t, tab, "every revision", `document.querySelectorAll('[data-table="revisions"] tbody tr').length === 22`)
	var order []string
	tab.MustEval(`[...document.querySelectorAll('[data-table="revisions"] tbody tr')].map((r) => r.dataset.revision)`, &order)
	if order[0] != "22" || order[21] != "1" || order[19] != "3" {
		t.Errorf("the revisions, paged: %q; want 22 down to 1", order)
	}
	var older int
	tab.MustEval(`[...document.querySelectorAll('.specs button')].filter((b) => b.innerText.includes("Show older")).length`, &older)
	if older != 0 {
		t.Errorf("Show older revisions is still offered with every revision shown")
	}
	noProblems(t, tab)
	onlyAPI(t, tab, s.console)

	// Someone who may view the app but not change its spec sees the
	// pages and, on each change, the API's refusal; nothing changes.
	viewer, _ := s.member(t, "vera")
	s.must(t, "POST", "/apps/"+site.id+"/grants", map[string]any{"plane": "control", "principal_kind": "user", "principal_id": viewer, "role_id": "role_viewer"}, http.StatusCreated, nil)
	vtab := consoleTab(t, browse(t))
	s.signInTab(t, vtab, "vera", "vera-password-93d1")
	vtab.Go(base + "/new")
	waitFor(t, vtab, "the viewer's editor", `document.querySelector('#spec-yaml').value.includes("workloads:")`)
	clickButton(t, vtab, ".spec-edit .actions", "Save as a new revision")
	refusedTo := func(what, scope string) {
		t.Helper()
		waitFor(t, vtab, what+" refused", `document.querySelector('`+scope+` [role=alert] .code')`)
		var code string
		vtab.MustEval(`document.querySelector('`+scope+` [role=alert] .code code').innerText`, &code)
		if !strings.HasPrefix(code, "PERM_") {
			t.Errorf("%s by a viewer shows %q; want the API's PERM_ refusal", what, code)
		}
	}
	refusedTo("saving a revision", ".spec-edit")
	vtab.Go(base + "/22")
	waitFor(t, vtab, "revision 22", `document.querySelector('pre[data-yaml]')`)
	clickButton(t, vtab, ".spec-view .actions", "Pin")
	clickButton(t, vtab, "dialog.confirm", "Pin revision 22")
	refusedTo("pinning", ".spec-view")
	accessible(t, vtab, "a refused pin")
	vtab.Go(s.console + "/apps/" + site.id + "/volumes")
	waitFor(t, vtab, "the viewer's volumes", `document.querySelector('#volume-workload option[value="web"]')`)
	fill(t, vtab, map[string]string{"volume_name": "more", "volume_size": "5", "volume_path": "/more"}, "volume_name", "volume_size", "volume_path")
	refusedTo("declaring a volume", ".volume-form")
	var latest struct {
		Items []struct{ Revision int } `json:"items"`
	}
	s.must(t, "GET", "/apps/"+site.id+"/specs?limit=1", nil, http.StatusOK, &latest)
	if p := s.pinned(t, site.id); p != 3 || len(latest.Items) != 1 || latest.Items[0].Revision != 22 {
		t.Errorf("after the viewer's tries: pinned %d, latest %+v; want 3 and 22 unchanged", p, latest.Items)
	}
	noProblems(t, vtab)
	onlyAPI(t, vtab, s.console)
}

// typeYAML replaces the spec editor's text, as input events.
func typeYAML(t *testing.T, tab *browsertest.Tab, text string) {
	t.Helper()
	tab.MustEval(`(() => { const ta = document.querySelector('#spec-yaml'); ta.focus(); ta.value = `+strconv.Quote(text)+`; ta.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, nil)
}

// clickLink clicks the link inside the element matching scope whose text
// is label.
func clickLink(t *testing.T, tab *browsertest.Tab, scope, label string) {
	t.Helper()
	var ok bool
	tab.MustEval(`(() => { const a = [...document.querySelectorAll(`+strconv.Quote(scope+" a")+`)].find((a) => a.innerText.trim() === `+strconv.Quote(label)+`); if (!a) return false; a.click(); return true; })()`, &ok)
	if !ok {
		t.Fatalf("no link %q in %s at %s", label, scope, tab.URL())
	}
}

// pinned is the app's pinned revision by the API (0: none).
func (s *webServer) pinned(t *testing.T, appID string) int {
	t.Helper()
	var a struct {
		App struct {
			Pinned *struct{ Revision int } `json:"pinned"`
		} `json:"app"`
	}
	s.must(t, "GET", "/apps/"+appID, nil, http.StatusOK, &a)
	if a.App.Pinned == nil {
		return 0
	}
	return a.App.Pinned.Revision
}
