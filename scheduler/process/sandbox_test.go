package process_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
)

// TestSandboxView: a sandboxed workload sees a read-only host, writes its
// artifact directory and its volume (at the volume's real path, even one
// missing on the host under a read-only directory), has a private /tmp,
// its own PID namespace, and sees none of the runtime's files.
func TestSandboxView(t *testing.T) {
	needSandbox(t)
	// Outside /tmp (private in a sandbox anyway), so that hiding is seen
	// at work: a control file beside the hidden ones stays visible.
	base, err := os.MkdirTemp("/var/tmp", "svc-sandbox-test-")
	if err != nil {
		t.Skipf("no directory outside /tmp to test with: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	cfg := testConfig(t)
	cfg.WorkDir = filepath.Join(base, "work")
	secret := filepath.Join(base, "secret.key")
	control := filepath.Join(base, "control")
	for _, f := range []string{secret, control} {
		if err := os.WriteFile(f, []byte("hidden"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg.SandboxHide = []string{secret}
	rt := newRuntime(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	// The runtime's own files: another app's volume and a job's log.
	other := rt.VolumeDir("app-other", "data")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "theirs"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	art := commandArtifact(t)
	script := strings.Join([]string{
		`check() { if eval "$2"; then echo "$1=yes"; else echo "$1=no"; fi; }`,
		`check root_writable 'touch /svc-sandbox-probe 2>/dev/null'`,
		`check etc_writable 'touch /etc/svc-sandbox-probe 2>/dev/null'`,
		`check artifact_writable 'echo a > ./written'`,
		`check volume_writable 'echo v > /srv/svc-test/volume/f'`,
		`check volume_env '[ "$SVC_VOLUME_DATA" = /srv/svc-test/volume ]'`,
		`check tmp_writable 'echo t > /tmp/t'`,
		`check host_tmp_visible '[ -e "$HOST_TMP_FILE" ]'`,
		`check workdir_visible '[ -e "$OTHER_VOLUME/theirs" ]'`,
		`check secret_readable 'grep -q hidden "$SECRET" 2>/dev/null'`,
		`check control_readable 'grep -q hidden "$CONTROL" 2>/dev/null'`,
		`check pid_ns '[ "$$" -lt 10 ]'`,
		`echo done > ./report-done`,
		`exec sleep 1000`,
	}, "\n")
	hostTmp, err := os.CreateTemp("/tmp", "svc-host-tmp")
	if err != nil {
		t.Fatal(err)
	}
	hostTmp.Close()
	defer os.Remove(hostTmp.Name())
	_, err = rt.Run(ctx, scheduler.Job{ID: "job-sb", AppID: "app-sb", Workloads: map[string]scheduler.Task{"w": {
		Artifact:  art,
		Command:   []string{"sh", "-c", script},
		Env:       map[string]string{"HOST_TMP_FILE": hostTmp.Name(), "OTHER_VOLUME": other, "SECRET": secret, "CONTROL": control},
		NoPort:    true,
		Isolation: policy.IsolationSandbox,
		Mounts:    []scheduler.Mount{{Volume: "data", Path: "/srv/svc-test/volume"}},
	}}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	waitUntil(t, "the sandbox report", func() (bool, string) {
		_, err := os.Stat(filepath.Join(cfg.WorkDir, "work", "job-sb", "w", "report-done"))
		return err == nil, ""
	})
	lines, err := rt.Logs(ctx, "job-sb", "w")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range lines {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	want := map[string]string{
		"root_writable": "no", "etc_writable": "no", "artifact_writable": "yes", "volume_writable": "yes",
		"volume_env": "yes", "tmp_writable": "yes", "host_tmp_visible": "no", "workdir_visible": "no",
		"secret_readable": "no", "control_readable": "yes", "pid_ns": "yes",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (log: %q)", k, got[k], v, lines)
		}
	}
	if b, err := os.ReadFile(filepath.Join(rt.VolumeDir("app-sb", "data"), "f")); err != nil || string(b) != "v\n" {
		t.Errorf("the volume on the host: %q, %v", b, err)
	}
	if _, err := os.Stat("/srv/svc-test"); err == nil {
		t.Errorf("the sandbox made its mount point on the host")
	}
	if _, err := os.Stat(filepath.Join(art.Dir, "srv")); err == nil {
		t.Errorf("a sandboxed workload got a volume link in its artifact")
	}
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

// TestSandboxedBuild: with BuildIsolation sandbox, a build writes its work
// area and not the host.
func TestSandboxedBuild(t *testing.T) {
	needSandbox(t)
	cfg := testConfig(t)
	cfg.BuildIsolation = policy.IsolationSandbox
	rt := newRuntime(t, cfg)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "in.txt"), []byte("in\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	art, err := rt.Build(context.Background(), scheduler.BuildRequest{Source: src, Build: spec.Build{
		Kind:    spec.BuildCommand,
		Command: `cp in.txt out.txt && if touch /etc/svc-build-probe 2>/dev/null; then echo host-writable; exit 1; fi`,
	}})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(art.Dir, "out.txt")); err != nil || string(b) != "in\n" {
		t.Errorf("the build's output: %q, %v", b, err)
	}
}
