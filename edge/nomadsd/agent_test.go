package nomadsd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The contract suite against a real Nomad: `nomad agent -dev` with ACLs
// on, the cloud fingerprinters denied and raw_exec enabled, started by the
// test on loopback ports and stopped after it. Apps run as raw_exec jobs
// (a sleep) whose group services use the nomad provider. It runs when
// nomad is on PATH and is skipped, saying so, otherwise.

type agentCluster struct {
	addr string
	tok  string
	hc   *http.Client
}

var _ cluster = (*agentCluster)(nil)

func TestContractAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not starting a nomad agent")
	}
	runContract(t, startAgent(t))
}

const agentConfig = `
bind_addr = "127.0.0.1"
log_level = "WARN"
ports {
  http = %d
  rpc  = %d
  serf = %d
}
acl {
  enabled = true
}
client {
  options = {
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
  }
}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
`

func startAgent(t *testing.T) *agentCluster {
	t.Helper()
	bin, err := exec.LookPath("nomad")
	if err != nil {
		t.Skip("nomad is not on PATH: the nomad route source's contract suite ran against the fake Nomad only (TestContractFake)")
	}
	ports := freePorts(t, 3)
	dir := t.TempDir()
	file := filepath.Join(dir, "nomad.hcl")
	if err := os.WriteFile(file, fmt.Appendf(nil, agentConfig, ports[0], ports[1], ports[2]), 0o600); err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	cmd := exec.Command(bin, "agent", "-dev", "-config", file)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nomad: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("nomad's output:\n%s", out.String())
		}
	})
	c := &agentCluster{addr: "http://127.0.0.1:" + strconv.Itoa(ports[0]), hc: &http.Client{Timeout: 30 * time.Second}}

	// Starting an agent is the one wait that asks again: until it has a
	// leader there is nothing to block on.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var boot struct{ SecretID string }
		err := c.do(http.MethodPost, "/v1/acl/bootstrap", nil, &boot)
		if err == nil && boot.SecretID != "" {
			c.tok = boot.SecretID
			break
		}
		select {
		case <-exited:
			t.Fatalf("nomad exited while starting:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nomad's ACLs could not be bootstrapped within 60s (last error %v):\n%s", err, out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return c
}

// do sends a request with the management token and decodes the answer.
func (c *agentCluster) do(method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, c.addr+path, r)
	if err != nil {
		return err
	}
	if c.tok != "" {
		req.Header.Set("X-Nomad-Token", c.tok)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (c *agentCluster) address() string { return c.addr }
func (c *agentCluster) token() string   { return c.tok }

// run registers the app's job with count n: a raw_exec sleep in a group
// whose services (nomad provider) are the primary workload's on one
// dynamic port and a secondary workload's on another.
func (c *agentCluster) run(t *testing.T, a app, n int) []string {
	t.Helper()
	job := map[string]any{
		"ID": a.job, "Name": a.job, "Type": "service", "Datacenters": []string{"*"},
		"TaskGroups": []any{map[string]any{
			"Name": "web", "Count": n,
			"Networks": []any{map[string]any{"DynamicPorts": []any{
				map[string]any{"Label": "http"}, map[string]any{"Label": "admin"},
			}}},
			"Services": []any{
				map[string]any{"Name": a.service, "PortLabel": "http", "Provider": "nomad", "Tags": a.tags(true)},
				map[string]any{"Name": a.worker, "PortLabel": "admin", "Provider": "nomad", "Tags": a.tags(false)},
			},
			"Tasks": []any{map[string]any{
				"Name": "sleep", "Driver": "raw_exec",
				"Config":    map[string]any{"command": "/bin/sleep", "args": []string{"3600"}},
				"Resources": map[string]any{"CPU": 20, "MemoryMB": 16},
			}},
		}},
	}
	if err := c.do(http.MethodPost, "/v1/jobs", map[string]any{"Job": job}, nil); err != nil {
		t.Fatalf("register job %s: %v", a.job, err)
	}
	return nil
}

func (c *agentCluster) stop(t *testing.T, a app) {
	t.Helper()
	if err := c.do(http.MethodDelete, "/v1/job/"+a.job+"?purge=true", nil, nil); err != nil {
		t.Fatalf("stop job %s: %v", a.job, err)
	}
}

// freePorts returns n loopback TCP ports free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return out
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
