package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/testserver"
)

// BenchmarkEdgeWrk measures the edge as its users would: wrk (the Debian
// package) against one small upstream four ways in one run: directly,
// through a bare tuned httputil.ReverseProxy, through the edge of the real
// svc binary with a signed-in token (authorization, assertion, header
// hygiene), and through Caddy's reverse_proxy as a peer. It reports each
// way's requests per second and p99 latency, and the edge's throughput
// against the bare proxy and Caddy. `make bench` runs it once
// (-benchtime 1x); SVC_EDGE_BENCH_DURATION sets each run's length (10s).
func BenchmarkEdgeWrk(b *testing.B) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Skip("wrk is not installed (apt-get install wrk)")
	}
	caddy, err := exec.LookPath("caddy")
	if err != nil {
		b.Skip("caddy is not installed (apt-get install caddy)")
	}
	dur := 10 * time.Second
	if v := os.Getenv("SVC_EDGE_BENCH_DURATION"); v != "" {
		if dur, err = time.ParseDuration(v); err != nil {
			b.Fatalf("SVC_EDGE_BENCH_DURATION: %v", err)
		}
	}
	root, err := moduleRoot()
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "benchservers")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "internal/e2e/testdata/benchservers")).CombinedOutput(); err != nil {
		b.Fatalf("build the benchmark servers: %v\n%s", err, out)
	}
	upstream := startPeer(b, bin, "upstream")
	bare := startPeer(b, bin, "proxy", "-to", "http://"+upstream)
	caddyAddr := startCaddy(b, caddy, upstream)

	first, err := testserver.FreePorts(1)
	if err != nil {
		b.Fatal(err)
	}
	srv := startAppServer(b, "edge-bench", "SVC_APP_PORT_START="+strconv.Itoa(first), "SVC_APP_PORT_END="+strconv.Itoa(first),
		"SVC_SERVER_PROXY_UPSTREAM=http://"+upstream)
	sm := samples[3] // static-hello: routed, then every request goes to the upstream
	id, _ := srv.onboard(b, "edge-bench", sm.dir, sm.detector)
	d := srv.deploy(b, id, 0)
	if lines, end := srv.follow(b, id, d.ID); end.State != "succeeded" {
		b.Fatalf("deploy ended %s %s; its log:\n%s", end.State, end.code(), strings.Join(lines, "\n"))
	}
	edgeURL := fmt.Sprintf("http://127.0.0.1:%d/", first)
	token := srv.p.token
	waitOK(b, edgeURL, token)

	ways := []struct{ name, url, token string }{
		{"direct", "http://" + upstream + "/", ""},
		{"bare-proxy", "http://" + bare + "/", ""},
		{"edge", edgeURL, token},
		{"caddy", "http://" + caddyAddr + "/", ""},
	}
	results := map[string]wrkResult{}
	b.ResetTimer()
	for range b.N {
		for _, w := range ways {
			results[w.name] = runWrk(b, wrk, w.url, w.token, dur)
		}
	}
	b.StopTimer()
	for _, w := range ways {
		r := results[w.name]
		b.ReportMetric(r.rps, w.name+"-req/s")
		b.ReportMetric(float64(r.p99.Microseconds()), w.name+"-p99-µs")
	}
	e, bp, c := results["edge"], results["bare-proxy"], results["caddy"]
	b.ReportMetric(e.rps/bp.rps, "edge/bare")
	b.ReportMetric(e.rps/c.rps, "edge/caddy")
	fmt.Printf("\nedge benchmark (wrk -t2 -c64 -d%s, small page, loopback, everything on this machine)\n", dur)
	fmt.Printf("%-11s %12s %12s\n", "way", "req/s", "p99")
	for _, w := range ways {
		fmt.Printf("%-11s %12.0f %12s\n", w.name, results[w.name].rps, results[w.name].p99)
	}
	fmt.Printf("edge/bare-proxy %.2fx   edge/caddy %.2fx\n\n", e.rps/bp.rps, e.rps/c.rps)
}

type wrkResult struct {
	rps float64
	p99 time.Duration
}

var (
	rpsRE = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	p99RE = regexp.MustCompile(`\s99%\s+([0-9.]+)(us|ms|s)`)
	errRE = regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`)
)

// runWrk runs wrk against url and parses its throughput and p99 latency;
// any non-2xx answer fails the benchmark (a refused edge is no figure).
func runWrk(b *testing.B, wrk, url, token string, dur time.Duration) wrkResult {
	args := []string{"-t2", "-c64", "-d" + dur.String(), "--latency"}
	if token != "" {
		args = append(args, "-H", "Authorization: Bearer "+token)
	}
	out, err := exec.Command(wrk, append(args, url)...).CombinedOutput()
	if err != nil {
		b.Fatalf("wrk %s: %v\n%s", url, err, out)
	}
	if m := errRE.FindSubmatch(out); m != nil {
		b.Fatalf("wrk %s: %s answers were not 2xx:\n%s", url, m[1], out)
	}
	m, p := rpsRE.FindSubmatch(out), p99RE.FindSubmatch(out)
	if m == nil || p == nil {
		b.Fatalf("wrk %s: unreadable output:\n%s", url, out)
	}
	rps, _ := strconv.ParseFloat(string(m[1]), 64)
	v, _ := strconv.ParseFloat(string(p[1]), 64)
	unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[string(p[2])]
	return wrkResult{rps: rps, p99: time.Duration(v * float64(unit))}
}

// startPeer starts one of the benchmark servers and returns its address.
func startPeer(b *testing.B, bin string, args ...string) string {
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("%s: no address: %v", args[0], err)
	}
	return strings.TrimSpace(line)
}

// startCaddy runs Caddy's reverse_proxy to upstream on a free port.
func startCaddy(b *testing.B, caddy, upstream string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := b.TempDir()
	conf := filepath.Join(dir, "Caddyfile")
	body := fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n}\nhttp://%s {\n\treverse_proxy %s\n}\n", addr, upstream)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(caddy, "run", "--config", conf, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	cmd.Stderr = &tailWriter{max: 4096}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitOK(b, "http://"+addr+"/", "")
	return addr
}

// tailWriter keeps the last bytes written to it (a peer's log, shown when
// it fails to come up).
type tailWriter struct {
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

// waitOK waits until url answers 200.
func waitOK(b *testing.B, url, token string) {
	deadline := time.Now().Add(scaled(30 * time.Second))
	for {
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s did not answer 200 (last: %v %v)", url, res, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
