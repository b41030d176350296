package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/scheduler"
)

// nodeServer serves "hi" on $PORT and says so, with its process ID.
const nodeServer = "require('http').createServer((q, r) => r.end('hi')).listen(process.env.PORT, () => console.log('listening pid=' + process.pid));\n"

// siteSource is the tar.gz of a tiny site: a page (served by a static
// workload) and a node server (run by a process workload).
func siteSource(t testing.TB) []byte {
	return tarGz(t,
		tarFile{name: "index.html", body: "<h1>hello</h1>\n"},
		tarFile{name: "server.js", body: nodeServer},
	)
}

// siteSpec is a POST /specs body: a static site whose build runs the shell
// command build (none when empty), asking for approvals when above 0.
// Static workloads are served inside the runtime: no process to start.
func siteSpec(build string, approvals int) string {
	b := map[string]any{"kind": "static"}
	if build != "" {
		b["command"] = build
	}
	doc := map[string]any{"workloads": map[string]any{"web": map[string]any{"primary": true, "build": b}}}
	if approvals > 0 {
		doc["deploy"] = map[string]any{"approvals": approvals}
	}
	return jsonOf(map[string]any{"spec": doc})
}

// nodeSpec is a POST /specs body: the node server as the primary workload,
// a process the runtime supervises.
func nodeSpec(build string) string {
	return jsonOf(map[string]any{"spec": map[string]any{"workloads": map[string]any{"web": map[string]any{
		"primary": true, "build": map[string]any{"kind": "command", "command": build}, "run": map[string]any{"command": []string{"node", "server.js"}},
	}}}})
}

// sourcedApp creates an app with siteSource as its source.
func (h *harness) sourcedApp(t testing.TB, name string) string {
	t.Helper()
	app := h.app(t, name)
	if a := h.upload(api+"/apps/"+app+"/source", "application/gzip", siteSource(t)); a.status != http.StatusAccepted {
		t.Fatalf("upload the source of %s: %d %s", name, a.status, a.body)
	}
	return app
}

// writeSpec writes a revision (a POST /specs body) and returns its number.
func (h *harness) writeSpec(t testing.TB, app, body string) uint64 {
	t.Helper()
	a := h.send("POST", api+"/apps/"+app+"/specs", body)
	if a.status != http.StatusCreated {
		t.Fatalf("write a revision: %d %s", a.status, a.body)
	}
	return decodeAs[specAnswer](t, a).Spec.Number
}

func (h *harness) pinSpec(t testing.TB, app string, rev uint64) {
	t.Helper()
	if a := h.send("POST", fmt.Sprintf("%s/apps/%s/specs/%d/pin", api, app, rev), ""); a.status != http.StatusOK {
		t.Fatalf("pin revision %d: %d %s", rev, a.status, a.body)
	}
}

// pinnedApp is an app with a source and body as its pinned revision.
func (h *harness) pinnedApp(t testing.TB, name, body string) string {
	t.Helper()
	app := h.sourcedApp(t, name)
	h.pinSpec(t, app, h.writeSpec(t, app, body))
	return app
}

// deploy asks for a deploy and wants it accepted.
func (h *harness) deploy(t testing.TB, app, body string, header ...string) deploymentDTO {
	t.Helper()
	a := h.send("POST", api+"/apps/"+app+"/deployments", body, header...)
	if a.status != http.StatusAccepted {
		t.Fatalf("deploy %s %s: %d %s", app, body, a.status, a.body)
	}
	return decodeAs[deploymentAnswer](t, a).Deployment
}

// waitFor polls cond until it holds; the deadline is generous, for a
// loaded machine: it guards against hanging, it does not time anything.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *harness) deployment(t testing.TB, app, depID string) deploymentDTO {
	t.Helper()
	a := h.send("GET", api+"/apps/"+app+"/deployments/"+depID, "")
	if a.status != http.StatusOK {
		t.Fatalf("get deployment %s: %d %s", depID, a.status, a.body)
	}
	return decodeAs[deploymentAnswer](t, a).Deployment
}

// waitDeployment waits for a deployment to end and returns it.
func (h *harness) waitDeployment(t testing.TB, app, depID string) deploymentDTO {
	t.Helper()
	var d deploymentDTO
	waitFor(t, "deployment "+depID+" to end", func() bool {
		d = h.deployment(t, app, depID)
		return d.FinishedAt != nil
	})
	return d
}

// deployed deploys an app's pinned revision and wants it to succeed.
func (h *harness) deployed(t testing.TB, app string) deploymentDTO {
	t.Helper()
	d := h.waitDeployment(t, app, h.deploy(t, app, `{}`).ID)
	if d.State != scheduler.DepSucceeded {
		t.Fatalf("deployment %s: %s %v %v", d.ID, d.State, deref(d.ErrorCode), deref(d.ErrorMessage))
	}
	return d
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func (h *harness) getApp(t testing.TB, app string) apps.App {
	t.Helper()
	return decodeAs[appAnswer](t, h.send("GET", api+"/apps/"+app, "")).App
}

// waitAppState waits for an app to be in a state.
func (h *harness) waitAppState(t testing.TB, app, state string) apps.App {
	t.Helper()
	var a apps.App
	waitFor(t, "app "+app+" to be "+state, func() bool {
		a = h.getApp(t, app)
		return a.State == state
	})
	return a
}

func (h *harness) status(t testing.TB, app string) scheduler.Status {
	t.Helper()
	a := h.send("GET", api+"/apps/"+app+"/status", "")
	wantStatus(t, "status", a, http.StatusOK)
	return decodeAs[scheduler.Status](t, a)
}

// eventsOf returns the outbox events of a type about a target.
func (h *harness) eventsOf(t testing.TB, typ, targetID string) []events.Event {
	t.Helper()
	var out []events.Event
	for _, e := range h.allEvents(t) {
		if e.Type == typ && (targetID == "" || e.Data["target_id"] == targetID) {
			out = append(out, e)
		}
	}
	return out
}

// buildGate returns a shell fragment that waits until open is called: a
// build held in the building state for as long as a test needs.
func buildGate(t testing.TB) (wait string, open func()) {
	path := filepath.Join(t.TempDir(), "gate")
	open = func() {
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(open) // a test that fails early lets its build finish
	return fmt.Sprintf("while [ ! -e '%s' ]; do sleep 0.02; done", path), open
}

// sseEvent is one server-sent event.
type sseEvent struct{ event, data string }

// readEvent reads the next event of a stream, skipping comments.
func readEvent(r *bufio.Reader) (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.event != "" || ev.data != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			ev.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data += strings.TrimPrefix(line, "data: ")
		default:
			return ev, fmt.Errorf("not a server-sent event line: %q", line)
		}
	}
}

// readEvents reads events until the end event (included) or the stream
// ends.
func readEvents(t testing.TB, r *bufio.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev, err := readEvent(r)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
		if ev.event == "end" {
			return out
		}
	}
}

func logLines(t testing.TB, evs []sseEvent) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		if ev.event != "log" {
			continue
		}
		var l deployLogEvent
		if err := json.Unmarshal([]byte(ev.data), &l); err != nil {
			t.Fatalf("log event %q: %v", ev.data, err)
		}
		if l.Time.IsZero() || !slices.Contains([]string{scheduler.LogBuild, scheduler.LogRun, scheduler.LogSystem}, l.Stream) {
			t.Errorf("log event %s", ev.data)
		}
		out = append(out, l.Line)
	}
	return out
}

func endOf(t testing.TB, evs []sseEvent) deployEndEvent {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].event != "end" {
		t.Fatalf("the stream does not end with an end event: %v", evs)
	}
	var end deployEndEvent
	if err := json.Unmarshal([]byte(evs[len(evs)-1].data), &end); err != nil {
		t.Fatal(err)
	}
	return end
}

func containsLine(lines []string, sub string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, sub) })
}

// replayLogs reads a finished deployment's whole log stream.
func (h *harness) replayLogs(t testing.TB, app, depID string) []sseEvent {
	t.Helper()
	a := h.send("GET", api+"/apps/"+app+"/deployments/"+depID+"/logs", "")
	if a.status != http.StatusOK || !strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("logs of %s: %d %s %s", depID, a.status, a.header.Get("Content-Type"), a.body)
	}
	return readEvents(t, bufio.NewReader(bytes.NewReader(a.body)))
}

func TestDeploysAPI(t *testing.T) {
	h := newHarness(t)
	srv := httptest.NewServer(h.srv.Handler())
	defer srv.Close()
	gate, open := buildGate(t)
	app := h.sourcedApp(t, "Deployed")
	base := api + "/apps/" + app
	rev1 := h.writeSpec(t, app, siteSpec("echo building one; "+gate+"; echo built one", 0))
	h.pinSpec(t, app, rev1)

	// 202 with the deployment; the same key replays it; another body with
	// the key is refused.
	first := h.send("POST", base+"/deployments", `{}`, "Idempotency-Key", "deploy-1")
	wantStatus(t, "deploy", first, http.StatusAccepted)
	d1 := decodeAs[deploymentAnswer](t, first).Deployment
	if !strings.HasPrefix(d1.ID, "dep_") || d1.AppID != app || d1.Revision != rev1 || d1.State != scheduler.DepQueued ||
		d1.Trigger != scheduler.TriggerAPI || d1.CreatedBy == "" || d1.FinishedAt != nil || d1.ErrorCode != nil {
		t.Fatalf("deployment %s", first.body)
	}
	if loc := first.header.Get("Location"); loc != base+"/deployments/"+d1.ID {
		t.Errorf("Location = %q", loc)
	}
	if bytes.Contains(first.body, []byte("artifacts")) || bytes.Contains(first.body, []byte(h.dir)) {
		t.Errorf("the deployment shows host paths: %s", first.body)
	}
	again := h.send("POST", base+"/deployments", `{}`, "Idempotency-Key", "deploy-1")
	if again.status != http.StatusAccepted || again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, first.body) {
		t.Errorf("replay: %d %v %s", again.status, again.header, again.body)
	}
	wantError(t, "the key with another body", h.send("POST", base+"/deployments", `{"revision":1}`, "Idempotency-Key", "deploy-1"), http.StatusConflict, errcode.StateInvalid)

	// The build waits on the gate: the deploy runs until the test opens it.
	wantError(t, "a deploy while another runs", h.send("POST", base+"/deployments", `{}`), http.StatusConflict, errcode.StateInvalid)
	wantError(t, "an unknown revision", h.send("POST", base+"/deployments", `{"revision":99}`), http.StatusNotFound, errcode.NotFound)
	wantError(t, "a negative revision", h.send("POST", base+"/deployments", `{"revision":-1}`), http.StatusBadRequest, errcode.ValidInvalid)

	t.Run("log stream of a running deploy", func(t *testing.T) {
		req, _ := http.NewRequest("GET", srv.URL+base+"/deployments/"+d1.ID+"/logs", nil)
		req.Header.Set("Authorization", "Bearer "+h.token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-cache" {
			t.Fatalf("stream: %d %v", resp.StatusCode, resp.Header)
		}
		r := bufio.NewReader(resp.Body)
		// Lines arrive while the build waits on the gate.
		var seen []sseEvent
		for !containsLine(logLines(t, seen), "building one") {
			ev, err := readEvent(r)
			if err != nil {
				t.Fatalf("stream ended before the build's first line: %v (%v)", err, seen)
			}
			seen = append(seen, ev)
		}
		if d := h.deployment(t, app, d1.ID); d.State != scheduler.DepBuilding {
			t.Fatalf("the build's line arrived, and the deployment is %s, not building", d.State)
		}
		open()
		seen = append(seen, readEvents(t, r)...)
		lines := logLines(t, seen)
		if end := endOf(t, seen); end.State != scheduler.DepSucceeded || end.ErrorCode != nil {
			t.Errorf("end = %+v", end)
		}
		if !containsLine(lines, "built one") || !containsLine(lines, "deploy succeeded") {
			t.Errorf("lines = %q", lines)
		}
		// The finished deployment replays the same log, then the end.
		replay := h.replayLogs(t, app, d1.ID)
		if got := logLines(t, replay); !slices.Equal(got, lines) {
			t.Errorf("replay = %q, live = %q", got, lines)
		}
		if end := endOf(t, replay); end.State != scheduler.DepSucceeded {
			t.Errorf("replay's end = %+v", end)
		}
	})

	d1 = h.waitDeployment(t, app, d1.ID)
	if d1.State != scheduler.DepSucceeded || d1.StartedAt == nil || d1.FinishedAt == nil || d1.ErrorCode != nil {
		t.Fatalf("deployment = %+v", d1)
	}
	if a := h.waitAppState(t, app, apps.StateRunning); a.DesiredState != apps.DesiredRunning {
		t.Errorf("app = %+v", a)
	}
	if st := h.status(t, app); st.Revision == nil || *st.Revision != rev1 || st.DeploymentID == nil || *st.DeploymentID != d1.ID {
		t.Errorf("status = %+v", st)
	}
	if len(h.eventsOf(t, "deploy.started", d1.ID)) != 1 || len(h.eventsOf(t, "deploy.succeeded", d1.ID)) != 1 {
		t.Errorf("deploy events of %s missing", d1.ID)
	}

	t.Run("failed build", func(t *testing.T) {
		rev2 := h.writeSpec(t, app, siteSpec("echo about to fail; exit 3", 0))
		d2 := h.waitDeployment(t, app, h.deploy(t, app, fmt.Sprintf(`{"revision":%d}`, rev2)).ID)
		if d2.State != scheduler.DepFailed || deref(d2.ErrorCode) != string(errcode.BuildFailed) || deref(d2.ErrorMessage) == "" {
			t.Fatalf("deployment = %+v", d2)
		}
		failed := h.eventsOf(t, "deploy.failed", d2.ID)
		if len(failed) != 1 || failed[0].Data["error_code"] != string(errcode.BuildFailed) || failed[0].Data["deployment_id"] != d2.ID {
			t.Errorf("deploy.failed events = %+v", failed)
		}
		// The previous revision still serves.
		if a := h.getApp(t, app); a.State != apps.StateRunning {
			t.Errorf("after a failed build the app is %s", a.State)
		}
		if st := h.status(t, app); st.Revision == nil || *st.Revision != rev1 {
			t.Errorf("status after a failed build = %+v", st)
		}
		replay := h.replayLogs(t, app, d2.ID)
		if end := endOf(t, replay); end.State != scheduler.DepFailed || deref(end.ErrorCode) != string(errcode.BuildFailed) || !containsLine(logLines(t, replay), "about to fail") {
			t.Errorf("log of the failed build: %v", replay)
		}
	})

	var d3, rb deploymentDTO
	t.Run("rollback", func(t *testing.T) {
		wantError(t, "nothing earlier to roll back to", h.send("POST", base+"/deployments/rollback", ""), http.StatusConflict, errcode.StateInvalid)
		rev3 := h.writeSpec(t, app, siteSpec("echo three", 0))
		d3 = h.waitDeployment(t, app, h.deploy(t, app, fmt.Sprintf(`{"revision":%d}`, rev3)).ID)
		if st := h.status(t, app); d3.State != scheduler.DepSucceeded || *st.Revision != rev3 {
			t.Fatalf("deploy revision 3: %+v, status %+v", d3, st)
		}
		a := h.send("POST", base+"/deployments/rollback", "", "Idempotency-Key", "rollback-1")
		wantStatus(t, "rollback", a, http.StatusAccepted)
		rb = decodeAs[deploymentAnswer](t, a).Deployment
		if rb.Trigger != scheduler.TriggerRollback || rb.Revision != rev1 {
			t.Fatalf("rollback = %s", a.body)
		}
		if again := h.send("POST", base+"/deployments/rollback", "", "Idempotency-Key", "rollback-1"); !bytes.Equal(again.body, a.body) {
			t.Errorf("rollback replay: %d %s", again.status, again.body)
		}
		if rb = h.waitDeployment(t, app, rb.ID); rb.State != scheduler.DepSucceeded {
			t.Fatalf("rollback = %+v", rb)
		}
		if st := h.status(t, app); *st.Revision != rev1 || *st.DeploymentID != rb.ID {
			t.Errorf("status after the rollback = %+v", st)
		}
		// What each shipped: d1 built its workload from the uploaded
		// archive; the rollback started d1's kept build of the same
		// source, building nothing; no host path shows.
		got := h.send("GET", base+"/deployments/"+rb.ID, "")
		if bytes.Contains(got.body, []byte(h.dir)) {
			t.Errorf("the deployment shows host paths: %s", got.body)
		}
		d1 = h.deployment(t, app, d1.ID)
		src, built := d1.Source, d1.Builds["web"]
		if src == nil || src.Kind != "archive" || !strings.HasPrefix(src.Commit, "sha256:") || !strings.HasPrefix(src.CheckoutID, "chk_") {
			t.Fatalf("deployment 1's source = %+v", src)
		}
		if built.Reused || built.BuiltBy != d1.ID || built.ArtifactID == "" || !strings.HasPrefix(built.BuildKey, "sha256:") {
			t.Errorf("deployment 1's build = %+v; want its own", built)
		}
		if rb.Redeploys == nil || *rb.Redeploys != d1.ID || rb.Source == nil || *rb.Source != *src {
			t.Errorf("rollback ships %v from %+v; want deployment %s's source %+v", rb.Redeploys, rb.Source, d1.ID, src)
		}
		if w := rb.Builds["web"]; !w.Reused || w.BuiltBy != d1.ID || w.ArtifactID != built.ArtifactID || w.BuildKey != built.BuildKey {
			t.Errorf("rollback's build = %+v; want deployment 1's kept build %+v, reused", w, built)
		}
		if w := d3.Builds["web"]; w.Reused || w.BuildKey == built.BuildKey {
			t.Errorf("revision 3 (another build command) = %+v; want a build of its own, another key", w)
		}
	})

	t.Run("list, newest first, paged", func(t *testing.T) {
		all := decodeAs[list[deploymentDTO]](t, h.send("GET", base+"/deployments", ""))
		if len(all.Items) != 4 || all.NextCursor != "" {
			t.Fatalf("list = %+v", all)
		}
		var want []string
		for _, d := range all.Items {
			want = append(want, d.ID)
		}
		if !slices.IsSortedFunc(want, func(a, b string) int { return strings.Compare(b, a) }) || want[0] != rb.ID || want[3] != d1.ID || want[1] != d3.ID {
			t.Errorf("not newest first: %v", want)
		}
		got := pageAll(t, h, base+"/deployments?limit=3", 5, func(d deploymentDTO) string { return d.ID })
		if !slices.Equal(got, want) {
			t.Errorf("pages gave %v, want %v", got, want)
		}
		wantError(t, "a bad limit", h.send("GET", base+"/deployments?limit=0", ""), http.StatusBadRequest, errcode.ValidInvalid)
	})

	other := h.app(t, "Other")
	wantError(t, "another app's deployment", h.send("GET", api+"/apps/"+other+"/deployments/"+d1.ID, ""), http.StatusNotFound, errcode.NotFound)
	wantError(t, "its log", h.send("GET", api+"/apps/"+other+"/deployments/"+d1.ID+"/logs", ""), http.StatusNotFound, errcode.NotFound)
	wantError(t, "an unknown deployment", h.send("GET", base+"/deployments/dep_01M7ZVAA7HN5NZE25AZ701FBCF", ""), http.StatusNotFound, errcode.NotFound)
	wantError(t, "nothing pinned", h.send("POST", api+"/apps/"+other+"/deployments", `{}`), http.StatusConflict, errcode.StateInvalid)
}

func TestDeployApprovals(t *testing.T) {
	h := newHarness(t)
	app := h.pinnedApp(t, "Held", siteSpec("echo approved build", 1))
	base := api + "/apps/" + app
	dev := h.account(t, "developer", nil, true)
	h.grantApp(t, app, authz.KindUser, dev.userID, authz.RoleDeveloper)

	held := h.deploy(t, app, `{}`)
	if held.State != scheduler.DepWaitingApproval || held.ApprovalsRequired != 1 || len(held.ApprovalReasons) == 0 || len(held.Approvals) != 0 {
		t.Fatalf("held deployment = %+v", held)
	}
	if len(h.eventsOf(t, "deploy.waiting_approval", held.ID)) != 1 || len(h.eventsOf(t, "deploy.started", held.ID)) != 0 {
		t.Errorf("events of the held deployment")
	}
	wantError(t, "the requester approves", h.send("POST", base+"/deployments/"+held.ID+"/approve", ""), http.StatusForbidden, errcode.PermDenied)
	a := h.send("POST", base+"/deployments/"+held.ID+"/approve", "", dev.bearer()...)
	wantStatus(t, "another developer approves", a, http.StatusOK)
	approved := decodeAs[deploymentAnswer](t, a).Deployment
	if len(approved.Approvals) != 1 || approved.Approvals[0].PrincipalID == "" || approved.State == scheduler.DepWaitingApproval {
		t.Fatalf("approved = %s", a.body)
	}
	if d := h.waitDeployment(t, app, held.ID); d.State != scheduler.DepSucceeded {
		t.Fatalf("the approved deploy: %+v", d)
	}
	if ev := h.eventsOf(t, "deploy.approved", held.ID); len(ev) != 1 {
		t.Errorf("deploy.approved events = %+v", ev)
	}
	wantError(t, "approve an ended deploy", h.send("POST", base+"/deployments/"+held.ID+"/approve", "", dev.bearer()...), http.StatusConflict, errcode.StateInvalid)

	// Rejected: it ends with the reason.
	second := h.deploy(t, app, `{}`, dev.bearer()...)
	wantError(t, "reject without a reason", h.send("POST", base+"/deployments/"+second.ID+"/reject", `{}`), http.StatusBadRequest, errcode.ValidInvalid)
	a = h.send("POST", base+"/deployments/"+second.ID+"/reject", `{"reason":"not during the freeze"}`)
	wantStatus(t, "reject", a, http.StatusOK)
	rejected := decodeAs[deploymentAnswer](t, a).Deployment
	if rejected.State != scheduler.DepRejected || deref(rejected.RejectedReason) != "not during the freeze" || rejected.FinishedAt == nil {
		t.Fatalf("rejected = %s", a.body)
	}
	if ev := h.eventsOf(t, "deploy.rejected", second.ID); len(ev) != 1 || ev[0].Data["reason"] != "not during the freeze" {
		t.Errorf("deploy.rejected events = %+v", ev)
	}
	wantError(t, "approve a rejected deploy", h.send("POST", base+"/deployments/"+second.ID+"/approve", ""), http.StatusConflict, errcode.StateInvalid)
	wantError(t, "approve an unknown deploy", h.send("POST", base+"/deployments/dep_01M7ZVAA7HN5NZE25AZ701FBCF/approve", "", dev.bearer()...), http.StatusNotFound, errcode.NotFound)
	if st := h.status(t, app); st.DeploymentID == nil || *st.DeploymentID != held.ID {
		t.Errorf("the rejected deploy changed what runs: %+v", st)
	}
}

func TestCapacityAPI(t *testing.T) {
	h := newHarness(t)
	a := h.send("GET", api+"/capacity", "")
	wantStatus(t, "capacity", a, http.StatusOK)
	c := decodeAs[scheduler.Capacity](t, a)
	if c.Host.CPUMillis <= 0 || c.Free.CPUMillis > c.Host.CPUMillis || c.Committed.Apps != 0 ||
		c.Ports.Start != 9000 || c.Ports.End != 9019 || c.Ports.Used != 0 || c.Ports.Free != 20 {
		t.Errorf("capacity = %s", a.body)
	}
	for _, field := range []string{`"host":{`, `"committed":{`, `"free":{`, `"ports":{`, `"memory_bytes":`, `"unlimited_workloads":`} {
		if !bytes.Contains(a.body, []byte(field)) {
			t.Errorf("capacity lacks %s: %s", field, a.body)
		}
	}
	// A deployed app holds a port and commits what it declares.
	app := h.pinnedApp(t, "Committed", siteSpec("", 0))
	h.deployed(t, app)
	c = decodeAs[scheduler.Capacity](t, h.send("GET", api+"/capacity", ""))
	if c.Ports.Used != 1 || c.Committed.Apps != 1 || c.Committed.Unlimited != 1 {
		t.Errorf("capacity with an app deployed = %+v", c)
	}
}
