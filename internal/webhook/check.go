package webhook

import (
	"fmt"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/svchost/svc/internal/errcode"
)

// Limits of what a subscription saves.
const (
	MaxURLBytes         = 2048
	MaxHeaders          = 20
	MaxHeaderValueBytes = 4096
	maxContentTypeBytes = 256
	maxHostBytes        = 253
)

// CheckURL checks a webhook URL when a subscription is saved: http or https,
// a host, no user name or password, at most 2048 bytes; a literal private,
// loopback, link-local, unspecified, multicast or reserved address (in any
// spelling) or a localhost name is refused unless allowPrivate; an IPv4
// address written other than as four decimal numbers (2130706433,
// 0x7f000001, 0177.0.0.1, 127.1) is always refused. Names are checked again
// when sending, on the address actually connected to.
func CheckURL(raw string, allowPrivate bool) error {
	if _, err := target(raw, allowPrivate, true); err != nil {
		return err
	}
	return nil
}

// target parses and checks a webhook URL. With literal, a canonical IP
// address is classified here too; without (Send), it is left to the
// dialer, which checks every address it connects to.
func target(raw string, allowPrivate, literal bool) (*url.URL, error) {
	bad := func(format string, args ...any) (*url.URL, error) {
		return nil, errcode.Invalid("url", format, args...)
	}
	if raw == "" {
		return bad("the webhook URL is empty")
	}
	if len(raw) > MaxURLBytes {
		return bad("the webhook URL is longer than %d bytes", MaxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("the webhook URL is not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("a webhook URL starts with https:// or http://")
	}
	if u.User != nil {
		return bad("a webhook URL may not carry a user name or password; send credentials in a header instead")
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return bad("the webhook URL has no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad("the webhook URL's port is not a port number (1 to 65535)")
		}
	}
	host := u.Hostname()
	if refusal := hostRule(host, allowPrivate, literal); refusal != "" {
		return nil, errcode.Invalid("url", "%s", refusal).
			WithRemedy("use an address on the public internet, or ask an administrator to turn on host policy allow_private_webhooks")
	}
	if strings.Contains(host, ":") {
		return u, nil
	}
	for _, c := range []byte(host) {
		if c >= 0x80 {
			return bad("the webhook URL's host is not ASCII; write an internationalised name in its xn-- form")
		}
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if len(name) > maxHostBytes {
		return bad("the webhook URL's host name is longer than %d bytes", maxHostBytes)
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return bad("the webhook URL's host is not a valid host name")
		}
	}
	return u, nil
}

// hostRule applies the address rule to a URL's host (no brackets): a
// sentence saying why it is refused, or "". With literal, canonical IP
// addresses are checked too; names and other spellings always are.
func hostRule(host string, allowPrivate, literal bool) string {
	policy := "; host policy allow_private_webhooks is off"
	if strings.Contains(host, ":") { // an IPv6 address
		a, err := netip.ParseAddr(host)
		switch {
		case err != nil:
			return "the webhook URL's host is not a valid IPv6 address"
		case a.Zone() != "":
			return "a webhook URL's IPv6 address may not name a zone"
		}
		if kind := classify(a); literal && kind != "" && !allowPrivate {
			return fmt.Sprintf("refused: %s is %s%s", a, kind, policy)
		}
		return ""
	}
	lower := strings.ToLower(host)
	if looksNumeric(lower) {
		if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
			if kind := classify(a); literal && kind != "" && !allowPrivate {
				return fmt.Sprintf("refused: %s is %s%s", a, kind, policy)
			}
			return ""
		}
		a, ok := parseLegacyIPv4(lower)
		if !ok {
			return fmt.Sprintf("refused: %s looks like an IP address but is not one", host)
		}
		if kind := classify(a); kind != "" {
			return fmt.Sprintf("refused: %s is %s written in another form (%s); write IPv4 addresses as four decimal numbers", host, a, kind)
		}
		return fmt.Sprintf("refused: %s is %s written in another form; write IPv4 addresses as four decimal numbers", host, a)
	}
	name := strings.TrimSuffix(lower, ".")
	if !allowPrivate && (localName(name)) {
		return fmt.Sprintf("refused: %s names this host (a loopback address)%s", host, policy)
	}
	return ""
}

// localName reports whether a host name always means the host itself.
func localName(name string) bool {
	switch name {
	case "localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback":
		return true
	}
	return strings.HasSuffix(name, ".localhost")
}

// forbiddenHeader says why an extra header may not be set: svc sets it, or
// it belongs to the connection rather than the request. "" means it may.
func forbiddenHeader(name string) string {
	c := http.CanonicalHeaderKey(name)
	switch {
	case strings.HasPrefix(c, "Svc-"):
		return "svc sets the Svc-* headers itself"
	case c == "Content-Type":
		return "set the content type with content_type"
	case c == "Host", c == "Content-Length", c == "Transfer-Encoding", c == "Connection", c == "Upgrade",
		c == "Te", c == "Trailer", c == "Keep-Alive", c == "Expect", strings.HasPrefix(c, "Proxy-"):
		return "it belongs to the connection, which svc manages"
	}
	return ""
}

// CheckHeaders checks a subscription's extra headers when saved: at most 20,
// names that are HTTP tokens, each name once (in any case), values of at
// most 4096 bytes without control characters (tab aside), none that svc
// sets or that belong to the connection. Errors name the header, never its
// value.
func CheckHeaders(h map[string]string) error {
	bad := func(format string, args ...any) error {
		return errcode.Invalid("headers", format, args...)
	}
	if len(h) > MaxHeaders {
		return bad("a subscription has at most %d extra headers", MaxHeaders)
	}
	seen := map[string]bool{}
	for name, value := range h {
		if !token(name) {
			return bad("%q is not a header name", name)
		}
		if why := forbiddenHeader(name); why != "" {
			return bad("the header %s cannot be set: %s", http.CanonicalHeaderKey(name), why)
		}
		c := http.CanonicalHeaderKey(name)
		if seen[c] {
			return bad("the header %s is given twice", c)
		}
		seen[c] = true
		if len(value) > MaxHeaderValueBytes {
			return bad("the value of header %s is longer than %d bytes", c, MaxHeaderValueBytes)
		}
		for _, b := range []byte(value) {
			if (b < 0x20 && b != '\t') || b == 0x7f {
				return bad("the value of header %s has a control character (line break, NUL, …)", c)
			}
		}
	}
	return nil
}

// token reports whether s is an HTTP token (RFC 7230 section 3.2.6).
func token(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, c := range []byte(s) {
		if c >= 0x80 || !tchar[c] {
			return false
		}
	}
	return true
}

var tchar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// CheckMethod checks a subscription's method: POST, PUT or PATCH; empty
// means POST.
func CheckMethod(m string) error {
	switch m {
	case "", http.MethodPost, http.MethodPut, http.MethodPatch:
		return nil
	}
	return errcode.Invalid("method", "the method must be POST, PUT or PATCH")
}

// CheckContentType checks a subscription's content type: a media type
// (type/subtype, parameters allowed) of at most 256 bytes; empty means
// application/json.
func CheckContentType(ct string) error {
	if ct == "" {
		return nil
	}
	if len(ct) > maxContentTypeBytes {
		return errcode.Invalid("content_type", "the content type is longer than %d bytes", maxContentTypeBytes)
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !strings.Contains(mt, "/") {
		return errcode.Invalid("content_type", "%q is not a media type (like application/json)", ct)
	}
	return nil
}

// isJSON reports whether a content type (empty: application/json) says
// the body is JSON: application/json or a +json type.
func isJSON(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
