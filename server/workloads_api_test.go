package server

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
)

var listeningRE = regexp.MustCompile(`listening pid=(\d+)`)

// nodeApp deploys the node server as an app's primary workload and waits
// for it to run.
func (h *harness) runningNodeApp(t testing.TB, name string) string {
	t.Helper()
	app := h.pinnedApp(t, name, nodeSpec("echo nothing to build"))
	h.deployed(t, app)
	h.waitAppState(t, app, apps.StateRunning)
	return app
}

// appLogs reads GET /logs.
func (h *harness) appLogs(t testing.TB, app, query string) appLogsDTO {
	t.Helper()
	a := h.send("GET", api+"/apps/"+app+"/logs"+query, "")
	wantStatus(t, "logs", a, http.StatusOK)
	return decodeAs[appLogsDTO](t, a)
}

// lastPID is the process ID of the last "listening" line of the app's log.
func (h *harness) lastPID(t testing.TB, app string) string {
	t.Helper()
	pid := ""
	for _, l := range h.appLogs(t, app, "").Lines {
		if m := listeningRE.FindStringSubmatch(l); m != nil {
			pid = m[1]
		}
	}
	return pid
}

func TestAppControlAPI(t *testing.T) {
	h := newHarness(t)
	app := h.runningNodeApp(t, "Controlled")
	base := api + "/apps/" + app

	st := h.status(t, app)
	web, ok := st.Workloads["web"]
	if st.State != apps.StateRunning || st.DesiredState != apps.DesiredRunning || !ok || !web.Running || !web.Primary || st.Revision == nil {
		t.Fatalf("status = %+v", st)
	}

	t.Run("logs", func(t *testing.T) {
		var pid string
		waitFor(t, "the server's first line", func() bool { pid = h.lastPID(t, app); return pid != "" })
		l := h.appLogs(t, app, "?tail=1&workload=web")
		if l.Workload != "web" || len(l.Lines) != 1 {
			t.Errorf("tail=1: %+v", l)
		}
		if l := h.appLogs(t, app, ""); l.Workload != "web" || len(l.Lines) == 0 {
			t.Errorf("default workload: %+v", l)
		}
		for _, q := range []string{"tail=0", "tail=10001", "tail=-3", "tail=many"} {
			e := wantError(t, q, h.send("GET", base+"/logs?"+q, ""), http.StatusBadRequest, errcode.ValidInvalid)
			if e.Details["field"] != "tail" {
				t.Errorf("%s: details %v", q, e.Details)
			}
		}
		wantError(t, "an unknown workload", h.send("GET", base+"/logs?workload=nope", ""), http.StatusNotFound, errcode.NotFound)
	})

	t.Run("usage", func(t *testing.T) {
		a := h.send("GET", base+"/usage", "")
		wantStatus(t, "usage", a, http.StatusOK)
		u := decodeAs[scheduler.Usage](t, a)
		if u.HostCPUMillis <= 0 || u.Workloads == nil {
			t.Errorf("usage = %s", a.body)
		}
		if w, ok := u.Workloads["web"]; u.Supported && (!ok || w.MemoryBytes <= 0) {
			t.Errorf("usage of web = %s", a.body)
		}
	})

	t.Run("restart in place", func(t *testing.T) {
		var before string
		waitFor(t, "the server's first line", func() bool { before = h.lastPID(t, app); return before != "" })
		a := h.send("POST", base+"/restart", "")
		wantStatus(t, "restart", a, http.StatusAccepted)
		if got := decodeAs[appAnswer](t, a).App; got.ID != app || got.State != apps.StateRunning {
			t.Errorf("restart answered %s", a.body)
		}
		waitFor(t, "the server to start again", func() bool { p := h.lastPID(t, app); return p != "" && p != before })
		if ev := h.eventsOf(t, "app.restarted", app); len(ev) != 1 {
			t.Errorf("app.restarted events = %+v", ev)
		}
		h.waitAppState(t, app, apps.StateRunning)
	})

	t.Run("stop and start", func(t *testing.T) {
		a := h.send("POST", base+"/stop", "")
		wantStatus(t, "stop", a, http.StatusOK)
		if got := decodeAs[appAnswer](t, a).App; got.DesiredState != apps.DesiredStopped {
			t.Errorf("stop answered %s", a.body)
		}
		h.waitAppState(t, app, apps.StateStopped)
		if st := h.status(t, app); st.DesiredState != apps.DesiredStopped || st.Workloads["web"].Running {
			t.Errorf("status of the stopped app = %+v", st)
		}
		wantError(t, "restart a stopped app", h.send("POST", base+"/restart", ""), http.StatusConflict, errcode.StateInvalid)

		a = h.send("POST", base+"/start", "")
		wantStatus(t, "start", a, http.StatusOK)
		if got := decodeAs[appAnswer](t, a).App; got.DesiredState != apps.DesiredRunning {
			t.Errorf("start answered %s", a.body)
		}
		h.waitAppState(t, app, apps.StateRunning)
		waitFor(t, "the workload to run", func() bool { return h.status(t, app).Workloads["web"].Running })
	})

	t.Run("an app never deployed", func(t *testing.T) {
		fresh := h.app(t, "Fresh")
		st := h.status(t, fresh)
		if st.State != apps.StateDraft || st.Revision != nil || len(st.Workloads) != 0 {
			t.Errorf("status = %+v", st)
		}
		wantError(t, "usage", h.send("GET", api+"/apps/"+fresh+"/usage", ""), http.StatusConflict, errcode.StateInvalid)
		wantError(t, "logs", h.send("GET", api+"/apps/"+fresh+"/logs", ""), http.StatusConflict, errcode.StateInvalid)
		wantError(t, "restart", h.send("POST", api+"/apps/"+fresh+"/restart", ""), http.StatusConflict, errcode.StateInvalid)
	})
}
