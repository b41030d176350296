package clientip

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func mustList(t testing.TB, s string) []netip.Prefix {
	t.Helper()
	ps, err := ParseList(s)
	if err != nil {
		t.Fatalf("ParseList(%q): %v", s, err)
	}
	return ps
}

func TestParseList(t *testing.T) {
	tests := []struct {
		in      string
		want    string // FormatList of the result
		wantErr string // part of the error
	}{
		{in: "", want: ""},
		{in: "  ", want: ""},
		{in: "10.0.0.7", want: "10.0.0.7"},
		{in: "10.0.0.7, 10.1.0.0/16 ,fd00::/8", want: "10.0.0.7,10.1.0.0/16,fd00::/8"},
		{in: "::ffff:10.0.0.7", want: "10.0.0.7"},
		{in: "0.0.0.0/0", want: "0.0.0.0/0"},
		{in: "10.0.0.7/32", want: "10.0.0.7"},
		{in: "10.0.0.7,", wantErr: "item 2: empty"},
		{in: "10.1.2.3/16", wantErr: "did you mean 10.1.0.0/16"},
		{in: "localhost", wantErr: "not an IP address"},
		{in: "10.0.0.256", wantErr: "not an IP address"},
		{in: "10.0.0.0/33", wantErr: "not an IP address"},
		{in: "fe80::1%eth0", wantErr: "not an IP address"},
		{in: "::ffff:10.0.0.0/104", wantErr: "IPv4-mapped"},
		{in: "10.0.0.1:80", wantErr: "not an IP address"},
		{in: strings.Repeat("1", 100), wantErr: "not an IP address"},
	}
	for _, tt := range tests {
		ps, err := ParseList(tt.in)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseList(%q) = %v, %v; want an error with %q", tt.in, ps, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("ParseList(%q): %v", tt.in, err)
		case FormatList(ps) != tt.want:
			t.Errorf("ParseList(%q) = %q, want %q", tt.in, FormatList(ps), tt.want)
		}
	}
}

func TestClient(t *testing.T) {
	trusted := New(mustList(t, "10.0.0.0/8, 192.168.1.1, fd00::/8"))
	tests := []struct {
		name string
		r    *Resolver
		peer string
		xff  []string
		want string
	}{
		{"no proxies: the peer", &Resolver{}, "203.0.113.9", []string{"1.2.3.4"}, "203.0.113.9"},
		{"nil resolver: the peer", nil, "203.0.113.9", []string{"1.2.3.4"}, "203.0.113.9"},
		{"untrusted peer: its header is ignored", trusted, "203.0.113.9", []string{"1.2.3.4"}, "203.0.113.9"},
		{"trusted peer, no header: the peer", trusted, "10.0.0.2", nil, "10.0.0.2"},
		{"trusted peer: the entry it appended", trusted, "10.0.0.2", []string{"198.51.100.7"}, "198.51.100.7"},
		{"a client's own entries left of the real one are ignored", trusted, "10.0.0.2", []string{"1.1.1.1, 2.2.2.2, 198.51.100.7"}, "198.51.100.7"},
		{"a chain of trusted proxies is walked", trusted, "10.0.0.2", []string{"1.1.1.1, 198.51.100.7, 10.9.9.9, 192.168.1.1"}, "198.51.100.7"},
		{"several header lines read in order", trusted, "10.0.0.2", []string{"1.1.1.1, 198.51.100.7", "10.9.9.9"}, "198.51.100.7"},
		{"every entry trusted: the left-most", trusted, "10.0.0.2", []string{"10.1.1.1, 10.2.2.2"}, "10.1.1.1"},
		{"garbage stops the walk at the last trusted hop", trusted, "10.0.0.2", []string{"198.51.100.7, nonsense, 10.3.3.3"}, "10.3.3.3"},
		{"garbage left of the client does not matter", trusted, "10.0.0.2", []string{"nonsense, 198.51.100.7"}, "198.51.100.7"},
		{"blank entries are skipped", trusted, "10.0.0.2", []string{" , 198.51.100.7 ,, "}, "198.51.100.7"},
		{"ports are dropped", trusted, "10.0.0.2", []string{"198.51.100.7:4711"}, "198.51.100.7"},
		{"IPv6 with a port", trusted, "10.0.0.2", []string{"[2001:db8::1]:80"}, "2001:db8::1"},
		{"IPv4-mapped peer counts as IPv4", trusted, "::ffff:10.0.0.2", []string{"198.51.100.7"}, "198.51.100.7"},
		{"IPv4-mapped entry is shown as IPv4", trusted, "10.0.0.2", []string{"::ffff:198.51.100.7"}, "198.51.100.7"},
		{"IPv6 proxy", trusted, "fd00::5", []string{"2001:db8::1"}, "2001:db8::1"},
		{"a zone does not make an address trusted or different", trusted, "fd00::5%eth0", []string{"2001:db8::1"}, "2001:db8::1"},
		{"trust everything: a client chooses", New(mustList(t, "0.0.0.0/0")), "203.0.113.9", []string{"1.2.3.4"}, "1.2.3.4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.r.Client(netip.MustParseAddr(tt.peer), tt.xff)
			if got.String() != tt.want {
				t.Errorf("Client(%s, %q) = %s, want %s", tt.peer, tt.xff, got, tt.want)
			}
		})
	}
}

func TestClientIPFromRequest(t *testing.T) {
	r := New(mustList(t, "127.0.0.1"))
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "127.0.0.1:5555"
	req.Header.Add("X-Forwarded-For", "9.9.9.9, 198.51.100.7")
	if got := r.ClientIP(req); got != "198.51.100.7" {
		t.Errorf("from a trusted proxy: %s, want 198.51.100.7", got)
	}
	if !r.PeerTrusted(req) {
		t.Error("PeerTrusted = false for 127.0.0.1")
	}
	req.RemoteAddr = "203.0.113.9:5555"
	if got := r.ClientIP(req); got != "203.0.113.9" {
		t.Errorf("from an untrusted peer: %s, want 203.0.113.9", got)
	}
	if r.PeerTrusted(req) {
		t.Error("PeerTrusted = true for 203.0.113.9")
	}
	req.RemoteAddr = "pipe"
	if got := r.ClientIP(req); got != "pipe" {
		t.Errorf("RemoteAddr not an address: %q, want it unchanged", got)
	}
}

func BenchmarkClient(b *testing.B) {
	r := New(mustList(b, "10.0.0.0/8, 192.168.0.0/16"))
	peer := netip.MustParseAddr("10.0.0.2")
	xff := []string{"1.1.1.1, 2.2.2.2, 198.51.100.7, 192.168.3.3"}
	b.ReportAllocs()
	for b.Loop() {
		_ = r.Client(peer, xff)
	}
}

func TestKey(t *testing.T) {
	for in, want := range map[string]string{
		"198.51.100.7":         "198.51.100.7",
		"::ffff:198.51.100.7":  "198.51.100.7",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2::ffff":   "2001:db8:1:2::/64",
		"fe80::1%eth0":         "fe80::/64",
		"pipe":                 "pipe",
		"":                     "",
	} {
		if got := Key(in); got != want {
			t.Errorf("Key(%q) = %q, want %q", in, got, want)
		}
	}
}
