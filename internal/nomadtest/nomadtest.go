// Package nomadtest owns starting a real `nomad agent -dev` for the
// contract suites that run against one (scheduler/nomad's runtime suite,
// edge/nomadsd's route source suite): the binary from SVC_NOMAD_BIN or
// PATH (a Nomad v2 built from a hashicorp/nomad release tag with its
// makefile's build tags; none is installed here and none is ever
// committed), loopback ports, its data under the test's directory, the
// cloud fingerprinters denied so that raw_exec and exec run, and, when
// the test ends, the agent stopped and what its client left mounted under
// that directory detached. With ACLs on it bootstraps them and makes
// client tokens of a given policy (Bootstrap, ClientToken). Without a
// binary the test is skipped, saying why.
//
// It must not import the packages it tests.
package nomadtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svchost/svc/internal/testserver"
)

// Options shape the agent.
type Options struct {
	// Skip is what the skip message says ran instead (for example "the
	// contract suite ran against the fake Nomad only").
	Skip string
	// ACL turns Nomad's ACLs on (the test bootstraps them).
	ACL bool
	// Client settings added to the client block (such as static host
	// volumes).
	Client map[string]any
	// Config settings added at the top of the agent's configuration
	// (such as a vault block).
	Config map[string]any
}

// Agent is a running agent.
type Agent struct {
	// Addr is its HTTP API, http://127.0.0.1:<port>.
	Addr string
	// Dir is its directory (data under data/, dynamic host volumes under
	// host_volumes/).
	Dir string
	// Exited is closed when the agent's process ends.
	Exited <-chan struct{}
	out    *testserver.Output
}

// Output is what the agent wrote so far.
func (a *Agent) Output() string { return a.out.String() }

// Start starts an agent, or skips the test when there is no nomad binary.
// It returns once the process runs; waiting for a leader or a ready node
// is the caller's (what it waits for differs).
func Start(t testing.TB, o Options) *Agent {
	t.Helper()
	bin := os.Getenv("SVC_NOMAD_BIN")
	if bin == "" {
		p, err := exec.LookPath("nomad")
		if err != nil {
			t.Skipf("no nomad binary on PATH (or SVC_NOMAD_BIN): %s; build a Nomad v2 agent from a hashicorp/nomad release tag with its makefile's build tags to run it against a real agent", o.Skip)
		}
		bin = p
	}
	dir := t.TempDir()
	first, err := testserver.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	ports := []int{first, first + 1, first + 2}
	client := map[string]any{
		"enabled":          true,
		"options":          map[string]string{"fingerprint.denylist": "env_aws,env_gce,env_azure,env_digitalocean"},
		"host_volumes_dir": filepath.Join(dir, "host_volumes"),
	}
	for k, v := range o.Client {
		client[k] = v
	}
	cfg := map[string]any{
		"data_dir":             filepath.Join(dir, "data"),
		"bind_addr":            "127.0.0.1",
		"log_level":            "WARN",
		"ports":                map[string]int{"http": ports[0], "rpc": ports[1], "serf": ports[2]},
		"advertise":            map[string]string{"http": "127.0.0.1", "rpc": "127.0.0.1", "serf": "127.0.0.1"},
		"client":               client,
		"plugin":               map[string]any{"raw_exec": map[string]any{"config": map[string]any{"enabled": true}}},
		"disable_update_check": true,
	}
	if o.ACL {
		cfg["acl"] = map[string]any{"enabled": true}
	}
	for k, v := range o.Config {
		cfg[k] = v
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "agent.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out := &testserver.Output{}
	cmd := exec.Command(bin, "agent", "-dev", "-config", file)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nomad agent: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		unmountUnder(t, dir)
		if t.Failed() {
			t.Logf("nomad's output:\n%s", out.String())
		}
	})
	return &Agent{Addr: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), Dir: dir, Exited: exited, out: out}
}

// mntDetach is Linux's MNT_DETACH.
const mntDetach = 0x2

// unmountUnder detaches what the stopped agent left mounted under dir: a
// Nomad client running as root mounts each task's secrets and private
// directories (tmpfs) and leaves them when it stops without destroying
// its allocations, which would keep the test's directory from being
// removed.
func unmountUnder(t testing.TB, dir string) {
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

// Bootstrap bootstraps the ACLs of an agent started with ACL and returns
// the management token. Starting an agent is the one wait that asks
// again: until it has a leader there is nothing to block on.
func (a *Agent) Bootstrap(t testing.TB) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var boot struct{ SecretID string }
		err := a.Call(http.MethodPost, "/v1/acl/bootstrap", "", nil, &boot)
		if err == nil && boot.SecretID != "" {
			return boot.SecretID
		}
		select {
		case <-a.Exited:
			t.Fatalf("nomad exited while starting:\n%s", a.Output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nomad's ACLs could not be bootstrapped within 60s (last error %v):\n%s", err, a.Output())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ClientToken makes an ACL policy named name with rules (HCL) and a client
// token holding it alone, with the management token, and returns the
// token's secret.
func (a *Agent) ClientToken(t testing.TB, management, name, rules string) string {
	t.Helper()
	if err := a.Call(http.MethodPost, "/v1/acl/policy/"+name, management,
		map[string]string{"Name": name, "Rules": rules}, nil); err != nil {
		t.Fatalf("create nomad ACL policy %s: %v", name, err)
	}
	var tok struct{ SecretID string }
	if err := a.Call(http.MethodPost, "/v1/acl/token", management,
		map[string]any{"Name": name, "Type": "client", "Policies": []string{name}}, &tok); err != nil || tok.SecretID == "" {
		t.Fatalf("create a nomad ACL token with policy %s: %v", name, err)
	}
	return tok.SecretID
}

// Call sends one request to the agent's HTTP API with token (none when
// empty) and decodes a 200 answer into out (when not nil).
func (a *Agent) Call(method, path, token string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.Addr+path, r)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
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
