package webhook

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// startDNS runs a real DNS server (UDP, on loopback) answering A and AAAA
// questions from names, and returns a resolver that asks it. Names resolve
// to loopback and private addresses with no network and no hosts file: the
// dialer's rule is what must refuse them.
func startDNS(t *testing.T, names map[string][]netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := dnsAnswer(buf[:n], names); resp != nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}
	}()
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

// dnsAnswer answers one DNS query (RFC 1035): the names' addresses of the
// type asked, NXDOMAIN for a name it does not know.
func dnsAnswer(q []byte, names map[string][]netip.Addr) []byte {
	if len(q) < 12 {
		return nil
	}
	i := 12
	var labels []string
	for {
		if i >= len(q) {
			return nil
		}
		l := int(q[i])
		i++
		if l == 0 {
			break
		}
		if l&0xc0 != 0 || i+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i:i+l]))
		i += l
	}
	if i+4 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i:])
	question := q[12 : i+4]
	addrs, known := names[strings.ToLower(strings.Join(labels, "."))]
	var rdata [][]byte
	for _, a := range addrs {
		switch {
		case qtype == 1 && a.Is4():
			b := a.As4()
			rdata = append(rdata, b[:])
		case qtype == 28 && a.Is6():
			b := a.As16()
			rdata = append(rdata, b[:])
		}
	}
	flags := uint16(0x8580) // a response, authoritative, recursion desired and available
	if !known {
		flags |= 3 // NXDOMAIN
	}
	resp := append([]byte{q[0], q[1]}, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint16(resp[2:], flags)
	binary.BigEndian.PutUint16(resp[6:], uint16(len(rdata)))
	resp = append(resp, question...)
	for _, r := range rdata {
		resp = append(resp, 0xc0, 12) // the question's name
		resp = binary.BigEndian.AppendUint16(resp, qtype)
		resp = append(resp, 0, 1, 0, 0, 0, 60) // class IN, TTL 60
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(r)))
		resp = append(resp, r...)
	}
	return resp
}

// canary is an HTTP server on 127.0.0.1 and, when the host has IPv6, on
// [::1] (same port) that counts the connections made to it.
type canary struct {
	port  int
	ipv6  bool
	conns atomic.Int64
}

func startCanary(t *testing.T) *canary {
	t.Helper()
	c := &canary{}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				c.conns.Add(1)
			}
		},
	}
	ln4, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = ln4.Addr().(*net.TCPAddr).Port
	go func() { _ = srv.Serve(ln4) }()
	if ln6, err := net.Listen("tcp", fmt.Sprintf("[::1]:%d", c.port)); err == nil {
		c.ipv6 = true
		go func() { _ = srv.Serve(ln6) }()
	} else {
		t.Logf("no IPv6 loopback (%v): the canary listens on 127.0.0.1 only", err)
	}
	t.Cleanup(func() { srv.Close() })
	return c
}

// TestSSRFMatrix: with allow_private_webhooks off, every URL of the matrix
// is refused when saved where its address is literal, and refused by Send
// (with CheckURL skipped) at dial time, or before it for spellings and
// names that are never an address to dial; the canary on loopback sees no
// connection. With the policy on, the loopback ones do reach the canary
// (so the refusals are the rule's, not unreachable addresses).
func TestSSRFMatrix(t *testing.T) {
	c := startCanary(t)
	p := fmt.Sprint(c.port)
	res := startDNS(t, map[string][]netip.Addr{
		"loopback.test":  {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
		"metadata.test":  {netip.MustParseAddr("169.254.169.254")},
		"private.test":   {netip.MustParseAddr("10.1.2.3")},
		"mapped.test":    {netip.MustParseAddr("::ffff:127.0.0.1")},
		"nat64.test":     {netip.MustParseAddr("64:ff9b::7f00:1")},
		"sixtofour.test": {netip.MustParseAddr("2002:7f00:1::1")},
		"mixed.test":     {netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("fd12::1")},
		"ula.test":       {netip.MustParseAddr("fd12::1")},
		"cgnat.test":     {netip.MustParseAddr("100.100.100.100")},
	})
	// stage: "dial" is the dialer's refusal of the address connected to;
	// "send" is Send's refusal before dialling (another spelling of an
	// address, a localhost name).
	matrix := []struct {
		url     string
		literal bool // CheckURL refuses it when saved
		stage   string
	}{
		{"http://127.0.0.1:" + p + "/", true, "dial"},
		{"http://[::1]:" + p + "/", true, "dial"},
		{"http://127.0.0.2:" + p + "/", true, "dial"},
		{"http://0.0.0.0:" + p + "/", true, "dial"},
		{"http://[::]:" + p + "/", true, "dial"},
		{"http://[::ffff:127.0.0.1]:" + p + "/", true, "dial"},
		{"http://[::ffff:7f00:1]:" + p + "/", true, "dial"},
		{"http://[0:0:0:0:0:ffff:127.0.0.1]:" + p + "/", true, "dial"},
		{"http://[::127.0.0.1]:" + p + "/", true, "dial"},
		{"http://[64:ff9b::7f00:1]:" + p + "/", true, "dial"},
		{"http://[2002:7f00:1::]:" + p + "/", true, "dial"},
		{"http://10.0.0.1:" + p + "/", true, "dial"},
		{"http://172.16.0.1:" + p + "/", true, "dial"},
		{"http://192.168.1.1:" + p + "/", true, "dial"},
		{"http://100.64.0.1:" + p + "/", true, "dial"},
		{"http://169.254.169.254/latest/meta-data/", true, "dial"},
		{"http://[::ffff:169.254.169.254]/latest/meta-data/", true, "dial"},
		{"http://[fe80::1]:" + p + "/", true, "dial"},
		{"http://[fd00:ec2::254]/latest/meta-data/", true, "dial"},
		{"http://[fc00::1]:" + p + "/", true, "dial"},
		{"http://224.0.0.1:" + p + "/", true, "dial"},
		{"http://255.255.255.255:" + p + "/", true, "dial"},
		{"http://240.0.0.1:" + p + "/", true, "dial"},
		{"http://2130706433:" + p + "/", true, "send"},
		{"http://0x7f000001:" + p + "/", true, "send"},
		{"http://0177.0.0.1:" + p + "/", true, "send"},
		{"http://127.1:" + p + "/", true, "send"},
		{"http://0x7f.1:" + p + "/", true, "send"},
		{"http://2852039166/latest/meta-data/", true, "send"},
		{"http://0:" + p + "/", true, "send"},
		{"http://localhost:" + p + "/", true, "send"},
		{"http://app.localhost:" + p + "/", true, "send"},
		{"http://loopback.test:" + p + "/", false, "dial"},
		{"http://metadata.test/latest/meta-data/", false, "dial"},
		{"http://private.test:" + p + "/", false, "dial"},
		{"http://mapped.test:" + p + "/", false, "dial"},
		{"http://nat64.test:" + p + "/", false, "dial"},
		{"http://sixtofour.test:" + p + "/", false, "dial"},
		{"http://mixed.test:" + p + "/", false, "dial"},
		{"http://ula.test:" + p + "/", false, "dial"},
		{"http://cgnat.test:" + p + "/", false, "dial"},
	}
	strict := NewSender(Options{Timeout: 3 * time.Second, Resolver: res, AllowPrivate: func() bool { return false }})
	defer strict.closeIdle()
	refused := 0
	for _, m := range matrix {
		err := CheckURL(m.url, false)
		if m.literal != (err != nil) {
			t.Errorf("CheckURL(%s) = %v, want refused %v", m.url, err, m.literal)
		}
		r := strict.Send(bg, Request{URL: m.url, Keys: []string{"whsec_k"}, Event: testEvent("evt_ssrf")})
		ok := !r.Delivered() && r.StatusCode == 0 && strings.HasPrefix(r.Error, "refused: ")
		switch m.stage {
		case "dial":
			ok = ok && strings.HasSuffix(r.Error, "; host policy allow_private_webhooks is off") &&
				strings.Contains(r.Error, " resolved to ") == !m.literal
		case "send":
			ok = ok && !strings.Contains(r.Error, " resolved to ")
		}
		if ok {
			refused++
		} else {
			t.Errorf("Send(%s): %+v, want refused at %s", m.url, r, m.stage)
		}
		t.Logf("%-50s saved: %-5v sent: %s (%s)", m.url, err == nil, r.Error, r.Duration.Round(time.Microsecond))
	}
	t.Logf("%d of %d URLs refused", refused, len(matrix))
	if n := c.conns.Load(); n != 0 {
		t.Fatalf("the canary saw %d connections", n)
	}

	// A redirect from a receiver the sender may reach to the canary is not
	// followed: the attempt fails with the 3xx, and the canary sees nothing.
	redirector := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		http.Redirect(w, r, "http://127.0.0.1:"+p+"/internal", http.StatusFound)
	})
	for _, allow := range []bool{false, true} {
		s := NewSender(Options{Resolver: res, AllowPrivate: func() bool { return allow }})
		r := s.Send(bg, Request{URL: redirector.URL, Keys: []string{"whsec_k"}, Event: testEvent("evt_redirect")})
		s.closeIdle()
		if r.Delivered() || allow && r.StatusCode != http.StatusFound || !allow && !strings.HasPrefix(r.Error, "refused: 127.0.0.1 is a loopback address") {
			t.Errorf("redirect to the canary (allow private %v): %+v", allow, r)
		}
	}
	if n := c.conns.Load(); n != 0 {
		t.Fatalf("the canary saw %d connections after the redirect", n)
	}

	// With the policy on, the same loopback URLs reach the canary.
	reach := []string{"http://127.0.0.1:" + p + "/", "http://0.0.0.0:" + p + "/", "http://[::ffff:127.0.0.1]:" + p + "/",
		"http://loopback.test:" + p + "/", "http://mapped.test:" + p + "/", "http://localhost:" + p + "/"}
	if c.ipv6 {
		reach = append(reach, "http://[::1]:"+p+"/")
	}
	for i, u := range reach {
		s := NewSender(Options{Resolver: res, AllowPrivate: func() bool { return true }})
		r := s.Send(bg, Request{URL: u, Keys: []string{"whsec_k"}, Event: testEvent("evt_ok")})
		s.closeIdle()
		if !r.Delivered() || c.conns.Load() != int64(i+1) {
			t.Errorf("with the policy on, %s: %+v, canary connections %d, want %d", u, r, c.conns.Load(), i+1)
		}
	}
}

// TestPolicyReadEachAttempt: the policy is read at every attempt, and a
// connection kept alive while it was on is not reused once it is off.
func TestPolicyReadEachAttempt(t *testing.T) {
	c := startCanary(t)
	var allow atomic.Bool
	allow.Store(true)
	s := NewSender(Options{AllowPrivate: allow.Load})
	defer s.closeIdle()
	u := fmt.Sprintf("http://127.0.0.1:%d/", c.port)
	req := Request{URL: u, Keys: []string{"whsec_k"}, Event: testEvent("evt_p")}
	for i := range 3 {
		if r := s.Send(bg, req); !r.Delivered() {
			t.Fatalf("attempt %d with the policy on: %+v", i, r)
		}
	}
	if n := c.conns.Load(); n != 1 {
		t.Fatalf("three attempts with the policy on took %d connections, want 1 kept alive", n)
	}
	allow.Store(false)
	if r := s.Send(bg, req); r.Delivered() || !strings.HasPrefix(r.Error, "refused: 127.0.0.1 is a loopback address") {
		t.Fatalf("with the policy turned off: %+v", r)
	}
	allow.Store(true)
	if r := s.Send(bg, req); !r.Delivered() {
		t.Fatalf("with the policy back on: %+v", r)
	}
	if n := c.conns.Load(); n != 1 {
		t.Errorf("the canary saw %d connections, want the one kept alive", n)
	}
}
