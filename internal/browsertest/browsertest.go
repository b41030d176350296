// Package browsertest drives a real headless Chromium from Go tests, through
// the DevTools protocol (github.com/chromedp/chromedp, a test-only
// dependency). A test starts one browser with a fresh profile, opens tabs,
// navigates, runs scripts in the page (awaiting their promises), chooses
// files for a file input (SetFiles), types with the keyboard and drags with
// the mouse (Press, Drag: real input events, so the browser's default
// actions and drag and drop happen), and reads the cookie jar, the requests
// (websockets too) and the redirect chains the browser followed.
//
// The binary is SVC_CHROMIUM_BIN, else /usr/bin/chromium, else chromium or
// chromium-browser on PATH. Without one, tests skip and say so; with
// SVC_REQUIRE_BROWSER=1 (CI) they fail instead.
//
// It is for tests only and must not be imported by production code, and it
// is the only package that imports chromedp.
package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// Environment variables the harness reads.
const (
	// EnvBinary names the Chromium binary to run.
	EnvBinary = "SVC_CHROMIUM_BIN"
	// EnvRequire, set to 1, turns a missing browser into a test failure.
	EnvRequire = "SVC_REQUIRE_BROWSER"
)

// stepTimeout bounds one navigation or one script; a step of these tests
// takes milliseconds, the bound is for a browser that hangs.
const stepTimeout = 60 * time.Second

// Binary returns the Chromium binary the harness would run, or "".
func Binary() string {
	if b := os.Getenv(EnvBinary); b != "" {
		return b
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// noBrowser skips the test for want of a browser, or fails it when
// SVC_REQUIRE_BROWSER=1 (CI, where a skip would count as a pass).
func noBrowser(t testing.TB) {
	t.Helper()
	msg := "no Chromium binary (set " + EnvBinary + ", or install Debian's chromium package)"
	if os.Getenv(EnvRequire) == "1" {
		t.Fatal(msg + "; " + EnvRequire + "=1 requires one")
	}
	t.Skip(msg)
}

// Options adjust the browser a test starts.
type Options struct {
	// HostRules are Chromium host resolver rules ("MAP *.test 127.0.0.1"),
	// so that tests can use real-looking host names on loopback.
	HostRules []string
	// IgnoreCertErrors accepts the self-signed certificates of a test's TLS
	// servers.
	IgnoreCertErrors bool
}

// Browser is one headless Chromium with its own fresh profile.
type Browser struct {
	t   testing.TB
	ctx context.Context // the browser's context (its first tab)
}

// Start launches Chromium for the test and stops it when the test ends.
// Without a binary the test is skipped, or fails when SVC_REQUIRE_BROWSER=1.
func Start(t testing.TB, o Options) *Browser {
	t.Helper()
	bin := Binary()
	if bin == "" {
		noBrowser(t)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// Without these Chromium floods a closed network with requests of
		// its own (and waits on them).
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("mute-audio", true),
	}
	if len(o.HostRules) > 0 {
		opts = append(opts, chromedp.Flag("host-resolver-rules", strings.Join(o.HostRules, ", ")))
	}
	if o.IgnoreCertErrors {
		opts = append(opts, chromedp.Flag("ignore-certificate-errors", true))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	stop := func() {
		cancel()
		cancelAlloc()
	}
	firstRun(t, ctx, stop, "start "+bin)
	t.Cleanup(stop)
	return &Browser{t: t, ctx: ctx}
}

// firstRun starts what ctx stands for (the browser, a tab) with its first
// run, which must not carry a timeout (it lives as long as the context of
// that run): the wait for it is bounded here instead. On failure it calls
// stop and fails the test.
func firstRun(t testing.TB, ctx context.Context, stop func(), what string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			stop()
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(stepTimeout):
		stop()
		t.Fatalf("%s: no answer within %s", what, stepTimeout)
	}
}

// Tab is one browser tab. Its methods fail the test on a protocol error
// (not on a page's own failure, which they return).
type Tab struct {
	t   testing.TB
	ctx context.Context

	mu       sync.Mutex
	hops     []Hop
	requests []Request
	problems []string
}

// Request is one request the tab's pages made: its resource type
// (Document, Script, Stylesheet, Image, Fetch, XHR, WebSocket, …) and URL.
type Request struct {
	Type, Method, URL string
}

// Hop is one response of a navigation: a redirect or the final answer.
type Hop struct {
	URL      string
	Status   int
	Location string
}

// Tab opens a new tab, closed when the test ends.
func (b *Browser) Tab() *Tab {
	b.t.Helper()
	tab := &Tab{t: b.t}
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithListener(tab.record))
	tab.ctx = ctx
	firstRun(b.t, ctx, cancel, "open a tab")
	b.t.Cleanup(cancel)
	return tab
}

// record keeps the document responses of navigations (redirects
// included), every request, and what the pages reported as a problem: an
// exception nothing caught, a console.error, an error of the browser's log
// other than a refused request's status (a 401 the page expects).
func (tb *Tab) record(ev any) {
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		if e.RedirectResponse != nil && e.Type == network.ResourceTypeDocument {
			tb.add(e.RedirectResponse)
		}
		tb.mu.Lock()
		tb.requests = append(tb.requests, Request{Type: string(e.Type), Method: e.Request.Method, URL: e.Request.URL})
		tb.mu.Unlock()
	case *network.EventWebSocketCreated:
		// A websocket's handshake is no requestWillBeSent.
		tb.mu.Lock()
		tb.requests = append(tb.requests, Request{Type: "WebSocket", Method: "GET", URL: e.URL})
		tb.mu.Unlock()
	case *runtime.EventExceptionThrown:
		tb.problem("exception: " + e.ExceptionDetails.Text + describe(e.ExceptionDetails.Exception))
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, describe(a))
			}
			tb.problem("console." + string(e.Type) + ": " + strings.Join(parts, " "))
		}
	case *log.EventEntryAdded:
		if e.Entry.Level == log.EntryLevelError && !(e.Entry.Source == log.EntrySourceNetwork && strings.Contains(e.Entry.Text, "the server responded with a status of")) {
			tb.problem("log (" + string(e.Entry.Source) + "): " + e.Entry.Text + " " + e.Entry.URL)
		}
	case *network.EventResponseReceived:
		if e.Type == network.ResourceTypeDocument {
			tb.add(e.Response)
		}
	}
}

func (tb *Tab) problem(p string) {
	tb.mu.Lock()
	tb.problems = append(tb.problems, p)
	tb.mu.Unlock()
}

func describe(o *runtime.RemoteObject) string {
	if o == nil {
		return ""
	}
	if o.Description != "" {
		return " " + o.Description
	}
	return " " + string(o.Value)
}

// Requests returns the requests the tab's pages made so far, in order.
func (tb *Tab) Requests() []Request {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]Request(nil), tb.requests...)
}

// Problems returns what the tab's pages reported so far as going wrong
// (uncaught exceptions, console.error, errors of the browser's log such as
// a Content-Security-Policy violation).
func (tb *Tab) Problems() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.problems...)
}

// OnNewDocument runs js in every document the tab loads from now on,
// before the page's own scripts (and outside its Content-Security-Policy).
func (tb *Tab) OnNewDocument(js string) {
	tb.t.Helper()
	run(tb, func(ctx context.Context, t *chromedp.Target) (page.AddScriptToEvaluateOnNewDocumentResult, error) {
		return cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: js})
	})
}

// ColorScheme makes the tab's pages see prefers-color-scheme as scheme
// ("light" or "dark").
func (tb *Tab) ColorScheme(scheme string) {
	tb.t.Helper()
	run(tb, func(ctx context.Context, t *chromedp.Target) (cdp.Empty, error) {
		return cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
	})
}

// Viewport sets the size of the tab's window in CSS pixels.
func (tb *Tab) Viewport(width, height int64) {
	tb.t.Helper()
	run(tb, chromedp.EmulateViewport(width, height))
}

// Screenshot returns a PNG of the whole page, beyond the window too.
func (tb *Tab) Screenshot() []byte {
	tb.t.Helper()
	return run(tb, chromedp.FullScreenshot(100))
}

func (tb *Tab) add(r *network.Response) {
	h := Hop{URL: r.URL, Status: int(r.Status)}
	for k, v := range r.Headers {
		if strings.EqualFold(k, "Location") {
			h.Location = fmt.Sprint(v)
		}
	}
	tb.mu.Lock()
	tb.hops = append(tb.hops, h)
	tb.mu.Unlock()
}

// Go navigates to url, waits for the page to load, and returns the
// responses of the navigation: each redirect, then the final answer. A
// page that does not load (an error page) fails the test.
func (tb *Tab) Go(url string) []Hop {
	tb.t.Helper()
	tb.mu.Lock()
	tb.hops = nil
	tb.mu.Unlock()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		tb.t.Fatalf("navigate to %s: %v", url, err)
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]Hop(nil), tb.hops...)
}

// URL returns the address of the tab's document.
func (tb *Tab) URL() string {
	tb.t.Helper()
	return run(tb, chromedp.Location())
}

// Eval runs a JavaScript expression in the page, awaits it when it is a
// promise, and decodes its value (JSON-serializable) into out (nil: drop
// it). A script that throws returns the error.
func (tb *Tab) Eval(js string, out any) error {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](js, chromedp.EvalAwaitPromise))
	if err != nil {
		var ex *chromedp.ExceptionError
		if errors.As(err, &ex) {
			return fmt.Errorf("the script threw: %s", ex.Error())
		}
		return err
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// MustEval is Eval that fails the test when the script throws.
func (tb *Tab) MustEval(js string, out any) {
	tb.t.Helper()
	if err := tb.Eval(js, out); err != nil {
		tb.t.Fatalf("script failed: %v\n%s", err, js)
	}
}

// SetFiles sets the files of the file input the CSS selector matches, as
// a person choosing them in the file chooser would (DOM.setFileInputFiles,
// which fires the input's input and change events): paths are files on
// this machine.
func (tb *Tab) SetFiles(selector string, paths ...string) {
	tb.t.Helper()
	run(tb, chromedp.SetUploadFiles(chromedp.CSS(selector), paths))
}

// Keys a test can press with Press (besides characters, which type
// themselves).
const (
	KeyEnter     = kb.Enter
	KeyTab       = kb.Tab
	KeyEscape    = kb.Escape
	KeySpace     = " "
	KeyArrowDown = kb.ArrowDown
	KeyArrowUp   = kb.ArrowUp
)

// Press types keys at the page's focused element as the keyboard would
// (each a key down, its character, a key up, through the browser's input
// pipeline, so default actions happen: Tab moves the focus, Enter and
// Space press the focused button), with shift held when shift is true.
func (tb *Tab) Press(keys string, shift bool) {
	tb.t.Helper()
	var opts []chromedp.KeyOption
	if shift {
		opts = append(opts, chromedp.KeyModifiers(chromedp.ModifierShift))
	}
	run(tb, chromedp.KeyEvent(keys, opts...))
}

// Drag drags the first element matching the CSS selector from with the
// mouse (button down at its centre, moves, button up) onto the centre of
// the first element matching to; an element that can be dragged
// (draggable, a link) starts the browser's own drag and drop.
func (tb *Tab) Drag(from, to string) {
	tb.t.Helper()
	run(tb, chromedp.DragAndDrop(chromedp.CSS(from), chromedp.CSS(to)))
}

// Cookies returns the cookies the browser would send to each of urls (to
// the tab's document when none is given).
func (tb *Tab) Cookies(urls ...string) []*network.Cookie {
	tb.t.Helper()
	res := run(tb, func(ctx context.Context, t *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{URLs: urls})
	})
	return res.Cookies
}

func run[T any](tb *Tab, a chromedp.Action[T]) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		tb.t.Fatalf("browser: %v", err)
	}
	return v
}
