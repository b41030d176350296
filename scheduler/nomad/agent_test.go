package nomad_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
)

// startAgent starts a real `nomad agent -dev` on loopback ports for the
// test and returns its HTTP address, or skips when no nomad binary is on
// PATH (SVC_NOMAD_BIN names one elsewhere). The agent is a Nomad v2 built
// from a release of hashicorp/nomad with its makefile's build tags; none
// is installed here, and none is ever committed to the project. It runs
// raw_exec and exec jobs once the cloud fingerprinters are denied
// (fingerprint.denylist), which this configuration does. Its client
// makes dynamic host volumes with the built-in "mkdir" plugin, which
// needs no configuration: each is a directory under host_volumes_dir
// (set here to the test's directory, as data_dir's default would be).
func startAgent(t *testing.T) string {
	t.Helper()
	addr, _ := startAgentWith(t, nil)
	return addr
}

// startAgentWith starts the agent of startAgent with client settings
// added to its configuration (such as static host volumes) and returns
// its address and its directory.
func startAgentWith(t *testing.T, client map[string]any) (addr, dir string) {
	t.Helper()
	bin := os.Getenv("SVC_NOMAD_BIN")
	if bin == "" {
		p, err := exec.LookPath("nomad")
		if err != nil {
			t.Skip("no nomad binary on PATH (or SVC_NOMAD_BIN): the contract suite ran against the fake Nomad only (TestContract); " +
				"build a Nomad v2 agent from a hashicorp/nomad release tag with its makefile's build tags and put it on PATH to run it against a real agent")
		}
		bin = p
	}
	dir = t.TempDir()
	ports := freePorts(t, 3)
	clientCfg := map[string]any{
		"enabled": true,
		"options": map[string]string{
			"fingerprint.denylist": "env_aws,env_gce,env_azure,env_digitalocean",
		},
		"host_volumes_dir": filepath.Join(dir, "host_volumes"),
	}
	for k, v := range client {
		clientCfg[k] = v
	}
	cfg := map[string]any{
		"data_dir":             filepath.Join(dir, "data"),
		"bind_addr":            "127.0.0.1",
		"log_level":            "WARN",
		"ports":                map[string]int{"http": ports[0], "rpc": ports[1], "serf": ports[2]},
		"advertise":            map[string]string{"http": "127.0.0.1", "rpc": "127.0.0.1", "serf": "127.0.0.1"},
		"client":               clientCfg,
		"plugin":               map[string]any{"raw_exec": map[string]any{"config": map[string]any{"enabled": true}}},
		"disable_update_check": true,
	}
	b, _ := json.Marshal(cfg)
	cfgFile := filepath.Join(dir, "agent.json")
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "agent", "-dev", "-config", cfgFile)
	cmd.Stdout, cmd.Stderr = testWriter{t}, testWriter{t}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nomad agent: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		unmountUnder(t, dir)
	})
	addr = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	waitAgent(t, addr)
	return addr, dir
}

// staticVolumeApp is the app whose volume "data" the agent of
// TestVolumes declares as a static host volume in its client
// configuration.
const staticVolumeApp = "app-static"

// TestVolumes runs the volume cases the contract suite does not have
// against the fake Nomad, and against a real agent when there is one
// (whose client also declares a static host volume).
func TestVolumes(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		runVolumeCases(t, func(t *testing.T, mod func(*nomad.Config)) *env {
			return newEnv(t, options{runtime: mod})
		}, "", "", "")
	})
	t.Run("agent", func(t *testing.T) {
		static := t.TempDir()
		addr, dir := startAgentWith(t, map[string]any{"host_volume": map[string]any{
			jobtemplates.VolumeSource(staticVolumeApp, "data"): map[string]any{"path": static},
		}})
		runVolumeCases(t, func(t *testing.T, mod func(*nomad.Config)) *env {
			return newEnv(t, options{address: addr, runtime: func(c *nomad.Config) {
				c.ServiceProvider = jobtemplates.ProviderNomad
				if mod != nil {
					mod(c)
				}
			}})
		}, addr, filepath.Join(dir, "host_volumes"), static)
	})
}

// runVolumeCases: a volume with a size is created (Nomad refuses a
// capacity_max below capacity_min) as a directory of the mkdir plugin
// (under hostVolumesDir, or the fake's <DataDir>/volumes) that the
// workload writes to; a static host volume (at static, when set, on the
// agent at addr) is used instead of creating one; and where no volume can be had the error says
// what to configure.
func runVolumeCases(t *testing.T, newEnv func(t *testing.T, mod func(*nomad.Config)) *env, addr, hostVolumesDir, static string) {
	t.Run("a volume with a size is a directory of the mkdir plugin", func(t *testing.T) {
		e := newEnv(t, nil)
		ctx := context.Background()
		runVolumeJob(ctx, t, e, "job-sized", "app-sized", 1<<30)
		dir := hostVolumesDir
		if e.fake != nil {
			dir = filepath.Join(e.fakeData, "volumes")
		}
		path := writeVolumeMarker(ctx, t, e, "job-sized")
		if filepath.Dir(path) != dir {
			t.Errorf("the volume is at %s, want a directory of %s", path, dir)
		}
	})
	t.Run("a static host volume is used", func(t *testing.T) {
		if static == "" {
			t.Skip("the fake's node declares no static host volume")
		}
		e := newEnv(t, nil)
		ctx := context.Background()
		runVolumeJob(ctx, t, e, "job-static", staticVolumeApp, 0)
		if path := writeVolumeMarker(ctx, t, e, "job-static"); path != static {
			t.Errorf("the volume is at %s, want the static host volume's path %s", path, static)
		}
		var vols []struct{ ID, Name string }
		if err := getJSON(ctx, addr+"/v1/volumes?type=host", &vols); err != nil {
			t.Fatal(err)
		}
		for _, v := range vols {
			if v.Name == jobtemplates.VolumeSource(staticVolumeApp, "data") {
				t.Errorf("a dynamic host volume %s was created beside the static one of its name", v.ID)
			}
		}
	})
	t.Run("no volume can be had", func(t *testing.T) {
		e := newEnv(t, func(c *nomad.Config) { c.NodePool, c.Builds = "no-such-pool", nomad.BuildsOnController })
		ctx := context.Background()
		_, err := e.rt.Run(ctx, volumeJob(ctx, t, e, "job-nopool", "app-nopool", 0))
		ce, ok := errcode.As(err)
		if !ok || ce.Code != errcode.AdapterFailed {
			t.Fatalf("Run = %v, want ADAPTER_FAILED", err)
		}
		for _, want := range []string{`node pool "no-such-pool" does not exist`} {
			if !strings.Contains(ce.Message, want) {
				t.Errorf("message %q does not say %q", ce.Message, want)
			}
		}
		for _, want := range []string{`host_volume "svc-app-nopool-data"`, "host_volumes_dir", "mkdir"} {
			if !strings.Contains(ce.Remedy, want) {
				t.Errorf("remedy %q does not say %q", ce.Remedy, want)
			}
		}
	})
}

// volumeJob is a job of the app whose workload "web" mounts volume
// "data" of the size and sleeps.
func volumeJob(ctx context.Context, t *testing.T, e *env, jobID, appID string, size int64) scheduler.Job {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "x.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	art, err := e.rt.Build(ctx, scheduler.BuildRequest{Source: src, Build: spec.Build{Kind: spec.BuildCommand, Command: "true"}})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return scheduler.Job{ID: jobID, AppID: appID, Workloads: map[string]scheduler.Task{"web": {
		Artifact: art, Command: []string{"sh", "-c", "exec sleep 1000"}, NoPort: true,
		Mounts: []scheduler.Mount{{Volume: "data", Path: "/data", SizeBytes: size}},
	}}}
}

// runVolumeJob runs volumeJob and stops it when the test ends.
func runVolumeJob(ctx context.Context, t *testing.T, e *env, jobID, appID string, size int64) {
	t.Helper()
	if _, err := e.rt.Run(ctx, volumeJob(ctx, t, e, jobID, appID, size)); err != nil {
		t.Fatalf("run %s: %v", jobID, err)
	}
	t.Cleanup(func() { _ = e.rt.Stop(context.Background(), jobID) })
}

// writeVolumeMarker has the job's workload write a marker into its
// volume "data" (a raw_exec workload is told where it is) and returns the
// volume's path, after checking the marker is there.
func writeVolumeMarker(ctx context.Context, t *testing.T, e *env, jobID string) string {
	t.Helper()
	s, err := e.rt.Exec(ctx, scheduler.ExecRequest{JobID: jobID, Workload: "web",
		Command: []string{"sh", "-c", `printf %s "$SVC_VOLUME_DATA"; echo volume-marker > "$SVC_VOLUME_DATA/marker"`}})
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	defer s.Close()
	out, err := io.ReadAll(s)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if code, err := s.Wait(); code != 0 || err != nil {
		t.Fatalf("writing the marker: exit %d, %v; output %q", code, err, out)
	}
	path := string(out)
	if b, err := os.ReadFile(filepath.Join(path, "marker")); err != nil || string(b) != "volume-marker\n" {
		t.Errorf("the marker in %s = %q, %v; want the workload's", path, b, err)
	}
	return path
}

// waitAgent waits until the agent has a leader and a ready node with
// raw_exec, polling up to a minute.
func waitAgent(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		var nodes []struct {
			Status  string
			Drivers map[string]struct{ Healthy bool }
		}
		if err := getJSON(ctx, addr+"/v1/nodes", &nodes); err == nil {
			for _, n := range nodes {
				if n.Status == "ready" && n.Drivers["raw_exec"].Healthy {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the nomad agent at %s has no ready node with raw_exec after a minute", addr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// mntDetach is Linux's MNT_DETACH (unmountUnder runs on Linux only).
const mntDetach = 0x2

// unmountUnder detaches what the stopped agent left mounted under dir: a
// Nomad client running as root mounts each task's secrets and private
// directories (tmpfs) and leaves them when it stops without destroying
// its allocations, which would keep the test's directory from being
// removed.
func unmountUnder(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return // not Linux: nothing of the agent's is mounted
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) }) // deepest first
	for _, p := range points {
		if err := syscall.Unmount(p, mntDetach); err != nil {
			t.Errorf("unmount %s, left by the nomad agent: %v", p, err)
		}
	}
}

func getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

// testWriter sends a process's output to the test log, line by line.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log("nomad: " + line)
	}
	return len(p), nil
}
