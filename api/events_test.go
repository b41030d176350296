package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestReadEvents(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []string
	}{
		"named events":          {"event: log\ndata: {\"a\":1}\n\nevent: end\ndata: {}\n\n", []string{`log {"a":1}`, "end {}"}},
		"keep-alive comments":   {": keep-alive\n\nevent: log\n: between\ndata: x\n\n", []string{"log x"}},
		"no event name":         {"data: plain\n\n", []string{"message plain"}},
		"data lines joined":     {"data: one\ndata: two\n\n", []string{"message one\ntwo"}},
		"no space after colon":  {"event:log\ndata:x\n\n", []string{"log x"}},
		"unfinished is dropped": {"event: log\ndata: a\n\nevent: log\ndata: b\n", []string{"log a"}},
		"unknown fields":        {"id: 7\nretry: 10\nevent: log\ndata: y\n\n", []string{"log y"}},
		"event without data":    {"event: log\n\n", nil},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			err := ReadEvents(strings.NewReader(tt.in), func(e string, d []byte) error {
				got = append(got, e+" "+string(d))
				return nil
			})
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("ReadEvents = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func FuzzReadEvents(f *testing.F) {
	f.Add("event: log\ndata: {}\n\n: c\n\ndata: a\ndata: b\n\n")
	f.Add("data:\n\n\n\nevent\n")
	f.Fuzz(func(t *testing.T, in string) {
		n := 0
		err := ReadEvents(strings.NewReader(in), func(e string, d []byte) error {
			n++
			if e == "" || strings.Contains(e, "\n") {
				t.Fatalf("event name %q", e)
			}
			return nil
		})
		if err == nil && n > strings.Count(in, "\n") {
			t.Fatalf("%d events from %d lines", n, strings.Count(in, "\n"))
		}
		// fn's error stops the reading and is returned as it is.
		stop := errors.New("stop")
		if n > 0 {
			if err := ReadEvents(strings.NewReader(in), func(string, []byte) error { return stop }); !errors.Is(err, stop) {
				t.Fatalf("fn's error came back as %v", err)
			}
		}
	})
}

// FollowDeployment hands over each log line and the end, each with the
// API's bytes, and says so when the stream breaks off before the end; an
// error answer before the stream is an *Error.
func TestFollowDeployment(t *testing.T) {
	stream := "event: log\ndata: {\"time\":\"2025-01-02T03:04:05Z\",\"stream\":\"build\",\"line\":\"go build\"}\n\n: keep-alive\n\n" +
		"event: end\ndata: {\"state\":\"failed\",\"error_code\":\"DEPLOY_BUILD_FAILED\"}\n\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("Accept") != "text/event-stream" {
			http.Error(w, "headers", http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/api/v1/apps/app_1/deployments/dep_1/logs":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = fmt.Fprint(w, stream)
		case "/api/v1/apps/app_1/deployments/dep_cut/logs":
			_, _ = fmt.Fprint(w, "event: log\ndata: {\"line\":\"half\"}\n\n")
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = fmt.Fprint(w, `{"code":"NOT_FOUND","message":"no deployment","remedy":"list them"}`)
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, WithToken("tok"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	end, err := c.FollowDeployment(context.Background(), "app_1", "dep_1", func(l *LogLine, e *DeployEnd, raw json.RawMessage) error {
		switch {
		case l != nil:
			got = append(got, l.Stream+": "+l.Line+" "+string(raw))
		case e != nil:
			got = append(got, "end "+e.State+" "+string(raw))
		}
		return nil
	})
	want := []string{
		`build: go build {"time":"2025-01-02T03:04:05Z","stream":"build","line":"go build"}`,
		`end failed {"state":"failed","error_code":"DEPLOY_BUILD_FAILED"}`,
	}
	if err != nil || end.State != "failed" || end.ErrorCode == nil || *end.ErrorCode != "DEPLOY_BUILD_FAILED" || !slices.Equal(got, want) {
		t.Errorf("FollowDeployment = %+v, %v, lines %q; want failed DEPLOY_BUILD_FAILED, lines %q", end, err, got, want)
	}
	none := func(*LogLine, *DeployEnd, json.RawMessage) error { return nil }
	if _, err := c.FollowDeployment(context.Background(), "app_1", "dep_cut", none); err == nil || !strings.Contains(err.Error(), "ended before the deploy did") {
		t.Errorf("a stream without its end: %v", err)
	}
	if _, err := c.FollowDeployment(context.Background(), "app_1", "dep_x", none); !IsCode(err, "NOT_FOUND") {
		t.Errorf("an unknown deployment: %v; want NOT_FOUND", err)
	}
}

// A call's raw answer is the API's bytes exactly, spacing and key order
// included, beside the decoded value.
func TestAnswersKeepTheAPIBytes(t *testing.T) {
	const body = "{\"items\": [ {\"slug\":\"a\", \"id\":\"app_1\",\"zz\":1} ],\"next_cursor\":\"app_1\"}\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprint(w, body)
	}))
	defer srv.Close()
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	page, raw, err := c.Apps(context.Background(), "", 0)
	if err != nil || string(raw) != body || len(page.Items) != 1 || page.Items[0].Slug != "a" || page.NextCursor != "app_1" {
		t.Errorf("Apps = %+v, %q, %v; want the body %q as it came", page, raw, err, body)
	}
}
