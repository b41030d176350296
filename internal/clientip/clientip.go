// Package clientip owns the answer to "which address is this client?": the
// connection's peer, unless that peer is a trusted proxy
// (server.trusted_proxies), in which case the right-most address in
// X-Forwarded-For that is not a trusted proxy; when every address there is
// trusted, the left-most. This is the standard algorithm: each proxy appends
// the address it received the request from, so the entries right of the
// first untrusted one were written by proxies svc trusts, and everything
// left of it is whatever the client chose to send.
//
// The API throttles sign-ins and passcodes by this address and records it
// in sessions and audit entries; the edge builds the X-Forwarded-For it
// sends to apps from it (a client's own header is kept only when its peer
// is a trusted proxy). Only X-Forwarded-For is read; Forwarded (RFC 7239),
// X-Real-IP and the like are ignored.
//
// It is pure: it must not touch storage, the network or the environment,
// and it does not import HTTP servers' frameworks.
package clientip

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Header is the header the client address is read from and that the edge
// sends to apps.
const Header = "X-Forwarded-For"

// Resolver finds a request's client address. The zero value trusts no
// proxy: the client is always the connection's peer. It is safe for
// concurrent use and must not be changed after first use.
type Resolver struct {
	trusted []netip.Prefix
}

// New returns a Resolver trusting the proxies in the given ranges.
func New(trusted []netip.Prefix) *Resolver {
	return &Resolver{trusted: append([]netip.Prefix(nil), trusted...)}
}

// ParseList reads a comma-separated list of IP addresses and CIDR ranges
// ("10.0.0.7, 10.1.0.0/16, fd00::/8"); an address stands for itself alone
// (/32 or /128). Blank items are refused, as are zones and ranges with host
// bits set (10.1.2.3/16: say 10.1.0.0/16), which are usually typos.
// An empty or blank list is no proxy at all.
func ParseList(s string) ([]netip.Prefix, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []netip.Prefix
	for i, item := range strings.Split(s, ",") {
		p, err := parseItem(strings.TrimSpace(item))
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i+1, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func parseItem(item string) (netip.Prefix, error) {
	if item == "" {
		return netip.Prefix{}, errors.New("empty (remove the extra comma)")
	}
	if len(item) > 64 {
		item = item[:64] + "…"
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR range (e.g. 10.0.0.7 or 10.1.0.0/16)", item)
	}
	if strings.Contains(item, "/") {
		p, err := netip.ParsePrefix(item)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR range (e.g. 10.0.0.7 or 10.1.0.0/16)", item)
		}
		if p.Addr().Is4In6() {
			return netip.Prefix{}, fmt.Errorf("%q is an IPv4-mapped range; write the IPv4 range", item)
		}
		if p.Masked() != p {
			return netip.Prefix{}, fmt.Errorf("%q has bits set beyond its prefix length; did you mean %s?", item, p.Masked())
		}
		return p, nil
	}
	a, err := netip.ParseAddr(item)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR range (e.g. 10.0.0.7 or 10.1.0.0/16)", item)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// FormatList renders ranges as ParseList reads them, an address alone
// without its prefix length.
func FormatList(ps []netip.Prefix) string {
	items := make([]string, len(ps))
	for i, p := range ps {
		if p.IsSingleIP() {
			items[i] = p.Addr().String()
		} else {
			items[i] = p.String()
		}
	}
	return strings.Join(items, ",")
}

// Trusted reports whether a is a trusted proxy.
func (r *Resolver) Trusted(a netip.Addr) bool {
	if r == nil || !a.IsValid() {
		return false
	}
	a = a.Unmap().WithZone("")
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Peer returns the connection's peer address of req (its RemoteAddr), the
// invalid Addr when RemoteAddr is not an address (as in some tests).
func Peer(req *http.Request) netip.Addr {
	return parseAddr(req.RemoteAddr)
}

// PeerTrusted reports whether req came from a trusted proxy, whose
// X-Forwarded-For svc then believes.
func (r *Resolver) PeerTrusted(req *http.Request) bool {
	return r.Trusted(Peer(req))
}

// ClientIP returns the client address of req as text: see the package doc.
// It is RemoteAddr as given when that is not an address, so that a caller
// always has a key.
func (r *Resolver) ClientIP(req *http.Request) string {
	peer := Peer(req)
	if !peer.IsValid() {
		return req.RemoteAddr
	}
	return r.Client(peer, req.Header.Values(Header)).String()
}

// Client returns the client address of a request from peer carrying the
// X-Forwarded-For header lines xff (in order): peer itself unless it is a
// trusted proxy; else, walking xff from the right, the first address that
// is not a trusted proxy. An entry that is not an address ends the walk at
// the last trusted hop, which is then the client as far as svc can tell;
// so does running out of entries. Entries may carry a port
// ("10.0.0.1:4711", "[fd00::1]:80"), which is dropped.
func (r *Resolver) Client(peer netip.Addr, xff []string) netip.Addr {
	cur := peer.Unmap().WithZone("")
	for i := len(xff) - 1; i >= 0 && r.Trusted(cur); i-- {
		line := xff[i]
		for r.Trusted(cur) {
			if line == "" {
				break
			}
			item := line
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				item, line = line[j+1:], line[:j]
			} else {
				line = ""
			}
			item = strings.TrimSpace(item)
			if item == "" {
				continue // "a, , b" and a trailing comma: nothing said
			}
			next := parseAddr(item)
			if !next.IsValid() {
				return cur
			}
			cur = next
		}
	}
	return cur
}

// parseAddr reads an address with or without a port, without its zone and
// with an IPv4-mapped IPv6 address turned into IPv4; the invalid Addr when
// s is neither.
func parseAddr(s string) netip.Addr {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone("")
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	// net.SplitHostPort also accepts what ParseAddrPort refuses, such as a
	// zone in brackets with a port.
	if host, _, err := net.SplitHostPort(s); err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			return a.Unmap().WithZone("")
		}
	}
	return netip.Addr{}
}

// Key is the client address ip (as ClientIP gives it) as a throttling key:
// an IPv4 address as it is, an IPv6 address by its /64, since one host or
// site usually holds a whole /64 and could otherwise take a fresh address
// for every guess. Text that is not an address is its own key.
func Key(ip string) string {
	a := parseAddr(ip)
	switch {
	case !a.IsValid():
		return ip
	case a.Is6():
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
