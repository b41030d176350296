package webhook

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSendRequest: what a receiver gets: the method, the content type, the
// Svc-* headers (signature over the exact body sent), User-Agent and the
// extra headers, which never replace svc's own.
func TestSendRequest(t *testing.T) {
	rc := newReceiver(t, nil)
	now := time.Unix(1750000000, 0)
	s := open(t, Options{Now: func() time.Time { return now }, UserAgent: "svc/test"})
	keys := []string{"whsec_new", "whsec_old"}
	tests := []struct {
		name       string
		req        Request
		wantMethod string
		wantCT     string
	}{
		{"defaults", Request{}, "POST", "application/json"},
		{"PUT", Request{Method: "PUT"}, "PUT", "application/json"},
		{"PATCH with a content type", Request{Method: "PATCH", ContentType: "application/cloudevents+json; charset=utf-8"}, "PATCH", "application/cloudevents+json; charset=utf-8"},
		{"a text template", Request{ContentType: "text/plain", Template: "{{.Subject}}"}, "POST", "text/plain"},
		{"extra headers", Request{Headers: map[string]string{"Authorization": "Bearer tkn-123456", "x-team": "ops", "User-Agent": "mine"}}, "POST", "application/json"},
		{"extra headers that would replace svc's", Request{Headers: map[string]string{
			"Svc-Event": "forged", "svc-signature": "v1=forged", "SVC-TIMESTAMP": "1", "Svc-Event-Id": "evt_forged", "Svc-Delivery-Id": "dlv_forged",
			"Content-Type": "text/forged", "Host": "internal.example", "Content-Length": "1", "Transfer-Encoding": "chunked",
			"Connection": "close", "X-Bad": "a\r\nX-Injected: 1", "X Bad": "v", "X-Kept": "yes"}}, "POST", "application/json"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
			req.URL, req.Keys, req.DeliveryID, req.Event = rc.URL+"/in", keys, fmt.Sprintf("dlv_%d", i), testEvent("evt_req")
			res := s.Send(bg, req)
			if !res.Delivered() || res.StatusCode != 204 || res.Error != "" || res.Duration <= 0 {
				t.Fatalf("%+v", res)
			}
			got := rc.requests()[i]
			body, err := Body(req)
			if err != nil {
				t.Fatal(err)
			}
			h := got.Header
			ts := strconv.FormatInt(now.Unix(), 10)
			want := map[string]string{
				"Content-Type":    tt.wantCT,
				"Svc-Event":       "deploy.failed",
				"Svc-Event-Id":    "evt_req",
				"Svc-Delivery-Id": req.DeliveryID,
				"Svc-Timestamp":   ts,
				"Svc-Signature":   Sign(keys, now.Unix(), got.Body),
				"User-Agent":      "svc/test",
			}
			if req.Headers["User-Agent"] != "" {
				want["User-Agent"] = "mine"
			}
			for name, v := range req.Headers {
				if CheckHeaders(map[string]string{name: v}) == nil {
					want[name] = v
				}
			}
			for name, v := range want {
				if h.Get(name) != v {
					t.Errorf("%s: %q, want %q", name, h.Get(name), v)
				}
				if len(h.Values(name)) != 1 {
					t.Errorf("%s sent %d times", name, len(h.Values(name)))
				}
			}
			if got.Method != tt.wantMethod || got.Path != "/in" || string(got.Body) != string(body) {
				t.Errorf("%s %s %s, want %s /in %s", got.Method, got.Path, got.Body, tt.wantMethod, body)
			}
			if h.Get("X-Injected") != "" || h.Get("Accept-Encoding") != "" {
				t.Errorf("unexpected headers: %v", h)
			}
		})
	}
}

// TestSendAnswers: a 2xx is delivered; any other status is a failure that
// says so; a redirect is not followed (its target sees nothing); an answer
// with a huge body is read no further than 64 KiB.
func TestSendAnswers(t *testing.T) {
	target := newReceiver(t, nil)
	s := open(t, Options{})
	for _, code := range []int{200, 201, 202, 204, 299, 301, 302, 303, 307, 308, 304, 400, 401, 404, 410, 429, 500, 502, 503} {
		rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			w.Header().Set("Location", target.URL+"/moved")
			w.WriteHeader(code)
		})
		res := s.Send(bg, Request{URL: rc.URL, Keys: []string{"whsec_k"}, Event: testEvent("evt_a")})
		switch {
		case code < 300:
			if !res.Delivered() || res.StatusCode != code {
				t.Errorf("%d: %+v, want delivered", code, res)
			}
		case code < 400:
			if res.Delivered() || res.StatusCode != code || res.Error != fmt.Sprintf("the receiver answered %d, a redirect; redirects are not followed", code) {
				t.Errorf("%d: %+v, want a failed redirect", code, res)
			}
		default:
			if res.Delivered() || res.StatusCode != code || res.Error != fmt.Sprintf("the receiver answered %d", code) {
				t.Errorf("%d: %+v, want a failure", code, res)
			}
		}
	}
	if n := len(target.requests()); n != 0 {
		t.Errorf("the redirects' target got %d requests", n)
	}

	huge := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for range 1600 { // 100 MiB, unless the client goes away
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	res := s.Send(bg, Request{URL: huge.URL, Keys: []string{"whsec_k"}, Event: testEvent("evt_h")})
	if !res.Delivered() || res.Duration > 10*time.Second {
		t.Errorf("a 100 MiB answer: %+v", res)
	}
}

// TestSendTimeout: no answer within the timeout is a failure that says so,
// within the timeout and some slack, whether the receiver never answers or
// answers its headers too late.
func TestSendTimeout(t *testing.T) {
	release := make(chan struct{})
	slow := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { <-release })
	// A listener that accepts and never reads or answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		close(release)
		ln.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	})
	const timeout = 300 * time.Millisecond
	s := open(t, Options{Timeout: timeout})
	for _, u := range []string{slow.URL, "http://" + ln.Addr().String() + "/"} {
		start := time.Now()
		res := s.Send(bg, Request{URL: u, Keys: []string{"whsec_k"}, Event: testEvent("evt_slow")})
		took := time.Since(start)
		if res.Delivered() || res.StatusCode != 0 || res.Error != "no answer within 300ms" {
			t.Errorf("%s: %+v", u, res)
		}
		if took < timeout || took > timeout+5*time.Second {
			t.Errorf("%s: the attempt took %s, want about %s", u, took, timeout)
		}
	}
	// The caller's own cancellation is said as such.
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	if res := s.Send(ctx, Request{URL: slow.URL, Keys: []string{"whsec_k"}, Event: testEvent("evt_c")}); res.Error != "the attempt was cancelled" {
		t.Errorf("a cancelled attempt: %+v", res)
	}
}

// TestSendFailures: attempts that cannot be made fail with a sentence that
// never quotes a header value, key or the URL's path and query.
func TestSendFailures(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + closed.Addr().String()
	closed.Close()
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { w.WriteHeader(500) })
	res := startDNS(t, map[string][]netip.Addr{"receiver.test": {netip.MustParseAddr("127.0.0.1")}})
	s := NewSender(Options{Resolver: res, AllowPrivate: func() bool { return true }})
	defer s.closeIdle()
	secret := map[string]string{"Authorization": "Bearer s3cr3t-header-value"}
	keys := []string{"whsec_s3cr3t-signing-key"}
	path := "/services/T0001/B0001/s3cr3tpathtoken?token=s3cr3tquery"
	tests := []struct {
		req  Request
		says string
	}{
		{Request{URL: closedURL + path}, "could not connect to 127.0.0.1: connect: connection refused"},
		{Request{URL: "http://nowhere.test" + path}, "could not resolve nowhere.test: no such host"},
		{Request{URL: tlsSrv.URL + path}, "the receiver's TLS certificate was not accepted (x509: certificate signed by unknown authority)"},
		{Request{URL: rc.URL + path}, "the receiver answered 500"},
		{Request{URL: "ftp://receiver.test" + path}, "a webhook URL starts with https:// or http://"},
		{Request{URL: "http://user:s3cr3t-password@receiver.test" + path}, "user name or password"},
		{Request{URL: rc.URL, Method: "GET"}, "the method must be POST, PUT or PATCH"},
		{Request{URL: rc.URL, ContentType: "nonsense"}, "is not a media type"},
		{Request{URL: rc.URL, Template: "{{.Nope"}, "the payload template is refused: payload:1: unclosed action"},
		{Request{URL: rc.URL, Keys: []string{}}, "the subscription has no signing key"},
		{Request{URL: rc.URL, Event: nil}, "no event to send"},
	}
	for i, tt := range tests {
		req := tt.req
		req.Headers = secret
		if req.Keys == nil {
			req.Keys = keys
		}
		if i != len(tests)-1 {
			req.Event = testEvent("evt_f")
		}
		r := s.Send(bg, req)
		if r.Delivered() || !strings.Contains(r.Error, tt.says) {
			t.Errorf("%s: %+v, want an error saying %q", req.URL, r, tt.says)
		}
		if strings.Contains(r.Error, "s3cr3t") {
			t.Errorf("%s: the error quotes a secret: %q", req.URL, r.Error)
		}
	}
	if n := len(rc.requests()); n != 1 {
		t.Errorf("the receiver got %d requests, want only the one answered 500", n)
	}
	// scrub, should a lower layer quote what the request carried.
	req := Request{URL: "https://h.example" + path, Headers: secret, Keys: keys}
	msg := scrub("failed: Bearer s3cr3t-header-value whsec_s3cr3t-signing-key "+req.URL+" and "+path, req)
	if strings.Contains(msg, "s3cr3t") {
		t.Errorf("scrub left a secret: %q", msg)
	}
}

// TestSendConcurrently: one Sender serves many attempts at once.
func TestSendConcurrently(t *testing.T) {
	rc := newReceiver(t, nil)
	s := open(t, Options{})
	var wg sync.WaitGroup
	for g := range 20 {
		wg.Go(func() {
			for i := range 10 {
				req := Request{URL: rc.URL, Keys: []string{"whsec_k"}, DeliveryID: fmt.Sprintf("dlv_%d_%d", g, i), Event: testEvent("evt_cc")}
				if i%2 == 0 {
					req.Template = `{"id": {{json .ID}}, "n": {{len .Fields}}}`
				}
				if r := s.Send(bg, req); !r.Delivered() {
					t.Errorf("%+v", r)
				}
			}
		})
	}
	wg.Wait()
	got := rc.requests()
	if len(got) != 200 {
		t.Fatalf("%d requests, want 200", len(got))
	}
	seen := map[string]bool{}
	for _, r := range got {
		seen[r.Header.Get("Svc-Delivery-Id")] = true
		if r.Header.Get("Svc-Signature") != Sign([]string{"whsec_k"}, mustInt(t, r.Header.Get("Svc-Timestamp")), r.Body) {
			t.Errorf("a signature does not match its body")
		}
	}
	if len(seen) != 200 {
		t.Errorf("%d distinct delivery IDs, want 200", len(seen))
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
