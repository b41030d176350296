package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
)

// GET /logs?follow=true streams the last tail lines and then every line
// the workload writes after the request arrived (a restart's new server
// announcing itself), with no polling in between; stopping the app ends
// the stream with reason stopped. Refusals still come as error envelopes.
func TestFollowAppLogsAPI(t *testing.T) {
	h := newHarness(t)
	srv := httptest.NewServer(h.srv.Handler())
	defer srv.Close()
	app := h.runningNodeApp(t, "Followed")
	base := api + "/apps/" + app
	var before string
	waitFor(t, "the server's first line", func() bool { before = h.lastPID(t, app); return before != "" })

	req, _ := http.NewRequest("GET", srv.URL+base+"/logs?follow=true&tail=1", nil)
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("follow: %d %v", resp.StatusCode, resp.Header)
	}
	r := bufio.NewReader(resp.Body)
	line := func() (string, sseEvent) {
		t.Helper()
		ev, err := readEvent(r)
		if err != nil {
			t.Fatalf("the stream ended: %v", err)
		}
		var l appLogEvent
		if ev.event == "log" {
			if err := json.Unmarshal([]byte(ev.data), &l); err != nil {
				t.Fatalf("log event %q: %v", ev.data, err)
			}
		}
		return l.Line, ev
	}
	// The headers came: the stream follows. tail=1 is the last line kept.
	if l, ev := line(); ev.event != "log" || !strings.Contains(l, "listening pid="+before) {
		t.Fatalf("first event = %+v; want the last kept line, the server's pid %s", ev, before)
	}

	// Lines written from now on arrive as they are written.
	wantStatus(t, "restart", h.send("POST", base+"/restart", ""), http.StatusAccepted)
	for {
		l, ev := line()
		if ev.event != "log" {
			t.Fatalf("event %+v before the restarted server's line", ev)
		}
		if m := listeningRE.FindStringSubmatch(l); m != nil && m[1] != before {
			break
		}
	}
	h.waitAppState(t, app, apps.StateRunning)

	wantStatus(t, "stop", h.send("POST", base+"/stop", ""), http.StatusOK)
	for {
		_, ev := line()
		if ev.event == "end" {
			var end appLogsEnd
			if err := json.Unmarshal([]byte(ev.data), &end); err != nil || end.Reason != scheduler.LogsStopped {
				t.Errorf("end = %s (%v); want reason stopped", ev.data, err)
			}
			break
		}
	}
	if _, err := readEvent(r); err == nil {
		t.Errorf("the stream goes on after its end")
	}

	// A stopped app's job gives what it kept and ends at once.
	a := h.send("GET", base+"/logs?follow=true&tail=2", "")
	if a.status != http.StatusOK || strings.Count(string(a.body), "event: log\n") != 2 || !strings.Contains(string(a.body), "event: end\ndata: {\"reason\":\"stopped\"}") {
		t.Errorf("follow a stopped app: %d %q", a.status, a.body)
	}
	wantError(t, "follow=maybe", h.send("GET", base+"/logs?follow=maybe", ""), http.StatusBadRequest, errcode.ValidInvalid)
	wantError(t, "an unknown workload", h.send("GET", base+"/logs?follow=true&workload=nope", ""), http.StatusNotFound, errcode.NotFound)
	wantError(t, "an app never deployed", h.send("GET", api+"/apps/"+h.app(t, "Never")+"/logs?follow=true", ""), http.StatusConflict, errcode.StateInvalid)
}
