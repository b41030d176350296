package e2e

import (
	"strings"
	"testing"
)

// TestDeployGoWithDockerfile onboards samples/go-whoami, a Go program
// modelled on traefik/whoami that ships a multi-stage Dockerfile and takes
// its port from a -port flag, on the real binary's process runtime (which
// builds no Dockerfile), as a newcomer would: the Go bid wins with nothing
// to ask, its run command passes $PORT to the flag, accepted as it is it
// plans as deployable, deploys, and answers at the address its status
// names.
func TestDeployGoWithDockerfile(t *testing.T) {
	srv := startAppServer(t, "whoami")
	id, doc := srv.onboard(t, "whoami", "go-whoami", "go")
	run, _ := doc["workloads"].(map[string]any)["web"].(map[string]any)["run"].(map[string]any)
	if cmd, _ := run["command"].([]any); len(cmd) != 3 || cmd[2] != `exec ./app --port="$PORT"` {
		t.Errorf("the accepted run = %v; want $PORT passed to -port", run)
	}
	var p struct {
		Deployable bool  `json:"deployable"`
		Refusals   []any `json:"refusals"`
	}
	srv.must(t, "POST", "/apps/"+id+"/plan", map[string]any{}, 200, &p)
	if !p.Deployable {
		t.Fatalf("plan of the accepted proposal: refusals %v; want deployable", p.Refusals)
	}
	srv.deployed(t, id, 0)
	addr := srv.waitDeployed(t, id)
	if body := waitAnswer(t, addr, "/whoami?probe=1", "Hostname: "); !strings.Contains(body, "GET /whoami?probe=1 HTTP/1.1") {
		t.Fatalf("GET http://%s/whoami = %q; want whoami's echo of the request", addr, body)
	}
}
