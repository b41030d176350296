package detect

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
)

// composeBid detects a tree holding the given files and returns the
// compose bid (which must exist and pass the sanity check).
func composeBid(t *testing.T, files map[string]string) Bid {
	t.Helper()
	fsys := fstest.MapFS{}
	for p, s := range files {
		fsys[p] = &fstest.MapFile{Data: []byte(s)}
	}
	r, dropped := detect(fsys, nil, Runtime{})
	if len(dropped) > 0 {
		t.Fatalf("bids dropped: %v", dropped)
	}
	for _, b := range append([]Bid{derefBid(r.Winner)}, r.RunnersUp...) {
		if b.Detector == "compose" {
			if err := spec.Validate(b.Proposal); err != nil {
				t.Fatalf("compose proposal does not validate: %v", err)
			}
			return b
		}
	}
	t.Fatalf("no compose bid; got %+v", r)
	return Bid{}
}

func derefBid(b *Bid) Bid {
	if b == nil {
		return Bid{}
	}
	return *b
}

func constructs(b Bid) []string {
	var out []string
	for _, r := range b.Rejected {
		out = append(out, r.Service+"|"+r.Construct)
	}
	return out
}

func TestComposeRejectionSample(t *testing.T) {
	r := Detect(os.DirFS(filepath.Join("testdata", "samples", "compose-rejected")), nil, Runtime{})
	if r.Winner == nil || r.Winner.Detector != "compose" {
		t.Fatalf("winner = %+v; want compose", r.Winner)
	}
	want := []string{"app|cap_add", "app|deploy.replicas", "app|privileged", "app|volumes: /var/run/docker.sock"}
	if diff := cmp.Diff(want, constructs(*r.Winner)); diff != "" {
		t.Errorf("rejected constructs (-want +got):\n%s", diff)
	}
	err := ComposeRejection(*r.Winner)
	e, ok := errcode.As(err)
	if !ok {
		t.Fatalf("ComposeRejection = %v; want an *errcode.Error", err)
	}
	if e.Code != errcode.PlanComposeRejected || e.Status() != http.StatusConflict {
		t.Errorf("code %s status %d; want %s 409", e.Code, e.Status(), errcode.PlanComposeRejected)
	}
	if !errors.Is(err, &errcode.Error{Code: errcode.PlanComposeRejected}) {
		t.Error("errors.Is does not match the code")
	}
	list, _ := e.Details["constructs"].([]map[string]string)
	if len(list) != len(want) || list[0]["construct"] != "cap_add" || list[0]["reason"] == "" {
		t.Errorf("details.constructs = %v", e.Details["constructs"])
	}
	if e.Message != "the compose file uses constructs svc cannot translate: app: cap_add; app: deploy.replicas; app: privileged; app: volumes: /var/run/docker.sock" {
		t.Errorf("message = %q", e.Message)
	}
}

func TestComposeRejectionNilWithoutConstructs(t *testing.T) {
	if err := ComposeRejection(Bid{Detector: "compose"}); err != nil {
		t.Errorf("ComposeRejection of a clean bid = %v; want nil", err)
	}
}

func TestComposeRejectedConstructs(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"host namespaces", `
services:
  web:
    image: nginx
    ports: ["80:80"]
    network_mode: host
    pid: host
    ipc: host
`, []string{"web|ipc: host", "web|network_mode: host", "web|pid: host"}},
		{"devices and shared namespaces", `
services:
  web:
    image: app
    ports: ["80:80"]
    devices: ["/dev/fuse:/dev/fuse"]
    security_opt: ["seccomp:unconfined"]
  side:
    image: helper
    network_mode: "service:web"
`, []string{"side|network_mode: service:web", "web|devices", "web|security_opt"}},
		{"secrets and configs from files", `
services:
  web:
    image: app
    ports: ["80:80"]
    secrets: [dbpass]
    configs: [nginx]
secrets:
  dbpass:
    file: ./secrets/db.txt
configs:
  nginx:
    external: true
`, []string{"web|configs.nginx", "web|secrets.dbpass"}},
		{"extends and include of other files", `
include:
  - other/compose.yaml
services:
  web:
    extends:
      file: base.yaml
      service: base
    image: app
    ports: ["80:80"]
`, []string{"|include", "web|extends"}},
		{"replicas and scale", `
services:
  web:
    image: app
    ports: ["80:80"]
    scale: 2
  worker:
    image: app
    deploy:
      replicas: 4
`, []string{"web|scale", "worker|deploy.replicas"}},
		{"bind mounts", `
services:
  web:
    build: .
    ports: ["80:80"]
    volumes:
      - ./src:/app/src
      - /etc/ssl:/etc/ssl:ro
      - ~/.aws:/root/.aws
  proxy:
    image: nginx
    volumes:
      - ./nginx.conf:/etc/nginx/nginx.conf:ro
`, []string{"proxy|volumes: ./nginx.conf", "web|volumes: /etc/ssl", "web|volumes: ~/.aws"}},
		{"networks that keep services apart", `
services:
  web:
    image: app
    ports: ["80:80"]
    networks: [front]
  db:
    image: postgres:16
    networks: [back]
networks:
  front: {}
  back: {}
`, []string{"|networks"}},
		{"external networks and volumes", `
services:
  web:
    image: app
    ports: ["80:80"]
    networks: [shared]
    volumes: [data:/data]
networks:
  shared:
    external: true
volumes:
  data:
    external:
      name: legacy-data
`, []string{"|networks.shared.external", "|volumes.data.external"}},
		{"build from outside the source", `
services:
  web:
    build:
      context: ../other
      ssh: [default]
    ports: ["80:80"]
`, []string{"web|build.context", "web|build.ssh"}},
		{"docker socket", `
services:
  web:
    image: app
    ports: ["80:80"]
    volumes:
      - type: bind
        source: /var/run/docker.sock
        target: /var/run/docker.sock
`, []string{"web|volumes: /var/run/docker.sock"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := composeBid(t, map[string]string{"compose.yaml": tt.file})
			if diff := cmp.Diff(tt.want, constructs(b)); diff != "" {
				t.Errorf("rejected constructs (-want +got):\n%s", diff)
			}
			if ComposeRejection(b) == nil {
				t.Error("ComposeRejection = nil; want an error")
			}
		})
	}
}

func TestComposeTranslation(t *testing.T) {
	b := composeBid(t, map[string]string{
		"docker-compose.yml": `
version: "3.9"
services:
  api:
    build:
      context: api
      dockerfile: Dockerfile.prod
    expose: ["4000"]
    env_file: [api.env, missing.env]
    environment:
      MONGO_URL: mongodb://mongo:27017/app
      AMQP_URL: amqp://guest:guest@queue:5672
      CACHE_HOST: cache
      STRIPE_KEY:
      FEATURE_FLAGS:
      PORT: ${PORT:-4000}
    deploy:
      resources:
        limits: {cpus: "0.5", memory: 256M}
  frontend:
    image: ghcr.io/example/frontend:1.2
    ports: ["3000:80"]
    depends_on: [api, mongo]
  mongo:
    image: mongo:7
  queue:
    image: rabbitmq:3-management
  cache:
    image: memcached:1.6
  mysql:
    image: mariadb:11
  debug:
    image: busybox
    profiles: [debug]
`,
		"docker-compose.override.yml": `
services:
  frontend:
    environment:
      API_URL: http://api:4000
`,
		"api.env": "LOG_FORMAT=json\nSESSION_SECRET=dev\n",
	})
	d := b.Proposal
	if got := d.Primary(); got != "frontend" {
		t.Errorf("primary = %s; want frontend (the one publishing a port)", got)
	}
	wantSlots := map[string]spec.Slot{
		"mongo": {Type: "mongodb", Required: true}, "queue": {Type: "rabbitmq", Required: true},
		"cache": {Type: "memcached", Required: true}, "mysql": {Type: "mysql", Required: true},
	}
	if diff := cmp.Diff(wantSlots, d.Slots); diff != "" {
		t.Errorf("slots (-want +got):\n%s", diff)
	}
	api := d.Workloads["api"]
	wantAPI := spec.Workload{
		Build: &spec.Build{Kind: spec.BuildDockerfile, Context: "api", Dockerfile: "Dockerfile.prod"},
		Run:   spec.Run{Port: 4000},
		Env: map[string]spec.EnvValue{
			"MONGO_URL":      {Slot: "mongo", Field: "url"},
			"AMQP_URL":       {Slot: "queue", Field: "url"},
			"CACHE_HOST":     {Slot: "cache", Field: "host"},
			"STRIPE_KEY":     {Secret: "STRIPE_KEY"},
			"FEATURE_FLAGS":  spec.Literal(""),
			"PORT":           spec.Literal("4000"),
			"LOG_FORMAT":     spec.Literal("json"),
			"SESSION_SECRET": {Secret: "SESSION_SECRET"},
		},
		Resources: &spec.Resources{CPUMillis: 500, MemoryBytes: 256 << 20},
	}
	if diff := cmp.Diff(wantAPI, api); diff != "" {
		t.Errorf("api workload (-want +got):\n%s", diff)
	}
	front := d.Workloads["frontend"]
	if front.Build.Kind != spec.BuildImage || front.Build.Image != "ghcr.io/example/frontend:1.2" || front.Run.Port != 80 {
		t.Errorf("frontend = %+v %+v; want the image on port 80", front.Build, front.Run)
	}
	if diff := cmp.Diff([]string{"api"}, front.DependsOn); diff != "" {
		t.Errorf("frontend depends_on (-want +got):\n%s", diff)
	}
	if front.Env["API_URL"] != spec.Literal("http://api:4000") {
		t.Errorf("override not merged: frontend env = %v", front.Env)
	}
	if _, ok := d.Workloads["debug"]; ok {
		t.Error("a service behind a profile became a workload")
	}
	var keys []string
	for _, q := range b.questions {
		keys = append(keys, q.Key)
	}
	if diff := cmp.Diff([]string{"env.FEATURE_FLAGS", "secret.SESSION_SECRET", "secret.STRIPE_KEY"}, keys); diff != "" {
		t.Errorf("questions (-want +got):\n%s", diff)
	}
	if len(b.Rejected) != 0 {
		t.Errorf("rejected = %+v; want none", b.Rejected)
	}
}

// TestComposeIgnoresHostEnvironment: interpolation never reads the host's
// variables, so the same file detects the same everywhere.
func TestComposeIgnoresHostEnvironment(t *testing.T) {
	t.Setenv("WEB_PORT", "9999")
	t.Setenv("APP_IMAGE", "evil/image")
	b := composeBid(t, map[string]string{"compose.yaml": `
services:
  web:
    image: ${APP_IMAGE:-example/web}
    ports: ["${WEB_PORT:-8000}:${WEB_PORT:-8000}"]
`})
	w := b.Proposal.Workloads["web"]
	if w.Build.Image != "example/web" || w.Run.Port != 8000 {
		t.Errorf("web = %+v %+v; want the file's defaults, not the host's variables", w.Build, w.Run)
	}
}

func TestComposePrimaryAndPortQuestion(t *testing.T) {
	b := composeBid(t, map[string]string{"compose.yaml": `
services:
  worker:
    build: .
  app:
    build: .
`})
	if got := b.Proposal.Primary(); got != "app" {
		t.Errorf("primary = %s; want app", got)
	}
	if len(b.questions) != 1 || b.questions[0].Key != KeyPort || b.questions[0].Default != "8080" {
		t.Errorf("questions = %+v; want the port", b.questions)
	}
	r := Detect(fstest.MapFS{"compose.yaml": {Data: []byte("services:\n  worker:\n    build: .\n  app:\n    build: .\n")}}, map[string]string{KeyPort: "7000"}, Runtime{})
	if r.Winner.Proposal.Workloads["app"].Run.Port != 7000 || len(r.Questions) != 0 {
		t.Errorf("answered: app run = %+v, questions %+v", r.Winner.Proposal.Workloads["app"].Run, r.Questions)
	}
}

func TestComposeWithoutAppServicesDoesNotBid(t *testing.T) {
	r := Detect(fstest.MapFS{
		"compose.yaml": {Data: []byte("services:\n  db:\n    image: postgres:16\n")},
		"go.mod":       {Data: []byte("module x\n")},
		"main.go":      {Data: []byte("package main\n\nfunc main() { http.ListenAndServe(\":8080\", nil) }\n")},
	}, nil, Runtime{})
	if r.Winner == nil || r.Winner.Detector != "go" || len(r.RunnersUp) != 0 {
		t.Errorf("winner = %+v, runners-up %d; want go alone (compose only declares a database)", r.Winner, len(r.RunnersUp))
	}
}

func TestComposeUnloadableDoesNotBid(t *testing.T) {
	for _, src := range []string{"services: [", "services:\n  web:\n    image: 5\n    ports: {a: b}\n", "- just\n- a list\n", ""} {
		r, dropped := detect(fstest.MapFS{"compose.yaml": {Data: []byte(src)}}, nil, Runtime{})
		if r.Winner != nil || len(dropped) > 0 {
			t.Errorf("%q: winner %+v, dropped %v; want no bid", src, r.Winner, dropped)
		}
	}
}

func TestComposeServiceSlot(t *testing.T) {
	tests := map[string]string{
		"postgres":                        "postgres",
		"postgres:16-alpine":              "postgres",
		"docker.io/library/postgres:16":   "postgres",
		"bitnami/postgresql:latest":       "postgres",
		"postgis/postgis:16-3.4":          "postgres",
		"mysql:8":                         "mysql",
		"mariadb":                         "mysql",
		"redis:7@sha256:abc":              "redis",
		"valkey/valkey:8":                 "redis",
		"mongo:7":                         "mongodb",
		"rabbitmq:3-management":           "rabbitmq",
		"memcached:1.6":                   "memcached",
		"registry.example.com:5000/redis": "redis",
		"nginx":                           "",
		"example/postgres-backup":         "",
		"":                                "",
	}
	for img, want := range tests {
		got, _ := composeServiceSlot(composeService(img))
		if got != want {
			t.Errorf("slot of %q = %q; want %q", img, got, want)
		}
	}
}

func composeService(image string) types.ServiceConfig {
	var s types.ServiceConfig
	s.Image = image
	return s
}
