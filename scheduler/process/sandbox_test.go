package process_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
)

// svcLayout is a server's work directory as svc lays it out, around the
// runtime's: a key-encryption key, a store and another app's checkout,
// none of which any sandbox may see.
type svcLayout struct {
	base, kek, store, checkout string
	cfg                        process.Config
}

func newSvcLayout(t *testing.T) svcLayout {
	t.Helper()
	base := sandboxDir(t)
	l := svcLayout{base: base, kek: filepath.Join(base, "keyring", "kek"), store: filepath.Join(base, "raft", "raft.db"),
		checkout: filepath.Join(base, "apps", "app-other", "src", "main.go")}
	for _, f := range []string{l.kek, l.store, l.checkout} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil { // as a careless component would
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("secret"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l.cfg = sandboxConfig(t)
	l.cfg.WorkDir = filepath.Join(base, "runtime")
	l.cfg.TraverseFrom = base
	return l
}

// dirs are the layout's directories (the parts of the server's work
// directory that are not the runtime's), with more.
func (l svcLayout) dirs(more ...string) []string {
	return append([]string{filepath.Dir(l.kek), filepath.Dir(l.store), filepath.Join(l.base, "apps")}, more...)
}

// hostAddr is a non-loopback address of this host, "" when it has none.
func hostAddr() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

// TestSandboxHostile runs a hostile workload (the probe) in the sandbox
// beside another app's workload, as a member's app would run on the
// embedded runtime, and checks what it can reach: not the server's work
// directory (key file, store, checkouts), not the host's secrets, not the
// server's process or environment, not another app's processes, secret or
// port; a read-only system; its own files, /tmp and volume writable; its
// job's other workload reachable by name; and it still serves at its host
// port, bound on loopback only.
func TestSandboxHostile(t *testing.T) {
	needSandbox(t)
	l := newSvcLayout(t)
	rt := newRuntime(t, l.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	canary := "canary-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv("SVC_TEST_CANARY", canary) // the server's own environment

	// Another app: a workload holding a secret, serving on its port.
	probe := scheduler.Artifact{ID: "probe", Kind: "command", Dir: probeArtifact(t)}
	victimJob := scheduler.Job{ID: "job-victim", AppID: "app-victim", Workloads: map[string]scheduler.Task{"web": {
		Artifact: probe, Command: []string{"./probe"},
		Env: map[string]string{helperEnv: "listen", "VICTIM_SECRET": canary},
	}}}
	victim, err := rt.Run(ctx, victimJob)
	if err != nil {
		t.Fatalf("run the victim: %v", err)
	}
	victimAddr := victim.Workloads["web"].Address
	_, victimPort, _ := net.SplitHostPort(victimAddr)
	// A service on the host's loopback (svc's API, say).
	hostLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()
	other := rt.VolumeDir("app-other", scheduler.Mount{Volume: "data"})
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	var hidden string
	if os.Geteuid() == 0 {
		// A file of the server's under a tree sandboxes see (a config
		// file in /opt, say), hidden by SandboxHide.
		dir, err := os.MkdirTemp("/opt", "svc-sandbox-test-")
		if err == nil {
			_ = os.Chmod(dir, 0o755) // readable by anyone, but hidden
			t.Cleanup(func() { os.RemoveAll(dir) })
			hidden = filepath.Join(dir, "svc.yaml")
			if err := os.WriteFile(hidden, []byte("secret"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if hidden != "" {
		// A runtime of its own: SandboxHide is read when the sandbox is
		// set up.
		l.cfg.SandboxHide = []string{hidden}
		rt.Close()
		rt = newRuntime(t, l.cfg)
		if victim, err = rt.Run(ctx, victimJob); err != nil {
			t.Fatalf("run the victim: %v", err)
		}
		victimAddr = victim.Workloads["web"].Address
		_, victimPort, _ = net.SplitHostPort(victimAddr)
	}

	reads := []string{"/etc/shadow", l.kek, l.store, l.checkout, filepath.Join(l.cfg.WorkDir, "uids.json"), "/proc/1/environ"}
	if hidden != "" {
		reads = append(reads, hidden)
	}
	dials := []string{"127.0.0.1:" + victimPort, hostLn.Addr().String(), "peer:7001", "127.0.0.1:7001"}
	if ip := hostAddr(); ip != "" {
		dials = append(dials, net.JoinHostPort(ip, victimPort))
	}
	const mount = "/srv/svc-test/volume"
	st, err := rt.Run(ctx, scheduler.Job{ID: "job-hostile", AppID: "app-hostile", Order: []string{"peer", "web"}, Workloads: map[string]scheduler.Task{
		"peer": {Artifact: probe, Command: []string{"./probe"}, AppPort: 7001,
			Env: map[string]string{helperEnv: "listen", "LISTEN_HOST": "127.0.0.1"}},
		"web": {Artifact: probe, Command: []string{"./probe"},
			Mounts: []scheduler.Mount{{Volume: "data", Path: mount}},
			Env: map[string]string{
				helperEnv:        "probe",
				"PROBE_READ":     strings.Join(reads, ","),
				"PROBE_EXISTS":   strings.Join(l.dirs(other, "/root", "/home", "/var/lib", "/sys"), ","),
				"PROBE_WRITE":    strings.Join([]string{"/etc/svc-probe", "/usr/svc-probe", "/svc-probe", "./written", "/tmp/t", mount + "/f"}, ","),
				"PROBE_DIAL":     strings.Join(dials, ","),
				"PROBE_CANARY_A": canary[:len(canary)/2],
				"PROBE_CANARY_B": canary[len(canary)/2:],
			}},
	}})
	if err != nil {
		t.Fatalf("run the hostile job: %v", err)
	}
	got := probeReport(t, func() []string { l, _ := rt.Logs(ctx, "job-hostile", "web"); return l })
	want := map[string]string{
		"uid": "1000", "canary": "absent",
		"write /etc/svc-probe": "denied", "write /usr/svc-probe": "denied", "write /svc-probe": "denied",
		"write ./written": "ok", "write /tmp/t": "ok", "write " + mount + "/f": "ok",
		"dial peer:7001": "ok", "dial 127.0.0.1:7001": "ok",
		"dial 127.0.0.1:" + victimPort: "refused", "dial " + hostLn.Addr().String(): "refused",
	}
	for _, p := range reads {
		want["read "+p] = "denied"
	}
	want["read /proc/1/environ"] = "ok" // its own PID namespace's first process
	for _, p := range l.dirs(other, "/root", "/home", "/var/lib", "/sys") {
		want["exists "+p] = "no"
	}
	if ip := hostAddr(); ip != "" {
		want["dial "+net.JoinHostPort(ip, victimPort)] = "refused"
	}
	wantReport(t, got, want)
	if n, _ := strconv.Atoi(got["procs"]); n < 1 || n > 4 {
		t.Errorf("the probe sees %s processes; in its own PID namespace it sees only its own", got["procs"])
	}
	if b, err := os.ReadFile(filepath.Join(rt.VolumeDir("app-hostile", scheduler.Mount{Volume: "data"}), "f")); err != nil || string(b) != "probe" {
		t.Errorf("the volume on the host: %q, %v", b, err)
	}
	if _, err := os.Stat("/srv/svc-test"); err == nil {
		t.Errorf("the sandbox made its mount point on the host")
	}

	// From the host: it serves at its address, on loopback only; its
	// processes are not root's; the inside port is not the host's.
	addr := st.Workloads["web"].Address
	if body := get(t, "http://"+addr+"/"); body != "probe-ok" {
		t.Errorf("GET %s = %q", addr, body)
	}
	host, port, _ := net.SplitHostPort(addr)
	if host != "127.0.0.1" {
		t.Errorf("the workload's address %s is not on loopback", addr)
	}
	if ip := hostAddr(); ip != "" {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, port), time.Second); err == nil {
			c.Close()
			t.Errorf("the workload answers at %s:%s, a non-loopback address of the host", ip, port)
		}
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:7001", time.Second); err == nil {
		c.Close()
		t.Errorf("the peer's inside port 7001 is open on the host")
	}
	if os.Geteuid() == 0 {
		for _, pid := range recordedPIDs(t, l.cfg.WorkDir, "job-hostile") {
			if uid := procUID(pid); uid == "0" || uid == "" {
				t.Errorf("process %d of the hostile job runs as uid %q on the host", pid, uid)
			}
		}
	}
}

// get GETs a URL and returns the body.
func get(t *testing.T, u string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// recordedPIDs are the pids a job's record names.
func recordedPIDs(t *testing.T, workDir, jobID string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(workDir, "jobs", jobID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Workloads map[string]struct{ PID int } `json:"workloads"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, w := range rec.Workloads {
		out = append(out, w.PID)
	}
	return out
}

// procUID is the real uid of a process, "" when it cannot be read.
func procUID(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	return ""
}

// TestSandboxedBuildHostile: a build step is the same hostile code, run
// by the build: it sees nothing of the server nor of other apps, writes
// only its work area, and reaches no port of the host.
func TestSandboxedBuildHostile(t *testing.T) {
	needSandbox(t)
	l := newSvcLayout(t)
	rt := newRuntime(t, l.cfg)
	canary := "canary-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv("SVC_TEST_CANARY", canary)
	hostLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()
	src := probeArtifact(t)
	script := fmt.Sprintf("%s=probe PROBE_EXIT=1 PROBE_READ=/etc/shadow,%s,%s PROBE_EXISTS=%s PROBE_WRITE=/etc/svc-probe,./out PROBE_DIAL=%s PROBE_CANARY_A=%s PROBE_CANARY_B=%s ./probe",
		helperEnv, l.kek, l.checkout, strings.Join(l.dirs("/root"), ","), hostLn.Addr(), canary[:4], canary[4:])
	var lines []string
	var mu sync.Mutex
	_, err = rt.Build(context.Background(), scheduler.BuildRequest{AppID: "app-hostile", Source: src, Build: spec.Build{Kind: spec.BuildCommand, Command: script},
		Log: func(_, line string) { mu.Lock(); lines = append(lines, line); mu.Unlock() }})
	if err != nil {
		t.Fatalf("build: %v (%v)", err, details(err))
	}
	got := probeReport(t, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), lines...) })
	wantReport(t, got, map[string]string{
		"uid": "1000", "canary": "absent",
		"read /etc/shadow": "denied", "read " + l.kek: "denied", "read " + l.checkout: "denied",
		"exists " + filepath.Dir(l.kek): "no", "exists /root": "no",
		"write /etc/svc-probe": "denied", "write ./out": "ok",
		"dial " + hostLn.Addr().String(): "refused",
	})
}

// TestSandboxUnavailable: without bubblewrap the runtime offers no
// sandbox, and a task that asks for one fails with
// PLAN_CAPABILITY_UNSUPPORTED; so does any stronger isolation.
func TestSandboxUnavailable(t *testing.T) {
	cfg := testConfig(t)
	cfg.Bwrap = filepath.Join(t.TempDir(), "no-bwrap-here")
	rt := newRuntime(t, cfg)
	inst, err := process.KindFor(rt).Open(context.Background(), adapters.Config{})
	if err != nil {
		t.Fatal(err)
	}
	caps := inst.Capabilities()
	if caps["isolation"] != policy.IsolationNone || caps["sandbox_available"] != false {
		t.Errorf("capabilities = %v, want isolation none, no sandbox", caps)
	}
	for _, level := range []string{policy.IsolationSandbox, policy.IsolationContainer, policy.IsolationVM} {
		_, err := rt.Run(context.Background(), scheduler.Job{ID: "job-iso", Workloads: map[string]scheduler.Task{"w": {
			Artifact: commandArtifact(t), Command: []string{"sleep", "1000"}, NoPort: true, Isolation: level,
		}}})
		if errcode.CodeOf(err) != errcode.PlanCapabilityUnsupp {
			t.Errorf("run at %s = %v, want PLAN_CAPABILITY_UNSUPPORTED", level, err)
		}
	}
}

// TestNoSandboxRunsNothing: a runtime set to sandbox every workload (the
// default) on a host that cannot run the sandbox runs nothing, builds
// nothing, says why and what to do, and says in its capabilities that it
// is unavailable (the plan refuses on that); it never falls back to no
// isolation by itself.
func TestNoSandboxRunsNothing(t *testing.T) {
	cfg := sandboxConfig(t)
	cfg.Bwrap = filepath.Join(t.TempDir(), "no-bwrap-here")
	rt := newRuntime(t, cfg)
	if err := rt.SandboxError(); err == nil || !strings.Contains(err.Error(), "bubblewrap") {
		t.Errorf("SandboxError = %v, want one naming bubblewrap", err)
	}
	inst, err := process.KindFor(rt).Open(context.Background(), adapters.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if caps := inst.Capabilities(); caps["unavailable"] == nil || caps["isolation"] != "" || caps["egress_allowlist"] != false {
		t.Errorf("capabilities = %v, want it unavailable, offering no isolation", caps)
	}
	_, err = rt.Run(context.Background(), scheduler.Job{ID: "job-x", Workloads: map[string]scheduler.Task{"w": {
		Artifact: commandArtifact(t), Command: []string{"sleep", "1000"}, NoPort: true,
	}}})
	if e, ok := errcode.As(err); !ok || e.Code != errcode.PlanCapabilityUnsupp || !strings.Contains(e.Remedy, "runtime.isolation: none") {
		t.Errorf("run = %v (details %v), want PLAN_CAPABILITY_UNSUPPORTED saying how to mend it or opt out", err, details(err))
	}
	_, err = rt.Build(context.Background(), scheduler.BuildRequest{Source: t.TempDir(), Build: spec.Build{Kind: spec.BuildCommand, Command: "true"}})
	if errcode.CodeOf(err) != errcode.PlanCapabilityUnsupp {
		t.Errorf("build = %v, want PLAN_CAPABILITY_UNSUPPORTED", err)
	}
}

// TestSandboxedBuild: with BuildIsolation sandbox, a build writes its work
// area and not the host.
func TestSandboxedBuild(t *testing.T) {
	needSandbox(t)
	rt := newRuntime(t, sandboxConfig(t))
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "in.txt"), []byte("in\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	art, err := rt.Build(context.Background(), scheduler.BuildRequest{Source: src, Build: spec.Build{
		Kind:    spec.BuildCommand,
		Command: `cp in.txt out.txt && if touch /etc/svc-build-probe 2>/dev/null; then echo host-writable; exit 1; fi`,
	}})
	if err != nil {
		t.Fatalf("build: %v (%v)", err, details(err))
	}
	if b, err := os.ReadFile(filepath.Join(art.Dir, "out.txt")); err != nil || string(b) != "in\n" {
		t.Errorf("the build's output: %q, %v", b, err)
	}
}

// details are a coded error's details, for a failure's message.
func details(err error) map[string]any {
	if e, ok := errcode.As(err); ok {
		return e.Details
	}
	return nil
}

// TestSandboxEgress: with host policy's egress_allowlist naming
// destinations, a sandbox has no route out at all; its only way out is the
// pod's proxy (HTTP_PROXY), which lets through what the list names and
// refuses the rest, and the refusal shows in the workload's log. Without a
// list, the sandbox reaches the world (checked where this host does).
func TestSandboxEgress(t *testing.T) {
	needSandbox(t)
	cfg := sandboxConfig(t)
	rt := newRuntime(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "upstream") })}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go up.Serve(ln)
	defer up.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	probe := scheduler.Artifact{ID: "probe", Kind: "command", Dir: probeArtifact(t)}
	allowed, refused := "http://127.0.0.1:"+port+"/", "http://127.0.0.2:"+port+"/"
	_, err = rt.Run(ctx, scheduler.Job{ID: "job-egress", AppID: "app-egress", Workloads: map[string]scheduler.Task{"web": {
		Artifact: probe, Command: []string{"./probe"}, NoPort: true,
		Egress: []string{"127.0.0.1", "*.example.org"},
		Env: map[string]string{helperEnv: "probe",
			"PROBE_GET":  allowed + "," + refused,
			"PROBE_DIAL": ln.Addr().String() + ",1.1.1.1:80",
		},
	}}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	lines := func() []string { l, _ := rt.Logs(ctx, "job-egress", "web"); return l }
	got := probeReport(t, lines)
	wantReport(t, got, map[string]string{
		"get " + allowed: "200", "get " + refused: "403",
		"dial " + ln.Addr().String(): "refused", "dial 1.1.1.1:80": "refused",
	})
	if !strings.Contains(strings.Join(lines(), "\n"), "[svc] egress to 127.0.0.2:"+port+" refused") {
		t.Errorf("the workload's log does not say the proxy refused 127.0.0.2: %q", lines())
	}

	// Open: the world is reachable where this host reaches it.
	const world = "proxy.golang.org:443"
	reachable := false
	if c, err := net.DialTimeout("tcp", world, 5*time.Second); err != nil {
		t.Logf("this host does not reach %s (%v): open egress is checked only by what stays closed", world, err)
	} else {
		c.Close()
		reachable = true
	}
	_, err = rt.Run(ctx, scheduler.Job{ID: "job-open", AppID: "app-open", Workloads: map[string]scheduler.Task{"web": {
		Artifact: probe, Command: []string{"./probe"}, NoPort: true,
		Env: map[string]string{helperEnv: "probe", "PROBE_DIAL": world + "," + ln.Addr().String(), "PROBE_EXISTS": "/etc/resolv.conf"},
	}}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	got = probeReport(t, func() []string { l, _ := rt.Logs(ctx, "job-open", "web"); return l })
	want := map[string]string{"dial " + ln.Addr().String(): "refused", "exists /etc/resolv.conf": "yes"}
	if reachable {
		want["dial "+world] = "ok"
	}
	wantReport(t, got, want)
	// The cloud's metadata service (link-local) is blackholed inside.
	var holder int
	b, err := os.ReadFile(filepath.Join(cfg.WorkDir, "jobs", "job-open.json"))
	if err == nil {
		var rec struct {
			Workloads map[string]struct{ PID int } `json:"workloads"`
		}
		if json.Unmarshal(b, &rec) == nil {
			holder = rec.Workloads["_pod-holder"].PID
		}
	}
	routes, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/route", holder))
	if err != nil || !strings.Contains(string(routes), "0000FEA9") {
		t.Errorf("the pod's routes (%v) do not blackhole 169.254.0.0/16:\n%s", err, routes)
	}
}

// TestSandboxEgressNeedsSandbox: an egress list cannot be enforced without
// a sandbox, so a workload or build outside one is refused rather than let
// out.
func TestSandboxEgressNeedsSandbox(t *testing.T) {
	rt := newRuntime(t, testConfig(t))
	_, err := rt.Run(context.Background(), scheduler.Job{ID: "job-x", Workloads: map[string]scheduler.Task{"w": {
		Artifact: commandArtifact(t), Command: []string{"sleep", "1000"}, NoPort: true, Egress: []string{"example.org"},
	}}})
	if errcode.CodeOf(err) != errcode.PlanCapabilityUnsupp {
		t.Errorf("run = %v, want PLAN_CAPABILITY_UNSUPPORTED", err)
	}
	_, err = rt.Build(context.Background(), scheduler.BuildRequest{Source: t.TempDir(), Egress: []string{"example.org"},
		Build: spec.Build{Kind: spec.BuildCommand, Command: "true"}})
	if errcode.CodeOf(err) != errcode.PlanCapabilityUnsupp {
		t.Errorf("build = %v, want PLAN_CAPABILITY_UNSUPPORTED", err)
	}
}

// TestPodNetworkLost: when a pod's pasta dies, its workloads cannot be
// reached, and their health says so (failing), though they still listen
// inside.
func TestPodNetworkLost(t *testing.T) {
	needSandbox(t)
	cfg := sandboxConfig(t)
	rt := newRuntime(t, cfg)
	ctx := context.Background()
	if _, err := rt.Run(ctx, scheduler.Job{ID: "job-lost", AppID: "app-lost", Workloads: map[string]scheduler.Task{"web": {
		Artifact: scheduler.Artifact{ID: "probe", Kind: "command", Dir: probeArtifact(t)}, Command: []string{"./probe"},
		Env: map[string]string{helperEnv: "listen"},
	}}}); err != nil {
		t.Fatalf("run: %v", err)
	}
	waitUntil(t, "the workload healthy", func() (bool, string) {
		st, _ := rt.Status(ctx, "job-lost")
		return st.Workloads["web"].Health == scheduler.HealthPassing, fmt.Sprint(st)
	})
	b, err := os.ReadFile(filepath.Join(cfg.WorkDir, "jobs", "job-lost.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Workloads map[string]struct{ PID int } `json:"workloads"`
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.Workloads["_pod-pasta"].PID <= 0 {
		t.Fatalf("the job's record names no pasta: %s", b)
	}
	if err := syscall.Kill(rec.Workloads["_pod-pasta"].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the workload's health failing", func() (bool, string) {
		st, _ := rt.Status(ctx, "job-lost")
		return st.Workloads["web"].Health == scheduler.HealthFailing, fmt.Sprint(st)
	})
}
