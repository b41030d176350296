// Package releasetest owns the suite of releases every runtime adapter
// passes under the scheduler: the real deploy path (scheduler.Service over
// a real store on disk, the real source service keeping checkouts) runs
// samples/go-hello, a real Go program built by the runtime, and the suite
// checks what the app serves and what each deployment recorded:
//
//   - an env-only change restarts on the kept build, building nothing;
//   - a source change (a new upload, no new revision) builds again and
//     serves the new code;
//   - a rollback serves the previous release's code from its kept build,
//     building nothing;
//   - a redeploy of a kept release builds nothing;
//   - a rollback whose build is gone builds again from its own source,
//     never from the app's current checkout.
//
// "Nothing was built" is read from the records (each workload's build was
// made by an earlier deployment, the same artifact) and the deploy log
// (no build output, no build started), never from a timing. Bench measures
// a rollback beside a fresh deploy (build and start) of the same app.
//
// It is imported by runtimes' tests only (scheduler/runtimetest is the
// runtime's own contract, without the scheduler); it must not import any
// runtime or the HTTP server.
package releasetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/plan"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/schema"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/source"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
	"github.com/svchost/svc/scheduler"
)

// Factory returns a fresh runtime for the suite; it registers its own
// cleanup with tb.
type Factory func(tb testing.TB) scheduler.Runtime

// deadline bounds every wait: a build of the sample and a start.
const deadline = 3 * time.Minute

// runtimeID is the adapter ID the suite's deployments name.
const runtimeID = "adp_releasetest"

// Run runs the suite: one app through its releases, in order.
func Run(t *testing.T, newRuntime Factory) {
	e := newEnv(t, newRuntime)
	app := e.app(t)
	v1 := e.upload(t, app, "")
	first := e.deployed(t, app, 0)
	e.wantServes(t, first, "hello from go: one")
	if !e.built(first) {
		t.Fatalf("the first deploy did not build: %+v", first.Builds)
	}
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"EnvOnlyChangeRestartsWithoutBuilding", func(t *testing.T) {
			e.revision(t, app, "two")
			d := e.deployed(t, app, 0)
			e.wantReused(t, d, first)
			e.wantServes(t, d, "hello from go: two")
		}},
		{"SourceChangeRebuilds", func(t *testing.T) {
			e.upload(t, app, " (v2)")
			d := e.deployed(t, app, 0)
			if !e.built(d) || d.Artifacts["web"].ID == first.Artifacts["web"].ID {
				t.Fatalf("a deploy after a new upload started %+v %+v; want a build of its own", d.Artifacts, d.Builds)
			}
			e.wantServes(t, d, "hello from go (v2): two")
		}},
		{"RollbackServesTheOldCode", func(t *testing.T) {
			d := e.rollback(t, app)
			if d.Source.Commit != v1.Commit {
				t.Fatalf("the rollback shipped %+v; want v1 %s", d.Source, v1.Commit)
			}
			e.wantReused(t, d, first)
			e.wantServes(t, d, "hello from go: two")
		}},
		{"RedeployOfAKeptReleaseBuildsNothing", func(t *testing.T) {
			v2 := e.latest(t, app, scheduler.TriggerAPI) // the deploy of v2
			d := e.deployed(t, app, 0)                   // the app's source is v2
			e.wantReused(t, d, v2)
			e.wantServes(t, d, "hello from go (v2): two")
		}},
		{"RollbackWhoseBuildIsGoneBuildsFromItsOwnSource", func(t *testing.T) {
			pr, ok := e.rt.(scheduler.Pruner)
			if !ok {
				t.Skip("the runtime cannot remove an artifact")
			}
			if err := pr.RemoveArtifact(context.Background(), first.Artifacts["web"]); err != nil {
				t.Fatal(err)
			}
			d := e.rollback(t, app)
			if !e.built(d) || d.Source.Commit != v1.Commit {
				t.Fatalf("the rollback shipped %+v with %+v; want v1 built again", d.Source, d.Builds)
			}
			e.wantServes(t, d, "hello from go: two")
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return // the steps share the app
		}
	}
}

// Bench measures, on one app, a fresh deploy (a new upload: the Go
// program built, then started) beside a rollback to the release before it
// (its kept build started), and reports the mean of each in ms.
func Bench(b *testing.B, newRuntime Factory) {
	e := newEnv(b, newRuntime)
	app := e.app(b)
	e.upload(b, app, "")
	e.deployed(b, app, 0)
	var deploys, rollbacks time.Duration
	n := 0
	for b.Loop() {
		n++
		marker := fmt.Sprintf(" (bench %d)", n)
		e.upload(b, app, marker)
		began := time.Now()
		d := e.deployed(b, app, 0)
		deploys += time.Since(began)
		if !e.built(d) {
			b.Fatalf("deploy %d reused a build: %+v", n, d.Builds)
		}
		began = time.Now()
		rb := e.rollback(b, app)
		rollbacks += time.Since(began)
		if e.built(rb) {
			b.Fatalf("rollback %d built: %+v", n, rb.Builds)
		}
	}
	b.ReportMetric(float64(deploys.Milliseconds())/float64(n), "deploy-ms")
	b.ReportMetric(float64(rollbacks.Milliseconds())/float64(n), "rollback-ms")
}

// env is the deploy path over a real store, source service and runtime.
type env struct {
	store   *raftstore.Store
	apps    *apps.Service
	specs   *spec.Service
	sources *source.Service
	sch     *scheduler.Service
	rt      scheduler.Runtime
	sample  map[string]string // samples/go-hello, by path
	ctx     context.Context
}

// openPolicy is host policy's defaults.
type openPolicy struct{}

func (openPolicy) Current() policy.Policy { return policy.Default() }

// planOn plans every revision deployable on the suite's runtime.
type planOn struct{}

func (planOn) Plan(string, uint64) (plan.Result, error) {
	return plan.Result{Deployable: true, Runtime: runtimeID}, nil
}

// nothingBound has no slots or secrets: the sample needs none.
type nothingBound struct{}

func (nothingBound) Resolve(_, key, _ string) (string, error) {
	return "", errcode.New(errcode.NotFound, "no slot %s", key)
}
func (nothingBound) IsSealed(string, string, string) bool { return false }

type noSecrets struct{}

func (noSecrets) Resolve(_ context.Context, _, key string) (string, int64, error) {
	return "", 0, errcode.New(errcode.NotFound, "no secret %s", key)
}
func (noSecrets) List(string) ([]secrets.View, error) { return nil, nil }

type oneRuntime struct{ rt scheduler.Runtime }

func (o oneRuntime) Runtime(id string) (scheduler.Runtime, error) {
	if id != runtimeID {
		return nil, errcode.New(errcode.AdapterUnavailable, "no runtime %s", id)
	}
	return o.rt, nil
}

func newEnv(tb testing.TB, newRuntime Factory) *env {
	tb.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		tb.Skip("no /bin/sh")
	}
	sample, err := readSample("go-hello")
	if err != nil {
		tb.Fatal(err)
	}
	now := func() time.Time { return time.Now().UTC() }
	store := raftstoretest.Open(tb, schema.Tables()...)
	e := &env{store: store, apps: apps.NewService(store, now), specs: spec.NewService(store, now), sample: sample,
		ctx: actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_releases", UserID: "usr_releases"})}
	e.sources, err = source.New(source.Deps{WorkDir: tb.TempDir(), Apps: e.apps, Policy: openPolicy{}, Now: now,
		Keep: func(appID string) []string { return scheduler.KeptCheckouts(store.Read(), appID) }})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = e.sources.Close() })
	e.rt = newRuntime(tb)
	e.sch = scheduler.NewService(scheduler.Config{Interval: 50 * time.Millisecond}, scheduler.Deps{
		Store: store, Specs: e.specs, Plans: planOn{}, Sources: e.sources, Slots: nothingBound{}, Secrets: noSecrets{},
		Policy: openPolicy{}, Runtimes: oneRuntime{rt: e.rt}, Now: now, Log: slog.New(slog.DiscardHandler),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.sch.RunDeploys(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	return e
}

// readSample reads samples/<name> of the module, found above the working
// directory.
func readSample(name string) (map[string]string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		root := filepath.Join(dir, "samples", name)
		if fi, err := os.Stat(root); err == nil && fi.IsDir() {
			files := map[string]string{}
			err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || d.Name() == "crash-forever" {
					return err
				}
				b, err := os.ReadFile(p)
				rel, _ := filepath.Rel(root, p)
				files[filepath.ToSlash(rel)] = string(b)
				return err
			})
			return files, err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, fmt.Errorf("no samples/%s above the working directory", name)
		}
		dir = parent
	}
}

// specOf is the sample's spec with the greeting in its env.
func specOf(greeting string) string {
	return `
env: {GREETING: "` + greeting + `"}
workloads:
  web:
    primary: true
    build: {kind: go, command: "go build -o app ."}
    run: {command: [./app], port: 8080, health: {path: /healthz, interval: 1s, timeout: 500ms}}
`
}

// app creates the app with its first revision (greeting "one") pinned.
func (e *env) app(tb testing.TB) string {
	tb.Helper()
	caller := authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: "usr_releases", UserID: "usr_releases"}}
	a, err := e.apps.Create(e.ctx, caller, apps.New{Name: "Releases"})
	if err != nil {
		tb.Fatal(err)
	}
	e.revision(tb, a.ID, "one")
	return a.ID
}

// revision writes and pins a revision with the greeting.
func (e *env) revision(tb testing.TB, appID, greeting string) {
	tb.Helper()
	doc, err := spec.Parse([]byte(specOf(greeting)))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := e.specs.CreateAndPin(e.ctx, appID, doc, ""); err != nil {
		tb.Fatal(err)
	}
}

// upload uploads the sample as the app's new source, its answer to GET /
// saying "hello from go<version>: ".
func (e *env) upload(tb testing.TB, appID, version string) source.Checkout {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range e.sample {
		if name == "main.go" {
			body = strings.Replace(body, `"hello from go: %s\n"`, `"hello from go`+version+`: %s\n"`, 1)
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.WriteString(tw, body); err != nil {
			tb.Fatal(err)
		}
	}
	if err := errors.Join(tw.Close(), zw.Close()); err != nil {
		tb.Fatal(err)
	}
	co, err := e.sources.FromArchive(e.ctx, appID, "application/gzip", &buf)
	if err != nil {
		tb.Fatal(err)
	}
	return co
}

// deployed deploys revision n (0: the pinned one) and waits for it to
// succeed.
func (e *env) deployed(tb testing.TB, appID string, n uint64) scheduler.Deployment {
	tb.Helper()
	d, err := e.sch.Create(e.ctx, appID, n, scheduler.TriggerAPI)
	if err != nil {
		tb.Fatal(err)
	}
	return e.succeeded(tb, d)
}

// rollback rolls the app back and waits for it to succeed.
func (e *env) rollback(tb testing.TB, appID string) scheduler.Deployment {
	tb.Helper()
	d, err := e.sch.Rollback(e.ctx, appID)
	if err != nil {
		tb.Fatal(err)
	}
	return e.succeeded(tb, d)
}

// succeeded waits on the store for the deployment to end, and fails unless
// it succeeded.
func (e *env) succeeded(tb testing.TB, d scheduler.Deployment) scheduler.Deployment {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	for {
		r := e.store.Read()
		cur, _, ok := scheduler.Deployments.Get(r, d.ID)
		if ok && !cur.Active() {
			if cur.State != scheduler.DepSucceeded {
				tb.Fatalf("deployment %s ended %s: %s; its log:\n%s", d.ID, cur.State, deref(cur.ErrorMessage), e.log(d.ID))
			}
			return cur
		}
		if err := r.Wait(ctx); err != nil {
			tb.Fatalf("deployment %s did not end within %s; its state: %+v", d.ID, deadline, cur)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// log is a finished deployment's kept log.
func (e *env) log(depID string) string {
	l, _, _ := scheduler.DeployLogs.Get(e.store.Read(), depID)
	var b strings.Builder
	for _, line := range l.Lines {
		fmt.Fprintf(&b, "%s: %s\n", line.Stream, line.Line)
	}
	return b.String()
}

// latest is the app's newest deployment by trigger.
func (e *env) latest(tb testing.TB, appID, trigger string) scheduler.Deployment {
	tb.Helper()
	list, _, err := e.sch.List(appID, "", 100)
	if err != nil {
		tb.Fatal(err)
	}
	for _, d := range list {
		if d.Trigger == trigger && d.State == scheduler.DepSucceeded {
			return d
		}
	}
	tb.Fatalf("app %s has no successful %s deployment", appID, trigger)
	return scheduler.Deployment{}
}

// built says whether the deployment built its workload itself.
func (e *env) built(d scheduler.Deployment) bool { return d.Builds["web"].BuiltBy == d.ID }

// wantReused fails unless d started from's kept build: the same artifact,
// made by the same deployment, no build started and none of its output in
// d's log.
func (e *env) wantReused(t *testing.T, d, from scheduler.Deployment) {
	t.Helper()
	if d.Artifacts["web"].ID != from.Artifacts["web"].ID || d.Builds["web"].BuiltBy != from.Builds["web"].BuiltBy || e.built(d) {
		t.Fatalf("deployment %s started %+v built by %s; want %s's kept build %+v", d.ID, d.Artifacts["web"], d.Builds["web"].BuiltBy,
			from.ID, from.Artifacts["web"])
	}
	log := e.log(d.ID)
	if strings.Contains(log, "\nbuild: ") || strings.HasPrefix(log, "build: ") || strings.Contains(log, "building workload") ||
		!strings.Contains(log, "starting the kept build of deployment "+from.Builds["web"].BuiltBy) {
		t.Fatalf("deployment %s's log shows a build, or not the kept one started:\n%s", d.ID, log)
	}
}

// wantServes fails unless the release d made answers GET / with want.
func (e *env) wantServes(t testing.TB, d scheduler.Deployment, want string) {
	t.Helper()
	rel, _, ok := scheduler.Releases.Get(e.store.Read(), d.AppID)
	if !ok || rel.DeploymentID != d.ID {
		t.Fatalf("the app's release is %+v; want deployment %s's", rel, d.ID)
	}
	st, err := e.rt.Status(context.Background(), rel.JobID)
	if err != nil {
		t.Fatal(err)
	}
	addr := st.Workloads["web"].Address
	var body string
	end := time.Now().Add(deadline)
	for {
		body, err = get(addr)
		if err == nil && strings.Contains(body, want) || time.Now().After(end) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || !strings.Contains(body, want) {
		t.Fatalf("GET http://%s/ = %q (%v); want %q", addr, body, err, want)
	}
}

func get(addr string) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
