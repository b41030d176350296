package process_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
)

// hostIPv4 returns a non-loopback IPv4 address of this machine. Traffic to
// it stays on the machine (the kernel delivers it locally).
func hostIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("cannot list this machine's addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("this machine has no non-loopback IPv4 address: the loopback detection needs one to advertise")
	return ""
}

// TestListensOnLoopback: with a non-loopback advertise host, a workload
// that listens only on loopback fails its run with
// BUILD_LISTENS_ON_LOOPBACK (well before the start timeout, which is set
// far beyond the test's deadline), and the job is gone.
func TestListensOnLoopback(t *testing.T) {
	ip := hostIPv4(t)
	hosts := []string{"127.0.0.1"}
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		ln.Close()
		hosts = append(hosts, "::1")
	}
	for _, host := range hosts {
		t.Run(host, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.AdvertiseHost = ip
			cfg.StartTimeout = time.Hour
			rt := newRuntime(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			_, err := rt.Run(ctx, scheduler.Job{ID: "job-loop", Workloads: map[string]scheduler.Task{"web": {
				Artifact: commandArtifact(t),
				Command:  helperCommand(t),
				Env:      map[string]string{helperEnv: "listen", "LISTEN_HOST": host},
			}}})
			e, ok := errcode.As(err)
			if !ok || e.Code != errcode.BuildListensLoopback {
				t.Fatalf("run = %v, want BUILD_LISTENS_ON_LOOPBACK", err)
			}
			if e.Details["workload"] != "web" {
				t.Errorf("details workload = %v, want web", e.Details["workload"])
			}
			addr := fmt.Sprint(e.Details["address"])
			if h, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(h).IsLoopback() {
				t.Errorf("details address = %q, want the loopback address it listens on", addr)
			}
			if _, err := rt.Status(ctx, "job-loop"); errcode.CodeOf(err) != errcode.NotFound {
				t.Errorf("status after the failed run = %v, want NOT_FOUND", err)
			}
		})
	}
}

// TestAdvertiseHostReachable: a workload listening on every address runs
// and is addressed at the advertise host.
func TestAdvertiseHostReachable(t *testing.T) {
	ip := hostIPv4(t)
	cfg := testConfig(t)
	cfg.AdvertiseHost = ip
	rt := newRuntime(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	st, err := rt.Run(ctx, scheduler.Job{ID: "job-any", Workloads: map[string]scheduler.Task{"web": {
		Artifact: commandArtifact(t),
		Command:  helperCommand(t),
		Env:      map[string]string{helperEnv: "listen", "LISTEN_HOST": "0.0.0.0"},
	}}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	ws := st.Workloads["web"]
	if !strings.HasPrefix(ws.Address, ip+":") || ws.Health != scheduler.HealthPassing {
		t.Fatalf("status = %+v, want passing at %s:port", ws, ip)
	}
	if err := rt.Stop(ctx, "job-any"); err != nil {
		t.Fatal(err)
	}
}
