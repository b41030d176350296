package e2e

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/browsertest"
)

// The console's browser tests drive the real console (console/dist,
// embedded in the real binary) in a real Chromium: they fill its forms
// and press its buttons as a person would, through the DOM.

// consoleTab opens a tab of 1280×800 that reports every
// securitypolicyviolation of its pages as a console error, so that
// Problems lists it.
func consoleTab(t testing.TB, b *browsertest.Browser) *browsertest.Tab {
	t.Helper()
	tab := b.Tab()
	tab.Viewport(1280, 800)
	tab.OnNewDocument(`document.addEventListener("securitypolicyviolation", (e) => console.error("CSP violation:", e.violatedDirective, e.blockedURI));`)
	return tab
}

// waitFor waits until the expression js is true in the tab's page.
func waitFor(t testing.TB, tab *browsertest.Tab, what, js string) {
	t.Helper()
	timeout := scaled(30 * time.Second)
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		if err := tab.Eval(`!!(`+js+`)`, &ok); err == nil && ok { // fails while a page loads
			return
		}
		if time.Now().After(deadline) {
			var body string
			_ = tab.Eval(`document.body ? document.body.innerText : ""`, &body)
			t.Fatalf("%s: not so after %s (at %s); the page says:\n%s", what, timeout, tab.URL(), body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitText waits until the page's text contains s.
func waitText(t testing.TB, tab *browsertest.Tab, s string) {
	t.Helper()
	waitFor(t, tab, "the page shows "+strconv.Quote(s), `document.body && document.body.innerText.includes(`+strconv.Quote(s)+`)`)
}

// waitURL waits until the tab's address satisfies ok.
func waitURL(t testing.TB, tab *browsertest.Tab, what string, ok func(string) bool) string {
	t.Helper()
	timeout := scaled(30 * time.Second)
	deadline := time.Now().Add(timeout)
	for {
		addr := tab.URL()
		if ok(addr) {
			return addr
		}
		if time.Now().After(deadline) {
			var body string
			_ = tab.Eval(`document.body ? document.body.innerText : ""`, &body)
			t.Fatalf("%s: still at %s after %s; the page says:\n%s", what, addr, timeout, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fill types values into the inputs named by their name attribute, as
// input events (what the console's fields listen to), and submits the
// form of the last one.
func fill(t testing.TB, tab *browsertest.Tab, fields map[string]string, order ...string) {
	t.Helper()
	type kv struct{ K, V string }
	var list []kv
	for _, k := range order {
		list = append(list, kv{k, fields[k]})
	}
	b, _ := json.Marshal(list)
	var ok bool
	// The console re-renders after each input (a microtask): the form is
	// submitted in a task after those, with what was typed.
	tab.MustEval(`(async () => {
  let form = null;
  for (const {K, V} of `+string(b)+`) {
    const el = document.querySelector('input[name="' + K + '"]');
    if (!el) return false;
    el.focus();
    el.value = V;
    el.dispatchEvent(new Event("input", {bubbles: true}));
    form = el.form;
  }
  await new Promise((r) => setTimeout(r, 0));
  form.requestSubmit();
  return true;
})()`, &ok)
	if !ok {
		t.Fatalf("fill %v: an input is missing at %s", order, tab.URL())
	}
}

// click clicks the first element matching the CSS selector.
func click(t testing.TB, tab *browsertest.Tab, selector string) {
	t.Helper()
	var ok bool
	tab.MustEval(`(() => { const el = document.querySelector(`+strconv.Quote(selector)+`); if (!el) return false; el.click(); return true; })()`, &ok)
	if !ok {
		t.Fatalf("click %s: no such element at %s", selector, tab.URL())
	}
}

// noProblems fails the test if the tab's pages reported anything going
// wrong: a Content-Security-Policy violation, an exception, console.error.
func noProblems(t testing.TB, tab *browsertest.Tab) {
	t.Helper()
	for _, p := range tab.Problems() {
		t.Errorf("the console reported: %s", p)
	}
}

// onlyAPI fails the test unless every request the tab's console pages
// made stayed on the console's origin, and every fetch (and websocket) went under /api/v1/
// (documents, scripts, styles and images aside, which are the console's own
// files and the apps' tile images, also under /api/v1/).
func onlyAPI(t testing.TB, tab *browsertest.Tab, console string) {
	t.Helper()
	origin, _ := url.Parse(console)
	fetches := 0
	for _, r := range tab.Requests() {
		u, err := url.Parse(r.URL)
		if err != nil || u.Scheme == "data" {
			continue
		}
		// A websocket (the terminal's) is the page's origin in ws: or wss:.
		if r.Type == "WebSocket" {
			u.Scheme = map[string]string{"ws": "http", "wss": "https"}[u.Scheme]
		}
		if u.Scheme+"://"+u.Host != origin.Scheme+"://"+origin.Host {
			t.Errorf("the console requested %s %s (%s): off its origin", r.Method, r.URL, r.Type)
			continue
		}
		switch r.Type {
		case "Fetch", "XHR", "EventSource", "WebSocket":
			fetches++
			if !strings.HasPrefix(u.Path, "/api/v1/") {
				t.Errorf("the console fetched %s %s: not under /api/v1/", r.Method, r.URL)
			}
		case "Image":
			if !strings.HasPrefix(u.Path, "/api/v1/") {
				t.Errorf("the console loaded the image %s: not under /api/v1/", r.URL)
			}
		case "Script", "Stylesheet":
			if !strings.HasPrefix(u.Path, "/assets/") {
				t.Errorf("the console loaded %s %s: not one of its files", r.Type, r.URL)
			}
		}
	}
	if fetches == 0 {
		t.Errorf("no request of the console's was seen (%d requests): the recording is broken", len(tab.Requests()))
	}
}

// axeSource is axe-core's script, from the console's dev dependencies.
var axeSource = sync.OnceValues(func() ([]byte, error) {
	_, file, _, _ := runtime.Caller(0)
	return os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "console", "node_modules", "axe-core", "axe.min.js"))
})

// accessible runs axe-core on the tab's page, in the light and the dark
// theme, and fails the test on every serious or critical violation.
func accessible(t testing.TB, tab *browsertest.Tab, page string) {
	t.Helper()
	src, err := axeSource()
	if err != nil {
		if os.Getenv("SVC_REQUIRE_NODE") == "1" {
			t.Fatalf("axe-core: %v (run make console, which installs the console's dependencies)", err)
		}
		t.Logf("axe-core is not installed (%v): the accessibility check of %s is skipped; run make console", err, page)
		return
	}
	var loaded bool
	tab.MustEval(`typeof axe !== "undefined" || (() => { `+string(src)+`; return true; })()`, &loaded)
	for _, scheme := range []string{"light", "dark"} {
		tab.ColorScheme(scheme)
		var violations []string
		tab.MustEval(`axe.run(document, {resultTypes: ["violations"]}).then((r) => r.violations
  .filter((v) => v.impact === "serious" || v.impact === "critical")
  .map((v) => v.impact + " " + v.id + ": " + v.help + " at " + v.nodes.map((n) => n.target.join(" ")).join(", ")))`, &violations)
		for _, v := range violations {
			t.Errorf("accessibility of %s (%s theme): %s", page, scheme, v)
		}
	}
	tab.ColorScheme("light")
}

var (
	shotsOnce sync.Once
	shotsDir  string
)

// screenshots writes PNGs of the tab's page in the light and the dark
// theme to SVC_SCREENSHOTS (default a temporary directory, logged).
func screenshots(t testing.TB, tab *browsertest.Tab, name string) {
	t.Helper()
	shotsOnce.Do(func() {
		shotsDir = os.Getenv("SVC_SCREENSHOTS")
		if shotsDir == "" {
			shotsDir, _ = os.MkdirTemp("", "svc-console-screenshots-")
		}
		_ = os.MkdirAll(shotsDir, 0o755)
	})
	for _, scheme := range []string{"light", "dark"} {
		tab.ColorScheme(scheme)
		// Let the page paint in the scheme before the picture.
		tab.MustEval(`new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, nil)
		p := filepath.Join(shotsDir, name+"-"+scheme+".png")
		if err := os.WriteFile(p, tab.Screenshot(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tab.ColorScheme("light")
	t.Logf("screenshots of %s written to %s", name, shotsDir)
}
