package nomad_test

import (
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler/nomad"
	"github.com/svchost/svc/scheduler/nomad/fakenomad"
	"github.com/svchost/svc/scheduler/process"
)

// hostGoCache is the host's Go build cache, shared with the builds of the
// tests so that the sample program builds in seconds.
func hostGoCache() map[string]string {
	env := map[string]string{}
	if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); dir != "" && dir != "off" {
			if _, err := os.Stat(dir); err == nil {
				env["GOCACHE"] = dir
			}
		}
	}
	return env
}

// env is what one test's runtime runs against.
type env struct {
	rt        *nomad.Runtime
	fake      *fakenomad.Server // nil against a real agent
	fakeData  string            // the fake's data directory
	artifacts *nomad.Artifacts
	artURL    string
	builder   *process.Runtime
}

// options adjust a test's runtime or fake.
type options struct {
	fake    func(*fakenomad.Config)
	runtime func(*nomad.Config)
	address string // a real agent's; empty starts a fake
}

// newEnv starts a fake Nomad (unless o.address names an agent), an
// artifact server and a runtime with the contract suite's small restart
// budget (2 restarts within a minute, 50ms apart) and short waits.
func newEnv(t testing.TB, o options) *env {
	t.Helper()
	builder, err := process.New(process.Config{WorkDir: t.TempDir(), BuildEnv: hostGoCache(), Isolation: "none"})
	if err != nil {
		t.Fatalf("builder: %v", err)
	}
	t.Cleanup(func() { _ = builder.Close() })
	e := &env{builder: builder}
	address := o.address
	if address == "" {
		fc := fakenomad.Config{DataDir: t.TempDir()}
		e.fakeData = fc.DataDir
		if o.fake != nil {
			o.fake(&fc)
		}
		fake, err := fakenomad.Start(fc)
		if err != nil {
			t.Fatalf("fake nomad: %v", err)
		}
		t.Cleanup(func() { _ = fake.Close() })
		e.fake, address = fake, fake.URL()
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	arts, err := nomad.NewArtifacts(nomad.ArtifactsConfig{Dir: t.TempDir(), Key: key})
	if err != nil {
		t.Fatalf("artifacts: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle(nomad.ArtifactPath, arts)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e.artifacts, e.artURL = arts, srv.URL
	cfg := nomad.Config{
		Address:         address,
		Builder:         builder,
		BuildEnv:        hostGoCache(),
		BuildResources:  &spec.Resources{CPUMillis: 250, MemoryBytes: 512 << 20},
		Artifacts:       arts,
		ArtifactBaseURL: srv.URL,
		StartTimeout:    30 * time.Second,
		HealthyDeadline: 30 * time.Second,
		MinHealthyTime:  100 * time.Millisecond,
		RestartAttempts: 2,
		RestartInterval: time.Minute,
		RestartDelay:    50 * time.Millisecond,
		KillTimeout:     2 * time.Second,
	}
	if o.runtime != nil {
		o.runtime(&cfg)
	}
	rt, err := nomad.New(cfg)
	if err != nil {
		t.Fatalf("runtime: %v", err)
	}
	e.rt = rt
	return e
}
