package nomad_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startAgent starts a real `nomad agent -dev` on loopback ports for the
// test and returns its HTTP address, or skips when no nomad binary is on
// PATH (SVC_NOMAD_BIN names one elsewhere). The agent is a Nomad v2 built
// from a release of hashicorp/nomad with its makefile's build tags; none
// is installed here, and none is ever committed to the project. It runs
// raw_exec and exec jobs once the cloud fingerprinters are denied
// (fingerprint.denylist), which this configuration does.
func startAgent(t *testing.T) string {
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
	dir := t.TempDir()
	ports := freePorts(t, 3)
	cfg := map[string]any{
		"data_dir":  filepath.Join(dir, "data"),
		"bind_addr": "127.0.0.1",
		"log_level": "WARN",
		"ports":     map[string]int{"http": ports[0], "rpc": ports[1], "serf": ports[2]},
		"advertise": map[string]string{"http": "127.0.0.1", "rpc": "127.0.0.1", "serf": "127.0.0.1"},
		"client": map[string]any{
			"enabled": true,
			"options": map[string]string{
				"fingerprint.denylist": "env_aws,env_gce,env_azure,env_digitalocean",
			},
		},
		"plugin": map[string]any{
			"raw_exec": map[string]any{"config": map[string]any{"enabled": true}},
		},
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
	})
	addr := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	waitAgent(t, addr)
	return addr
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
