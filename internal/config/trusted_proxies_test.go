package config

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTrustedProxies covers server.trusted_proxies from the environment and
// the file (a YAML sequence), its listing in Settings, its refusals and the
// warning for a range that trusts everyone.
func TestTrustedProxies(t *testing.T) {
	c := mustLoad(t, LoadArgs{Env: []string{"SVC_SERVER_TRUSTED_PROXIES=10.0.0.7, 10.1.0.0/16,fd00::/8"}})
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.7/32"), netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00::/8")}
	if diff := cmp.Diff(want, c.Server.TrustedProxies, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("TrustedProxies mismatch (-want +got):\n%s", diff)
	}
	s := settingsByName(c)["server.trusted_proxies"]
	if s.Value != "10.0.0.7,10.1.0.0/16,fd00::/8" || s.Origin != OriginEnvironment {
		t.Errorf("setting listed as %+v", s)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %q", c.Warnings)
	}

	file := writeFile(t, "server:\n  trusted_proxies:\n    - 192.168.1.1\n    - 10.0.0.0/8\n")
	c = mustLoad(t, LoadArgs{File: file})
	if s := settingsByName(c)["server.trusted_proxies"]; s.Value != "192.168.1.1,10.0.0.0/8" || s.Origin != OriginConfigFile {
		t.Errorf("from the file: %+v", s)
	}

	for in, wantErr := range map[string]string{
		"10.0.0.7,":     `SVC_SERVER_TRUSTED_PROXIES: item 2: empty (remove the extra comma)`,
		"proxy.local":   `SVC_SERVER_TRUSTED_PROXIES: item 1: "proxy.local" is not an IP address or CIDR range (e.g. 10.0.0.7 or 10.1.0.0/16)`,
		"10.1.2.3/16":   `SVC_SERVER_TRUSTED_PROXIES: item 1: "10.1.2.3/16" has bits set beyond its prefix length; did you mean 10.1.0.0/16?`,
		"10.0.0.1:8080": `SVC_SERVER_TRUSTED_PROXIES: item 1: "10.0.0.1:8080" is not an IP address or CIDR range (e.g. 10.0.0.7 or 10.1.0.0/16)`,
	} {
		_, err := Load(LoadArgs{Env: []string{"SVC_SERVER_TRUSTED_PROXIES=" + in}})
		if err == nil || err.Error() != wantErr {
			t.Errorf("%q: error %v, want %s", in, err, wantErr)
		}
	}

	c = mustLoad(t, LoadArgs{Env: []string{"SVC_SERVER_TRUSTED_PROXIES=10.0.0.7,::/0"}})
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "trusts every address (::/0)") {
		t.Errorf("warnings for ::/0: %q", c.Warnings)
	}
}
