package server

import (
	"net/http"
	"testing"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/identity"
)

// recordingHandoff is the edge's side of the handoff for the server's
// tests: it records whom the server says the caller is and sends the
// browser to a fixed address (or refuses a token, as the edge does).
type recordingHandoff struct {
	callers []identity.Authenticated
	allowed map[string]bool // NextPage's
}

var _ handoffService = (*recordingHandoff)(nil)

func (f *recordingHandoff) Handoff(r *http.Request, caller identity.Authenticated) (string, error) {
	f.callers = append(f.callers, caller)
	if caller.Token != nil {
		return "", errcode.Invalid("next", "a token opens apps by itself")
	}
	return "http://app.example:9001/.svc/handoff?code=x", nil
}

// NextPage lets pages go to the paths and addresses in allowed, as they
// are, and refuses any other.
func (f *recordingHandoff) NextPage(_ *http.Request, next string) (string, error) {
	if f.allowed[next] {
		return next, nil
	}
	return "", errcode.Invalid("next", "next must be a path on this console or the address of one of this installation's apps")
}

// TestHandoffEndpoint: GET /api/v1/edge/handoff is public (a visitor not
// signed in is sent to sign in by the edge), hands the edge the caller the
// session cookie names, and only when the cookie may count: a navigation
// does, a fetch from another origin's page does not, nor an ambiguous pair
// of cookies. Without an edge it answers NOT_FOUND.
func TestHandoffEndpoint(t *testing.T) {
	h := newHarness(t)
	u := h.account(t, "browser", nil, false)
	_, cookie := h.signIn(u.username, u.password)
	path := api + "/edge/handoff?next=x"
	wantError(t, "no edge", h.send("GET", path, "", "Authorization", ""), http.StatusNotFound, errcode.NotFound)

	f := &recordingHandoff{}
	h.srv = h.withDeps(t, func(d *Deps) { d.Handoff = f })
	for _, tc := range []struct {
		name   string
		header []string
		want   string // the caller's principal ID ("" anonymous)
	}{
		{"a navigation from an app's origin", []string{"Cookie", cookieSession + "=" + cookie, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"}, u.userID},
		{"a typed address", []string{"Cookie", cookieSession + "=" + cookie, "Sec-Fetch-Site", "none", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"}, u.userID},
		{"a fetch from an app's page", []string{"Cookie", cookieSession + "=" + cookie, "Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "empty"}, ""},
		{"a sandboxed page's request", []string{"Cookie", cookieSession + "=" + cookie, "Origin", "null"}, ""},
		{"two session cookies", []string{"Cookie", cookieSession + "=" + cookie + "; " + cookieSession + "=" + cookie, "Sec-Fetch-Site", "none", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"}, ""},
		{"no cookie", []string{"Sec-Fetch-Site", "none", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.callers = nil
			a := h.send("GET", path, "", append([]string{"Authorization", ""}, tc.header...)...)
			if a.status != http.StatusSeeOther || a.header.Get("Location") != "http://app.example:9001/.svc/handoff?code=x" ||
				a.header.Get("Cache-Control") != "no-store" || a.header.Get("Referrer-Policy") != "no-referrer" {
				t.Fatalf("%d %v %s", a.status, a.header, a.body)
			}
			if len(f.callers) != 1 || f.callers[0].Principal.ID != tc.want || (tc.want == "" && f.callers[0].Principal.Kind != authz.KindAnonymous) {
				t.Errorf("the edge was told the caller is %+v; want %q", f.callers, tc.want)
			}
		})
	}
	a := h.send("GET", path, "", "Authorization", "Bearer "+h.token)
	wantError(t, "a token", a, http.StatusBadRequest, errcode.ValidInvalid)
}

// TestAuditedReadsAreSameOriginOnly: a read with an audited effect (a
// secret's value) is not done for a link from another site, though a
// navigation may otherwise carry the session cookie; from the console's own
// pages, or with a token, it is.
func TestAuditedReadsAreSameOriginOnly(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "vault")
	wantStatus(t, "set", h.send("PUT", api+"/apps/"+app+"/secrets/K", `{"value":"v"}`), http.StatusOK)
	_, cookie := h.signIn("admin", adminPassword)
	path := api + "/apps/" + app + "/secrets/K/value"
	link := []string{"Authorization", "", "Cookie", cookieSession + "=" + cookie, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"}
	wantError(t, "a link from another site", h.send("GET", path, "", link...), http.StatusForbidden, errcode.PermDenied)
	wantStatus(t, "the console's own page", h.send("GET", path, "", withCookie(cookie)...), http.StatusOK)
	wantStatus(t, "a token", h.send("GET", path, ""), http.StatusOK)
	// A navigation to an unaudited read is the person's.
	wantStatus(t, "a link to /me", h.send("GET", api+"/me", "", link...), http.StatusOK)
}
