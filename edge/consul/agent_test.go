package consul

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/svchost/svc/internal/testserver"
)

// The contract suite against a real Consul: `consul agent -dev` with ACLs
// on (deny by default, a management token), started by the test on
// loopback ports and stopped after it. It runs when there is a consul
// binary (SVC_CONSUL_BIN, or consul on PATH) and is skipped, saying so,
// otherwise.

// agentCluster is a real Consul agent as the contract suite drives it.
type agentCluster struct {
	addr   string
	tok    string
	client *api.Client
}

var _ cluster = (*agentCluster)(nil)

func TestContractAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not starting a consul agent")
	}
	runContract(t, startAgent(t))
}

// anonymousTokenID is the accessor ID of Consul's anonymous token.
const anonymousTokenID = "00000000-0000-0000-0000-000000000002"

// startAgent starts `consul agent -dev` and waits for its leader and its
// ACL bootstrap.
func startAgent(t *testing.T) *agentCluster {
	t.Helper()
	bin := os.Getenv("SVC_CONSUL_BIN")
	if bin == "" {
		p, err := exec.LookPath("consul")
		if err != nil {
			t.Skip("no consul binary on PATH (or SVC_CONSUL_BIN; scripts/consul-tool.sh builds one): the consul route source's contract suite ran against the fake Consul only (TestContractFake)")
		}
		bin = p
	}
	const tok = "9c2d8f57-3c8f-4a8e-a7a1-2a9c5d3e6b10"
	ports := freePorts(t, 4)
	cfg := map[string]any{
		"node_name":            "svc-test",
		"bind_addr":            "127.0.0.1",
		"client_addr":          "127.0.0.1",
		"disable_update_check": true,
		"log_level":            "warn",
		"ports": map[string]int{
			"http": ports[0], "serf_lan": ports[1], "serf_wan": ports[2], "server": ports[3],
			"dns": -1, "grpc": -1, "grpc_tls": -1,
		},
		"acl": map[string]any{
			"enabled": true, "default_policy": "deny",
			"tokens": map[string]string{"initial_management": tok, "agent": tok},
		},
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "consul.json")
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var out testserver.Output
	cmd := exec.Command(bin, "agent", "-dev", "-config-file", file)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start consul: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("consul's output:\n%s", out.String())
		}
	})

	addr := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	client, err := api.NewClient(&api.Config{Address: addr, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	// Starting an agent is the one wait that asks again: until it has a
	// leader there is nothing to block on, and until that leader has made
	// the management and anonymous tokens (it does so just after it is
	// elected) the test's requests would be refused, "ACL not found".
	// Reading the anonymous token with the management token proves both.
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader, err := client.Status().Leader()
		if err == nil && leader != "" {
			if _, _, err = client.ACL().TokenRead(anonymousTokenID, nil); err == nil {
				break
			}
		}
		select {
		case <-exited:
			t.Fatalf("consul exited while starting:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("consul had no leader after 30s (last error %v):\n%s", err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &agentCluster{addr: addr, tok: tok, client: client}
}

func (c *agentCluster) address() string { return c.addr }
func (c *agentCluster) token() string   { return c.tok }

func (c *agentCluster) readToken(t *testing.T, services, nodes []string) string {
	t.Helper()
	var rules strings.Builder
	for _, p := range services {
		fmt.Fprintf(&rules, "service_prefix %q {\n  policy = \"read\"\n}\n", p)
	}
	for _, p := range nodes {
		fmt.Fprintf(&rules, "node_prefix %q {\n  policy = \"read\"\n}\n", p)
	}
	acl := c.client.ACL()
	pol, _, err := acl.PolicyCreate(&api.ACLPolicy{Name: fmt.Sprintf("svc-read-%d", seq.Add(1)), Rules: rules.String()}, nil)
	if err != nil {
		t.Fatalf("create policy %q: %v", rules.String(), err)
	}
	tok, _, err := acl.TokenCreate(&api.ACLToken{Description: "svc contract: read only", Policies: []*api.ACLTokenPolicyLink{{ID: pol.ID}}}, nil)
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	return tok.SecretID
}

func (c *agentCluster) register(t *testing.T, in instance) {
	t.Helper()
	status := api.HealthPassing
	if !in.passing {
		status = api.HealthCritical
	}
	err := c.client.Agent().ServiceRegister(&api.AgentServiceRegistration{
		ID: in.id, Name: in.service, Tags: in.tags(), Address: in.addr, Port: in.port,
		Check: &api.AgentServiceCheck{CheckID: "check-" + in.id, TTL: "10m", Status: status},
	})
	if err != nil {
		t.Fatalf("register %s: %v", in.id, err)
	}
}

func (c *agentCluster) setPassing(t *testing.T, id string, passing bool) {
	t.Helper()
	status := api.HealthPassing
	if !passing {
		status = api.HealthCritical
	}
	if err := c.client.Agent().UpdateTTL("check-"+id, "", status); err != nil {
		t.Fatalf("update check of %s: %v", id, err)
	}
}

func (c *agentCluster) deregister(t *testing.T, id string) {
	t.Helper()
	if err := c.client.Agent().ServiceDeregister(id); err != nil {
		t.Fatalf("deregister %s: %v", id, err)
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
