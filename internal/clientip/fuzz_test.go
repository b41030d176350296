package clientip

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzClient checks, for any header a client can send, that the answer is
// the peer when the peer is untrusted, and otherwise an address that is the
// peer or appears in the header.
func FuzzClient(f *testing.F) {
	f.Add("10.0.0.2", "1.1.1.1, 198.51.100.7")
	f.Add("203.0.113.9", "1.2.3.4")
	f.Add("10.0.0.2", " , [2001:db8::1]:80,,nonsense, 10.1.1.1")
	f.Add("fd00::1", "::ffff:1.2.3.4, fe80::1%eth0")
	r := New(mustList(f, "10.0.0.0/8, fd00::/8"))
	f.Fuzz(func(t *testing.T, peerText, xff string) {
		peer, err := netip.ParseAddr(peerText)
		if err != nil {
			return
		}
		got := r.Client(peer, []string{xff})
		if !got.IsValid() {
			t.Fatalf("Client(%s, %q) is not an address", peer, xff)
		}
		if got.Zone() != "" || got.Is4In6() {
			t.Fatalf("Client(%s, %q) = %s: zone or mapped form kept", peer, xff, got)
		}
		if !r.Trusted(peer) {
			if got != peer.Unmap().WithZone("") {
				t.Fatalf("untrusted peer %s: Client = %s, want the peer", peer, got)
			}
			return
		}
		if got == peer.Unmap().WithZone("") {
			return
		}
		for item := range strings.SplitSeq(xff, ",") {
			if a := parseAddr(strings.TrimSpace(item)); a == got {
				return
			}
		}
		t.Fatalf("Client(%s, %q) = %s, which is neither the peer nor in the header", peer, xff, got)
	})
}

// FuzzParseList checks that ParseList never panics and that what it
// accepts reads back the same.
func FuzzParseList(f *testing.F) {
	f.Add("10.0.0.7, 10.1.0.0/16, fd00::/8")
	f.Add("::ffff:10.0.0.7,")
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParseList(s)
		if err != nil {
			return
		}
		again, err := ParseList(FormatList(ps))
		if err != nil {
			t.Fatalf("ParseList(FormatList(%q)) = %v", s, err)
		}
		if FormatList(again) != FormatList(ps) {
			t.Fatalf("round trip of %q: %q then %q", s, FormatList(ps), FormatList(again))
		}
	})
}
