package process_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/testserver"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
)

// helperEnv makes the test binary a helper process instead of running
// tests: "listen" serves HTTP on $LISTEN_HOST:$PORT; "orphan-child" runs a
// job on a runtime in $WORKDIR, prints its workload's pid and waits to be
// killed.
const helperEnv = "SVC_PROCESS_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		warmTestSeed()
		os.Exit(m.Run())
	case "listen":
		helperListen()
	case "orphan-child":
		helperOrphanChild()
	case "probe":
		helperProbe()
	default:
		fmt.Fprintln(os.Stderr, "unknown helper", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

func helperListen() {
	addr := net.JoinHostPort(os.Getenv("LISTEN_HOST"), os.Getenv("PORT"))
	fmt.Println("helper listening on", addr)
	err := http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "helper-marker")
	}))
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// helperOrphanChild is the server that dies: it runs a job whose workload
// writes its pid to a file, prints "pid=N" and blocks until killed.
func helperOrphanChild() {
	fail := func(err error) {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	dir := os.Getenv("WORKDIR")
	rt, err := process.New(process.Config{WorkDir: dir, SettleTime: 100 * time.Millisecond, Isolation: os.Getenv("ISOLATION")})
	if err != nil {
		fail(err)
	}
	art := filepath.Join(dir, "art")
	if err := os.MkdirAll(art, 0o700); err != nil {
		fail(err)
	}
	pidFile := filepath.Join(dir, "workload.pid")
	env := pidFile
	if os.Getenv("ISOLATION") != "none" {
		// A sandbox sees only its working copy.
		env, pidFile = "workload.pid", filepath.Join(dir, "work", "job-orphan", "sleeper", "workload.pid")
	}
	_, err = rt.Run(context.Background(), scheduler.Job{ID: "job-orphan", Workloads: map[string]scheduler.Task{"sleeper": {
		Artifact: scheduler.Artifact{ID: "a", Kind: "command", Dir: art},
		Command:  []string{"sh", "-c", `echo $$ > "$PIDFILE"; exec sleep 1000`},
		Env:      map[string]string{"PIDFILE": env},
		NoPort:   true,
	}}})
	if err != nil {
		fail(err)
	}
	// The workload writes its pid as it starts; the runtime records the
	// job (with the pid) just after the start: wait for both, so that the
	// test's kill never comes between them.
	record := filepath.Join(dir, "jobs", "job-orphan.json")
	var b []byte
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err = os.ReadFile(pidFile); err == nil && len(b) > 0 {
			if _, err = os.Stat(record); err == nil {
				break
			}
		}
		if time.Now().After(end) {
			break
		}
	}
	if err != nil {
		fail(err)
	}
	fmt.Printf("pid=%s\n", strings.TrimSpace(string(b)))
	select {}
}

// helperCommand runs the test binary as a helper workload.
func helperCommand(t *testing.T) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("test binary: %v", err)
	}
	return []string{exe}
}

// needSandbox skips unless the runtime offers the sandbox here; with
// SVC_REQUIRE_SANDBOX=1 (CI) it fails instead.
func needSandbox(t *testing.T) {
	t.Helper()
	rt, err := process.New(process.Config{WorkDir: sandboxDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	inst, err := process.KindFor(rt).Open(context.Background(), adapters.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := inst.Capabilities()["isolation"]; got != "sandbox" {
		if os.Getenv("SVC_REQUIRE_SANDBOX") == "1" {
			t.Fatalf("SVC_REQUIRE_SANDBOX=1 and bubblewrap does not work on this host (isolation %v)", got)
		}
		t.Skipf("bubblewrap does not work on this host (isolation %v): install bubblewrap to run this test", got)
	}
}

// waitUntil polls cond until it holds, failing after a generous deadline:
// no test fails because the machine is slow.
func waitUntil(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(45 * time.Second)
	last := ""
	for time.Now().Before(end) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last state: %s", what, last)
}

// processGone reports whether no live process has the pid (a zombie
// counts as gone).
func processGone(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

// testSeed is the Go build cache seed of every test runtime on this
// machine (built once per Go version: runtimes seed their apps' caches
// from it), so that sandboxed Go builds do not compile the standard
// library each time.
func testSeed() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "svc-tests", "go-seed")
}

// warmTestSeed warms testSeed before any test runs (no test's deadline
// covers it: the first time on a machine it takes a minute or two).
func warmTestSeed() {
	if _, err := exec.LookPath("go"); err != nil {
		return
	}
	if err := process.WarmGoCacheSeed(context.Background(), testSeed(), nil); err != nil {
		fmt.Fprintln(os.Stderr, "warming the Go build cache seed:", err)
	}
}

// sandboxDir returns a fresh directory that the sandboxes' users can pass
// through to what the runtime gives them (when the tests run as root).
func sandboxDir(t testing.TB) string { return testserver.PassableDir(t) }

// sharedCache is one toolchain cache directory for every sandboxed runtime
// of the tests (each app has its own below it, as in production; tests'
// jobs are nobody's and share one), so that Go builds are warm after the
// first.
var sharedCache = sync.OnceValue(func() string {
	d, err := os.MkdirTemp("", "svc-process-cache-")
	if err == nil {
		err = os.Chmod(d, 0o711)
	}
	if err != nil {
		panic(err)
	}
	return d
})

// testConfig is a runtime with short waits, without isolation: the tests
// of the supervisor, logs and usage look at its processes from outside.
// sandboxConfig is the same in the sandbox.
func testConfig(t *testing.T) process.Config {
	return process.Config{
		WorkDir:           sandboxDir(t),
		Isolation:         "none",
		StopGrace:         2 * time.Second,
		StartTimeout:      30 * time.Second,
		SettleTime:        200 * time.Millisecond,
		HealthInterval:    100 * time.Millisecond,
		RestartBackoff:    20 * time.Millisecond,
		MaxRestartBackoff: 200 * time.Millisecond,
	}
}

func sandboxConfig(t *testing.T) process.Config {
	cfg := testConfig(t)
	cfg.Isolation = "sandbox"
	cfg.CacheDir = sharedCache()
	cfg.GoCacheSeed = testSeed()
	return cfg
}

func newRuntime(t *testing.T, cfg process.Config) *process.Runtime {
	t.Helper()
	rt, err := process.New(cfg)
	if err != nil {
		t.Fatalf("new runtime: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// commandArtifact is an artifact directory for shell workloads.
func commandArtifact(t *testing.T) scheduler.Artifact {
	t.Helper()
	return scheduler.Artifact{ID: "test", Kind: "command", Dir: t.TempDir()}
}
