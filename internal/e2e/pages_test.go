package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/browsertest"
)

// submitForm fills the page's form and submits it as a person would (its
// own script posts it to the API).
func submitForm(t *testing.T, tab *browsertest.Tab, fields map[string]string) {
	t.Helper()
	b, _ := json.Marshal(fields)
	tab.MustEval(`(() => {
  const f = document.querySelector("form");
  for (const [k, v] of Object.entries(`+string(b)+`)) f.elements[k].value = v;
  f.requestSubmit();
  return true;
})()`, nil)
}

// waitPage waits until the tab's address and the page's status line (""
// where it has none) satisfy done, and returns the address.
func waitPage(t *testing.T, tab *browsertest.Tab, what string, done func(addr, status string) bool) string {
	t.Helper()
	deadline := time.Now().Add(scaled(30 * time.Second))
	for {
		addr := tab.URL()
		var status string
		_ = tab.Eval(`(document.getElementById("status") || {}).textContent || ""`, &status) // fails while a page loads
		if done(addr, status) {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still at %s (status %q) after %s", what, addr, status, scaled(30*time.Second))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBrowserSignInPages: the console's stand-in pages in a real browser,
// on the embedded defaults (port mode). Not signed in, a private app's page
// lands on /login; signing in through its form lands on the app's page
// (its next, through the handoff), as the administrator. An app shared
// behind a passcode lands on /passcode/<app ID>; its form admits the
// browser and lands on the app. A sign-in page given a next elsewhere
// (https://evil.example/, //evil.example, /\evil.example) signs in and
// stays on svc.
func TestBrowserSignInPages(t *testing.T) {
	// The edge sends every app's requests to the test's own upstream: the
	// apps' workloads serve nothing here, so they need no sandbox.
	s := startWebServer(t, "port", "SVC_RUNTIME_ISOLATION=none")
	notes, guarded := s.app(t, "notes"), s.app(t, "guarded")
	s.must(t, "POST", "/apps/"+guarded.id+"/grants", map[string]any{"plane": "data", "principal_kind": "anonymous", "passcode": "open-sesame-42"}, http.StatusCreated, nil)
	var me struct {
		User struct{ ID string } `json:"user"`
	}
	s.must(t, "GET", "/me", nil, http.StatusOK, &me)
	admin := map[string]string{"username": "admin", "password": adminPassword}

	tab := browse(t).Tab()
	page := notes.url + "page?x=1"
	tab.Go(page)
	if !strings.HasPrefix(tab.URL(), s.console+"/login?next=") {
		t.Fatalf("not signed in, the app's page ended at %s; want the sign-in page", tab.URL())
	}
	submitForm(t, tab, map[string]string{"username": "admin", "password": "not-the-password"})
	waitPage(t, tab, "a wrong password", func(_, status string) bool { return strings.Contains(status, "AUTH_INVALID") })
	submitForm(t, tab, admin)
	waitPage(t, tab, "signing in through the page", func(addr, _ string) bool { return addr == page })
	if h := s.hostile.hits(notes.id, "/page"); len(h) == 0 || h[len(h)-1].UserID != me.User.ID || !h[len(h)-1].Assertion {
		t.Errorf("the app got %+v; want the administrator's assertion", h)
	}

	pc := browse(t).Tab()
	pc.Go(guarded.url)
	if !strings.HasPrefix(pc.URL(), s.console+"/passcode/"+guarded.id+"?next=") {
		t.Fatalf("a passcode app sent the browser to %s", pc.URL())
	}
	submitForm(t, pc, map[string]string{"passcode": "open-sesame-42"})
	waitPage(t, pc, "the passcode page", func(addr, _ string) bool { return addr == guarded.url })

	elsewhere := browse(t).Tab()
	for _, next := range []string{"https://evil.example/", "//evil.example", `/\evil.example`} {
		elsewhere.Go(s.console + "/login?next=" + url.QueryEscape(next))
		submitForm(t, elsewhere, admin)
		addr := waitPage(t, elsewhere, "next="+next, func(addr, status string) bool {
			return !strings.HasPrefix(addr, s.console+"/login") || status == "You are signed in."
		})
		if !strings.HasPrefix(addr, s.console+"/login?") {
			t.Errorf("signed in with next=%s, the browser ended at %s; want it to stay on the sign-in page", next, addr)
		}
	}
}
