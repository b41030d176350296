package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/svchost/svc/internal/policy"
)

// fuzzEnvNames lists the variables FuzzLoadEnv feeds: every setting, every
// policy setting, SVC_PORT, an unknown variable and an unknown policy one.
func fuzzEnvNames() []string {
	var out []string
	for _, d := range defs {
		out = append(out, d.env())
	}
	for _, n := range policy.Names() {
		out = append(out, "SVC_POLICY_"+strings.ToUpper(n))
	}
	return append(out, "SVC_PORT", "SVC_UNKNOWN", "SVC_POLICY_BOGUS")
}

// fuzzBaseEnv returns a valid clustered configuration holding the canary in
// both secrets.
func fuzzBaseEnv() map[string]string {
	return map[string]string{
		"SVC_ADMIN_PASSWORD":    canary,
		"SVC_CLUSTER_SECRET":    canary,
		"SVC_CLUSTER_NODE_ID":   "n1",
		"SVC_CLUSTER_RAFT_ADDR": "10.0.0.1:7000",
		"SVC_CLUSTER_PEERS":     "n1=10.0.0.1:7000,n2=10.0.0.2:7000",
	}
}

// FuzzLoadEnv feeds one value to one variable of a valid configuration. Load
// must not panic, must never show the canary secret, and what it accepts must
// load again, from its own listing, to the same listing.
func FuzzLoadEnv(f *testing.F) {
	names := fuzzEnvNames()
	for i, n := range names {
		f.Add(uint8(i), "")
		switch {
		case strings.HasPrefix(n, "SVC_POLICY_"):
			f.Add(uint8(i), "none")
		case n == "SVC_DATABASE_URL":
			f.Add(uint8(i), "postgres://u:p@h/db")
			f.Add(uint8(i), "file:///data")
		}
	}
	f.Add(uint8(0), "x")
	f.Add(uint8(1), "[::1]:80")
	f.Fuzz(func(t *testing.T, i uint8, value string) {
		name := names[int(i)%len(names)]
		env := fuzzBaseEnv()
		env[name] = value
		c, err := Load(LoadArgs{Env: envList(env)})
		if err != nil {
			msg := err.Error()
			if strings.Contains(msg, canary) {
				t.Fatalf("%s=%q: error leaks the secret:\n%s", name, value, msg)
			}
			for _, line := range strings.Split(msg, "\n") {
				if line == "" {
					t.Fatalf("%s=%q: error has an empty line:\n%q", name, value, msg)
				}
			}
			return
		}
		assertNoCanary(t, c)
		if len(c.Settings) != len(defs) {
			t.Fatalf("%s=%q: %d settings listed, want %d", name, value, len(c.Settings), len(defs))
		}
		// Load again from the listing: the same listing must come back.
		again := fuzzBaseEnv()
		for _, s := range c.Settings {
			if s.Origin != OriginEnvironment || s.Secret {
				continue
			}
			if strings.Contains(s.Value, "xxxxx") {
				return // redacted: the listing cannot reproduce it
			}
			again[s.Env] = s.Value
		}
		for k, v := range env {
			if strings.HasPrefix(k, "SVC_POLICY_") {
				again[k] = v
			}
		}
		c2, err := Load(LoadArgs{Env: envList(again)})
		if err != nil {
			t.Fatalf("%s=%q: loading the listing again failed:\n%v", name, value, err)
		}
		if diff := cmp.Diff(c.Settings, c2.Settings); diff != "" {
			t.Fatalf("%s=%q: listing changed on reload (-first +second):\n%s", name, value, diff)
		}
	})
}

// FuzzLoadFile loads arbitrary config file content: Load must not panic or
// show the canary secret of the environment.
func FuzzLoadFile(f *testing.F) {
	f.Add("server:\n  addr: :8080\napp: {port_start: 9000}\npolicy: {public_sharing: none}\n")
	f.Add("a: &x [*x]\n")
	f.Add("cluster:\n  peers: [n1=10.0.0.1:7000, n2=10.0.0.2:7000]\n")
	f.Add("policy:\n  egress_allowlist: &l [a.example.com]\n  source_allowlist: *l\n")
	f.Add("? [a]\n: b\n")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content string) {
		path := filepath.Join(dir, "svc.yaml")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatalf("write: %v", err)
		}
		c, err := Load(LoadArgs{Env: envList(fuzzBaseEnv()), File: path})
		if err != nil {
			if strings.Contains(err.Error(), canary) && !strings.Contains(content, canary) {
				t.Fatalf("error leaks the secret:\n%v", err)
			}
			return
		}
		if !strings.Contains(content, canary) {
			assertNoCanary(t, c)
		}
	})
}

// FuzzParseBackoff checks that parseBackoff never panics and that an
// accepted schedule is within bounds and survives formatting.
func FuzzParseBackoff(f *testing.F) {
	for _, s := range []string{"5s,15s,30s,1m,2m,5m", "", "1h2m3.5s", "0s", "-1s", "5s,,5s", "9223372036854775807ns", strings.Repeat("1s,", 21)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		b, err := parseBackoff(in)
		if err != nil {
			return
		}
		if len(b) == 0 || len(b) > maxBackoffSteps {
			t.Fatalf("parseBackoff(%q) accepted %d steps", in, len(b))
		}
		for i, d := range b {
			if d <= 0 {
				t.Fatalf("parseBackoff(%q) step %d = %v, not greater than zero", in, i+1, d)
			}
		}
		again, err := parseBackoff(formatBackoff(b))
		if err != nil || !cmp.Equal(b, again) {
			t.Fatalf("parseBackoff(formatBackoff(%v)) = %v, %v", b, again, err)
		}
	})
}

// FuzzParsePeers checks that parsePeers never panics and that accepted peers
// are valid, unique and survive formatting.
func FuzzParsePeers(f *testing.F) {
	for _, s := range []string{"n1=10.0.0.1:7000,n2=10.0.0.2:7000", "", "a=[::1]:1", "a=h:1,a=h:2", "=", "a==b:1", "a=h:1, b = H:01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		peers, err := parsePeers(in)
		if err != nil {
			return
		}
		ids := map[string]bool{}
		addrs := map[string]bool{}
		for _, p := range peers {
			if checkNodeID(p.ID) != nil || checkRaftAddr(p.Addr) != nil {
				t.Fatalf("parsePeers(%q) accepted %+v", in, p)
			}
			if ids[p.ID] || addrs[canonicalAddr(p.Addr)] {
				t.Fatalf("parsePeers(%q) accepted a duplicate %+v", in, p)
			}
			ids[p.ID], addrs[canonicalAddr(p.Addr)] = true, true
		}
		again, err := parsePeers(formatPeers(peers))
		if err != nil || !cmp.Equal(peers, again) {
			t.Fatalf("parsePeers(formatPeers(%v)) = %v, %v", peers, again, err)
		}
	})
}
