package process_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The probe is the hostile workload of the sandbox tests: the test binary,
// copied into an artifact and run in a sandbox as the "probe" helper, tries
// what an attacker's app would and prints one line per try, key=value.
// What it tries comes in its environment (comma-separated lists):
//
//	PROBE_READ      files to read (read <path>=ok | denied)
//	PROBE_EXISTS    paths to look at (exists <path>=yes | no)
//	PROBE_WRITE     files to create (write <path>=ok | denied)
//	PROBE_DIAL      host:port to connect to (dial <addr>=ok | refused)
//	PROBE_GET       URLs to GET through $HTTP_PROXY (get <url>=<status> | error)
//	PROBE_CANARY_A and _B, halves of a value the probe must find nowhere:
//	                not in its environment, not in any /proc/*/environ
//	                (canary=absent | found)
//
// It also reports uid=, procs= (processes it can see) and, with PORT set,
// serves "probe-ok" there on every address; without, it stays up.

func helperProbe() {
	out := func(k, v string) { fmt.Printf("%s=%s\n", k, v) }
	list := func(env string) []string {
		var l []string
		for _, s := range strings.Split(os.Getenv(env), ",") {
			if s = strings.TrimSpace(s); s != "" {
				l = append(l, s)
			}
		}
		return l
	}
	okOr := func(err error, no string) string {
		if err != nil {
			return no
		}
		return "ok"
	}
	out("uid", strconv.Itoa(os.Getuid()))
	for _, p := range list("PROBE_READ") {
		_, err := os.ReadFile(p)
		out("read "+p, okOr(err, "denied"))
	}
	for _, p := range list("PROBE_EXISTS") {
		_, err := os.Lstat(p)
		out("exists "+p, map[bool]string{true: "yes", false: "no"}[err == nil])
	}
	for _, p := range list("PROBE_WRITE") {
		err := os.WriteFile(p, []byte("probe"), 0o600)
		out("write "+p, okOr(err, "denied"))
	}
	for _, a := range list("PROBE_DIAL") {
		c, err := net.DialTimeout("tcp", a, 3*time.Second)
		if err == nil {
			c.Close()
		}
		out("dial "+a, okOr(err, "refused"))
	}
	for _, u := range list("PROBE_GET") {
		// Go's ProxyFromEnvironment never proxies loopback: use the
		// proxy the sandbox was told of directly.
		proxy, _ := url.Parse(os.Getenv("HTTP_PROXY"))
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
		resp, err := c.Get(u)
		if err != nil {
			out("get "+u, "error")
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out("get "+u, strconv.Itoa(resp.StatusCode))
	}
	procs := 0
	canary := []byte(os.Getenv("PROBE_CANARY_A") + os.Getenv("PROBE_CANARY_B"))
	found := len(canary) > 0 && bytes.Contains([]byte(strings.Join(os.Environ(), "\x00")), canary)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		procs++
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ")); err == nil && len(canary) > 0 && bytes.Contains(b, canary) {
			found = true
		}
	}
	out("procs", strconv.Itoa(procs))
	out("canary", map[bool]string{true: "found", false: "absent"}[found])
	out("probe", "done")
	if os.Getenv("PROBE_EXIT") != "" {
		os.Exit(0)
	}
	if port := os.Getenv("PORT"); port != "" {
		_ = http.ListenAndServe(":"+port, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "probe-ok")
		}))
		os.Exit(1)
	}
	select {}
}

// probeArtifact is an artifact holding the test binary as ./probe.
func probeArtifact(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "probe"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// probeReport reads what a probe printed: its lines key=value, once it
// said probe=done.
func probeReport(t *testing.T, lines func() []string) map[string]string {
	t.Helper()
	got := map[string]string{}
	waitUntil(t, "the probe's report", func() (bool, string) {
		got = map[string]string{}
		for _, l := range lines() {
			if k, v, ok := strings.Cut(l, "="); ok {
				got[k] = v
			}
		}
		return got["probe"] == "done", fmt.Sprint(lines())
	})
	return got
}

// wantReport checks the report against want, key by key.
func wantReport(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
