// Package egress owns outbound access from sandboxed workloads and builds
// when host policy's egress_allowlist names destinations: the allowlist's
// matching rules and the forward proxy (HTTP and CONNECT, smokescreen's
// model) that is the only way out of a sandbox's network then.
//
// The proxy decides on the address it actually dials: a name is resolved
// once, each address is checked, and the connection goes to a checked
// address, never to a name resolved again (no DNS rebinding). A name
// matched exactly by an entry may reach any address it resolves to; a name
// matched by a *.domain wildcard reaches only public addresses (loopback,
// private, link-local, shared and unspecified ones need an IP or CIDR
// entry); an IP literal is allowed only by an IP or CIDR entry. Redirects
// are the client's business: each request is checked on its own.
//
// It must not import the store, the scheduler or any runtime: the process
// runtime gives it the list (the workload's, as the deploy path resolved it
// from host policy) and a logger.
package egress

import (
	"fmt"
	"net/netip"
	"strings"
)

// Allowlist is a parsed egress_allowlist. The zero value allows nothing;
// Parse of an empty list gives nil, which callers read as "open" (they do
// not proxy at all).
type Allowlist struct {
	names    map[string]bool // exact host names, lower case, no trailing dot
	suffixes []string        // ".example.org" for *.example.org
	prefixes []netip.Prefix  // IP addresses (as /32, /128) and CIDRs
}

// Parse reads egress_allowlist entries: host names, *.domain wildcards, IP
// addresses and CIDR prefixes (the policy package validated them; Parse
// refuses anything else rather than guess). An empty list gives nil.
func Parse(entries []string) (*Allowlist, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	a := &Allowlist{names: map[string]bool{}}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
			continue
		case strings.HasPrefix(e, "*."):
			d := normalName(e[2:])
			if !plausibleName(d) {
				return nil, fmt.Errorf("egress allowlist: %q is not a *.domain wildcard", e)
			}
			a.suffixes = append(a.suffixes, "."+d)
		case strings.Contains(e, "/"):
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("egress allowlist: %q: %w", e, err)
			}
			a.prefixes = append(a.prefixes, p.Masked())
		default:
			if ip, err := netip.ParseAddr(e); err == nil {
				if ip.Zone() != "" {
					return nil, fmt.Errorf("egress allowlist: %q: an address with a zone", e)
				}
				ip = ip.Unmap()
				a.prefixes = append(a.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
				continue
			}
			n := normalName(e)
			if !plausibleName(n) {
				return nil, fmt.Errorf("egress allowlist: %q is not a host name, *.domain, IP address or CIDR", e)
			}
			a.names[n] = true
		}
	}
	return a, nil
}

// normalName lower-cases a host name and drops a trailing dot.
func normalName(s string) string { return strings.ToLower(strings.TrimSuffix(s, ".")) }

// plausibleName accepts what a DNS name can be made of; the policy package
// checks the finer rules when the list is saved.
func plausibleName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return !strings.HasPrefix(s, ".") && !strings.Contains(s, "..")
}

// match is how a host name matched the list.
type match int

const (
	noMatch  match = iota
	exact          // an exact entry: any address it resolves to
	wildcard       // a *.domain entry: public addresses only
)

func (a *Allowlist) matchName(host string) match {
	if a == nil {
		return noMatch
	}
	host = normalName(host)
	if a.names[host] {
		return exact
	}
	for _, s := range a.suffixes {
		if len(host) > len(s) && strings.HasSuffix(host, s) {
			return wildcard
		}
	}
	return noMatch
}

// listed says whether an IP or CIDR entry covers ip.
func (a *Allowlist) listed(ip netip.Addr) bool {
	if a == nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range a.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// public says whether ip is an address on the public internet: not
// loopback, private, link-local, shared (100.64/10), unspecified,
// multicast, nor another special-purpose block a host would not mean.
func public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	for _, p := range special {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// special are the IPv4 and IPv6 blocks that are neither public nor covered
// by netip's predicates above.
var special = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (carrier NAT)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation (TEST-NET-1)
	netip.MustParsePrefix("198.51.100.0/24"), // documentation (TEST-NET-2)
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation (TEST-NET-3)
}

// AllowAddr says whether a connection to ip may be made: reached by name
// (how the name matched: exact or wildcard) or as an IP literal (noMatch).
func (a *Allowlist) allowAddr(ip netip.Addr, how match) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsUnspecified() || ip.IsMulticast() {
		return false
	}
	switch how {
	case exact:
		return true
	case wildcard:
		return public(ip) || a.listed(ip)
	}
	return a.listed(ip)
}
