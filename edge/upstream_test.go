package edge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
)

// signerFunc is a signer for a test.
type signerFunc func(ctx context.Context, c Claims) (string, error)

var _ Signer = signerFunc(nil)

func (f signerFunc) Assertion(ctx context.Context, c Claims) (string, error) { return f(ctx, c) }

// sharedApp is a world with one app shared with alice, served in port mode.
func sharedApp(t *testing.T, o edgeOpts) (*world, *person, *testApp, *Proxy, string) {
	t.Helper()
	w := newWorld(t)
	alice := w.newPerson("alice")
	app := w.addApp("notes", 9001)
	w.grant(app.id, authz.KindUser, alice.user.ID)
	p := w.edge(o)
	return w, alice, app, p, serve(t, p.PortHandler(9001))
}

// TestServerSentEventsStream: an event reaches the client while the app
// is still answering.
func TestServerSentEventsStream(t *testing.T) {
	_, alice, app, _, srv := sharedApp(t, edgeOpts{})
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv+"/sse", nil)
	bearer(alice.token)(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	lines := bufio.NewReader(res.Body)
	first, err := lines.ReadString('\n')
	if err != nil || first != "data: first\n" {
		t.Fatalf("first event %q, %v: it did not arrive before the app finished", first, err)
	}
	app.unblock() // only now does the app send the rest and finish
	rest, err := io.ReadAll(lines)
	if err != nil || !strings.Contains(string(rest), "data: second") {
		t.Fatalf("rest %q, %v", rest, err)
	}
}

// TestWebsocketsPassThrough: an upgrade reaches the app (which verifies
// the assertion before accepting) and messages flow both ways.
func TestWebsocketsPassThrough(t *testing.T) {
	_, alice, _, _, srv := sharedApp(t, edgeOpts{})
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	c, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv, "http")+"/ws", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + alice.token}},
	})
	if err != nil {
		t.Fatalf("dial through the edge: %v (%v)", err, res)
	}
	defer c.CloseNow()
	for _, msg := range []string{"hello", "again"} {
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.Read(ctx)
		if err != nil || string(got) != "echo: "+msg {
			t.Fatalf("read %q, %v", got, err)
		}
	}
	_ = c.Close(websocket.StatusNormalClosure, "")

	// Not signed in: no upgrade.
	_, res, err = websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv, "http")+"/ws", nil)
	if err == nil || res == nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an anonymous upgrade: %v, %v; want 401", err, res)
	}
}

func TestUpstreamDownIs502(t *testing.T) {
	w, alice, app, _, srv := sharedApp(t, edgeOpts{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	w.setRoute(app, Route{AppID: app.id, Slug: app.slug, Port: 9001, Upstream: dead})
	env := deny(t, srv+"/", 502, "ADAPTER_UNAVAILABLE", bearer(alice.token))
	if env.Details["reason"] != "unreachable" || strings.Contains(env.Message, dead) {
		t.Errorf("envelope %+v: want reason unreachable, and no upstream address", env)
	}
}

func TestUpstreamTimeoutIs504(t *testing.T) {
	_, alice, app, _, srv := sharedApp(t, edgeOpts{cfg: Config{ResponseHeaderTimeout: 200 * time.Millisecond}})
	defer app.unblock()
	env := deny(t, srv+"/hang", 504, "ADAPTER_UNAVAILABLE", bearer(alice.token))
	if env.Details["reason"] != "timeout" {
		t.Errorf("envelope %+v: want reason timeout", env)
	}
}

// TestAnAppNotRunningIs502 — and only to whoever may open it.
func TestAnAppNotRunningIs502(t *testing.T) {
	w, alice, app, _, srv := sharedApp(t, edgeOpts{})
	w.setRoute(app, Route{AppID: app.id, Slug: app.slug, Port: 9001})
	env := deny(t, srv+"/", 502, "ADAPTER_UNAVAILABLE", bearer(alice.token))
	if env.Message != "the app is not running" || env.Details["reason"] != "not_running" {
		t.Errorf("envelope %+v", env)
	}
	deny(t, srv+"/", 401, "AUTH_REQUIRED")
	deny(t, srv+"/", 403, "PERM_DENIED", w.as(w.newPerson("carol"), app))
}

// TestNoAssertionNoRequest: when the signer fails, nothing is forwarded.
func TestNoAssertionNoRequest(t *testing.T) {
	var calls atomic.Int64
	for _, tc := range []struct {
		name   string
		signer signerFunc
		status int
		code   string
	}{
		{"error", func(context.Context, Claims) (string, error) { calls.Add(1); return "", errors.New("no key") }, 500, "INTERNAL"},
		{"empty token", func(context.Context, Claims) (string, error) { calls.Add(1); return "", nil }, 500, "INTERNAL"},
		{"store unavailable", func(context.Context, Claims) (string, error) {
			calls.Add(1)
			return "", errcode.New(errcode.StoreUnavailable, "no leader")
		}, 503, "STORE_UNAVAILABLE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, alice, app, _, srv := sharedApp(t, edgeOpts{signer: tc.signer})
			before := calls.Load()
			env := deny(t, srv+"/", tc.status, tc.code, bearer(alice.token))
			if calls.Load() != before+1 || app.hits.Load() != 0 {
				t.Errorf("signer calls %d, app hits %d: want one and none", calls.Load()-before, app.hits.Load())
			}
			if strings.Contains(env.Message, "no key") {
				t.Errorf("the signer's error reached the caller: %q", env.Message)
			}
		})
	}
}

// TestForwardingHeaders: X-Forwarded-For is the peer, appended to the
// client's own header only when the peer is a trusted proxy; -Proto says
// https behind an https external URL, -Host is what the client asked.
func TestForwardingHeaders(t *testing.T) {
	_, alice, _, _, srv := sharedApp(t, edgeOpts{})
	rep := open(t, srv+"/", bearer(alice.token))
	if got := rep.Header["X-Forwarded-For"]; len(got) != 1 || got[0] != "127.0.0.1" {
		t.Errorf("X-Forwarded-For %q", got)
	}
	rep = open(t, srv+"/", bearer(alice.token), header("X-Forwarded-For", "10.1.2.3"), hostHeader("notes.example.com:9001"))
	if got := rep.Header["X-Forwarded-For"]; len(got) != 1 || got[0] != "127.0.0.1" {
		t.Errorf("X-Forwarded-For %q from an untrusted peer, want the client's header replaced by the peer", got)
	}
	_, alice3, _, _, srv3 := sharedApp(t, edgeOpts{cfg: Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	rep = open(t, srv3+"/", bearer(alice3.token), header("X-Forwarded-For", "10.1.2.3"), hostHeader("notes.example.com:9001"))
	if got := rep.Header["X-Forwarded-For"]; len(got) != 1 || got[0] != "10.1.2.3, 127.0.0.1" {
		t.Errorf("X-Forwarded-For %q from a trusted proxy, want the peer appended to its header", got)
	}
	if rep.Header["X-Forwarded-Host"][0] != "notes.example.com:9001" || rep.Header["X-Forwarded-Proto"][0] != "http" || rep.Host != "notes.example.com:9001" {
		t.Errorf("X-Forwarded-Host %q, -Proto %q, Host %q", rep.Header["X-Forwarded-Host"], rep.Header["X-Forwarded-Proto"], rep.Host)
	}
	_, alice2, _, _, srv2 := sharedApp(t, edgeOpts{cfg: Config{ExternalURL: "https://svc.example.com"}})
	if rep = open(t, srv2+"/", bearer(alice2.token)); rep.Header["X-Forwarded-Proto"][0] != "https" {
		t.Errorf("behind an https external URL: X-Forwarded-Proto %q", rep.Header["X-Forwarded-Proto"])
	}
}

// TestProxyUpstream: with SVC_SERVER_PROXY_UPSTREAM set, authorized
// requests go there, with the assertion and the forwarding headers, even
// when this node knows no workload address; refused ones go nowhere.
func TestProxyUpstream(t *testing.T) {
	w := newWorld(t)
	alice := w.newPerson("alice")
	app := w.addApp("notes", 9001)
	w.grant(app.id, authz.KindUser, alice.user.ID)
	w.setRoute(app, Route{AppID: app.id, Slug: app.slug, Port: 9001}) // no upstream known here
	var got atomic.Pointer[http.Request]
	router := serve(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		claims, err := w.verify(r, r.Header.Get(HeaderAppID))
		if err != nil {
			http.Error(rw, err.Error(), http.StatusUnauthorized)
			return
		}
		got.Store(r)
		rw.Header().Set("X-App", "router")
		_ = json.NewEncoder(rw).Encode(report{Path: r.URL.Path, Query: r.URL.RawQuery, Host: r.Host, Header: r.Header, Claims: claims})
	}))
	p := w.edge(edgeOpts{cfg: Config{ProxyUpstream: router + "/route"}})
	srv := serve(t, p.PortHandler(9001))
	rep := open(t, srv+"/x?y=1", bearer(alice.token), header("X-Svc-App-Id", "app_EVIL"))
	if rep.Path != "/route/x" || rep.Query != "y=1" || rep.Claims["aud"] != app.id || rep.Claims["sub"] != alice.user.ID {
		t.Errorf("the router got path %q query %q claims %v", rep.Path, rep.Query, rep.Claims)
	}
	if rep.Header[HeaderAppID][0] != app.id || rep.Header["X-Forwarded-Host"][0] != strings.TrimPrefix(srv, "http://") || rep.Header["X-Forwarded-For"][0] != "127.0.0.1" {
		t.Errorf("headers %v", rep.Header)
	}
	got.Store(nil)
	deny(t, srv+"/x", 401, "AUTH_REQUIRED")
	if got.Load() != nil {
		t.Error("a refused request reached the router")
	}
}

// TestActivityIsRecordedPerApp: forwarded requests mark their app active;
// refused ones mark nothing.
func TestActivityIsRecordedPerApp(t *testing.T) {
	w, alice, app, p, srv := sharedApp(t, edgeOpts{})
	other := w.addApp("other", 9002)
	if !p.LastActivity(app.id).IsZero() {
		t.Fatal("activity before any request")
	}
	start := time.Now().Add(-time.Second)
	open(t, srv+"/", bearer(alice.token))
	if got := p.LastActivity(app.id); got.Before(start) {
		t.Errorf("LastActivity %v, want a time after %v", got, start)
	}
	deny(t, serve(t, p.PortHandler(9002))+"/", 403, "PERM_DENIED", bearer(alice.token))
	if !p.LastActivity(other.id).IsZero() {
		t.Error("a refused request counted as activity")
	}
	// What internal/idle stores: every app's stamp, and only those.
	if all := p.Activity(); len(all) != 1 || !all[app.id].Equal(p.LastActivity(app.id)) {
		t.Errorf("Activity() = %v; want only %s at %v", all, app.id, p.LastActivity(app.id))
	}
}

func TestActivityStampsMoveForward(t *testing.T) {
	var a activity
	t0 := time.Unix(1000, 0)
	a.touch("app_1", t0)
	a.touch("app_1", t0.Add(activityGrain/2))
	if got := a.last("app_1"); !got.Equal(t0) {
		t.Errorf("within the grain: %v, want %v", got, t0)
	}
	a.touch("app_1", t0.Add(3*activityGrain))
	if got := a.last("app_1"); !got.Equal(t0.Add(3 * activityGrain)) {
		t.Errorf("after the grain: %v", got)
	}
	if !a.last("app_2").IsZero() {
		t.Error("an app never seen has activity")
	}
}
