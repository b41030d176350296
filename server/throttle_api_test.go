package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/identity"
)

// countingHasher counts the secrets checked: every Verify and Dummy is one
// Argon2id evaluation of a guess.
type countingHasher struct {
	inner identity.Hasher
	n     atomic.Int64
}

var _ identity.Hasher = (*countingHasher)(nil)

func (h *countingHasher) Hash(ctx context.Context, pw string) (string, error) {
	return h.inner.Hash(ctx, pw)
}

func (h *countingHasher) Verify(ctx context.Context, encoded, pw string) (bool, bool, error) {
	h.n.Add(1)
	return h.inner.Verify(ctx, encoded, pw)
}

func (h *countingHasher) Dummy(ctx context.Context, pw string) {
	h.n.Add(1)
	h.inner.Dummy(ctx, pw)
}

// from is an HTTP client whose connections come from the loopback address
// ip (127.0.0.1, 127.0.0.2, …: every 127/8 address is this host's), so
// that the server sees distinct peers.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}}
}

// reply is an answer over real HTTP.
type reply struct {
	status     int
	code       errcode.Code
	retryAfter string
}

// postJSON sends a JSON body to the server at base, with X-Forwarded-For xff
// when not empty.
func postJSON(t testing.TB, c *http.Client, url, body, xff string) reply {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return reply{}
	}
	req.Header.Set("Content-Type", "application/json")
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Error(err)
		return reply{}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var e envelope
	_ = json.Unmarshal(b, &e)
	return reply{status: res.StatusCode, code: e.Code, retryAfter: res.Header.Get("Retry-After")}
}

func signInBody(username, pw string) string {
	return jsonOf(map[string]string{"username": username, "password": pw})
}

// burst is n requests at once, each built by body(i); it returns at once.
// Every answer is counted by code; refused is closed at the first
// RATE_LIMITED, which must carry Retry-After.
type burst struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	codes   map[errcode.Code]int
	once    sync.Once
	refused chan struct{}
}

func startBurst(t *testing.T, c *http.Client, url string, n int, body func(i int) string) *burst {
	b := &burst{codes: map[errcode.Code]int{}, refused: make(chan struct{})}
	start := make(chan struct{})
	for i := range n {
		b.wg.Go(func() {
			<-start
			r := postJSON(t, c, url, body(i), "")
			b.mu.Lock()
			b.codes[r.code]++
			b.mu.Unlock()
			if r.code == errcode.RateLimited {
				if s, err := strconv.Atoi(r.retryAfter); r.status != 500 || err != nil || s < 1 || s > 900 {
					t.Errorf("RATE_LIMITED answered %d with Retry-After %q", r.status, r.retryAfter)
				}
				b.once.Do(func() { close(b.refused) })
			}
		})
	}
	close(start)
	return b
}

// waitRefused waits for the burst's first RATE_LIMITED.
func (b *burst) waitRefused(t *testing.T) {
	t.Helper()
	select {
	case <-b.refused:
	case <-time.After(time.Minute):
		t.Fatal("no attempt of the burst was refused")
	}
}

// TestSignInBurstChecksAtMostTheLimit: 200 wrong passwords at once at one
// account from one address have at most ten checked (Argon2id evaluations
// and refused sign-ins audited), every other answered RATE_LIMITED with
// Retry-After; the right password sent in the middle of the burst is
// refused like the rest, and the rightful user at another address signs
// in meanwhile.
func TestSignInBurstChecksAtMostTheLimit(t *testing.T) {
	hasher := &countingHasher{inner: testHasher}
	h := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, hasher: hasher})
	bob := h.account(t, "bob", nil, false)
	srv := httptest.NewServer(h.srv.Handler())
	defer srv.Close()
	url := srv.URL + api + "/sessions"
	hasher.n.Store(0)

	attacker := from("127.0.0.1")
	b := startBurst(t, attacker, url, 200, func(i int) string { return signInBody(bob.username, fmt.Sprintf("wrong-guess-%03d", i)) })
	b.waitRefused(t)
	if r := postJSON(t, attacker, url, signInBody(bob.username, bob.password), ""); r.code != errcode.RateLimited || r.retryAfter == "" {
		t.Errorf("the right password amid the burst: %d %s, want 500 RATE_LIMITED with Retry-After", r.status, r.code)
	}
	if r := postJSON(t, from("127.0.0.2"), url, signInBody(bob.username, bob.password), ""); r.status != http.StatusOK {
		t.Errorf("the rightful user at another address while the account is attacked: %d %s, want 200", r.status, r.code)
	}
	b.wg.Wait()

	checked := hasher.n.Load() - 1 // the rightful user's sign-in
	if checked < 1 || checked > 10 {
		t.Errorf("%d guesses checked, want 1 to 10", checked)
	}
	if b.codes[errcode.AuthInvalid] != int(checked) || b.codes[errcode.RateLimited] != 200-int(checked) {
		t.Errorf("answers %v, want %d AUTH_INVALID and the rest RATE_LIMITED", b.codes, checked)
	}
	a := h.send("GET", api+"/audit?action=session.create_failed&limit=500", "")
	var entries struct{ Items []json.RawMessage }
	if err := json.Unmarshal(a.body, &entries); err != nil || len(entries.Items) != int(checked) {
		t.Errorf("%d refused sign-ins audited (%v), want %d", len(entries.Items), err, checked)
	}
}

// TestPasscodeBurstChecksAtMostTheLimit: 200 wrong passcodes at once from
// one address have at most ten checked; the right passcode amid them is
// refused; another address still gets in.
func TestPasscodeBurstChecksAtMostTheLimit(t *testing.T) {
	hasher := &countingHasher{inner: testHasher}
	h := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, hasher: hasher, env: []string{"SVC_POLICY_PUBLIC_SHARING=allowed"}})
	app := h.passcodeApp(t, "Garden", "open-sesame")
	srv := httptest.NewServer(h.srv.Handler())
	defer srv.Close()
	url := srv.URL + api + "/apps/" + app + "/passcode"
	code := func(c string) string { return jsonOf(map[string]string{"passcode": c}) }
	hasher.n.Store(0)

	attacker := from("127.0.0.1")
	b := startBurst(t, attacker, url, 200, func(i int) string { return code(fmt.Sprintf("guess-%03d", i)) })
	b.waitRefused(t)
	if r := postJSON(t, attacker, url, code("open-sesame"), ""); r.code != errcode.RateLimited || r.retryAfter == "" {
		t.Errorf("the right passcode amid the burst: %d %s, want 500 RATE_LIMITED with Retry-After", r.status, r.code)
	}
	b.wg.Wait()
	checked := hasher.n.Load()
	if checked < 1 || checked > 10 {
		t.Errorf("%d passcodes checked, want 1 to 10", checked)
	}
	if b.codes[errcode.PermPasscodeRequired] != int(checked) || b.codes[errcode.RateLimited] != 200-int(checked) {
		t.Errorf("answers %v, want %d PERM_PASSCODE_REQUIRED and the rest RATE_LIMITED", b.codes, checked)
	}
	if r := postJSON(t, from("127.0.0.2"), url, code("open-sesame"), ""); r.status != http.StatusNoContent {
		t.Errorf("the right passcode from another address: %d %s, want 204", r.status, r.code)
	}
}

// TestClientAddressFromTrustedProxiesOnly: X-Forwarded-For names the
// client only when the peer is a trusted proxy (server.trusted_proxies).
func TestClientAddressFromTrustedProxiesOnly(t *testing.T) {
	t.Run("untrusted peer: the header is ignored", func(t *testing.T) {
		h := newHarness(t)
		bob := h.account(t, "bob", nil, false)
		srv := httptest.NewServer(h.srv.Handler())
		defer srv.Close()
		url, c := srv.URL+api+"/sessions", from("127.0.0.1")
		for i := range 10 {
			if r := postJSON(t, c, url, signInBody(bob.username, "wrong-guess"), fmt.Sprintf("203.0.113.%d", i)); r.code != errcode.AuthInvalid {
				t.Fatalf("guess %d: %d %s", i, r.status, r.code)
			}
		}
		if r := postJSON(t, c, url, signInBody(bob.username, bob.password), "198.51.100.20"); r.code != errcode.RateLimited {
			t.Errorf("a fresh X-Forwarded-For after ten failures from the same peer: %d %s, want RATE_LIMITED", r.status, r.code)
		}
	})
	t.Run("trusted proxy: the header names the client", func(t *testing.T) {
		h := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, env: []string{"SVC_SERVER_TRUSTED_PROXIES=127.0.0.1"}})
		bob := h.account(t, "bob", nil, false)
		srv := httptest.NewServer(h.srv.Handler())
		defer srv.Close()
		url, proxy := srv.URL+api+"/sessions", from("127.0.0.1")
		for i := range 10 {
			if r := postJSON(t, proxy, url, signInBody(bob.username, "wrong-guess"), "203.0.113.7"); r.code != errcode.AuthInvalid {
				t.Fatalf("guess %d: %d %s", i, r.status, r.code)
			}
		}
		if r := postJSON(t, proxy, url, signInBody(bob.username, bob.password), "203.0.113.7"); r.code != errcode.RateLimited {
			t.Errorf("the attacker's address after ten failures: %d %s, want RATE_LIMITED", r.status, r.code)
		}
		if r := postJSON(t, proxy, url, signInBody(bob.username, bob.password), "198.51.100.20, 203.0.113.7"); r.code != errcode.RateLimited {
			t.Errorf("the attacker forging an address left of its own: %d %s, want RATE_LIMITED", r.status, r.code)
		}
		if r := postJSON(t, proxy, url, signInBody(bob.username, bob.password), "198.51.100.20"); r.status != http.StatusOK {
			t.Fatalf("the rightful user through the proxy: %d %s, want 200", r.status, r.code)
		}
		a := h.send("GET", api+"/audit?action=session.create&limit=1", "")
		if !strings.Contains(string(a.body), `"client_ip":"198.51.100.20"`) {
			t.Errorf("the sign-in is not audited with the client's address: %s", a.body)
		}
	})
}
