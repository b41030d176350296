package runtimetest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
)

// contractPy is the workload of the lifecycle cases: an HTTP server on
// 127.0.0.1:$PORT that names its process (a random instance ID: pids say
// nothing inside a PID namespace), writes and reads a marker in its
// "data" volume, and crashes on request, for good (a flag file in its
// working directory makes every later start exit at once with code 4).
// With DEPENDS_ON=host:port it exits with code 5 unless that address
// accepts a connection when it starts.
const contractPy = `import http.server, os, socket, sys, urllib.parse

if os.path.exists("crash.flag"):
    print("crash flag set: exiting", flush=True)
    sys.exit(4)
dep = os.environ.get("DEPENDS_ON")
if dep:
    host, port = dep.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        print("dependency", dep, "not ready:", e, flush=True)
        sys.exit(5)
volume = os.environ.get("SVC_VOLUME_DATA") or "/data"
instance = os.urandom(8).hex()


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body):
        b = body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
        self.wfile.flush()

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(u.query)
        if u.path == "/instance":
            self.reply(200, instance)
        elif u.path == "/volume/write":
            with open(os.path.join(volume, "marker"), "w") as f:
                f.write(q["v"][0])
            self.reply(200, "written")
        elif u.path == "/volume/read":
            try:
                with open(os.path.join(volume, "marker")) as f:
                    self.reply(200, f.read())
            except FileNotFoundError:
                self.reply(404, "no marker")
        elif u.path == "/crash":
            open("crash.flag", "w").close()
            self.reply(200, "crashing")
            os._exit(4)
        else:
            self.reply(200, "contract-marker")

    def log_message(self, *args):
        pass


print("listening on", os.environ["PORT"], flush=True)
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
`

// needTools skips the case unless the programs are on PATH.
func needTools(t *testing.T, bins ...string) {
	t.Helper()
	for _, bin := range bins {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("no %s on PATH", bin)
		}
	}
}

// buildContractPy builds an artifact holding contract.py (a command build
// that runs "true").
func buildContractPy(ctx context.Context, t *testing.T, b scheduler.Builder) scheduler.Artifact {
	t.Helper()
	src := writeTree(t, map[string]string{"contract.py": contractPy})
	art, err := b.Build(ctx, scheduler.BuildRequest{Source: src, Build: spec.Build{Kind: spec.BuildCommand, Command: "true"}})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return art
}

func contractTask(art scheduler.Artifact) scheduler.Task {
	return scheduler.Task{
		Artifact: art,
		Command:  []string{"python3", "contract.py"},
		Health:   &spec.Health{Path: "/", Interval: spec.Duration(100 * time.Millisecond)},
	}
}

func workloadStatus(ctx context.Context, r scheduler.Runner, jobID, name string) (scheduler.WorkloadStatus, string) {
	st, err := r.Status(ctx, jobID)
	if err != nil {
		return scheduler.WorkloadStatus{}, err.Error()
	}
	ws := st.Workloads[name]
	return ws, fmt.Sprintf("%+v (exit code %s)", ws, fmtCode(ws.ExitCode))
}

func fmtCode(c *int) string {
	if c == nil {
		return "none"
	}
	return strconv.Itoa(*c)
}

// restartInPlace: Restart starts the workload again at the same address;
// its restart count rises and the new process serves.
func restartInPlace(t *testing.T, newRuntime Factory) {
	needTools(t, "python3")
	b, r := newRuntime(t)
	ctx := testContext(t)
	art := buildContractPy(ctx, t, b)
	st := runJob(ctx, t, r, scheduler.Job{ID: "job-restart", Workloads: map[string]scheduler.Task{"web": contractTask(art)}})
	before := st.Workloads["web"]
	instance := get(t, before.Address, "/instance")
	if err := r.Restart(ctx, "job-restart"); err != nil {
		t.Fatalf("restart: %v", err)
	}
	waitFor(t, "the restart counted, at the same address", func() (bool, string) {
		ws, state := workloadStatus(ctx, r, "job-restart", "web")
		return ws.Restarts > before.Restarts && ws.Running && ws.Address == before.Address && !ws.Dead, state
	})
	waitFor(t, "a new process answering at the same address", func() (bool, string) {
		body, err := tryGet(before.Address, "/instance")
		return err == nil && body != instance, fmt.Sprintf("instance %q (was %q), %v", body, instance, err)
	})
	waitFor(t, "health passing after the restart", func() (bool, string) {
		ws, state := workloadStatus(ctx, r, "job-restart", "web")
		return ws.Health == scheduler.HealthPassing, state
	})
	stopAndGone(ctx, t, r, "job-restart", before.Address)
}

// startOrder: a workload that needs another (it exits unless the other
// accepts connections when it starts) runs when the order puts the other
// first, although by name it would start first. The dependency takes a
// second to listen, so a runtime that starts both at once fails the run.
func startOrder(t *testing.T, newRuntime Factory) {
	needTools(t, "python3", "sh")
	b, r := newRuntime(t)
	ctx := testContext(t)
	art := buildContractPy(ctx, t, b)
	port := freeLoopbackPort(t)
	dep := contractTask(art)
	dep.Command = []string{"sh", "-c", "sleep 1; exec python3 contract.py"}
	dep.Port = port
	app := contractTask(art)
	app.Env = map[string]string{"DEPENDS_ON": net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	st := runJob(ctx, t, r, scheduler.Job{
		ID:        "job-order",
		Workloads: map[string]scheduler.Task{"app": app, "zdb": dep},
		Order:     []string{"zdb"}, // "app" is left out: it starts after
	})
	for _, name := range []string{"app", "zdb"} {
		ws := st.Workloads[name]
		if !ws.Running || ws.Restarts != 0 {
			t.Errorf("%s after run = %+v, want running without restarts", name, ws)
		}
	}
	if got := get(t, st.Workloads["app"].Address, "/"); !strings.Contains(got, "contract-marker") {
		t.Errorf("GET app / = %q, want the contract marker", got)
	}
}

// deadAfterRepeatedCrashes: a workload that crashes again at once after
// every restart exhausts the restart policy and is reported dead, with
// its exit code; Stop still works.
func deadAfterRepeatedCrashes(t *testing.T, newRuntime Factory) {
	needTools(t, "python3")
	b, r := newRuntime(t)
	ctx := testContext(t)
	art := buildContractPy(ctx, t, b)
	st := runJob(ctx, t, r, scheduler.Job{ID: "job-dead", Workloads: map[string]scheduler.Task{"web": contractTask(art)}})
	if ws := st.Workloads["web"]; ws.Dead {
		t.Fatalf("status after run = %+v, want alive", ws)
	}
	_, _ = tryGet(st.Workloads["web"].Address, "/crash")
	waitFor(t, "the workload dead after its restart budget", func() (bool, string) {
		ws, state := workloadStatus(ctx, r, "job-dead", "web")
		return ws.Dead && !ws.Running && ws.ExitCode != nil && *ws.ExitCode == 4 && ws.Restarts >= 1, state
	})
	if err := r.Stop(ctx, "job-dead"); err != nil {
		t.Fatalf("stop a job with a dead workload: %v", err)
	}
}

// volumeSurvivesJobs: what a job of app X writes in its volume, the next
// job of app X reads; a job of app Y, with a volume of the same name,
// does not see it.
func volumeSurvivesJobs(t *testing.T, newRuntime Factory) {
	needTools(t, "python3")
	b, r := newRuntime(t)
	ctx := testContext(t)
	withVolume := func(art scheduler.Artifact) map[string]scheduler.Task {
		task := contractTask(art)
		task.Mounts = []scheduler.Mount{{Volume: "data", Path: "/data"}}
		return map[string]scheduler.Task{"web": task}
	}
	marker := fmt.Sprintf("volume-marker-%d", time.Now().UnixNano())

	st := runJob(ctx, t, r, scheduler.Job{ID: "job-vol-a", AppID: "app-x", Workloads: withVolume(buildContractPy(ctx, t, b))})
	addr := st.Workloads["web"].Address
	if got := get(t, addr, "/volume/write?v="+marker); got != "written" {
		t.Fatalf("write through job A = %q", got)
	}
	stopAndGone(ctx, t, r, "job-vol-a", addr)

	st = runJob(ctx, t, r, scheduler.Job{ID: "job-vol-b", AppID: "app-x", Workloads: withVolume(buildContractPy(ctx, t, b))})
	if got := get(t, st.Workloads["web"].Address, "/volume/read"); got != marker {
		t.Errorf("read through job B of the same app = %q, want %q", got, marker)
	}

	st = runJob(ctx, t, r, scheduler.Job{ID: "job-vol-c", AppID: "app-y", Workloads: withVolume(buildContractPy(ctx, t, b))})
	body, err := tryGet(st.Workloads["web"].Address, "/volume/read")
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("read through a job of another app = %q, %v; want 404 (no marker)", body, err)
	}
}

// freeLoopbackPort returns a port free on 127.0.0.1 a moment ago.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
