package source

import (
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

func TestParseRepository(t *testing.T) {
	ok := []struct {
		repo             string
		allowFile        bool
		scheme, host, pt string
	}{
		{"https://github.com/acme/app.git", false, "https", "github.com", "/acme/app.git"},
		{"HTTPS://GitHub.com/acme/app", false, "https", "GitHub.com", "/acme/app"},
		{"http://git.internal:8080/team/app", false, "http", "git.internal", "/team/app"},
		{"https://user:pw@github.com/acme/app", false, "https", "github.com", "/acme/app"},
		{"ssh://git@github.com/acme/app.git", false, "ssh", "github.com", "/acme/app.git"},
		{"ssh://git@[::1]:2222/acme/app", false, "ssh", "::1", "/acme/app"},
		{"git@github.com:acme/app.git", false, "ssh", "github.com", "acme/app.git"},
		{"github.com:acme/app", false, "ssh", "github.com", "acme/app"},
		{"https://bücher.example/app", false, "https", "bücher.example", "/app"},
		{"/srv/git/app.git", true, "file", "", "/srv/git/app.git"},
		{"file:///srv/git/app.git", true, "file", "", "/srv/git/app.git"},
	}
	for _, c := range ok {
		r, err := parseRepository(c.repo, c.allowFile)
		if err != nil || r.scheme != c.scheme || r.host != c.host || r.path != c.pt {
			t.Errorf("parseRepository(%q) = %+v, %v; want %s %s %s", c.repo, r, err, c.scheme, c.host, c.pt)
		}
	}
	bad := []struct{ repo, want string }{
		{"", "is required"},
		{"ext::sh -c touch% /tmp/pwned", "whitespace"},
		{"ext::sh", "transport helper"},
		{"fd::17", "transport helper"},
		{"-uploadpack=touch /tmp/x", "whitespace"},
		{"--upload-pack=evil", "must not start with -"},
		{"https://github.com/acme/app\n", "control characters"},
		{"https://github.com/acme/ app", "whitespace"},
		{"https://github.com/acme/\tapp", "whitespace"},
		{"git://github.com/acme/app", "git://"},
		{"ftp://example.com/app", `scheme "ftp"`},
		{"file:///srv/git/app", "file://"},
		{"/srv/git/app", "is a local path"},
		{"./app", "is a local path"},
		{"~/app", "is a local path"},
		{"ssh://-oProxyCommand=x/app", "no valid host"},
		{"ssh://-oProxyCommand=touch%20x/app", "not a valid URL"},
		{"-oProxyCommand=x:app", "must not start with -"},
		{"git@-oProxyCommand=x:app", "no valid host"},
		{"https:///acme/app", "no valid host"},
		{"https://github.com", "needs a path"},
		{"https://github.com/", "needs a path"},
		{"https://github.com/acme/app?x=1", "query"},
		{"https://github.com/acme/app#frag", "fragment"},
		{"https://gith%75b.com/acme/app", "not a valid URL"},
		{"github.com:", "needs a path"},
		{"github.com:-app", "needs a path"},
		{"acme/app", "not a repository address"},
		{"https:acme/app", "not a repository address"},
		{"https://" + strings.Repeat("a", 3000) + ".com/x", "longer than 2048"},
	}
	for _, c := range bad {
		_, err := parseRepository(c.repo, false)
		e, ok := errcode.As(err)
		if !ok || e.Code != errcode.ValidInvalid || e.Details["field"] != fieldRepository || !strings.Contains(e.Message, c.want) {
			t.Errorf("parseRepository(%q) = %v, want VALID_INVALID on source.repository saying %q", c.repo, err, c.want)
		}
	}
	if _, err := parseRepository("./app", true); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("a relative local path with file allowed: %v", err)
	}
}

func TestCheckRefAndSubdir(t *testing.T) {
	for _, ref := range []string{"", "main", "feature/x", "v1.2.3", "release-2024", strings.Repeat("a", 40)} {
		if err := checkRef(ref); err != nil {
			t.Errorf("checkRef(%q) = %v", ref, err)
		}
	}
	for _, ref := range []string{"-b", "--upload-pack=x", "a..b", "a b", "a\x00b", "a~1", "a^", "a:b", "a?", "a*", "a[", `a\b`, "a@{1}", "/a", "a/", "a.lock", "a.", "@", "a//b", strings.Repeat("a", 256)} {
		if err := checkRef(ref); err == nil || errcode.CodeOf(err) != errcode.ValidInvalid {
			t.Errorf("checkRef(%q) = %v, want VALID_INVALID", ref, err)
		}
	}
	for in, want := range map[string]string{"": "", ".": "", "svc": "svc", "./svc/web/": "svc/web", "a//b": "a/b"} {
		if got, err := cleanSubdir(in); err != nil || got != want {
			t.Errorf("cleanSubdir(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"..", "a/../..", "../x", "/etc", "-x", `a\b`, "a\nb"} {
		if _, err := cleanSubdir(in); err == nil {
			t.Errorf("cleanSubdir(%q) accepted", in)
		}
	}
	if isCommit(strings.Repeat("a", 39)) || !isCommit(strings.Repeat("F", 40)) || !isCommit(strings.Repeat("0", 64)) {
		t.Error("isCommit")
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pw@github.com/acme/app":   "https://***@github.com/acme/app",
		"https://ghp_token@github.com/acme/app": "https://***@github.com/acme/app",
		"HTTP://u:p@host:8080/x":                "HTTP://***@host:8080/x",
		"https://u:p@w@host/x":                  "https://***@host/x",
		"ssh://git:pw@github.com/acme/app":      "ssh://git:***@github.com/acme/app",
		"ssh://git@github.com/acme/app":         "ssh://git@github.com/acme/app",
		"git@github.com:acme/app":               "git@github.com:acme/app",
		"https://github.com/acme/app":           "https://github.com/acme/app",
		"https://github.com/acme/a@b":           "https://github.com/acme/a@b",
		"https://u:p@host?x@y":                  "https://***@host?x@y",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	if got := redactText("fatal: unable to access 'https://user:pw@host/x': refused; also ssh://a:b@c/d"); strings.Contains(got, "pw") || strings.Contains(got, ":b@") {
		t.Errorf("redactText left credentials: %s", got)
	}
	for in, want := range map[string]string{
		"https://user:pw@github.com/acme/app": "https://github.com/acme/app",
		"ssh://git:pw@github.com/acme/app":    "ssh://git@github.com/acme/app",
		"git@github.com:acme/app":             "git@github.com:acme/app",
	} {
		if got := withoutCredentials(in); got != want {
			t.Errorf("withoutCredentials(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckAllowed(t *testing.T) {
	list := []string{"github.com/acme/", "gitlab.com", "*.corp.example", "git.example.org:8443", "bitbucket.org/team/app", "codeberg.org/pre-*", "https://sr.ht/~me"}
	cases := []struct {
		repo  string
		allow bool
	}{
		{"https://github.com/acme/app.git", true},
		{"https://github.com/acme/app", true},
		{"git@github.com:acme/app.git", true},
		{"ssh://git@github.com/acme/sub/app", true},
		{"https://GITHUB.COM/acme/app", true},
		{"https://github.com./acme/app", true},
		{"https://github.com:443/acme/app", true},
		{"https://user@github.com/acme/app", true},
		{"https://user:pw@github.com/acme/app", true},
		{"https://github.com/acme", true},
		{"https://github.com/ACME/app", false}, // paths compare exactly
		{"https://github.com/acmeevil/app", false},
		{"https://github.com/acme/../evil/app", false},
		{"https://github.com/acme/%2e%2e/evil/app", false},
		{"https://github.com/evil/app", false},
		{"https://github.com.evil.com/acme/app", false},
		{"https://evil.com/github.com/acme/app", false},
		{"https://github.com@evil.com/acme/app", false},
		{"github.com@evil.com:acme/app", false},
		{"https://evilgithub.com/acme/app", false},
		{"https://gitlab.com/anyone/app", true},
		{"https://gitlab.com:8443/anyone/app", true},
		{"https://sub.gitlab.com/x/y", false},
		{"https://git.corp.example/x/y", true},
		{"https://a.b.corp.example/x/y", true},
		{"https://corp.example/x/y", false},
		{"https://evilcorp.example/x/y", false},
		{"https://git.example.org:8443/x/y", true},
		{"https://git.example.org/x/y", false},
		{"https://git.example.org:443/x/y", false},
		{"https://bitbucket.org/team/app.git", true},
		{"https://bitbucket.org/team/app2", false},
		{"https://bitbucket.org/team/app/nested", true},
		{"https://codeberg.org/pre-x/app", true},
		{"https://codeberg.org/pr/app", false},
		{"https://sr.ht/~me/app", true},
		{"https://gіthub.com/acme/app", false}, // Cyrillic і
		{"https://ｇｉｔｈｕｂ.com/acme/app", false},
		{"https://xn--gthub-n4a.com/acme/app", false},
		{"https://[::1]/acme/app", false},
	}
	for _, c := range cases {
		err := CheckAllowed(c.repo, list)
		if c.allow && err != nil {
			t.Errorf("%s: refused: %v", c.repo, err)
		}
		if !c.allow {
			e, ok := errcode.As(err)
			if !ok || e.Code != errcode.PolicySourceNotAllow || e.Status() != 403 || e.Details["host"] == nil {
				t.Errorf("%s: %v, want POLICY_SOURCE_NOT_ALLOWED with the host", c.repo, err)
			}
		}
	}
	// archive: allows uploads and matches no repository, not even one
	// on a host named archive.
	for _, repo := range []string{"https://archive/x/y", "ssh://archive/x/y", "/srv/git/app"} {
		if err := CheckAllowed(repo, []string{ArchiveEntry}); !errcode.Has(err, errcode.PolicySourceNotAllow) {
			t.Errorf("%s under [archive:]: %v, want POLICY_SOURCE_NOT_ALLOWED", repo, err)
		}
	}
	for _, c := range []struct {
		list  []string
		allow bool
	}{{nil, true}, {[]string{ArchiveEntry}, true}, {[]string{"github.com", ArchiveEntry}, true}, {[]string{"github.com"}, false}, {[]string{"archive"}, false}} {
		err := CheckArchiveAllowed(c.list)
		if c.allow != (err == nil) || (err != nil && !errcode.Has(err, errcode.PolicySourceNotAllow)) {
			t.Errorf("an archive under %q: %v, want allowed %v", c.list, err, c.allow)
		}
	}
	// IDNs match an entry written the same way.
	if err := CheckAllowed("https://bücher.example/app", []string{"bücher.example"}); err != nil {
		t.Errorf("an IDN host against itself: %v", err)
	}
	if err := CheckAllowed("https://bücher.example/app", []string{"xn--bcher-kva.example"}); err == nil {
		t.Error("a Unicode host matched its punycode entry; the doc says it does not")
	}
	// Empty allows everything, a local path only then.
	for _, l := range [][]string{nil, {}} {
		if err := CheckAllowed("https://anything.example/x", l); err != nil {
			t.Errorf("empty list %v: %v", l, err)
		}
	}
	if err := CheckAllowed("/srv/git/app", []string{"*"}); errcode.CodeOf(err) != errcode.PolicySourceNotAllow {
		t.Errorf("a local path under a non-empty list: %v", err)
	}
	if err := CheckAllowed("https://anything.example/x", []string{"*"}); err != nil {
		t.Errorf("* allows every host: %v", err)
	}
	// The refusal names the host, never the credentials.
	err := CheckAllowed("https://user:s3cret@evil.com/x", list)
	e, _ := errcode.As(err)
	if e == nil || e.Details["host"] != "evil.com" || strings.Contains(e.Error(), "s3cret") || strings.Contains(e.Details["repository"].(string), "s3cret") {
		t.Errorf("refusal = %+v", e)
	}
	// A bad address is VALID_INVALID, not a policy refusal.
	if err := CheckAllowed("ext::sh", list); errcode.CodeOf(err) != errcode.ValidInvalid {
		t.Errorf("ext:: = %v", err)
	}
}
