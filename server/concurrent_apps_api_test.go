package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/svchost/svc/internal/detection"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/volumes"
)

// Concurrent writes to one app over real HTTP (issue 15): a change that
// raced another is applied, not refused; only a request whose own
// precondition fails (a taken slug, a volume the spec declares already)
// answers STATE_INVALID.

// burstRequest is one request of a burst.
type burstRequest struct{ method, path, body string }

// requests is n requests of one method: paths[i] with bodies[i].
func requests(method string, paths, bodies []string) []burstRequest {
	out := make([]burstRequest, len(paths))
	for i := range out {
		out[i] = burstRequest{method, paths[i], bodies[i]}
	}
	return out
}

// appsBurst sends the requests over real HTTP to a listening server, as
// the harness administrator, all released at once, and returns the
// answers in order.
func appsBurst(t *testing.T, h *harness, reqs []burstRequest) []answer {
	t.Helper()
	srv := httptest.NewServer(h.srv.Handler())
	defer srv.Close()
	out := make([]answer, len(reqs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range reqs {
		req, err := http.NewRequest(r.method, srv.URL+r.path, strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+h.token)
		if r.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Errorf("%s %s: %v", r.method, r.path, err)
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Errorf("%s %s: read the answer: %v", r.method, r.path, err)
			}
			out[i] = answer{status: resp.StatusCode, header: resp.Header, body: b}
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// repeated is n copies of s, each with %d replaced by its index.
func repeated(n int, s string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.ReplaceAll(s, "%d", fmt.Sprint(i))
	}
	return out
}

// oneWins checks that exactly one answer is status and every other is a
// 409 STATE_INVALID naming field: one request's precondition held, the
// others' failed.
func oneWins(t *testing.T, what string, answers []answer, status int, field string) {
	t.Helper()
	won := 0
	for i, a := range answers {
		if a.status == status {
			won++
			continue
		}
		if e := wantError(t, fmt.Sprintf("%s %d", what, i), a, http.StatusConflict, errcode.StateInvalid); e.Details["field"] != field {
			t.Errorf("%s %d: details %v", what, i, e.Details)
		}
	}
	if won != 1 {
		t.Errorf("%d %s requests applied; want 1", won, what)
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
	for i, a := range appsBurst(t, h, requests("PATCH", repeated(n, api+"/apps/"+app), repeated(n, `{"name":"Renamed %d"}`))) {
		wantStatus(t, fmt.Sprintf("rename %d", i), a, http.StatusOK)
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
	oneWins(t, "slug claim", appsBurst(t, h, requests("PATCH", paths, repeated(n, `{"slug":"wanted"}`))), http.StatusOK, "slug")
	late := h.app(t, "Late")
	wantError(t, "a taken slug", h.send("PATCH", api+"/apps/"+late, `{"slug":"wanted"}`), http.StatusConflict, errcode.StateInvalid)
}

func TestConcurrentSpecRevisionsAllApply(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Revised")
	const n = 16
	body := strings.Replace(specExampleJSON, `"LOG_LEVEL": "info"`, `"LOG_LEVEL": "level-%d"`, 1)
	seen := map[uint64]bool{}
	for i, a := range appsBurst(t, h, requests("POST", repeated(n, api+"/apps/"+app+"/specs"), repeated(n, body))) {
		wantStatus(t, fmt.Sprintf("revision %d", i), a, http.StatusCreated)
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
	for i, a := range appsBurst(t, h, requests("POST", repeated(n, base), repeated(n, `{"name":"v%d","size_bytes":1048576,"path":"/v%d"}`))) {
		wantStatus(t, fmt.Sprintf("volume %d", i), a, http.StatusCreated)
		if a.status == http.StatusCreated {
			seen[decodeAs[volumes.Created](t, a).SpecRevision] = true
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
	oneWins(t, "declaration of one name", appsBurst(t, h, requests("POST", repeated(4, base), repeated(4, `{"name":"dup","size_bytes":1048576,"path":"/dup%d"}`))), http.StatusCreated, "name")
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
	var reqs []burstRequest
	for i := range n {
		reqs = append(reqs,
			burstRequest{"POST", fmt.Sprintf("%s/apps/%s/specs/%d/pin", api, app, i+1), ""},
			burstRequest{"PATCH", api + "/apps/" + app, fmt.Sprintf(`{"name":"Pinned %d"}`, i)})
	}
	for i, a := range appsBurst(t, h, reqs) {
		wantStatus(t, reqs[i].method+" "+reqs[i].path, a, http.StatusOK)
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
	for i, a := range appsBurst(t, h, requests("POST", repeated(n, base+"/detection/answers"), repeated(n, `{"answers":{"note_%d":"value %d"}}`))) {
		wantStatus(t, fmt.Sprintf("answer %d", i), a, http.StatusOK)
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
