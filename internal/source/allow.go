package source

import (
	"path"
	"slices"
	"strings"

	"github.com/svchost/svc/internal/errcode"
)

// CheckAllowed applies host policy's source_allowlist to a repository
// address. An empty list allows every source (it is the policy of a fresh
// installation). Otherwise the repository's host must match an entry:
//
//	github.com            the host, on any port
//	git.example.com:8443  the host on that port (443 for https, 80 for http, 22 for ssh when the address names none)
//	*.example.com         any host below example.com (not example.com itself)
//	github.com/acme/      repositories under acme/ on github.com; also written
//	github.com/acme or github.com/acme/*
//	github.com/acme-*     paths starting with acme- (a trailing * is a plain prefix)
//
// Hosts compare case-insensitively (ASCII only: an internationalized name
// matches only an entry written the same way, so write punycode for
// both); paths compare exactly, segment by segment, after cleaning (a
// trailing .git is ignored). A scheme:// before an entry is ignored. A
// local path has no host and is never allowed by a non-empty list.
//
// The entry archive: (ArchiveEntry) allows uploaded archives and matches
// no repository.
//
// A refusal is POLICY_SOURCE_NOT_ALLOWED with the host in details.
func CheckAllowed(repo string, allowlist []string) error {
	if len(allowlist) == 0 {
		return nil
	}
	rem, err := parseRepository(repo, true)
	if err != nil {
		return err
	}
	host := strings.TrimSuffix(asciiLower(rem.host), ".")
	port := rem.port
	if port == "" {
		port = map[string]string{"https": "443", "http": "80", "ssh": "22"}[rem.scheme]
	}
	repoPath := cleanRepoPath(rem.path)
	for _, e := range allowlist {
		if e != ArchiveEntry && host != "" && matchEntry(e, host, port, repoPath) {
			return nil
		}
	}
	shown := host
	if shown == "" {
		shown = "a local path"
	}
	return errcode.New(errcode.PolicySourceNotAllow, "host policy's source_allowlist does not allow sources from %s", shown).
		WithDetail("host", host).WithDetail("repository", Redact(repo))
}

// ArchiveEntry is the source_allowlist entry that allows uploaded
// archives. An archive has no address to match, so a non-empty allowlist
// refuses uploads unless it names this entry: nothing bypasses a list
// the operator set. It cannot be confused with a host (a host's port is
// never empty).
const ArchiveEntry = "archive:"

// CheckArchiveAllowed applies host policy's source_allowlist to an
// uploaded archive: an empty list, or one naming ArchiveEntry, allows
// it; any other list refuses it with POLICY_SOURCE_NOT_ALLOWED.
func CheckArchiveAllowed(allowlist []string) error {
	if len(allowlist) == 0 || slices.Contains(allowlist, ArchiveEntry) {
		return nil
	}
	return errcode.New(errcode.PolicySourceNotAllow, "host policy's source_allowlist does not allow uploaded archives").
		WithDetail("source", KindArchive).
		WithRemedy("take the source from a repository the allowlist names, or ask an administrator to add %q to source_allowlist", ArchiveEntry)
}

func matchEntry(entry, host, port, repoPath string) bool {
	if i := strings.Index(entry, "://"); i >= 0 {
		entry = entry[i+3:]
	}
	hostPart, pathPart, hasPath := strings.Cut(entry, "/")
	hostPart = strings.TrimSuffix(asciiLower(hostPart), ".")
	if h, p, ok := strings.Cut(hostPart, ":"); ok {
		if p != port {
			return false
		}
		hostPart = h
	}
	switch {
	case hostPart == "*":
	case strings.HasPrefix(hostPart, "*."):
		if !strings.HasSuffix(host, hostPart[1:]) || len(host) <= len(hostPart)-1 {
			return false
		}
	case host != hostPart:
		return false
	}
	if !hasPath {
		return true
	}
	if prefix, glob := strings.CutSuffix(pathPart, "*"); glob && !strings.HasSuffix(prefix, "/") && prefix != "" {
		return strings.HasPrefix(repoPath, prefix) // github.com/acme-*: a plain prefix
	}
	want := cleanRepoPath(strings.TrimSuffix(pathPart, "*"))
	return want == "" || repoPath == want || strings.HasPrefix(repoPath, want+"/")
}

// cleanRepoPath is a repository path without leading or trailing slashes,
// dot segments or a trailing .git.
func cleanRepoPath(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	return strings.TrimSuffix(p, ".git")
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
