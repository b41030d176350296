package nomad_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/nomadtest"
	"github.com/svchost/svc/internal/spec"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
)

// startAgent starts a real `nomad agent -dev` (nomadtest) for the test
// and returns its HTTP address once it has a ready node with raw_exec, or
// skips when there is no nomad binary. Its client makes dynamic host
// volumes with the built-in "mkdir" plugin, which needs no configuration:
// each is a directory under the agent's host_volumes_dir.
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
	a := nomadtest.Start(t, nomadtest.Options{Client: client,
		Skip: "the contract suite ran against the fake Nomad only (TestContract)"})
	waitAgent(t, a.Addr)
	return a.Addr, a.Dir
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
func waitAgent(t testing.TB, addr string) { t.Helper(); waitAgentToken(t, addr, "") }

// waitAgentToken is waitAgent asking with an ACL token.
func waitAgentToken(t testing.TB, addr, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		var nodes []struct {
			Status  string
			Drivers map[string]struct{ Healthy bool }
		}
		if err := getJSONToken(ctx, addr+"/v1/nodes", token, &nodes); err == nil {
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

func getJSON(ctx context.Context, url string, out any) error {
	return getJSONToken(ctx, url, "", out)
}

func getJSONToken(ctx context.Context, url, token string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
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
