package source

import (
	"strings"
	"testing"
)

// FuzzNamedByAllowlist: any entry and host are read without panicking; a
// bare "*" names nothing, and an entry that is the host names it.
func FuzzNamedByAllowlist(f *testing.F) {
	f.Add("git.corp", "git.corp")
	f.Add("*.corp", "a.corp")
	f.Add("[fd00::5]:22", "fd00::5")
	f.Add("https://git.corp:8443/team/", "git.corp")
	f.Fuzz(func(t *testing.T, entry, host string) {
		named := namedByAllowlist(host, []string{entry})
		if entry == "*" && named {
			t.Fatalf("a bare * names %q", host)
		}
		if h := strings.ToLower(host); h != "" && h != "*" && !strings.ContainsAny(h, ":/[]") && !strings.HasSuffix(h, ".") && !strings.HasPrefix(h, "*.") &&
			h == asciiLower(host) && !namedByAllowlist(host, []string{host}) {
			t.Fatalf("the entry %q does not name its own host", host)
		}
	})
}
