package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/detection"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/volumes"
)

// Concurrent writes to one app over real HTTP (issue 15): a change that
// raced another is applied, not refused; only a request whose own
// precondition fails (a taken slug, a volume the spec declares already)
// answers STATE_INVALID.

// oneWins checks that exactly one answer is status and every other is a
// 409 STATE_INVALID naming field: one request's precondition held, the
// others' failed.
func oneWins(t *testing.T, what string, answers []answer, status int, field string) {
	t.Helper()
	if ok, _ := outcomes(t, what, answers, status, errcode.StateInvalid); ok != 1 {
		t.Errorf("%d %s requests applied; want 1", ok, what)
	}
	for i, a := range answers {
		if e, _ := envelopeOf(a); a.status != status && e.Details["field"] != field {
			t.Errorf("%s %d: details %v, want field %s", what, i, e.Details, field)
		}
	}
}

func (h *harness) auditedOf(t *testing.T, action, appID string) int {
	t.Helper()
	n := 0
	for _, e := range h.auditEntries(t) {
		if e.Action == action && e.AppID != nil && *e.AppID == appID {
			n++
		}
	}
	return n
}

func TestConcurrentRenamesOfOneAppAllApply(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Renamed")
	const n = 32
	as := h.wire(t).burst(n, func(i int) (string, string, string, string) {
		return "PATCH", api + "/apps/" + app, fmt.Sprintf(`{"name":"Renamed %d"}`, i), h.token
	})
	if ok, _ := outcomes(t, "rename", as, http.StatusOK, ""); ok != n {
		t.Errorf("%d of %d renames applied", ok, n)
	}
	got := decodeAs[appAnswer](t, h.send("GET", api+"/apps/"+app, "")).App
	if !strings.HasPrefix(got.Name, "Renamed ") || got.Name == "Renamed" {
		t.Errorf("name after the renames = %q", got.Name)
	}
	if c := h.auditedOf(t, "app.update", app); c != n {
		t.Errorf("%d app.update entries for %d renames", c, n)
	}
}

func TestConcurrentSlugClaimsOneWinsTheRestAreStateInvalid(t *testing.T) {
	h := newHarness(t)
	const n = 8
	paths := make([]string, n)
	for i := range paths {
		paths[i] = api + "/apps/" + h.app(t, fmt.Sprintf("Claimant %d", i))
	}
	oneWins(t, "slug claim", h.wire(t).burst(n, func(i int) (string, string, string, string) {
		return "PATCH", paths[i], `{"slug":"wanted"}`, h.token
	}), http.StatusOK, "slug")
	late := h.app(t, "Late")
	wantError(t, "a taken slug", h.send("PATCH", api+"/apps/"+late, `{"slug":"wanted"}`), http.StatusConflict, errcode.StateInvalid)
}

func TestConcurrentSpecRevisionsAllApply(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Revised")
	const n = 16
	body := strings.Replace(specExampleJSON, `"LOG_LEVEL": "info"`, `"LOG_LEVEL": "level-%d"`, 1)
	seen := map[uint64]bool{}
	as := h.wire(t).burst(n, func(i int) (string, string, string, string) {
		return "POST", api + "/apps/" + app + "/specs", strings.ReplaceAll(body, "%d", fmt.Sprint(i)), h.token
	})
	outcomes(t, "revision", as, http.StatusCreated, "")
	for _, a := range as {
		if a.status == http.StatusCreated {
			seen[decodeAs[specAnswer](t, a).Spec.Number] = true
		}
	}
	for k := uint64(1); k <= n; k++ {
		if !seen[k] {
			t.Errorf("no request got revision %d (got %v)", k, seen)
		}
	}
	list := decodeAs[specListAnswer](t, h.send("GET", api+"/apps/"+app+"/specs?limit=100", ""))
	if len(list.Items) != n || list.Items[0].Number != n {
		t.Errorf("%d revisions listed, newest %+v", len(list.Items), list.Items[0])
	}
	if c := h.auditedOf(t, "spec.create", app); c != n {
		t.Errorf("%d spec.create entries for %d revisions", c, n)
	}
}

func TestConcurrentVolumeDeclarationsAllApply(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Stored")
	h.specRevision(t, app) // revision 1 declares the volume data
	base := api + "/apps/" + app + "/volumes"
	const n = 8
	seen := map[uint64]bool{}
	w := h.wire(t)
	as := w.burst(n, func(i int) (string, string, string, string) {
		return "POST", base, fmt.Sprintf(`{"name":"v%d","size_bytes":1048576,"path":"/v%d"}`, i, i), h.token
	})
	outcomes(t, "volume", as, http.StatusCreated, "")
	for _, a := range as {
		if a.status == http.StatusCreated {
			seen[decodeAs[volumes.Created](t, a).Spec.Number] = true
		}
	}
	for k := uint64(2); k <= n+1; k++ {
		if !seen[k] {
			t.Errorf("no declaration wrote revision %d (got %v)", k, seen)
		}
	}
	// None is lost: the latest revision declares every one of them.
	list := decodeAs[volumeListDTO](t, h.send("GET", base, "")).Items
	names := map[string]bool{}
	for _, v := range list {
		names[v.Name] = true
	}
	for i := range n {
		if !names[fmt.Sprintf("v%d", i)] {
			t.Errorf("volume v%d is missing from the latest revision: %v", i, names)
		}
	}

	// One name declared by several requests at once: one is applied, the
	// others are STATE_INVALID (the spec declares it already).
	oneWins(t, "declaration of one name", w.burst(4, func(i int) (string, string, string, string) {
		return "POST", base, fmt.Sprintf(`{"name":"dup","size_bytes":1048576,"path":"/dup%d"}`, i), h.token
	}), http.StatusCreated, "name")
}

// Pins and renames of one app at once: all applied, and the app row's pin
// is the head's (both written by each pin's one write).
func TestConcurrentPinsAndRenamesAllApply(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Pinned")
	const n = 6
	for range n {
		h.specRevision(t, app)
	}
	as := h.wire(t).burst(2*n, func(i int) (string, string, string, string) {
		if i%2 == 0 {
			return "POST", fmt.Sprintf("%s/apps/%s/specs/%d/pin", api, app, i/2+1), "", h.token
		}
		return "PATCH", api + "/apps/" + app, fmt.Sprintf(`{"name":"Pinned %d"}`, i), h.token
	})
	if ok, _ := outcomes(t, "pin or rename", as, http.StatusOK, ""); ok != 2*n {
		t.Errorf("%d of %d pins and renames applied", ok, 2*n)
	}
	a := decodeAs[appAnswer](t, h.send("GET", api+"/apps/"+app, "")).App
	list := decodeAs[specListAnswer](t, h.send("GET", api+"/apps/"+app+"/specs", ""))
	if a.Pinned == nil || list.PinnedRevision == nil || uint64(a.Pinned.Revision) != *list.PinnedRevision || !strings.HasPrefix(a.Name, "Pinned ") {
		t.Errorf("the app %q pins %+v, its specs %v", a.Name, a.Pinned, list.PinnedRevision)
	}
	if p, r := h.auditedOf(t, "spec.pin", app), h.auditedOf(t, "app.update", app); p != n || r != n {
		t.Errorf("%d spec.pin and %d app.update entries; want %d each", p, r, n)
	}
}

// Answers to detection's questions given at once add up: none is refused,
// none lost (each is merged into the answers as they are when written).
func TestConcurrentDetectionAnswersAddUp(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Answered")
	base := api + "/apps/" + app
	wantStatus(t, "upload", h.upload(base+"/source", "application/gzip", flaskApp(t)), http.StatusAccepted)
	const n = 8
	as := h.wire(t).burst(n, func(i int) (string, string, string, string) {
		return "POST", base + "/detection/answers", fmt.Sprintf(`{"answers":{"note_%d":"value %d"}}`, i, i), h.token
	})
	if ok, _ := outcomes(t, "answer", as, http.StatusOK, ""); ok != n {
		t.Errorf("%d of %d answers applied", ok, n)
	}
	rec := decodeAs[detection.Record](t, h.send("GET", base+"/detection", ""))
	for i := range n {
		if k := fmt.Sprintf("note_%d", i); rec.Answers[k] != fmt.Sprintf("value %d", i) {
			t.Errorf("answer %s = %q; answers %v", k, rec.Answers[k], rec.Answers)
		}
	}
	if rec.Status != detection.StatusDone || rec.Winner == nil {
		t.Errorf("detection after the answers: %+v", rec)
	}
	if c := h.auditedOf(t, "detection.answer", app); c != n {
		t.Errorf("%d detection.answer entries for %d answers", c, n)
	}
}
