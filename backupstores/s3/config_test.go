package s3

import (
	"strings"
	"testing"
)

// FuzzConfig: whatever the settings, an accepted configuration talks http
// only to this machine and only when asked to, carries no user, path or
// query in its endpoint, and a prefix of clean segments ending in "/".
func FuzzConfig(f *testing.F) {
	f.Add("https://s3.example.com", "acme-backups", "svc/prod/", "false")
	f.Add("http://127.0.0.1:9000", "b-1", "", "true")
	f.Add("http://[::1]:9000/", "bucket", "a/../b", "true")
	f.Add("https://u:p@h/x?y#z", "Bucket", "/a", "1")
	f.Add("http://localhost.:1", "a.b.c", "a//b", "TRUE")
	f.Fuzz(func(t *testing.T, endpoint, bucket, prefix, insecure string) {
		c, err := configOf(map[string]string{"endpoint": endpoint, "bucket": bucket, "prefix": prefix, "insecure_http": insecure})
		if err != nil {
			return
		}
		u := c.endpoint
		if u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Host == "" {
			t.Fatalf("accepted endpoint %q as %v", endpoint, u)
		}
		if u.Scheme == "http" && !isLoopback(u.Hostname()) {
			t.Fatalf("accepted http to %s", u.Hostname())
		}
		if u.Scheme != "https" && u.Scheme != "http" {
			t.Fatalf("accepted scheme %s", u.Scheme)
		}
		if c.prefix != "" {
			if !strings.HasSuffix(c.prefix, "/") || strings.HasPrefix(c.prefix, "/") {
				t.Fatalf("prefix %q", c.prefix)
			}
			for seg := range strings.SplitSeq(strings.TrimSuffix(c.prefix, "/"), "/") {
				if seg == "" || seg == "." || seg == ".." {
					t.Fatalf("prefix %q has segment %q", c.prefix, seg)
				}
			}
		}
	})
}
