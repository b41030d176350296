package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/testserver"
)

// BenchmarkSandboxEdge measures what the sandbox costs a user, on the real
// binary: the go-hello sample deployed with runtime.isolation sandbox and
// none, a deploy's time (build, pod, start, healthy; and with the build
// reused), and
// wrk through the edge to the running app (the sandbox puts pasta between
// the edge and the workload). `make bench` runs it once;
// SVC_EDGE_BENCH_DURATION sets each wrk run's length (10s).
func BenchmarkSandboxEdge(b *testing.B) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Skip("wrk is not installed (apt-get install wrk)")
	}
	dur := 10 * time.Second
	if v := os.Getenv("SVC_EDGE_BENCH_DURATION"); v != "" {
		if dur, err = time.ParseDuration(v); err != nil {
			b.Fatalf("SVC_EDGE_BENCH_DURATION: %v", err)
		}
	}
	type result struct {
		build, redeploy time.Duration
		wrk             wrkResult
	}
	results := map[string]result{}
	isolations := []string{"none", "sandbox"}
	b.ResetTimer()
	for range b.N {
		for _, iso := range isolations {
			first, err := testserver.FreePorts(1)
			if err != nil {
				b.Fatal(err)
			}
			srv := startAppServer(b, "bench-"+iso, "SVC_RUNTIME_ISOLATION="+iso,
				"SVC_APP_PORT_START="+strconv.Itoa(first), "SVC_APP_PORT_END="+strconv.Itoa(first))
			sm := samples[0] // go-hello
			id, doc := srv.onboard(b, "bench-"+iso, sm.dir, sm.detector, helloValues("hi", "token")...)
			deploy := func(rev int) time.Duration {
				began := time.Now()
				d := srv.deploy(b, id, rev)
				if lines, end := srv.follow(b, id, d.ID); end.State != "succeeded" {
					b.Fatalf("deploy ended %s %s; its log:\n%s", end.State, end.code(), strings.Join(lines, "\n"))
				}
				srv.waitDeployed(b, id)
				return time.Since(began)
			}
			// The first deploy warms the app's build cache. Then a
			// revision with another build command (built again), and the
			// same revision again (its build reused: a redeploy).
			deploy(0)
			web := doc["workloads"].(map[string]any)["web"].(map[string]any)
			web["build"].(map[string]any)["command"] = "go build -o app . && echo built"
			rev := srv.newRevision(b, id, doc)
			r := result{build: deploy(rev)}
			r.redeploy = deploy(rev)
			edgeURL := fmt.Sprintf("http://127.0.0.1:%d/", first)
			waitOK(b, edgeURL, srv.p.token)
			r.wrk = runWrk(b, wrk, edgeURL, srv.p.token, dur)
			results[iso] = r
			srv.shutdown(b)
		}
	}
	b.StopTimer()
	fmt.Printf("\nsandbox benchmark: go-hello, a redeploy, then wrk -t2 -c64 -d%s through the edge (everything on this machine)\n", dur)
	fmt.Printf("%-9s %14s %10s %12s %12s\n", "isolation", "deploy+build", "redeploy", "req/s", "p99")
	for _, iso := range isolations {
		r := results[iso]
		b.ReportMetric(r.build.Seconds(), iso+"-deploy-s")
		b.ReportMetric(r.redeploy.Seconds(), iso+"-redeploy-s")
		b.ReportMetric(r.wrk.rps, iso+"-req/s")
		b.ReportMetric(float64(r.wrk.p99.Microseconds()), iso+"-p99-µs")
		fmt.Printf("%-9s %14s %10s %12.0f %12s\n", iso, r.build.Round(time.Millisecond), r.redeploy.Round(time.Millisecond), r.wrk.rps, r.wrk.p99)
	}
	fmt.Println()
}
