package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		wantNil bool
		wantErr string
	}{
		{in: nil, wantNil: true},
		{in: []string{}, wantNil: true},
		{in: []string{"api.example.com", "*.example.org", "10.0.0.1", "10.0.0.0/8", "::1", "fd00::/8", "localhost", "Example.NET."}},
		{in: []string{"https://example.com"}, wantErr: "https://example.com"},
		{in: []string{"*.", "x"}, wantErr: "not a *.domain"},
		{in: []string{"10.0.0.0/33"}, wantErr: "10.0.0.0/33"},
		{in: []string{"fe80::1%eth0"}, wantErr: "zone"},
		{in: []string{"a..b"}, wantErr: "not a host name"},
	} {
		a, err := Parse(tc.in)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Parse(%q) = %v, want an error with %q", tc.in, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("Parse(%q) = %v", tc.in, err)
		case (a == nil) != tc.wantNil:
			t.Errorf("Parse(%q) = %v, want nil %v", tc.in, a, tc.wantNil)
		}
	}
}

func TestDecision(t *testing.T) {
	a, err := Parse([]string{"db.internal", "*.example.org", "10.1.0.0/16", "192.168.1.5", "Api.Example.COM."})
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr
	for _, tc := range []struct {
		host string
		addr string
		want bool
	}{
		{"db.internal", "10.9.9.9", true},           // exact name: any address
		{"DB.internal.", "127.0.0.1", true},         // exact name, any case, trailing dot
		{"api.example.com", "8.8.8.8", true},        // exact
		{"x.example.org", "8.8.8.8", true},          // wildcard, public
		{"a.b.example.org", "1.1.1.1", true},        // wildcard, deeper
		{"example.org", "8.8.8.8", false},           // the apex is not *.example.org
		{"x.example.org", "127.0.0.1", false},       // wildcard to loopback
		{"x.example.org", "10.0.0.1", false},        // wildcard to private
		{"x.example.org", "169.254.169.254", false}, // wildcard to the metadata service
		{"x.example.org", "100.64.0.1", false},      // wildcard to carrier NAT
		{"x.example.org", "::1", false},
		{"x.example.org", "::ffff:127.0.0.1", false}, // mapped loopback
		{"x.example.org", "10.1.2.3", true},          // wildcard to private, but listed as CIDR
		{"evil.example.org.attacker.com", "8.8.8.8", false},
		{"notexample.org", "8.8.8.8", false},
		{"other.com", "8.8.8.8", false},
		{"", "192.168.1.5", true},  // IP literal listed
		{"", "192.168.1.6", false}, // IP literal not listed
		{"", "8.8.8.8", false},     // a public literal is not listed either
		{"", "10.1.255.1", true},   // in the CIDR
		{"", "::ffff:10.1.0.1", true},
		{"db.internal", "0.0.0.0", false}, // never the unspecified address
		{"db.internal", "224.0.0.1", false},
	} {
		how := noMatch
		if tc.host != "" {
			how = a.matchName(tc.host)
			if how == noMatch {
				if tc.want {
					t.Errorf("%s does not match the list", tc.host)
				}
				continue
			}
		}
		if got := a.allowAddr(ip(tc.addr), how); got != tc.want {
			t.Errorf("%s at %s: allowed = %v, want %v", tc.host, tc.addr, got, tc.want)
		}
	}
	var none *Allowlist
	if none.matchName("x") != noMatch || none.allowAddr(ip("1.1.1.1"), noMatch) {
		t.Errorf("a nil list allows something")
	}
}

// fakeResolver answers names from a map.
type fakeResolver map[string][]netip.Addr

var _ Resolver = fakeResolver(nil)

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestProxy runs the proxy in front of real servers on loopback and a
// client that goes through it as workloads do (HTTP_PROXY / CONNECT).
func TestProxy(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream saw %s %s", r.Method, r.URL.Path)
	}))
	defer up.Close()
	upAddr := netip.MustParseAddrPort(up.Listener.Addr().String())
	allow, err := Parse([]string{"allowed.test", "*.wild.test"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var refused []string
	d := &Dialer{Allow: allow, Resolver: fakeResolver{
		"allowed.test":     {upAddr.Addr()},
		"x.wild.test":      {upAddr.Addr()}, // a wildcard name pointing at loopback
		"unlisted.test":    {upAddr.Addr()},
		"rebind.wild.test": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.0.0.1")},
	}}
	p := &Proxy{Dial: d.Dial, Failed: func(dest string, err error) {
		mu.Lock()
		refused = append(refused, dest)
		mu.Unlock()
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.Serve(ln) }()
	defer p.Close()
	proxyURL, _ := url.Parse("http://" + ln.Addr().String())
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	port := fmt.Sprint(upAddr.Port())

	get := func(u string) (int, string) {
		t.Helper()
		resp, err := client.Get(u)
		if err != nil {
			t.Fatalf("GET %s through the proxy: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://allowed.test:" + port + "/hello"); code != 200 || body != "upstream saw GET /hello" {
		t.Errorf("an allowed name: %d %q", code, body)
	}
	for _, u := range []string{
		"http://unlisted.test:" + port + "/",
		"http://x.wild.test:" + port + "/",      // wildcard to loopback
		"http://127.0.0.1:" + port + "/",        // an unlisted literal
		"http://rebind.wild.test:" + port + "/", // only private answers
	} {
		if code, body := get(u); code != http.StatusForbidden || !strings.Contains(body, "refused") {
			t.Errorf("GET %s: %d %q, want 403", u, code, body)
		}
	}

	// CONNECT, by hand: what HTTPS clients send.
	tunnel := func(dest string) (int, net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("CONNECT %s: %v", dest, err)
		}
		if resp.StatusCode != 200 {
			c.Close()
			return resp.StatusCode, nil
		}
		return 200, &bufConn{Conn: c, r: br}
	}
	code, c := tunnel("allowed.test:" + port)
	if code != 200 {
		t.Fatalf("CONNECT to an allowed name: %d", code)
	}
	fmt.Fprintf(c, "GET /tunnelled HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	c.Close()
	if string(b) != "upstream saw GET /tunnelled" {
		t.Errorf("through the tunnel: %q", b)
	}
	for _, dest := range []string{"unlisted.test:" + port, "127.0.0.1:" + port, "x.wild.test:" + port, "allowed.test:0", "allowed.test", "[fe80::1%25lo]:80"} {
		if code, _ := tunnel(dest); code == 200 {
			t.Errorf("CONNECT %s was allowed", dest)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refused) < 4 {
		t.Errorf("refusals told: %q", refused)
	}
}

// TestProxyPassword: a proxy with a password serves only clients that
// give it.
func TestProxyPassword(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer up.Close()
	var d net.Dialer
	p := &Proxy{Password: "s3cret", Dial: func(ctx context.Context, hostport string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", hostport)
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.Serve(ln) }()
	defer p.Close()
	for _, tc := range []struct {
		user string
		want int
	}{{"", http.StatusProxyAuthRequired}, {"svc:wrong", http.StatusProxyAuthRequired}, {"svc:s3cret", http.StatusOK}, {"other:s3cret", http.StatusOK}} {
		u := "http://" + ln.Addr().String()
		if tc.user != "" {
			u = "http://" + tc.user + "@" + ln.Addr().String()
		}
		proxy, _ := url.Parse(u)
		resp, err := (&http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}).Get(up.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("with %q: %d, want %d", tc.user, resp.StatusCode, tc.want)
		}
	}
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func FuzzParse(f *testing.F) {
	for _, s := range []string{"api.example.com", "*.example.org", "10.0.0.0/8", "::1", "fd00::/8", "a..b", "*.", "1.2.3"} {
		f.Add(s, "x.example.org")
	}
	f.Fuzz(func(t *testing.T, entry, host string) {
		a, err := Parse([]string{entry})
		if err != nil {
			return
		}
		entry = strings.TrimSpace(entry)
		how := a.matchName(host)
		_ = a.allowAddr(netip.MustParseAddr("127.0.0.1"), how)
		if how == exact && normalName(host) != normalName(entry) {
			t.Fatalf("%q matched %q exactly", host, entry)
		}
		if how == wildcard && !strings.HasSuffix(normalName(host), strings.TrimPrefix(normalName(entry), "*")) {
			t.Fatalf("%q matched wildcard %q", host, entry)
		}
	})
}

// FuzzProxyAuth: any Proxy-Authorization header is read without panicking,
// and what Basic encodes reads back.
func FuzzProxyAuth(f *testing.F) {
	f.Add("svc", "pass:word")
	f.Add("", "")
	f.Add("a:b", "c")
	f.Fuzz(func(t *testing.T, user, pass string) {
		_, _, _ = parseProxyAuth(user + " " + pass) // anything at all
		if strings.Contains(user, ":") {
			return
		}
		h := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
		u, p, ok := parseProxyAuth(h)
		if !ok || u != user || p != pass {
			t.Fatalf("parseProxyAuth(%q) = %q, %q, %v; want %q, %q", h, u, p, ok, user, pass)
		}
	})
}
