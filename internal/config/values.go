package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// maxQuoted is how many bytes of a bad value an error message repeats.
const maxQuoted = 100

// quote renders a value for an error message, shortened when long. Callers
// redact values that may hold credentials first.
func quote(v string) string {
	if len(v) <= maxQuoted {
		return strconv.Quote(v)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return strconv.Quote(v[:cut]) + "…"
}

// keyText renders a file key for a message, quoted unless it is plain.
func keyText(k string) string {
	if k != "" && strings.IndexFunc(k, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) < 0 {
		return k
	}
	return quote(k)
}

func isSpaceOrControl(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }

// credentialParam matches key=value pairs that carry credentials, in URL
// queries and in keyword connection strings.
var credentialParam = regexp.MustCompile(`(?i)\b(password|passwd|pwd|pass|secret|token|sslpassword|api_?key)=[^&\s]*`)

// redact hides credentials in a URL-like value: the password of the
// userinfo (everything between "://" or a leading "//" and the last "@" after
// the user name, so that a password holding "/", "?" or "#" is hidden too; a
// userinfo without a password is hidden entirely) and the values of
// credential parameters.
func redact(v string) string {
	prefix, rest, ok := strings.Cut(v, "://")
	if ok {
		prefix += "://"
	} else if rest, ok = strings.CutPrefix(v, "//"); ok {
		prefix = "//"
	}
	if ok && !strings.HasPrefix(rest, "/") {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			user, _, hasPassword := strings.Cut(rest[:at], ":")
			if !hasPassword || strings.ContainsAny(user, "/?#") {
				user = "xxxxx"
			} else {
				user += ":xxxxx"
			}
			v = prefix + user + rest[at:]
		}
	}
	return credentialParam.ReplaceAllString(v, "${1}=xxxxx")
}

var uriScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// storeDir returns the store directory named by a database.url value: "" for
// the bundled store, or the absolute directory of file:///path or /path.
func storeDir(v string) (string, error) {
	return storeDirFrom(v, OriginEnvironment)
}

// storeDirFrom is storeDir with a remedy worded for where the value came
// from.
func storeDirFrom(v string, origin Origin) (string, error) {
	if v == "" {
		return "", nil
	}
	if strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "//") {
		return filepath.Clean(v), nil
	}
	accepted := "(accepted: empty for the bundled store under <work_dir>/raft, file:///absolute/path or an absolute path)"
	if !uriScheme.MatchString(v) {
		return "", fmt.Errorf("%s is not a store directory %s", quote(redact(v)), accepted)
	}
	scheme, _, _ := strings.Cut(v, ":")
	if !strings.EqualFold(scheme, "file") {
		remedy := "unset SVC_DATABASE_URL"
		if origin == OriginConfigFile {
			remedy = "remove database.url from the config file"
		}
		return "", fmt.Errorf("%s cannot be used: svc keeps its state in its embedded replicated Raft store and cannot use an external database; %s, or point it at a store directory with file:///path",
			quote(redact(v)), remedy)
	}
	u, err := url.Parse(v)
	if err != nil || u.User != nil || (u.Host != "" && u.Host != "localhost") || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%s is not a file URL of a directory %s", quote(redact(v)), accepted)
	}
	return filepath.Clean(u.Path), nil
}

// isHostname reports whether v is a DNS name: dot-separated labels of
// letters, digits and inner hyphens (underscores tolerated), 1 to 63 bytes
// each and at most 253 in all, whose last label is not all digits.
func isHostname(v string) bool {
	if v == "" || len(v) > 253 {
		return false
	}
	labels := strings.Split(v, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return strings.Trim(labels[len(labels)-1], "0123456789") != ""
}

// isHost reports whether v is an IP address or a hostname.
func isHost(v string) bool {
	if _, err := netip.ParseAddr(v); err == nil {
		return true
	}
	return isHostname(v)
}

// checkListenAddr accepts host:port or :port with port 0-65535.
func checkListenAddr(v string) error {
	host, port, err := net.SplitHostPort(v)
	if err == nil && (host == "" || isHost(host)) {
		if _, perr := parsePort(port, 0); perr == nil {
			return nil
		}
	}
	return fmt.Errorf("%s is not a listen address (accepted: host:port or :port with port 0-65535, e.g. \":8080\")", quote(v))
}

// checkRaftAddr accepts host:port with a host other nodes can reach (not
// empty, not 0.0.0.0 or ::) and port 1-65535.
func checkRaftAddr(v string) error {
	host, port, err := net.SplitHostPort(v)
	if err == nil && isHost(host) {
		if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
			return fmt.Errorf("%s is not a concrete address: other nodes must be able to reach it (e.g. 10.0.0.5:7000)", quote(v))
		}
		if _, perr := parsePort(port, 1); perr == nil {
			return nil
		}
	}
	return fmt.Errorf("%s is not a raft address (accepted: host:port with a host other nodes can reach and port 1-65535, e.g. 10.0.0.5:7000)", quote(v))
}

// canonicalAddr normalises a checked host:port for comparison.
func canonicalAddr(v string) string {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return v
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.String()
	}
	if n, err := strconv.Atoi(port); err == nil {
		port = strconv.Itoa(n)
	}
	return net.JoinHostPort(strings.ToLower(host), port)
}

// checkHTTPURL accepts an absolute http or https URL with a host.
func checkHTTPURL(v, example string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("%s is not an absolute http or https URL (e.g. %s)", quote(redact(v)), example)
	}
	return nil
}

// checkNodeID accepts 1 to 64 of A-Z a-z 0-9 . _ -.
func checkNodeID(v string) error {
	if v == "" || len(v) > 64 || strings.IndexFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}) >= 0 {
		return fmt.Errorf("%s is not a node id (accepted: 1 to 64 of A-Z a-z 0-9 . _ -)", quote(v))
	}
	return nil
}

// maxBackoffSteps is the longest accepted retry schedule.
const maxBackoffSteps = 20

// parseBackoff reads a retry schedule: comma-separated Go durations, each
// greater than zero, 1 to 20 steps.
func parseBackoff(v string) ([]time.Duration, error) {
	if strings.TrimSpace(v) == "" {
		return nil, errors.New("an empty schedule is not accepted (accepted: comma-separated Go durations such as 5s,15s,1m)")
	}
	steps := strings.Split(v, ",")
	if len(steps) > maxBackoffSteps {
		return nil, fmt.Errorf("the schedule has %d steps; at most %d are accepted", len(steps), maxBackoffSteps)
	}
	out := make([]time.Duration, 0, len(steps))
	for i, s := range steps {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, fmt.Errorf("step %d is empty (accepted: comma-separated Go durations such as 5s,15s,1m)", i+1)
		}
		d, err := parseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i+1, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func formatBackoff(b []time.Duration) string {
	parts := make([]string, len(b))
	for i, d := range b {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

// parsePeers reads id=host:port,id2=host:port. Ids and addresses must be
// unique. An empty or blank value is no peers.
func parsePeers(v string) ([]Peer, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []Peer
	ids := map[string]bool{}
	addrs := map[string]string{}
	for i, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		id, addr, ok := strings.Cut(item, "=")
		id, addr = strings.TrimSpace(id), strings.TrimSpace(addr)
		if !ok {
			return nil, fmt.Errorf("peer %d: %s is not id=host:port (e.g. node1=10.0.0.5:7000)", i+1, quote(item))
		}
		if err := checkNodeID(id); err != nil {
			return nil, fmt.Errorf("peer %d: %w", i+1, err)
		}
		if err := checkRaftAddr(addr); err != nil {
			return nil, fmt.Errorf("peer %d (%s): %w", i+1, id, err)
		}
		if ids[id] {
			return nil, fmt.Errorf("peer id %s is listed twice", quote(id))
		}
		ids[id] = true
		key := canonicalAddr(addr)
		if other, dup := addrs[key]; dup {
			return nil, fmt.Errorf("address %s is listed for both %s and %s", quote(addr), other, id)
		}
		addrs[key] = id
		out = append(out, Peer{ID: id, Addr: addr})
	}
	return out, nil
}

func formatPeers(peers []Peer) string {
	parts := make([]string, len(peers))
	for i, p := range peers {
		parts[i] = p.ID + "=" + p.Addr
	}
	return strings.Join(parts, ",")
}

// deriveIssuer is the default issuer: the external URL without trailing
// slashes when set; otherwise http:// and the listen address, with localhost
// for an empty, unspecified or loopback host.
func deriveIssuer(externalURL, addr string) string {
	if externalURL != "" {
		return strings.TrimRight(externalURL, "/")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	h := "localhost"
	if ip, err := netip.ParseAddr(host); err == nil {
		if !ip.IsUnspecified() && !ip.IsLoopback() && ip.Zone() == "" {
			h = ip.String()
		}
	} else if host != "" {
		h = host
	}
	return "http://" + net.JoinHostPort(h, port)
}
