package nomad_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
)

// TestBuildRunsAsABatchJob: a build is a Nomad batch job named after the
// app that downloads the source (without .git), builds in the build
// context and uploads the result to svc; its output reaches the build's
// log; afterwards Nomad has forgotten the job, the packed source is gone
// and the artifact is in the store, ready for a run job.
func TestBuildRunsAsABatchJob(t *testing.T) {
	e := newEnv(t, options{runtime: func(c *nomad.Config) {
		c.Describe = func(_ context.Context, j scheduler.Job) (nomad.AppInfo, error) {
			return nomad.AppInfo{Slug: "shop-" + j.AppID}, nil
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := t.TempDir()
	for name, body := range map[string]string{"site/in.txt": "from-source\n", ".git/HEAD": "ref: refs/heads/main\n"} {
		_ = os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755)
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var lines []string
	art, err := e.rt.Build(ctx, scheduler.BuildRequest{
		ID: "dep_01ABC-web", AppID: "app1", Workload: "web", Source: src,
		Build: spec.Build{Kind: spec.BuildCommand, Context: "site",
			Command: `echo "job=$NOMAD_JOB_ID"; test ! -e ../.git && echo no-git; cp in.txt out.txt; echo built >&2`},
		Log: func(_, line string) { lines = append(lines, line) },
	})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	log := strings.Join(lines, "\n")
	for _, want := range []string{"job=svc-shop-app1-build-01abc-web", "no-git", "built"} {
		if !strings.Contains(log, want) {
			t.Errorf("build log %q lacks %q", log, want)
		}
	}
	if art.ID != "dep_01ABC-web" || art.Dir != "" || art.Kind != spec.BuildCommand {
		t.Errorf("artifact = %+v, want the build's ID and kind, no directory on the controller", art)
	}
	if !e.rt.HasArtifact(ctx, art) {
		t.Fatalf("the uploaded build is not in the store")
	}
	if e.rt.HasArtifact(ctx, scheduler.Artifact{ID: art.ID + ".src"}) {
		t.Errorf("the packed source was left in the store")
	}
	var state struct{ Jobs map[string]json.RawMessage }
	if err := json.Unmarshal(e.fake.State(), &state); err != nil {
		t.Fatal(err)
	}
	for id := range state.Jobs {
		if strings.Contains(id, "-build-") {
			t.Errorf("nomad still knows build job %s", id)
		}
	}
	st, err := e.rt.Run(ctx, scheduler.Job{ID: "job-built", Workloads: map[string]scheduler.Task{
		"web": {Artifact: art, Command: []string{"sh", "-c", "cat out.txt; exec sleep 1000"}, NoPort: true},
	}})
	if err != nil || !st.Workloads["web"].Running {
		t.Fatalf("the run job of the build is not running: %+v, %v", st, err)
	}
	out, err := e.rt.Logs(ctx, "job-built", "web")
	if err != nil || !strings.Contains(strings.Join(out, "\n"), "from-source") {
		t.Errorf("run job output = %q, %v; want the built file's content", out, err)
	}
}

// TestBuildUploadRefused: a build whose upload svc refuses fails with
// BUILD_FAILED, the upload's failure in its log tail, and stores nothing.
func TestBuildUploadRefused(t *testing.T) {
	e := newEnv(t, options{runtime: func(c *nomad.Config) {
		// Downloads work; uploads are refused.
		arts := c.Artifacts
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut {
				http.Error(w, "uploads are off", http.StatusForbidden)
				return
			}
			arts.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		c.ArtifactBaseURL = srv.URL
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := e.rt.Build(ctx, scheduler.BuildRequest{ID: "b-refused", Source: t.TempDir(),
		Build: spec.Build{Kind: spec.BuildCommand, Command: "echo built-fine"}})
	e2, ok := errcode.As(err)
	if !ok || e2.Code != errcode.BuildFailed {
		t.Fatalf("build = %v, want BUILD_FAILED", err)
	}
	if tail := strings.Join(e2.Details["log_tail"].([]string), "\n"); !strings.Contains(tail, "built-fine") || !strings.Contains(tail, "403") {
		t.Errorf("log tail = %q, want the build's output and curl's 403", tail)
	}
	if e.rt.HasArtifact(ctx, scheduler.Artifact{ID: "b-refused"}) {
		t.Errorf("a refused upload was stored")
	}
}

// TestBuildLogIsLive: the build's output reaches the build's log while it
// runs (the build below waits for the test to have seen its first line),
// and every line arrives exactly once.
func TestBuildLogIsLive(t *testing.T) {
	e := newEnv(t, options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gate := filepath.Join(t.TempDir(), "go")
	var mu sync.Mutex
	var lines []string
	_, err := e.rt.Build(ctx, scheduler.BuildRequest{Source: t.TempDir(), Timeout: 2 * time.Minute,
		Build: spec.Build{Kind: spec.BuildCommand, Command: `echo first-line; echo to-stderr >&2; while [ ! -e "` + gate + `" ]; do sleep 0.05; done; printf 'after-go\nno-newline'`},
		Log: func(_, line string) {
			mu.Lock()
			defer mu.Unlock()
			lines = append(lines, line)
			if line == "first-line" {
				_ = os.WriteFile(gate, nil, 0o644)
			}
		}})
	if err != nil {
		t.Fatalf("build: %v (a build log that is not live never opens the gate)", err)
	}
	mu.Lock()
	defer mu.Unlock()
	count := map[string]int{}
	for _, l := range lines {
		count[l]++
	}
	for _, want := range []string{"first-line", "to-stderr", "after-go", "no-newline"} {
		if count[want] != 1 {
			t.Errorf("line %q arrived %d times; log %q", want, count[want], lines)
		}
	}
}

// TestCancelBuilds: the builds of a deployment whose server died are
// stopped and purged from Nomad; other deployments' builds are not
// touched.
func TestCancelBuilds(t *testing.T) {
	e := newEnv(t, options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	started := make(chan string, 2)
	done := make(chan error, 2)
	for _, id := range []string{"dep_DEAD-web", "dep_LIVE-web"} {
		go func() {
			_, err := e.rt.Build(ctx, scheduler.BuildRequest{ID: id, Source: t.TempDir(), Timeout: 2 * time.Minute,
				Build: spec.Build{Kind: spec.BuildCommand, Command: "echo up; exec sleep 600"},
				Log:   func(_, line string) { started <- id }})
			done <- err
		}()
	}
	<-started
	<-started
	if err := e.rt.CancelBuilds(ctx, "dep_DEAD"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if err := <-done; errcode.CodeOf(err) != errcode.BuildFailed {
		t.Errorf("the canceled build ended with %v, want BUILD_FAILED", err)
	}
	var state struct{ Jobs map[string]json.RawMessage }
	if err := json.Unmarshal(e.fake.State(), &state); err != nil {
		t.Fatal(err)
	}
	_, dead := state.Jobs["default/svc-none-build-dead-web"]
	_, live := state.Jobs["default/svc-none-build-live-web"]
	if dead || !live {
		t.Errorf("after the cancel nomad has the dead deployment's build %v (want false) and the live one's %v (want true)", dead, live)
	}
	if err := e.rt.CancelBuilds(ctx, "dep_LIVE"); err != nil {
		t.Fatal(err)
	}
	<-done
}
