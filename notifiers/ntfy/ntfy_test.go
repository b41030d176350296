package ntfy

import (
	"context"
	"fmt"
	"io"
	"log"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/notifiers/internal/notifytest"
)

const token = "tk_AgQdq7mVBoFD37zQVN29RhuMzNIz2"

// published is one publish request an ntfy server got.
type published struct {
	method, path string
	header       http.Header
	body         string
}

// server is a real HTTPS server answering like ntfy: publishes to a topic
// (recorded) and /v1/health with health; answer, when set, answers
// publishes instead.
func server(t *testing.T, ca *notifytest.CA, health string, answer http.HandlerFunc) (*httptest.Server, chan published) {
	t.Helper()
	got := make(chan published, 10)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, health)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- published{method: r.Method, path: r.URL.Path, header: r.Header, body: string(b)}
		if answer != nil {
			answer(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"sPs71M8A2T","time":1777636800,"event":"message","topic":"svc-alerts","message":"…"}`)
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = ca.ServerTLS(t)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes of clients that do not trust it
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, got
}

func open(t *testing.T, settings map[string]string, tok string) *Ntfy {
	t.Helper()
	k := Kind()
	var creds []string
	if tok != "" {
		creds = []string{"token"}
	}
	if err := k.Validate(settings, creds); err != nil {
		t.Fatalf("Validate(%v): %v", settings, err)
	}
	inst, err := k.Open(context.Background(), adapters.Config{ID: "adp_ntfy", Settings: settings, Credentials: map[string]string{"token": tok}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return inst.(*Ntfy)
}

func TestNotifyPublishes(t *testing.T) {
	ca := notifytest.NewCA(t, "ntfy CA")
	srv, got := server(t, ca, `{"healthy":true}`, nil)
	n := open(t, map[string]string{"server": srv.URL + "/ntfy/", "topic": "svc-alerts", "ca_file": ca.File}, token)

	m := notifytest.DeployFailed()
	if err := n.Notify(context.Background(), m); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	p := <-got
	if p.method != "POST" || p.path != "/ntfy/svc-alerts" || p.body != m.Body {
		t.Errorf("published %s %s %q; want POST /ntfy/svc-alerts with the message's line", p.method, p.path, p.body)
	}
	want := map[string]string{
		"Title":         "shop: deploy failed",
		"Click":         "https://svc.example.com/apps/app_01/deploys",
		"Tags":          "rotating_light,deploy.failed",
		"Priority":      "4", // default, raised for a failure
		"Authorization": "Bearer " + token,
		"Content-Type":  "text/plain; charset=utf-8",
	}
	gotHeaders := map[string]string{}
	for k := range want {
		gotHeaders[k] = p.header.Get(k)
	}
	if diff := cmp.Diff(want, gotHeaders); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}

	// Without a token, no Authorization; an install event without a link
	// has no Click; a name that is not ASCII arrives intact.
	n = open(t, map[string]string{"server": srv.URL, "topic": "svc-alerts", "priority": "low", "ca_file": ca.File}, "")
	m = notifytest.Rendered("app.created", "Café ☕\r\nX-Injected: 1", map[string]any{"name": "Café", "slug": "cafe"})
	m.Link = ""
	if err := n.Notify(context.Background(), m); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	p = <-got
	title, err := new(mime.WordDecoder).DecodeHeader(p.header.Get("Title"))
	if err != nil || title != "Café ☕  X-Injected: 1: app created" {
		t.Errorf("Title %q decodes to %q (%v)", p.header.Get("Title"), title, err)
	}
	for _, h := range []string{"Authorization", "Click", "X-Injected"} {
		if v := p.header.Get(h); v != "" {
			t.Errorf("header %s = %q; want none", h, v)
		}
	}
	if p.path != "/svc-alerts" || p.header.Get("Priority") != "2" || p.header.Get("Tags") != "app.created" {
		t.Errorf("published to %s with priority %q and tags %q", p.path, p.header.Get("Priority"), p.header.Get("Tags"))
	}

	// A long line is cut below ntfy's 4096 bytes, past which it would
	// become an attachment.
	m = notifytest.Rendered("deploy.failed", "shop", map[string]any{"message": strings.Repeat("é", 3000)})
	if err := n.Notify(context.Background(), m); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	if p = <-got; len([]rune(p.body)) != maxBody || len(p.body) > 4096 || !strings.HasSuffix(p.body, "…") || !strings.HasPrefix(p.body, "shop: deploy failed") {
		t.Errorf("a long line arrives as %d characters, %d bytes", len([]rune(p.body)), len(p.body))
	}
}

func TestRefusalsKeepTheTokenOut(t *testing.T) {
	ca := notifytest.NewCA(t, "ntfy CA")
	srv, got := server(t, ca, `{"healthy":true}`, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"code":40101,"http":401,"error":"unauthorized","seen":"`+r.Header.Get("Authorization")+`"}`)
	})
	n := open(t, map[string]string{"server": srv.URL, "topic": "svc-alerts", "ca_file": ca.File}, token)
	err := n.Notify(context.Background(), notifytest.DeployFailed())
	notifytest.NoSecret(t, err, errcode.AdapterFailed, token)
	if !strings.Contains(err.Error(), "ntfy at 127.0.0.1:") || !strings.Contains(err.Error(), "401 Unauthorized") || !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("refusal: %v", err)
	}
	<-got

	other := notifytest.NewCA(t, "another CA")
	untrusted := open(t, map[string]string{"server": srv.URL, "topic": "svc-alerts", "ca_file": other.File}, token)
	for _, err := range []error{untrusted.Notify(context.Background(), notifytest.DeployFailed()), untrusted.Check(context.Background())} {
		notifytest.NoSecret(t, err, errcode.AdapterFailed, token)
		if !strings.Contains(err.Error(), "does not trust") {
			t.Errorf("with the wrong CA: %v", err)
		}
	}
	if len(got) != 0 {
		t.Errorf("a server the adapter does not trust got %d publishes", len(got))
	}
}

func TestCheck(t *testing.T) {
	ca := notifytest.NewCA(t, "ntfy CA")
	for _, tt := range []struct {
		health string
		code   errcode.Code // empty: healthy
		says   string
	}{
		{`{"healthy":true}`, "", ""},
		{`{"healthy":false}`, errcode.AdapterUnavailable, "says it is not healthy"},
		{`<html>not ntfy</html>`, errcode.AdapterFailed, "something other than ntfy's"},
		{`{}`, errcode.AdapterFailed, "something other than ntfy's"},
	} {
		srv, got := server(t, ca, tt.health, nil)
		n := open(t, map[string]string{"server": srv.URL, "topic": "svc-alerts", "ca_file": ca.File}, token)
		err := n.Check(context.Background())
		if tt.code == "" {
			if err != nil {
				t.Errorf("Check answered %s: %v", tt.health, err)
			}
		} else {
			notifytest.NoSecret(t, err, tt.code, token)
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("Check answered %s: %v; want it to say %q", tt.health, err, tt.says)
			}
		}
		if len(got) != 0 {
			t.Errorf("Check published %d messages", len(got))
		}
		srv.Close()
		err = n.Check(context.Background())
		notifytest.NoSecret(t, err, errcode.AdapterUnavailable, token)
		if !strings.Contains(err.Error(), "is not reachable: connection refused") {
			t.Errorf("Check with the server down: %v", err)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		settings map[string]string
		token    bool
		field    string // empty: valid
	}{
		{map[string]string{"topic": "svc-alerts"}, true, ""},
		{map[string]string{"server": "http://ntfy.internal:8080", "topic": "a_b-C9"}, false, ""},
		{map[string]string{"server": "http://127.0.0.1:8080", "topic": "x"}, true, ""},
		{map[string]string{"server": "https://ntfy.example.com/push/", "topic": strings.Repeat("t", 64), "priority": "5"}, true, ""},
		{map[string]string{"topic": "x", "priority": "MAX"}, false, ""},
		{map[string]string{"topic": "x", "priority": "urgent"}, false, ""},
		{map[string]string{"server": "http://ntfy.internal", "topic": "x"}, true, "config.server"},
		{map[string]string{"server": "ntfy.sh", "topic": "x"}, false, "config.server"},
		{map[string]string{"server": "ftp://ntfy.sh", "topic": "x"}, false, "config.server"},
		{map[string]string{"server": "https://user:pw@ntfy.sh", "topic": "x"}, false, "config.server"},
		{map[string]string{"server": "https://ntfy.sh/?topic=x", "topic": "x"}, false, "config.server"},
		{map[string]string{"server": "https://", "topic": "x"}, false, "config.server"},
		{map[string]string{"topic": ""}, false, "config.topic"},
		{map[string]string{"topic": "svc alerts"}, false, "config.topic"},
		{map[string]string{"topic": "a/b"}, false, "config.topic"},
		{map[string]string{"topic": "café"}, false, "config.topic"},
		{map[string]string{"topic": strings.Repeat("t", 65)}, false, "config.topic"},
		{map[string]string{"topic": "x", "priority": "6"}, false, "config.priority"},
		{map[string]string{"topic": "x", "priority": "loud"}, false, "config.priority"},
	} {
		var creds []string
		if tt.token {
			creds = []string{"token"}
		}
		notifytest.Validated(t, Kind().Validate(tt.settings, creds), tt.field, fmt.Sprintf("%v, token %t", tt.settings, tt.token))
	}
	if _, err := New(map[string]string{"topic": "x"}, "tk_bad\r\nX: y"); err == nil || strings.Contains(err.Error(), "tk_bad") {
		t.Errorf("New with a token holding a line break = %v; want a refusal that does not quote it", err)
	}
}

func TestPriorityFor(t *testing.T) {
	for _, tt := range []struct {
		configured int
		event      string
		want       int
	}{
		{3, "deploy.failed", 4},
		{3, "adapter.unhealthy", 4},
		{3, "subscription.disabled", 4},
		{3, "app.gave_up", 4},
		{3, "app.idle_stopped", 4},
		{3, "security.scan_failed", 4},
		{1, "backup.failed", 4},
		{5, "deploy.failed", 5},
		{3, "deploy.succeeded", 3},
		{2, "user.sign_in_failed", 2},
		{3, "subscription.test", 3},
		{3, "", 3},
	} {
		if got := priorityFor(tt.configured, tt.event); got != tt.want {
			t.Errorf("priorityFor(%d, %q) = %d; want %d", tt.configured, tt.event, got, tt.want)
		}
	}
}

// FuzzConfig: accepted settings publish to a URL on the configured server
// whose last path segment is the topic, at a priority from 1 to 5.
func FuzzConfig(f *testing.F) {
	f.Add("https://ntfy.sh", "svc-alerts", "high")
	f.Add("http://127.0.0.1:8080/base/", "a", "3")
	f.Add("https://ntfy.sh/%2e%2e", "x", "")
	f.Add("https://[::1]:1", "_", "urgent")
	f.Fuzz(func(t *testing.T, server, topic, priority string) {
		cfg, err := configOf(map[string]string{"server": server, "topic": topic, "priority": priority}, false)
		if err != nil {
			return
		}
		n := &Ntfy{cfg: cfg}
		u, err := url.Parse(n.endpoint(cfg.topic))
		if err != nil {
			t.Fatalf("endpoint %q does not parse: %v", n.endpoint(cfg.topic), err)
		}
		if u.Host != cfg.server.Host || !strings.HasSuffix(u.Path, "/"+topic) || strings.Contains(topic, "/") {
			t.Fatalf("settings %q %q publish to %s", server, topic, u)
		}
		if cfg.priority < 1 || cfg.priority > 5 {
			t.Fatalf("priority %q read as %d", priority, cfg.priority)
		}
	})
}
