package server

import (
	"crypto/sha256"
	"encoding/base64"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
)

var (
	formAttrRE = regexp.MustCompile(`<form method="post" data-endpoint="([^"]*)" data-next="([^"]*)" data-done="[^"]*">`)
	inlineRE   = regexp.MustCompile(`(?s)<(script|style)>(.*?)</(?:script|style)>`)
	inputRE    = regexp.MustCompile(`<input name="([^"]*)" type="([^"]*)"`)
)

// shownPage is what a stand-in page showed.
type shownPage struct {
	endpoint, next string // the form's; "" without a form
	inputs         []string
	notice         bool
}

// getPage fetches a stand-in page and checks what every one must have:
// 200 HTML with the security headers, and a Content-Security-Policy that
// allows exactly the inline script and style the page carries.
func getPage(t *testing.T, h *harness, path string) shownPage {
	t.Helper()
	a := h.do("GET", path, nil, "Authorization", "")
	if a.status != http.StatusOK || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET %s: %d %s: %s", path, a.status, a.header.Get("Content-Type"), a.body)
	}
	for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"} {
		if got := a.header.Get(k); got != v {
			t.Errorf("GET %s: %s %q, want %q", path, k, got, v)
		}
	}
	csp := a.header.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'none'", "connect-src 'self'", "form-action 'none'", "frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, d) {
			t.Errorf("GET %s: the policy %q lacks %s", path, csp, d)
		}
	}
	body := string(a.body)
	inline := inlineRE.FindAllStringSubmatch(body, -1)
	if len(inline) != 2 {
		t.Fatalf("GET %s: %d inline scripts and styles, want one of each", path, len(inline))
	}
	for _, m := range inline {
		sum := sha256.Sum256([]byte(m[2]))
		if want := m[1] + "-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, want) {
			t.Errorf("GET %s: the policy %q does not allow the page's own %s (%s)", path, csp, m[1], want)
		}
	}
	var p shownPage
	if m := formAttrRE.FindStringSubmatch(body); m != nil {
		p.endpoint, p.next = html.UnescapeString(m[1]), html.UnescapeString(m[2])
	}
	for _, m := range inputRE.FindAllStringSubmatch(body, -1) {
		p.inputs = append(p.inputs, m[1]+":"+m[2])
	}
	p.notice = strings.Contains(body, `class="notice"`)
	return p
}

// TestSignInPage: GET /login serves the sign-in form, which posts to POST
// /api/v1/sessions and then follows next only where the edge says a page
// may send a browser (here a fake edge allowing a handoff path and an app
// address; the edge's own rule is edge.TestNextPage); anything else is not
// followed and the page says so.
func TestSignInPage(t *testing.T) {
	h := newHarness(t)
	handoff := "/api/v1/edge/handoff?next=http%3A%2F%2Flocalhost%3A9001%2F&state=s"
	app := "http://localhost:9001/x"
	h.srv = h.withDeps(t, func(d *Deps) {
		d.Handoff = &recordingHandoff{allowed: map[string]bool{handoff: true, app: true}}
	})
	login := func(next ...string) string {
		q := url.Values{"next": next}
		return "/login?" + q.Encode()
	}

	p := getPage(t, h, "/login")
	if p.endpoint != api+"/sessions" || p.next != "" || p.notice || strings.Join(p.inputs, ",") != "username:text,password:password" {
		t.Errorf("/login: %+v", p)
	}
	for _, next := range []string{handoff, app} {
		if p := getPage(t, h, login(next)); p.next != next || p.notice {
			t.Errorf("/login?next=%s: the form goes to %q (notice %v)", next, p.next, p.notice)
		}
	}
	for _, next := range [][]string{{"https://evil.example/"}, {"//evil.example"}, {`/\evil.example`}, {"javascript:alert(1)"}, {handoff, app}} {
		if p := getPage(t, h, login(next...)); p.next != "" || !p.notice || p.endpoint != api+"/sessions" {
			t.Errorf("/login?next=%q: the form goes to %q (notice %v); want nowhere, and a notice", next, p.next, p.notice)
		}
	}
	h.srv = h.withDeps(t, func(d *Deps) { d.Handoff = nil })
	if p := getPage(t, h, login(handoff)); p.next != "" || !p.notice {
		t.Errorf("without an edge: %+v; want next not followed, and a notice", p)
	}
}

// TestPasscodePageAndSetupPage: /passcode/<app ID> names an app shared
// with everyone behind a passcode and posts to its passcode endpoint
// (NOT_FOUND for any other app, as the endpoint answers); /setup offers
// the first account while the installation waits for one, and says it is
// set up afterwards.
func TestPasscodePageAndSetupPage(t *testing.T) {
	h := newSharingHarness(t)
	guarded, plain := h.app(t, "guarded"), h.app(t, "plain")
	wantStatus(t, "share behind a passcode", h.send("POST", api+"/apps/"+guarded+"/grants", `{"plane":"data","principal_kind":"anonymous","passcode":"open-sesame"}`), http.StatusCreated)
	p := getPage(t, h, "/passcode/"+guarded)
	if p.endpoint != api+"/apps/"+guarded+"/passcode" || strings.Join(p.inputs, ",") != "passcode:password" {
		t.Errorf("/passcode/%s: %+v", guarded, p)
	}
	for _, id := range []string{plain, ids.New(ids.App), "not-an-id"} {
		wantError(t, "the passcode page of "+id, h.do("GET", "/passcode/"+id, nil), http.StatusNotFound, errcode.NotFound)
	}

	if p := getPage(t, h, "/setup"); p.endpoint != "" || len(p.inputs) != 0 {
		t.Errorf("/setup on an installation set up: %+v; want no form", p)
	}
	fresh := newHarnessWith(t, harnessOptions{})
	if p := getPage(t, fresh, "/setup"); p.endpoint != api+"/setup" || strings.Join(p.inputs, ",") != "username:text,display_name:text,password:password" {
		t.Errorf("/setup on a fresh installation: %+v", p)
	}
}
