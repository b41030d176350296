package process

import (
	"net/netip"
	"strings"
	"testing"
)

// TestResolvConf: a pod's resolver is the host's, but a resolver on the
// host's loopback (systemd-resolved's stub) is unreachable from the pod,
// so pasta forwards DNS sent to dnsStub to it.
func TestResolvConf(t *testing.T) {
	for _, tc := range []struct {
		name, host  string
		proxied     bool
		want        string
		wantForward bool
	}{
		{name: "plain", host: "nameserver 10.0.0.2\nsearch example.internal\n# comment\noptions ndots:2\n",
			want: "nameserver 10.0.0.2\nsearch example.internal\noptions ndots:2\n"},
		{name: "systemd-resolved", host: "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n",
			want: "nameserver " + dnsStub + "\noptions edns0 trust-ad\nsearch .\n", wantForward: true},
		{name: "loopback and another", host: "nameserver 127.0.0.1\nnameserver 9.9.9.9\n",
			want: "nameserver 9.9.9.9\n"},
		{name: "ipv6 loopback", host: "nameserver ::1\n", want: "nameserver " + dnsStub + "\n", wantForward: true},
		{name: "none", host: "", want: ""},
		{name: "proxied", host: "nameserver 10.0.0.2\n", proxied: true, want: "# egress goes through the proxy in HTTP_PROXY; it resolves names\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := parseResolv([]byte(tc.host))
			if got := h.conf(tc.proxied); got != tc.want {
				t.Errorf("conf = %q, want %q", got, tc.want)
			}
			if got := h.loopbackOnly(); got != tc.wantForward {
				t.Errorf("forward DNS = %v, want %v", got, tc.wantForward)
			}
		})
	}
}

// FuzzParseResolv: any resolv.conf is read without panicking, and what a
// pod gets names no loopback server (unreachable from it).
func FuzzParseResolv(f *testing.F) {
	f.Add("nameserver 127.0.0.53\noptions edns0\n")
	f.Add("nameserver 10.0.0.2\nsearch a b\n")
	f.Add("nameserver\n\x00nameserver ::1 x\n")
	f.Fuzz(func(t *testing.T, s string) {
		h := parseResolv([]byte(s))
		for _, line := range strings.Split(h.conf(false), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" {
				if a, err := netip.ParseAddr(f[1]); err == nil && a.IsLoopback() {
					t.Fatalf("the pod is told of the loopback resolver %s", f[1])
				}
			}
		}
	})
}
