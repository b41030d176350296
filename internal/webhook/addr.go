package webhook

import (
	"net/netip"
	"strconv"
	"strings"
)

// Which addresses a webhook may reach. A webhook URL is chosen by anyone
// who may create a subscription, so without a rule it would let them make
// svc's host send requests to itself, to the cloud's metadata service or to
// the private network behind it (server-side request forgery).
//
// Unless host policy's allow_private_webhooks is on, an attempt never
// connects to:
//
//   - loopback (127/8, ::1), unspecified (0.0.0.0/8 "this network", ::),
//   - private (10/8, 172.16/12, 192.168/16, 100.64/10 carrier NAT,
//     fc00::/7 unique local, fec0::/10 site local),
//   - link-local (169.254/16, where cloud metadata services answer;
//     fe80::/10),
//   - multicast (224/4, ff00::/8), reserved and broadcast (240/4), and the
//     special-purpose blocks a receiver never lives in (192.0.0/24,
//     198.18/15, the documentation blocks, 100::/64, 2001:db8::/32,
//     64:ff9b:1::/48),
//   - an IPv6 address that embeds one of those IPv4 addresses: IPv4-mapped
//     (::ffff:0:0/96), IPv4-compatible (::/96), NAT64 (64:ff9b::/96),
//     6to4 (2002::/16) and Teredo (2001::/32, its client address).
//
// The rule is applied by the dialer to the address actually being
// connected to (every address DNS gave, each time), so neither a name that
// resolves to such an address nor one that changes its answer between
// checks gets around it. CheckURL applies the same rule to a literal
// address when a subscription is saved.

// classify says what kind of address a is when an attempt may not connect
// to it under the rule above ("a loopback address", …); "" means a is a
// public address.
func classify(a netip.Addr) string {
	a = a.WithZone("")
	if !a.IsValid() {
		return "not an address"
	}
	if a.Is4In6() {
		if k := classify4(a.Unmap()); k != "" {
			return k + " (IPv4-mapped)"
		}
		return ""
	}
	if a.Is4() {
		return classify4(a)
	}
	b := a.As16()
	switch {
	case a == netip.IPv6Unspecified():
		return "an unspecified address"
	case a == netip.IPv6Loopback():
		return "a loopback address"
	case compat.Contains(a):
		// IPv4-compatible (deprecated): never a receiver, whatever it embeds.
		if k := classify4(netip.AddrFrom4([4]byte(b[12:16]))); k != "" {
			return k + " (IPv4-compatible)"
		}
		return "a reserved address (IPv4-compatible)"
	case nat64.Contains(a):
		if k := classify4(netip.AddrFrom4([4]byte(b[12:16]))); k != "" {
			return k + " (through NAT64)"
		}
		return ""
	case sixToFour.Contains(a):
		if k := classify4(netip.AddrFrom4([4]byte(b[2:6]))); k != "" {
			return k + " (through 6to4)"
		}
		return ""
	case teredo.Contains(a):
		client := [4]byte{b[12] ^ 0xff, b[13] ^ 0xff, b[14] ^ 0xff, b[15] ^ 0xff}
		if k := classify4(netip.AddrFrom4(client)); k != "" {
			return k + " (through Teredo)"
		}
		return ""
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsMulticast():
		return "a multicast address"
	case a.IsPrivate() || siteLocal.Contains(a):
		return "a private address"
	}
	for _, p := range reserved6 {
		if p.Contains(a) {
			return "a reserved address"
		}
	}
	return ""
}

// classify4 is classify for an IPv4 address.
func classify4(a netip.Addr) string {
	switch {
	case thisNetwork.Contains(a):
		return "an unspecified address"
	case a.IsLoopback():
		return "a loopback address"
	case a == metadata:
		return "a link-local address (a cloud metadata service)"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsPrivate():
		return "a private address"
	case carrierNAT.Contains(a):
		return "a private address (carrier NAT)"
	case a.IsMulticast():
		return "a multicast address"
	case a == broadcast:
		return "the broadcast address"
	}
	for _, p := range reserved4 {
		if p.Contains(a) {
			return "a reserved address"
		}
	}
	return ""
}

var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	carrierNAT  = netip.MustParsePrefix("100.64.0.0/10")
	metadata    = netip.MustParseAddr("169.254.169.254")
	broadcast   = netip.MustParseAddr("255.255.255.255")
	reserved4   = []netip.Prefix{
		netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
		netip.MustParsePrefix("192.0.2.0/24"),    // documentation
		netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
		netip.MustParsePrefix("198.51.100.0/24"), // documentation
		netip.MustParsePrefix("203.0.113.0/24"),  // documentation
		netip.MustParsePrefix("240.0.0.0/4"),     // reserved
	}
	compat    = netip.MustParsePrefix("::/96")
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	teredo    = netip.MustParsePrefix("2001::/32")
	siteLocal = netip.MustParsePrefix("fec0::/10")
	reserved6 = []netip.Prefix{
		netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
		netip.MustParsePrefix("100::/64"),       // discard only
		netip.MustParsePrefix("2001:db8::/32"),  // documentation
		netip.MustParsePrefix("::/8"),           // reserved by the IETF
	}
)

// looksNumeric reports whether host (lower-case, no brackets) would be read
// as an IPv4 address by a URL parser or by inet_aton: its last label (a
// trailing dot aside) is a decimal or 0x-hexadecimal number.
func looksNumeric(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if rest, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(rest, "0123456789abcdef") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

// parseLegacyIPv4 reads host as inet_aton and URL parsers do: one to four
// parts, each decimal, 0x hexadecimal or 0-prefixed octal, the last filling
// the bytes left (2130706433, 0x7f000001, 0177.0.0.1, 127.1). A trailing
// dot is allowed. ok is false when host is not such an address.
func parseLegacyIPv4(host string) (a netip.Addr, ok bool) {
	host = strings.TrimSuffix(host, ".")
	parts := strings.Split(host, ".")
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0" // "0x" alone is 0, as inet_aton reads it
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		if digits == "" || len(digits) > 32 {
			return netip.Addr{}, false
		}
		n, err := strconv.ParseUint(digits, base, 64)
		if err != nil {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}
