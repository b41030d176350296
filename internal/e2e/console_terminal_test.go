package e2e

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/browsertest"
)

// The console's terminal page (/apps/<app ID>/terminal) in a real Chromium
// against the real binary. Run it with:
//
//	go test -count=1 -run 'TestConsoleTerminal' ./internal/e2e/

// TestConsoleTerminal, on a server in port mode with the Python sample
// deployed on the process runtime (its workload in the sandbox):
//   - the page loads xterm.js (its own chunk, with its stylesheet as a file
//     of its own) and shows the screen without a CSP violation; the
//     workload picker lists the primary workload, running;
//   - Connect opens a shell over the exec websocket; typing
//     `echo $((6*7))` (the browser's keyboard) shows 42 on the screen
//     (read from xterm's rows for screen readers); Tab stays in the shell,
//     Shift+Tab leaves the terminal (no keyboard trap);
//   - a smaller window makes the page send a resize: `stty size` in the
//     shell answers a different size afterwards;
//   - `exit 3` ends the shell and the page shows exit code 3; the audit
//     log has app.exec on the app;
//   - with host policy turning exec off (disabled_verbs: [app.exec]) the
//     page shows the API's refusal POLICY_EXEC_DISABLED with its remedy,
//     offers no Connect and opens no websocket; a member who holds the
//     app's viewer role (no app.exec) sees PERM_VERB_REQUIRED likewise.
//
// All through, the only request that is not HTTP is the websocket to
// /api/v1/apps/<id>/exec; the console reports no problem; axe-core finds
// no serious violation (light and dark); screenshots go to
// SVC_SCREENSHOTS.
func TestConsoleTerminal(t *testing.T) {
	s := startWebServer(t, "port")
	notes := s.appOf(t, "notes", samples[2]) // python-hello: a process to exec beside
	page := s.console + "/apps/" + notes.id + "/terminal"

	tab := consoleTab(t, browse(t))
	watchLayoutShift(tab)
	s.signInTab(t, tab, "admin", adminPassword)
	tab.Go(page)
	waitFor(t, tab, "the screen and the workload picker", `document.querySelector('.term-host .xterm canvas') && document.querySelector('#workload') && document.querySelector('#workload').value === "web"`)
	noLayoutShift(t, tab, "the terminal page")
	var options []string
	tab.MustEval(`[...document.querySelectorAll('#workload option')].map((o) => o.textContent + (o.disabled ? " disabled" : ""))`, &options)
	if strings.Join(options, ",") != "web (primary)" {
		t.Errorf("the workload picker offers %q; want the running primary workload web", options)
	}
	var sheets []string
	tab.MustEval(`[...document.querySelectorAll('link[rel=stylesheet]')].map((l) => new URL(l.href).pathname)`, &sheets)
	xterm := 0
	for _, s := range sheets {
		if strings.HasPrefix(s, "/assets/xterm-") {
			xterm++
		} else if !strings.HasPrefix(s, "/assets/") {
			t.Errorf("the page links the stylesheet %s, not one of the console's files", s)
		}
	}
	if xterm != 1 {
		t.Errorf("the page's stylesheets are %q; want xterm's own file among the console's", sheets)
	}
	var chunk bool
	for _, r := range tab.Requests() {
		chunk = chunk || r.Type == "Script" && strings.Contains(r.URL, "/assets/terminal-screen-")
	}
	if !chunk {
		t.Errorf("the terminal page did not load its chunk (terminal-screen) as a script of its own")
	}
	accessible(t, tab, "the terminal page")

	clickButton(t, tab, ".terminal-bar", "Connect")
	waitText(t, tab, "Connected to web")
	waitFor(t, tab, "the shell's prompt", screenHasLine("$"))
	typeInTerminal(t, tab, "echo $((6*7))")
	waitFor(t, tab, "42 on the screen", screenHasLine("42"))
	// No keyboard trap: Tab goes to the shell, Shift+Tab leaves.
	tab.Press(browsertest.KeyTab, false)
	focused(t, tab, "the focus still in the terminal after Tab", `document.activeElement.matches('.term-host textarea')`)
	tab.Press(browsertest.KeyTab, true)
	focused(t, tab, "the focus out of the terminal after Shift+Tab", `!document.activeElement.closest('.term-host')`)
	accessible(t, tab, "the terminal, connected")
	screenshots(t, tab, "app-terminal")

	// The window shrinks: the screen refits and the page tells the server.
	typeInTerminal(t, tab, "stty size")
	before := sttySize(t, tab, "")
	tab.Viewport(900, 600)
	after := sttySize(t, tab, before)
	t.Logf("stty size: %s in the 1280×800 window, %s in 900×600", before, after)
	tab.Viewport(1280, 800)

	typeInTerminal(t, tab, "exit 3")
	waitFor(t, tab, "exit code 3 shown", `document.querySelector('.term-exit[data-exit="3"]')`)
	waitText(t, tab, "The shell ended with exit code 3.")
	clickButton(t, tab, ".terminal-bar", "Connect") // the bar offers a new shell
	waitText(t, tab, "Connected to web")
	clickButton(t, tab, ".terminal-bar", "Disconnect")
	waitText(t, tab, "Disconnected: the shell was ended.")
	if !s.execAudited(t, notes.id) {
		t.Errorf("the audit log has no app.exec on %s", notes.id)
	}
	sockets := execSockets(t, tab, notes.id)
	if sockets != 2 {
		t.Errorf("the page opened %d exec websockets; want 2 (two Connects)", sockets)
	}
	noProblems(t, tab)
	onlyAPI(t, tab, s.console)

	// Exec turned off by host policy: the refusal, no Connect, no socket.
	var pol struct {
		Policy map[string]any `json:"policy"`
	}
	s.must(t, "GET", "/policy", nil, http.StatusOK, &pol)
	s.must(t, "PUT", "/policy", map[string]any{"policy": map[string]any{"disabled_verbs": []string{"app.exec"}}}, http.StatusOK, nil)
	tab.Go(page)
	refusedWith(t, tab, "POLICY_EXEC_DISABLED", "PUT /api/v1/policy")
	accessible(t, tab, "the terminal refused by host policy")
	screenshots(t, tab, "app-terminal-policy")
	if n := execSockets(t, tab, notes.id); n != sockets {
		t.Errorf("refused by policy, the page still opened a websocket (%d in all)", n)
	}
	noProblems(t, tab)
	onlyAPI(t, tab, s.console)
	s.must(t, "PUT", "/policy", map[string]any{"policy": pol.Policy}, http.StatusOK, nil)

	// A member with the app's viewer role: no app.exec.
	bob, _ := s.member(t, "bob")
	s.must(t, "POST", "/apps/"+notes.id+"/grants", map[string]any{"plane": "control", "principal_kind": "user", "principal_id": bob, "role_id": "role_viewer"}, http.StatusCreated, nil)
	bt := consoleTab(t, browse(t))
	s.signInTab(t, bt, "bob", "bob-password-93d1")
	bt.Go(page)
	refusedWith(t, bt, "PERM_VERB_REQUIRED", "")
	accessible(t, bt, "the terminal refused without app.exec")
	if n := execSockets(t, bt, notes.id); n != 0 {
		t.Errorf("without app.exec, the page opened %d websockets", n)
	}
	noProblems(t, bt)
	onlyAPI(t, bt, s.console)
}

// typeInTerminal types line into the page's terminal and presses Enter,
// with the browser's keyboard (key events through its input pipeline).
func typeInTerminal(t *testing.T, tab *browsertest.Tab, line string) {
	t.Helper()
	var ok bool
	tab.MustEval(`(() => { const ta = document.querySelector('.term-host textarea'); if (!ta) return false; ta.focus(); return document.activeElement === ta; })()`, &ok)
	if !ok {
		t.Fatalf("no terminal to type %q into at %s", line, tab.URL())
	}
	tab.Press(line+browsertest.KeyEnter, false)
}

// screenHasLine is a condition: a row of the terminal's screen (xterm's
// rows for screen readers) reads line.
func screenHasLine(line string) string {
	return `[...document.querySelectorAll('.term-host .xterm-accessibility-tree > div')].some((r) => r.textContent.trim() === ` + strconv.Quote(line) + `)`
}

// sttySize types `stty size` into the terminal, again every second
// (a resize travels while the test types), until a row of the screen
// reads "<rows> <cols>" other than not, and returns it.
func sttySize(t *testing.T, tab *browsertest.Tab, not string) string {
	t.Helper()
	const rows = `[...document.querySelectorAll('.term-host .xterm-accessibility-tree > div')].map((r) => r.textContent.trim()).map((s) => s.replace(/\s+/g, " ")).filter((s) => /^\d+ \d+$/.test(s))`
	timeout := scaled(30 * time.Second)
	deadline := time.Now().Add(timeout)
	var typed time.Time
	for ; ; time.Sleep(50 * time.Millisecond) {
		if time.Since(typed) > time.Second {
			typeInTerminal(t, tab, "stty size")
			typed = time.Now()
		}
		var sizes []string
		tab.MustEval(rows, &sizes)
		for _, s := range sizes {
			if s != not {
				return s
			}
		}
		if time.Now().After(deadline) {
			var screen []string
			tab.MustEval(`[...document.querySelectorAll('.term-host .xterm-accessibility-tree > div')].map((r) => r.textContent)`, &screen)
			t.Fatalf("stty size never answered other than %q in %s; the screen reads %q", not, timeout, screen)
		}
	}
}

// execSockets counts the websockets the tab opened to the app's exec,
// and fails the test on any other websocket.
func execSockets(t *testing.T, tab *browsertest.Tab, appID string) int {
	t.Helper()
	n := 0
	for _, r := range tab.Requests() {
		if r.Type != "WebSocket" {
			continue
		}
		if u, err := url.Parse(r.URL); err == nil && u.Path == "/api/v1/apps/"+appID+"/exec" {
			n++
		} else {
			t.Errorf("the console opened a websocket to %s", r.URL)
		}
	}
	return n
}

// refusedWith waits for the terminal page's refusal: the API's code (and
// remedy, when given), and no Connect.
func refusedWith(t *testing.T, tab *browsertest.Tab, code, remedy string) {
	t.Helper()
	waitFor(t, tab, "the refusal "+code, `(() => { const c = document.querySelector('.terminal-page [role=alert] .code code'); return c && c.textContent === `+strconv.Quote(code)+`; })()`)
	waitText(t, tab, "You cannot open a terminal in this app.")
	if remedy != "" {
		waitFor(t, tab, "the remedy", `document.querySelector('.terminal-page [role=alert] .remedy').textContent.includes(`+strconv.Quote(remedy)+`)`)
	}
	var connect bool
	tab.MustEval(`[...document.querySelectorAll('button')].some((b) => b.textContent.trim() === "Connect")`, &connect)
	if connect {
		t.Errorf("refused with %s, the page still offers Connect", code)
	}
}
