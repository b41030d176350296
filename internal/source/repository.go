package source

import (
	"net/url"
	"path"
	"regexp"
	"strings"
	"unicode"

	"github.com/svchost/svc/internal/errcode"
)

// Fields named in errors about a repository source.
const (
	fieldRepository = "source.repository"
	fieldRef        = "source.ref"
	fieldSubdir     = "source.subdir"
)

const maxRepositoryBytes = 2048

// remote is a repository address taken apart.
type remote struct {
	scheme string // https, http, ssh (also the scp form) or file (also a local path)
	user   string
	host   string // as written; "" for file
	port   string
	path   string
	scp    bool // user@host:path
}

var transportRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*::`)

// parseRepository validates a repository address: https://, http://,
// ssh://, the scp form [user@]host:path, and (only when allowFile)
// file:// and absolute local paths. Everything git would read as an
// option, a transport helper (ext::) or something else is refused.
func parseRepository(repo string, allowFile bool) (remote, error) {
	invalid := func(format string, args ...any) (remote, error) {
		return remote{}, errcode.Invalid(fieldRepository, "source.repository "+format, args...)
	}
	switch {
	case repo == "":
		return invalid("is required")
	case len(repo) > maxRepositoryBytes:
		return invalid("is longer than %d bytes", maxRepositoryBytes)
	case strings.ContainsFunc(repo, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar }):
		return invalid("must not contain whitespace or control characters")
	case strings.HasPrefix(repo, "-"):
		return invalid("must not start with -")
	case transportRE.MatchString(repo):
		return invalid("uses a transport helper (such as ext::), which is not accepted")
	}
	if strings.Contains(repo, "://") {
		return parseURL(repo, allowFile)
	}
	if strings.HasPrefix(repo, "/") || strings.HasPrefix(repo, ".") || strings.HasPrefix(repo, "~") {
		if !allowFile {
			return invalid("is a local path; use an https://, http://, ssh:// or user@host:path address")
		}
		if !strings.HasPrefix(repo, "/") {
			return invalid("must be an absolute path")
		}
		return remote{scheme: "file", path: repo}, nil
	}
	colon, slash := strings.IndexByte(repo, ':'), strings.IndexByte(repo, '/')
	if colon < 0 || (slash >= 0 && slash < colon) {
		return invalid("is not a repository address: use https://host/path, ssh://host/path or user@host:path")
	}
	r := remote{scheme: "ssh", scp: true, path: repo[colon+1:]}
	r.host = repo[:colon]
	if at := strings.LastIndexByte(r.host, '@'); at >= 0 {
		r.user, r.host = r.host[:at], r.host[at+1:]
	}
	switch strings.ToLower(r.host) {
	case "http", "https", "ssh", "git", "file":
		return invalid("is not a repository address: write %s://host/path", strings.ToLower(r.host))
	}
	if err := checkHost(r.host, false); err != nil {
		return remote{}, err
	}
	if r.user != "" && (strings.HasPrefix(r.user, "-") || strings.ContainsAny(r.user, "@/:")) {
		return invalid("has an unacceptable user name")
	}
	if r.path == "" || strings.HasPrefix(r.path, "-") {
		return invalid("needs a path after the colon, not starting with -")
	}
	return r, nil
}

func parseURL(repo string, allowFile bool) (remote, error) {
	invalid := func(format string, args ...any) (remote, error) {
		return remote{}, errcode.Invalid(fieldRepository, "source.repository "+format, args...)
	}
	u, err := url.Parse(repo)
	if err != nil || u.Opaque != "" {
		return invalid("is not a valid URL")
	}
	r := remote{scheme: strings.ToLower(u.Scheme), host: u.Hostname(), port: u.Port(), path: u.Path}
	if u.User != nil {
		r.user = u.User.Username()
	}
	switch r.scheme {
	case "https", "http", "ssh":
	case "file":
		if !allowFile {
			return invalid("uses file://, which is not accepted")
		}
		if r.host != "" && r.host != "localhost" || !strings.HasPrefix(r.path, "/") || u.User != nil {
			return invalid("must be file:///absolute/path")
		}
		r.host = ""
		return r, nil
	case "git":
		return invalid("uses git://, which is neither encrypted nor authenticated; use https:// or ssh://")
	default:
		return invalid("uses the scheme %q; accepted: https://, http://, ssh:// and user@host:path", u.Scheme)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return invalid("must not have a query or a fragment")
	}
	if err := checkHost(r.host, true); err != nil {
		return remote{}, err
	}
	if strings.HasPrefix(r.user, "-") {
		return invalid("has an unacceptable user name")
	}
	if strings.Trim(r.path, "/") == "" {
		return invalid("needs a path to the repository")
	}
	return r, nil
}

// checkHost accepts letters (IDNs included), digits, dots, hyphens and
// underscores, and in a URL an IPv6 address; never a leading hyphen.
func checkHost(host string, inURL bool) error {
	bad := host == "" || strings.HasPrefix(host, "-") || strings.HasPrefix(host, ".") ||
		strings.ContainsFunc(host, func(r rune) bool {
			return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '-' || r == '_' || inURL && r == ':')
		})
	if bad {
		return errcode.Invalid(fieldRepository, "source.repository has no valid host")
	}
	return nil
}

var refBadRE = regexp.MustCompile(`[~^:?*\[\\]|\.\.|@\{|//|^/|/$|\.lock$|\.$|^@$`)

// checkRef validates a branch, tag or full commit SHA; "" is the default
// branch.
func checkRef(ref string) error {
	switch {
	case ref == "":
		return nil
	case len(ref) > 255:
		return errcode.Invalid(fieldRef, "source.ref is longer than 255 bytes")
	case strings.HasPrefix(ref, "-"):
		return errcode.Invalid(fieldRef, "source.ref must not start with -")
	case strings.ContainsFunc(ref, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return errcode.Invalid(fieldRef, "source.ref must not contain whitespace or control characters")
	case refBadRE.MatchString(ref):
		return errcode.Invalid(fieldRef, "source.ref %q is not a valid branch, tag or commit", shorten(ref))
	}
	return nil
}

var shaRE = regexp.MustCompile(`^([0-9a-fA-F]{40}|[0-9a-fA-F]{64})$`)

// isCommit reports whether ref is a full commit SHA (SHA-1 or SHA-256).
func isCommit(ref string) bool { return shaRE.MatchString(ref) }

// cleanSubdir validates the directory of the app inside the repository and
// returns it cleaned, "" for the root.
func cleanSubdir(subdir string) (string, error) {
	if subdir == "" || subdir == "." {
		return "", nil
	}
	switch {
	case len(subdir) > DefaultMaxPathBytes:
		return "", errcode.Invalid(fieldSubdir, "source.subdir is longer than %d bytes", DefaultMaxPathBytes)
	case strings.HasPrefix(subdir, "-"):
		return "", errcode.Invalid(fieldSubdir, "source.subdir must not start with -")
	case strings.HasPrefix(subdir, "/"):
		return "", errcode.Invalid(fieldSubdir, "source.subdir must be relative to the repository")
	case strings.ContainsFunc(subdir, func(r rune) bool { return unicode.IsControl(r) || r == '\\' }):
		return "", errcode.Invalid(fieldSubdir, "source.subdir must not contain control characters or backslashes")
	}
	for _, part := range strings.Split(subdir, "/") {
		if part == ".." {
			return "", errcode.Invalid(fieldSubdir, "source.subdir must not contain ..")
		}
	}
	c := path.Clean(subdir)
	if c == "." {
		return "", nil
	}
	return c, nil
}

// Redact returns a repository address without the credentials it may
// carry: the user information of an http(s) URL (user:password, or a token
// as the user) and the password of any other URL become ***. Use it
// wherever an address is shown or logged.
func Redact(repo string) string {
	i := strings.Index(repo, "://")
	if i < 0 {
		return repo // the scp form carries no password
	}
	rest := repo[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	auth := rest[:end]
	at := strings.LastIndexByte(auth, '@')
	if at < 0 {
		return repo
	}
	user := auth[:at]
	switch scheme := strings.ToLower(repo[:i]); {
	case scheme == "http" || scheme == "https":
		user = "***"
	case strings.Contains(user, ":"):
		user = user[:strings.IndexByte(user, ':')] + ":***"
	}
	return repo[:i+3] + user + "@" + auth[at+1:] + rest[end:]
}

// withoutCredentials is the address to record: no user information at all
// in an http(s) URL, no password in an ssh:// URL.
func withoutCredentials(repo string) string {
	u, err := url.Parse(repo)
	if err != nil || u.User == nil || !strings.Contains(repo, "://") {
		return repo
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		u.User = nil
	default:
		u.User = url.User(u.User.Username())
	}
	return u.String()
}

var credentialsRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]+@`)

// redactText replaces whatever looks like scheme://userinfo@ in free text
// (git's messages) with scheme://***@.
func redactText(s string) string { return credentialsRE.ReplaceAllString(s, "${1}***@") }
