package e2e

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"encoding/base64"
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

// The console's onboarding of a new app (/new, then the app's detection
// page) in a real Chromium against the real binary. Run it with:
//
//	go test -count=1 -run 'TestConsoleOnboarding' ./internal/e2e/

// TestConsoleOnboarding, on a fresh installation in port mode whose edge
// proxies to the apps themselves:
//   - sign-in through the sign-in page; the app list's New app leads to /new;
//   - /new shows the API's refusal of a bad slug at the slug field (nothing
//     is created), then creates the app and uploads the sample go-hello,
//     with a .env.example that makes detection ask for GREETING and a
//     secret API_TOKEN, through the file input (chosen as a person would),
//     showing the upload's progress up to 100%;
//   - the detection page waits for detection of that upload, then shows
//     the go proposal (workload, build, run, port), its evidence, the
//     question; answering it (the API records the answer and the proposal
//     takes it) leaves only the secret, asked as a password field at
//     accept; Run detection again reruns (audited);
//   - accept writes revision 1, pinned, with GREETING a literal and
//     API_TOKEN a secret reference, the secret kept by the adapter; Deploy
//     now opens the deploy's page, whose log streams while the deploy runs
//     (first line shown before the server's finished_at; every line of the
//     API's stream shown), and it succeeds;
//   - the app's address, opened in the browser (through the edge's
//     handoff), answers as the sample with the answered greeting, and its
//     /env/API_TOKEN with the secret given at accept;
//   - on the configured app (its pinned revision changed by hand), accept
//     with a value for the workload shows the diff first in a
//     confirmation, as the API has it, and then pins revision 3 with the
//     value;
//   - a hostile archive (a tar with a ../ entry), dropped on the drop zone
//     of a new app, shows the API's refusal (the same message, remedy and
//     code as the API gives it) and the app keeps no source;
//   - an app from a local git repository (served over HTTP, go-whoami in a
//     subdirectory): a repository URL the API refuses shows at its field;
//     then the page creates it, the detection page waits for the clone and
//     shows the proposal and the Dockerfile runner-up, and accepting pins
//     it; a new archive uploaded on that page is waited for and detected;
//     a repository whose ref does not exist shows its failed clone.
//
// All through, the console calls only /api/v1 (the uploads as XHR),
// reports no problem, and axe-core finds no serious violation on /new and
// the detection page in light and dark; screenshots go to SVC_SCREENSHOTS.
func TestConsoleOnboarding(t *testing.T) {
	s := startWebServer(t, "port", "SVC_RUNTIME_ISOLATION=none", "SVC_SERVER_PROXY_UPSTREAM=") // the edge reaches the apps themselves
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b := browse(t)
	tab := consoleTab(t, b)
	watchLayoutShift(tab)

	// Sign in through the page, then from the app list to /new.
	tab.Go(s.console + "/apps")
	waitURL(t, tab, "the sign-in page", func(a string) bool { return strings.HasPrefix(a, s.console+"/login") })
	fill(t, tab, map[string]string{"username": "admin", "password": adminPassword}, "username", "password")
	// Signing in loads the next page anew (location.assign): wait in the
	// page, which tolerates the navigation, rather than for its address.
	waitFor(t, tab, "back to the app list", `location.pathname === "/apps" && document.body.innerText.includes("svc launch ./my-app")`)
	click(t, tab, `.toolbar a.primary[href="/new"]`)
	waitURL(t, tab, "the new-app page", func(a string) bool { return a == s.console+"/new" })
	waitFor(t, tab, "the form", `document.querySelector('input[name="name"]') && document.querySelector('button.dropzone')`)
	accessible(t, tab, "the new-app page")
	screenshots(t, tab, "new-app")
	// The drop zone is a button a keyboard reaches; the file input has a label.
	var kb struct {
		Button, Labelled bool
	}
	tab.MustEval(`(() => { const b = document.querySelector('button.dropzone'); b.focus();
  return {button: document.activeElement === b && b.tabIndex === 0, labelled: !!document.querySelector('label[for="f-archive"]') && document.getElementById('f-archive').type === 'file'}; })()`, &kb)
	if !kb.Button || !kb.Labelled {
		t.Errorf("the drop zone: %+v; want a focusable button over a labelled file input", kb)
	}

	// The app's source: go-hello with a .env.example that makes detection
	// ask for GREETING (listed without a value) and API_TOKEN (a secret),
	// and a megabyte of noise so that the upload takes a moment.
	src := filepath.Join(t.TempDir(), "hello")
	if err := os.CopyFS(src, os.DirFS(filepath.Join(root, "samples", "go-hello"))); err != nil {
		t.Fatal(err)
	}
	noise := make([]byte, 2<<20)
	_, _ = rand.Read(noise)
	for name, body := range map[string][]byte{".env.example": []byte("GREETING=\nAPI_TOKEN=\n"), "assets/noise.bin": noise} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	archivePath := filepath.Join(t.TempDir(), "hello.tar.gz")
	if err := os.WriteFile(archivePath, dirTarGz(t, src), 0o644); err != nil {
		t.Fatal(err)
	}

	// The archive chosen through the file input, as a person would; the
	// upload's progress recorded as the page shows it.
	tab.MustEval(`(() => { window.__pct = []; new MutationObserver(() => {
  const p = document.querySelector('.upload-progress'); if (p && p.dataset.percent !== "" && window.__pct[window.__pct.length - 1] !== p.dataset.percent) window.__pct.push(p.dataset.percent);
}).observe(document.body, {subtree: true, childList: true, attributes: true}); return true; })()`, nil)
	tab.SetFiles("#f-archive", archivePath)
	waitFor(t, tab, "the archive chosen", `document.querySelector('#archive-chosen').dataset.file === "hello.tar.gz"`)

	// A slug the API refuses shows at the slug field, and nothing is made.
	fill(t, tab, map[string]string{"name": "Hello Onboard", "slug": "Not A Slug!"}, "name", "slug")
	waitFor(t, tab, "the slug's refusal at its field", `document.querySelector('#f-slug-error').dataset.code === "VALID_INVALID"`)
	var slugErr struct {
		Text    string
		Invalid string
	}
	tab.MustEval(`({text: document.querySelector('#f-slug-error').innerText, invalid: document.getElementById('f-slug').getAttribute('aria-invalid')})`, &slugErr)
	if !strings.Contains(slugErr.Text, "lower-case letters") || slugErr.Invalid != "true" {
		t.Errorf("the slug field shows %+v; want the API's message and aria-invalid", slugErr)
	}
	if n := len(s.names(t, "/apps", "id")); n != 0 {
		t.Errorf("a refused create left %d apps", n)
	}
	accessible(t, tab, "the new-app page with a refusal at a field")
	screenshots(t, tab, "new-app-field-error")

	// Create and upload.
	fill(t, tab, map[string]string{"slug": "hello-onboard"}, "slug")
	detURL := waitURL(t, tab, "the detection page", func(a string) bool {
		return strings.HasPrefix(a, s.console+"/apps/app_") && strings.Contains(a, "/detection?checkout=")
	})
	appID := strings.TrimPrefix(detURL, s.console+"/apps/")
	appID = appID[:strings.Index(appID, "/")]
	var pct []string
	tab.MustEval(`window.__pct`, &pct)
	if len(pct) == 0 || pct[len(pct)-1] != "100" {
		t.Errorf("the upload's progress went %v; want it shown up to 100", pct)
	}
	var app struct {
		App struct {
			Slug   string
			Source *struct {
				Kind       string
				CheckoutID string `json:"checkout_id"`
			} `json:"source"`
		} `json:"app"`
	}
	s.must(t, "GET", "/apps/"+appID, nil, http.StatusOK, &app)
	if app.App.Slug != "hello-onboard" || app.App.Source == nil || app.App.Source.Kind != "archive" || !strings.HasSuffix(detURL, "checkout="+app.App.Source.CheckoutID) {
		t.Fatalf("the app made by /new: %+v (page at %s)", app.App, detURL)
	}

	// Detection: the proposal, its evidence and the question.
	tab.MustEval(`window.__cls = 0`, nil)
	waitFor(t, tab, "the go proposal", `document.querySelector('[data-detector="go"] [data-table="proposal"]')`)
	noLayoutShift(t, tab, "the detection page")
	var shown struct {
		Row, Evidence, Questions string
	}
	tab.MustEval(`({row: document.querySelector('[data-table="proposal"] tr[data-workload="web"]').innerText,
  evidence: document.querySelector('ul.evidence').innerText, questions: document.querySelector('form.questions') ? document.querySelector('form.questions').innerText : ""})`, &shown)
	if !strings.Contains(shown.Row, "go build") || !strings.Contains(shown.Row, "./app") || !strings.Contains(shown.Row, "8080") {
		t.Errorf("the proposal's workload row: %q; want its build, run command and port", shown.Row)
	}
	if !strings.Contains(shown.Evidence, "go.mod") {
		t.Errorf("the evidence: %q; want go.mod named", shown.Evidence)
	}
	if !strings.Contains(shown.Questions, "Value of GREETING") || strings.Contains(shown.Questions, "API_TOKEN") {
		t.Errorf("the questions form: %q; want GREETING asked and no secret", shown.Questions)
	}
	var secretField string
	tab.MustEval(`(document.querySelector('input[name="secret.API_TOKEN"]') || {}).type || ""`, &secretField)
	if secretField != "password" {
		t.Errorf("the secret API_TOKEN at accept is a %q field; want a password field", secretField)
	}
	accessible(t, tab, "the detection page with a question")
	screenshots(t, tab, "detection-question")

	// Answer: the API records it, detection runs again and asks nothing
	// but the secret.
	greeting := "onboarded-" + randomHex(t)
	fill(t, tab, map[string]string{"env.GREETING": greeting}, "env.GREETING")
	waitFor(t, tab, "the question answered", `document.querySelector('[data-questions="0"]')`)
	var rec struct {
		Answers   map[string]string
		Questions []struct{ Key, Kind string }
		Winner    struct {
			Proposal struct {
				Workloads map[string]struct {
					Env map[string]json.RawMessage
				}
			}
		}
	}
	s.must(t, "GET", "/apps/"+appID+"/detection", nil, http.StatusOK, &rec)
	if rec.Answers["env.GREETING"] != greeting || len(rec.Questions) != 1 || rec.Questions[0].Kind != "secret" ||
		string(rec.Winner.Proposal.Workloads["web"].Env["GREETING"]) != strconv.Quote(greeting) {
		t.Fatalf("after answering in the page, detection is %+v", rec)
	}
	waitText(t, tab, greeting) // the proposal shows the answer
	clickButton(t, tab, ".detection .actions", "Run detection again")
	waitForAPI(t, "the rerun audited", func() bool { return s.audited(t, "detection.rerun", appID) })
	waitFor(t, tab, "the rerun's record shown", `document.querySelector('.detection .actions button').getAttribute('aria-busy') === "false" && document.querySelector('input[name="secret.API_TOKEN"]')`)

	// Accept with the secret, then Deploy now.
	token := "tok-" + randomHex(t)
	fill(t, tab, map[string]string{"secret.API_TOKEN": token}, "secret.API_TOKEN")
	waitFor(t, tab, "accepted", `document.querySelector('[data-revision="1"]')`)
	var specs struct {
		Items []struct {
			Revision int
			Pinned   bool
		}
	}
	s.must(t, "GET", "/apps/"+appID+"/specs", nil, http.StatusOK, &specs)
	var one struct {
		Spec struct {
			Spec struct {
				Env       map[string]json.RawMessage
				Workloads map[string]struct {
					Env map[string]json.RawMessage
				}
			}
		}
	}
	s.must(t, "GET", "/apps/"+appID+"/specs/1", nil, http.StatusOK, &one)
	// The secret is where the proposal refers to it: the workload's env.
	env := one.Spec.Spec.Workloads["web"].Env
	if len(specs.Items) != 1 || !specs.Items[0].Pinned || string(env["GREETING"]) != strconv.Quote(greeting) || string(env["API_TOKEN"]) != `{"secret":"API_TOKEN"}` || len(one.Spec.Spec.Env) != 0 {
		t.Fatalf("after accept: specs %+v, revision 1's env %s and its workload's %s", specs.Items, mustMarshal(one.Spec.Spec.Env), mustMarshal(env))
	}
	if names := s.names(t, "/apps/"+appID+"/secrets", "key"); len(names) != 1 || names[0] != "API_TOKEN" {
		t.Errorf("the app's secrets after accept: %v", names)
	}
	var pw string
	tab.MustEval(`document.body.innerHTML.includes(`+strconv.Quote(token)+`) ? "shown" : ""`, &pw)
	if pw != "" {
		t.Errorf("the page still holds the secret's value after accept")
	}
	accessible(t, tab, "the detection page, accepted")
	screenshots(t, tab, "detection-accepted")
	s.deployStreamed(t, tab, appID, func() { clickButton(t, tab, ".accepted", "Deploy now") })
	screenshots(t, tab, "onboarding-deploy")

	// Open the app: its address answers as the sample, with the answer
	// and the secret.
	s.waitRunning(t, appID)
	var got struct {
		App struct {
			URL *string `json:"url"`
		} `json:"app"`
	}
	s.must(t, "GET", "/apps/"+appID, nil, http.StatusOK, &got)
	if got.App.URL == nil {
		t.Fatal("the deployed app has no address")
	}
	waitFor(t, tab, "the open link", `document.querySelector('a.open-link')`)
	var open string
	tab.MustEval(`document.querySelector('a.open-link').href`, &open)
	if open != *got.App.URL {
		t.Errorf("the page's open link goes to %s; the app's address is %s", open, *got.App.URL)
	}
	appTab := b.Tab() // the same browser, signed in to the console: the edge hands it to the app
	appTab.Go(open)
	waitText(t, appTab, "hello from go: "+greeting)
	appTab.Go(strings.TrimSuffix(open, "/") + "/env/API_TOKEN")
	waitText(t, appTab, token)

	// Accept again over the configured app, whose pinned revision was
	// changed by hand: the diff first, confirmed; a value set at accept
	// for the workload lands in it.
	var rev1 struct {
		Spec struct {
			Spec specDoc `json:"spec"`
		} `json:"spec"`
	}
	s.must(t, "GET", "/apps/"+appID+"/specs/1", nil, http.StatusOK, &rev1)
	byHand := clone(t, rev1.Spec.Spec)
	byHand["workloads"].(map[string]any)["web"].(map[string]any)["env"].(map[string]any)["GREETING"] = "changed-by-hand"
	rev2 := s.newRevision(t, appID, byHand)
	s.must(t, "POST", "/apps/"+appID+"/specs/"+strconv.Itoa(rev2)+"/pin", nil, http.StatusOK, nil)
	var apiDiff struct {
		Changes []struct{ Path string }
	}
	s.must(t, "GET", "/apps/"+appID+"/detection/diff", nil, http.StatusOK, &apiDiff)
	tab.Go(s.console + "/apps/" + appID + "/detection")
	waitText(t, tab, "This app is configured already (revision 2 is pinned)")
	clickButton(t, tab, "form.accept", "Add a value")
	waitFor(t, tab, "a value row", `document.querySelector('select[name="value-workload-0"]')`)
	tab.MustEval(`(() => { const s = document.querySelector('select[name="value-workload-0"]'); s.value = "web"; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, nil)
	fill(t, tab, map[string]string{"value-key-0": "EXTRA", "value-value-0": "set-at-accept"}, "value-key-0", "value-value-0")
	waitFor(t, tab, "the diff in a confirmation", `document.querySelector('dialog.confirm[open] [data-table="diff"]')`)
	var diffRows []string
	tab.MustEval(`[...document.querySelectorAll('dialog.confirm [data-table="diff"] tbody tr')].map((r) => r.innerText)`, &diffRows)
	if len(diffRows) != len(apiDiff.Changes) || len(diffRows) == 0 || !strings.Contains(strings.Join(diffRows, "\n"), "changed-by-hand") {
		t.Errorf("the confirmation shows the diff %q; the API's has %d changes, GREETING's among them", diffRows, len(apiDiff.Changes))
	}
	accessible(t, tab, "the detection page's confirmation with the diff")
	screenshots(t, tab, "detection-confirm-diff")
	clickButton(t, tab, "dialog.confirm", "Accept and replace")
	waitFor(t, tab, "accepted again", `document.querySelector('[data-revision="3"]')`)
	var pinned struct {
		App struct{ Pinned struct{ Revision int } } `json:"app"`
	}
	s.must(t, "GET", "/apps/"+appID, nil, http.StatusOK, &pinned)
	s.must(t, "GET", "/apps/"+appID+"/specs/3", nil, http.StatusOK, &one)
	env = one.Spec.Spec.Workloads["web"].Env
	if pinned.App.Pinned.Revision != 3 || string(env["EXTRA"]) != `"set-at-accept"` || string(env["GREETING"]) != strconv.Quote(greeting) {
		t.Errorf("after accepting over the configured app, revision %d is pinned with the workload's env %s; want 3 with EXTRA and the answered GREETING", pinned.App.Pinned.Revision, mustMarshal(env))
	}

	// A hostile archive dropped on the drop zone: the API's refusal.
	hostile := traversalTar(t)
	tab.Go(s.console + "/new")
	waitFor(t, tab, "the form", `document.querySelector('button.dropzone')`)
	fillOnly(t, tab, "name", "Hostile Upload")
	var dropped bool
	tab.MustEval(`(() => { const b = Uint8Array.from(atob(`+strconv.Quote(base64.StdEncoding.EncodeToString(hostile))+`), (c) => c.charCodeAt(0));
  const dt = new DataTransfer(); dt.items.add(new File([b], "hostile.tar", {type: "application/x-tar"}));
  const z = document.querySelector('button.dropzone');
  z.dispatchEvent(new DragEvent("dragenter", {bubbles: true, cancelable: true, dataTransfer: dt}));
  z.dispatchEvent(new DragEvent("drop", {bubbles: true, cancelable: true, dataTransfer: dt})); return true; })()`, &dropped)
	waitFor(t, tab, "the dropped archive chosen", `document.querySelector('#archive-chosen').dataset.file === "hostile.tar"`)
	click(t, tab, `.new-app button[type=submit]`)
	waitFor(t, tab, "the upload refused", `document.querySelector('#new-error .code')`)
	var refusal string
	tab.MustEval(`[...document.querySelectorAll('#new-error .msg, #new-error .remedy, #new-error .code code')].map((e) => e.innerText).join(" | ")`, &refusal)
	var ids []string
	for _, id := range s.names(t, "/apps", "id") {
		if id != appID {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("apps besides the first: %v; want the hostile upload's", ids)
	}
	r := s.call(t, "POST", "/apps/"+ids[0]+"/source", archive(hostile))
	var env2 struct{ Code, Message, Remedy string }
	mustJSON(t, r.body, &env2)
	if r.status < 400 || env2.Code == "" {
		t.Fatalf("the API's answer to the hostile archive: %d %s", r.status, r.body)
	}
	want := sentence(env2.Message) + " | " + func() string {
		if env2.Remedy == "" {
			return ""
		}
		return sentence(env2.Remedy) + " | "
	}() + env2.Code
	if refusal != want || !strings.Contains(env2.Message, "path traversal") {
		t.Errorf("the page shows the hostile archive's refusal as %q; the API gives %q", refusal, want)
	}
	var hostileApp struct {
		App struct {
			Source *struct{ Kind string } `json:"source"`
		} `json:"app"`
	}
	s.must(t, "GET", "/apps/"+ids[0], nil, http.StatusOK, &hostileApp)
	if hostileApp.App.Source != nil {
		t.Errorf("the hostile upload's app has a source: %+v", hostileApp.App.Source)
	}
	waitText(t, tab, "Choose another archive and upload again")
	accessible(t, tab, "the new-app page with a refused upload")
	screenshots(t, tab, "new-app-hostile")

	// An app from a git repository, the app in a subdirectory.
	repo := gitRepoOf(t, s, filepath.Join(root, "samples", "go-whoami"), "apps/hello")
	tab.Go(s.console + "/new")
	waitFor(t, tab, "the form", `document.querySelector('input[name="kind"][value="repository"]')`)
	click(t, tab, `input[name="kind"][value="repository"]`)
	waitFor(t, tab, "the repository fields", `document.querySelector('input[name="repository"]')`)
	fill(t, tab, map[string]string{"name": "From Git", "repository": "ftp://example.com/x.git"}, "name", "repository")
	waitFor(t, tab, "the repository's refusal at its field", `document.querySelector('#f-repository-error').dataset.code !== ""`)
	accessible(t, tab, "the new-app page for a repository, with a refusal")
	screenshots(t, tab, "new-app-repository-error")
	fill(t, tab, map[string]string{"repository": repo, "ref": "main", "subdir": "apps/hello"}, "repository", "ref", "subdir")
	gitURL := waitURL(t, tab, "the repository app's detection page", func(a string) bool {
		return strings.HasPrefix(a, s.console+"/apps/app_") && strings.HasSuffix(a, "/detection?from=repository")
	})
	gitID := strings.TrimPrefix(gitURL, s.console+"/apps/")
	gitID = gitID[:strings.Index(gitID, "/")]
	waitFor(t, tab, "the repository's go proposal", `document.querySelector('[data-detector="go"] [data-table="proposal"]')`)
	var gitApp struct {
		App struct {
			Source *struct{ Kind, Repository, Ref, Subdir string } `json:"source"`
		} `json:"app"`
	}
	s.must(t, "GET", "/apps/"+gitID, nil, http.StatusOK, &gitApp)
	if gitApp.App.Source == nil || gitApp.App.Source.Kind != "repository" || gitApp.App.Source.Repository != repo || gitApp.App.Source.Ref != "main" || gitApp.App.Source.Subdir != "apps/hello" {
		t.Errorf("the repository app's source: %+v", gitApp.App.Source)
	}
	waitText(t, tab, repo)
	// go-whoami's Dockerfile is the runner-up, its evidence saying why.
	var runner string
	tab.MustEval(`(() => { const d = document.querySelector('ul.runners li[data-detector="dockerfile"] details'); if (!d) return ""; d.open = true; return d.innerText; })()`, &runner)
	if !strings.Contains(runner, "Dockerfile") {
		t.Errorf("the runners-up show %q; want the dockerfile bid with its evidence", runner)
	}
	accessible(t, tab, "the detection page of a repository app")
	screenshots(t, tab, "detection-repository")
	click(t, tab, `form.accept button[type=submit]`)
	waitFor(t, tab, "the repository app accepted", `document.querySelector('[data-revision="1"]')`)
	s.must(t, "GET", "/apps/"+gitID, nil, http.StatusOK, &pinned)
	if pinned.App.Pinned.Revision != 1 {
		t.Errorf("the repository app's pinned revision: %d", pinned.App.Pinned.Revision)
	}

	// A new source uploaded on the detection page: the page waits for its
	// detection (go-hello: no Dockerfile, so no runner-up).
	helloPath := filepath.Join(t.TempDir(), "go-hello.tgz")
	if err := os.WriteFile(helloPath, sampleArchive(t, "go-hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	click(t, tab, `details.new-source summary`)
	tab.SetFiles("#f-archive", helloPath)
	waitFor(t, tab, "the new archive chosen", `document.querySelector('#archive-chosen').dataset.file === "go-hello.tgz"`)
	click(t, tab, `details.new-source button[type=submit]`)
	waitFor(t, tab, "the new source's proposal", `document.body.innerText.includes("uploaded archive") && document.querySelector('[data-detector="go"] [data-table="proposal"]') && !document.querySelector('ul.runners')`)
	s.must(t, "GET", "/apps/"+gitID, nil, http.StatusOK, &gitApp)
	if gitApp.App.Source == nil || gitApp.App.Source.Kind != "archive" {
		t.Errorf("after an upload on the detection page the app's source is %+v", gitApp.App.Source)
	}

	// A repository whose ref does not exist: the clone fails behind the
	// answer, and the detection page says so.
	tab.Go(s.console + "/new")
	waitFor(t, tab, "the form", `document.querySelector('input[name="kind"][value="repository"]')`)
	click(t, tab, `input[name="kind"][value="repository"]`)
	waitFor(t, tab, "the repository fields", `document.querySelector('input[name="repository"]')`)
	fill(t, tab, map[string]string{"name": "Bad Ref", "repository": repo, "ref": "no-such-branch"}, "name", "repository", "ref")
	waitURL(t, tab, "the bad ref's detection page", func(a string) bool {
		return strings.HasSuffix(a, "/detection?from=repository") && !strings.Contains(a, gitID)
	})
	waitFor(t, tab, "the failed clone shown", `document.body.innerText.includes("Detection failed") && document.body.innerText.includes("no-such-branch")`)
	accessible(t, tab, "the detection page of a failed clone")
	screenshots(t, tab, "detection-failed")

	noProblems(t, tab)
	noProblems(t, appTab)
	onlyAPI(t, tab, s.console)
	var xhrUploads int
	for _, r := range tab.Requests() {
		if r.Type == "XHR" && r.Method == "POST" && strings.HasSuffix(r.URL, "/source") {
			xhrUploads++
		}
	}
	if xhrUploads != 3 {
		t.Errorf("the page uploaded %d archives with XMLHttpRequest; want 3", xhrUploads)
	}
}

// deployStreamed runs ask (which asks for a deploy in the page), waits for
// the page of the deploy it opens to show the outcome succeeded, and checks
// that the log streamed: its first line was shown before the server's
// finished_at, and the page shows every line of the API's stream. It
// returns the deploy page's address and the deploy's ID.
func (s *webServer) deployStreamed(t *testing.T, tab *browsertest.Tab, appID string, ask func()) (string, string) {
	t.Helper()
	tab.MustEval(`(() => { window.__firstLine = 0; new MutationObserver(() => {
  if (!window.__firstLine && document.querySelector('.deploy-detail .log .ln')) window.__firstLine = Date.now();
}).observe(document.body, {subtree: true, childList: true}); return true; })()`, nil)
	ask()
	depURL := waitURL(t, tab, "the deploy's page", func(a string) bool { return strings.HasPrefix(a, s.console+"/apps/"+appID+"/deploys/dep_") })
	depID := depURL[strings.LastIndex(depURL, "/")+1:]
	waitFor(t, tab, "the deploy's outcome", `document.querySelector('.outcome').dataset.outcome === "succeeded"`)
	var firstLine int64
	tab.MustEval(`window.__firstLine`, &firstLine)
	var dep struct {
		Deployment struct {
			FinishedAt time.Time `json:"finished_at"`
		}
	}
	s.must(t, "GET", "/apps/"+appID+"/deployments/"+depID, nil, http.StatusOK, &dep)
	if firstLine == 0 || !time.UnixMilli(firstLine).Before(dep.Deployment.FinishedAt) {
		t.Errorf("the first log line was shown at %v, the deploy finished at %v: the log did not stream while the deploy ran", time.UnixMilli(firstLine), dep.Deployment.FinishedAt)
	}
	lines, _ := s.follow(t, appID, depID)
	var shown int
	tab.MustEval(`document.querySelectorAll('.deploy-detail .log .ln').length`, &shown)
	if shown != len(lines) || len(lines) == 0 {
		t.Errorf("the page shows %d log lines; the API's stream has %d", shown, len(lines))
	}
	return depURL, depID
}

// fillOnly types a value into the input named name, without submitting.
func fillOnly(t *testing.T, tab *browsertest.Tab, name, value string) {
	t.Helper()
	var ok bool
	tab.MustEval(`(() => { const el = document.querySelector('input[name=`+strconv.Quote(name)+`]'); if (!el) return false;
  el.value = `+strconv.Quote(value)+`; el.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, &ok)
	if !ok {
		t.Fatalf("no input %s at %s", name, tab.URL())
	}
}

// sentence is the console's way of showing an API message: capitalized,
// ending with a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.ContainsAny(s[len(s)-1:], ".!?") {
		s += "."
	}
	return s
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// traversalTar is a tar whose second entry climbs out with ../.
func traversalTar(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct{ name, body string }{{"index.html", "<p>hi</p>\n"}, {"../escaped.txt", "out of the checkout\n"}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// gitRepoOf serves a repository with one commit on main holding dir under
// sub (see serveGitRepo), allowing its address (and uploads) in host
// policy when it is private, and returns its URL.
func gitRepoOf(t *testing.T, s *webServer, dir, sub string) string {
	t.Helper()
	repo, ip := serveGitRepo(t, dir, sub)
	if ip.IsPrivate() {
		// archive: keeps uploads allowed for the tests that go on to them.
		s.must(t, "PUT", "/policy", map[string]any{"policy": map[string]any{"source_allowlist": []string{ip.String(), "archive:"}}}, http.StatusOK, nil)
	}
	return repo
}
