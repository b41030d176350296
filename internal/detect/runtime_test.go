package detect

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/internal/spec"
)

// The build kinds of the runtimes of this repository, as their
// capabilities say (scheduler/process, scheduler/nomad), and of a runtime
// that also builds Dockerfiles.
var (
	processRuntime    = Runtime{Kind: "process", Builds: []string{"go", "node", "python", "static", "command"}}
	nomadRuntime      = Runtime{Kind: "nomad", Builds: []string{"go", "node", "python", "static", "command"}}
	dockerfileRuntime = Runtime{Kind: "docker", Builds: []string{"go", "node", "python", "static", "command", "dockerfile", "image"}}
)

// whoami is samples/go-whoami: a Go program that takes its port from a
// -port flag and ships a multi-stage Dockerfile, as traefik/whoami does.
func whoami() string { return filepath.Join("..", "..", "samples", "go-whoami") }

// TestRuntimeRanking: a bid the runtime cannot run ranks after every bid
// it can, whatever its score, and says why; a runtime that runs it, or one
// detection knows nothing of, leaves the scores to decide.
func TestRuntimeRanking(t *testing.T) {
	cannotBuild := func(kind string) Evidence {
		return Evidence{Path: "Dockerfile", Reason: "the " + kind + " runtime cannot build Dockerfiles; it builds go, node, python, static, command"}
	}
	tests := []struct {
		name    string
		rt      Runtime
		bidders []string
		why     *Evidence // the dockerfile bid's evidence of why it cannot run
	}{
		{"unknown runtime", Runtime{}, []string{"dockerfile", "go"}, nil},
		{"process runtime", processRuntime, []string{"go", "dockerfile"}, new(cannotBuild("process"))},
		{"nomad runtime", nomadRuntime, []string{"go", "dockerfile"}, new(cannotBuild("nomad"))},
		{"a runtime that builds Dockerfiles", dockerfileRuntime, []string{"dockerfile", "go"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, dropped := detect(os.DirFS(whoami()), nil, tt.rt)
			if len(dropped) > 0 {
				t.Fatalf("bids dropped: %v", dropped)
			}
			checkBids(t, r)
			if diff := cmp.Diff(tt.bidders, bidders(r)); diff != "" {
				t.Fatalf("bids (-want +got):\n%s", diff)
			}
			if len(r.Questions) != 0 {
				t.Errorf("questions %+v; want none", r.Questions)
			}
			var docker Bid
			for _, b := range append([]Bid{*r.Winner}, r.RunnersUp...) {
				if b.Detector == "dockerfile" {
					docker = b
				}
				if b.Score != map[string]int{"dockerfile": 80, "go": 75}[b.Detector] {
					t.Errorf("%s scores %d; the runtime changes the ranking, not the scores", b.Detector, b.Score)
				}
			}
			for _, e := range docker.Evidence {
				if e.Reason == "a Dockerfile at the root" || e.Reason == "EXPOSE 80" {
					continue
				}
				if tt.why == nil || e != *tt.why {
					t.Errorf("dockerfile evidence %+v; want %v", e, tt.why)
				}
			}
			if tt.why != nil && !slices.Contains(docker.Evidence, *tt.why) {
				t.Errorf("dockerfile evidence %+v; want it to say %q", docker.Evidence, tt.why.Reason)
			}
			goBid := r.Winner
			if goBid.Detector != "go" {
				goBid = &r.RunnersUp[0]
			}
			w := goBid.Proposal.Workloads["web"]
			want := spec.Workload{
				Primary: spec.Bool(true),
				Build:   &spec.Build{Kind: spec.BuildGo, Context: ".", Command: "go build -o app ."},
				Run:     spec.Run{Command: []string{"sh", "-c", `exec ./app --port="$PORT"`}, Port: 8080},
				Env:     map[string]spec.EnvValue{"PORT": spec.Literal("8080")},
			}
			if diff := cmp.Diff(want, w); diff != "" {
				t.Errorf("go proposal (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRuntimeRankingWhenNothingRuns: when the runtime runs no bid, the
// best of them still wins (a plan then refuses it, saying why), with the
// evidence of why it cannot run; every unrunnable build kind is named once,
// at the file it comes from.
func TestRuntimeRankingWhenNothingRuns(t *testing.T) {
	r, dropped := detect(os.DirFS(filepath.Join("testdata", "samples", "dockerfile-only")), nil, processRuntime)
	if len(dropped) > 0 || r.Winner == nil || r.Winner.Detector != "dockerfile" {
		t.Fatalf("winner %+v (dropped %v); want the Dockerfile, the only bid", r.Winner, dropped)
	}
	if !slices.Contains(r.Winner.Evidence, Evidence{Path: "Dockerfile", Reason: "the process runtime cannot build Dockerfiles; it builds go, node, python, static, command"}) {
		t.Errorf("evidence %+v; want why the process runtime cannot run it", r.Winner.Evidence)
	}

	files := map[string]string{
		"compose.yaml":     "services:\n  web:\n    build: ./web\n    ports: [\"8000:8000\"]\n  worker:\n    build: ./web\n  cache:\n    image: example/cache:1\n    ports: [\"9000:9000\"]\n",
		"web/Dockerfile":   "FROM python:3.12\n",
		"requirements.txt": "flask\n",
		"app.py":           "from flask import Flask\napp = Flask(__name__)\n",
	}
	if r := run(t, files, nil); r.Winner.Detector != "compose" {
		t.Fatalf("winner %s; the test needs compose to win on an unknown runtime", r.Winner.Detector)
	}
	r, _ = detect(mapFS(files), nil, Runtime{Builds: processRuntime.Builds})
	checkBids(t, r)
	if diff := cmp.Diff([]string{"python", "compose", "dockerfile"}, bidders(r)); diff != "" {
		t.Fatalf("bids (-want +got):\n%s", diff)
	}
	var why []Evidence
	for _, e := range r.RunnersUp[0].Evidence {
		if strings.HasPrefix(e.Reason, "the runtime ") {
			why = append(why, e)
		}
	}
	wantWhy := []Evidence{
		{Path: "compose.yaml", Reason: "the runtime cannot run container images; it builds go, node, python, static, command"},
		{Path: "web/Dockerfile", Reason: "the runtime cannot build Dockerfiles; it builds go, node, python, static, command"},
	}
	if diff := cmp.Diff(wantWhy, why); diff != "" {
		t.Errorf("compose's evidence of why it cannot run (-want +got):\n%s", diff)
	}
}
