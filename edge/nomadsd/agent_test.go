package nomadsd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/svchost/svc/internal/nomadtest"
)

// The contract suite against a real Nomad: `nomad agent -dev` with ACLs
// on, the cloud fingerprinters denied and raw_exec enabled, started by the
// test on loopback ports with its data in the test's directory, and
// stopped after it (what it left mounted there is detached). Apps run as raw_exec jobs
// (a sleep) whose group services use the nomad provider. It runs when
// nomad is on PATH (or SVC_NOMAD_BIN names it, as for scheduler/nomad's
// suite) and is skipped, saying so, otherwise.

type agentCluster struct {
	agent *nomadtest.Agent
	addr  string
	tok   string
	hc    *http.Client
}

var _ cluster = (*agentCluster)(nil)

func TestContractAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not starting a nomad agent")
	}
	runContract(t, startAgent(t))
}

func startAgent(t *testing.T) *agentCluster {
	t.Helper()
	a := nomadtest.Start(t, nomadtest.Options{ACL: true,
		Skip: "the nomad route source's contract suite ran against the fake Nomad only (TestContractFake)"})
	c := &agentCluster{agent: a, addr: a.Addr, hc: &http.Client{Timeout: 30 * time.Second}}
	c.tok = a.Bootstrap(t)
	return c
}

// do sends a request with the management token and decodes the answer.
func (c *agentCluster) do(method, path string, body, out any) error {
	return c.agent.Call(method, path, c.tok, body, out)
}

func (c *agentCluster) address() string { return c.addr }
func (c *agentCluster) token() string   { return c.tok }

// run registers the app's job with count n: a raw_exec sleep in a group
// whose services (nomad provider) are the primary workload's on one
// dynamic port, a secondary workload's on another, and one not svc's.
// Nomad picks the ports when it places the allocations, so run waits
// (blocking queries on the job's allocations) until exactly n are placed
// to run, and returns the primary's upstreams: their "http" ports.
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
				map[string]any{"Name": a.job + "-cache", "PortLabel": "admin", "Provider": "nomad", "Tags": []string{"cache"}},
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
	var placed []string
	for index := uint64(0); len(placed) != n; {
		var allocs []struct{ ID, DesiredStatus, ClientStatus string }
		got, err := c.get("/v1/job/"+a.job+"/allocations", index, &allocs)
		if err != nil {
			t.Fatalf("read the allocations of job %s: %v", a.job, err)
		}
		placed = placed[:0]
		for _, al := range allocs {
			if al.DesiredStatus == "run" && (al.ClientStatus == "pending" || al.ClientStatus == "running") {
				placed = append(placed, al.ID)
			}
		}
		index = max(got, 1)
	}
	var ups []string
	for _, id := range placed {
		var al struct {
			AllocatedResources struct {
				Shared struct {
					Ports []struct {
						Label  string
						Value  int
						HostIP string
					}
				}
			}
		}
		if err := c.do(http.MethodGet, "/v1/allocation/"+id, nil, &al); err != nil {
			t.Fatalf("read allocation %s: %v", id, err)
		}
		for _, p := range al.AllocatedResources.Shared.Ports {
			if p.Label == "http" {
				ups = append(ups, net.JoinHostPort(p.HostIP, strconv.Itoa(p.Value)))
			}
		}
	}
	if len(ups) != n {
		t.Fatalf("job %s: the %d allocations placed have %d http ports: %v", a.job, n, len(ups), ups)
	}
	return ups
}

// get reads path into out with a blocking query: once Nomad's index is
// above index (at once for 0); it returns the answer's index.
func (c *agentCluster) get(path string, index uint64, out any) (uint64, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet,
		c.addr+path+"?wait=20s&index="+strconv.FormatUint(index, 10), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Nomad-Token", c.tok)
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: HTTP %d: %s", path, resp.StatusCode, b)
	}
	got, err := strconv.ParseUint(resp.Header.Get("X-Nomad-Index"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("GET %s: X-Nomad-Index: %w", path, err)
	}
	return got, json.Unmarshal(b, out)
}

func (c *agentCluster) stop(t *testing.T, a app) {
	t.Helper()
	if err := c.do(http.MethodDelete, "/v1/job/"+a.job+"?purge=true", nil, nil); err != nil {
		t.Fatalf("stop job %s: %v", a.job, err)
	}
}
