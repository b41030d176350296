package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

// TestNextPage: GET /api/v1/edge/next, public, answers where a console page
// may send the browser as the edge says (here a fake edge allowing a
// handoff path and an app address; the edge's own rule is
// edge.TestNextPage), refuses anything else VALID_INVALID, more than one
// next or none too; without an edge, NOT_FOUND.
func TestNextPage(t *testing.T) {
	h := newHarness(t)
	handoff := "/api/v1/edge/handoff?next=http%3A%2F%2Flocalhost%3A9001%2F&state=s"
	app := "http://localhost:9001/x"
	h.srv = h.withDeps(t, func(d *Deps) {
		d.Handoff = &recordingHandoff{allowed: map[string]bool{handoff: true, app: true}}
	})
	ask := func(next ...string) answer {
		return h.do("GET", api+"/edge/next?"+url.Values{"next": next}.Encode(), nil, "Authorization", "")
	}
	for _, next := range []string{handoff, app} {
		a := ask(next)
		var got nextPageDTO
		if a.status != http.StatusOK || json.Unmarshal(a.body, &got) != nil || got.Next != next {
			t.Errorf("next=%s: %d %s; want it given back", next, a.status, a.body)
		}
	}
	for _, next := range [][]string{{"https://evil.example/"}, {"//evil.example"}, {`/\evil.example`}, {"javascript:alert(1)"}, {handoff, app}, nil} {
		wantError(t, "next="+url.Values{"next": next}.Encode(), ask(next...), http.StatusBadRequest, errcode.ValidInvalid)
	}
	h.srv = h.withDeps(t, func(d *Deps) { d.Handoff = nil })
	wantError(t, "without an edge", ask(handoff), http.StatusNotFound, errcode.NotFound)
}

// TestConsoleRoutes: the console's page paths and files go to
// Deps.Console as they came (path and query), for anyone, also while the
// store catches up (they read no state); API paths never do; without a
// console those paths answer NOT_FOUND.
func TestConsoleRoutes(t *testing.T) {
	h := newHarness(t)
	var seen []string
	h.srv = h.withDeps(t, func(d *Deps) {
		d.Console = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = append(seen, r.URL.RequestURI())
			w.WriteHeader(http.StatusTeapot)
		})
	})
	paths := []string{"/", "/login?next=%2F", "/setup", "/passcode/app_01", "/account/password", "/apps/app_01/deploys", "/admin/", "/admin/users", "/assets/index-x.js"}
	for _, p := range paths {
		if a := h.do("GET", p, nil, "Authorization", ""); a.status != http.StatusTeapot {
			t.Errorf("GET %s: %d %s; want the console's answer", p, a.status, a.body)
		}
	}
	if len(seen) != len(paths) {
		t.Fatalf("the console saw %v", seen)
	}
	for i, p := range paths {
		if seen[i] != p {
			t.Errorf("the console saw %s, want %s", seen[i], p)
		}
	}
	for _, p := range []string{api + "/nothing", "/nothing", "/favicon.ico"} {
		if a := h.do("GET", p, nil); a.status == http.StatusTeapot {
			t.Errorf("GET %s went to the console", p)
		}
	}
	h.srv = h.withDeps(t, func(d *Deps) { d.Console = nil })
	wantError(t, "without a console", h.do("GET", "/", nil), http.StatusNotFound, errcode.NotFound)
}
