package scheduler_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/ids"
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

// The scheduler's decisions, on a real store, with an in-memory runtime
// whose failures the tests choose. The process runtime itself is tested by
// the runtime contract suite, and the two together by the server's and
// the end-to-end tests.

var (
	alice = actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_alice", UserID: "usr_alice"})
	bob   = actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_bob", UserID: "usr_bob"})
)

// fakeRuntime runs jobs in memory. Workloads run healthy unless a test
// changes their status.
type fakeRuntime struct {
	dir string

	mu          sync.Mutex
	jobs        map[string]map[string]scheduler.WorkloadStatus
	ran         map[string]scheduler.Job
	builds      int
	built       []string // the source directory of each build
	runs        int
	restarts    int
	buildErr    error
	runErr      error
	gate        chan struct{} // when set, builds wait for it
	notReady    bool          // when set, jobs run but never pass their health check
	logsRemoved []string
	canceled    []string // deployments whose builds were canceled
	asked       []string // artifacts HasArtifact was asked about
	host        scheduler.Host
}

var (
	_ scheduler.Runtime        = (*fakeRuntime)(nil)
	_ scheduler.HostReader     = (*fakeRuntime)(nil)
	_ scheduler.Pruner         = (*fakeRuntime)(nil)
	_ scheduler.BuildCanceler  = (*fakeRuntime)(nil)
	_ scheduler.ArtifactKeeper = (*fakeRuntime)(nil)
)

// HasArtifact keeps artifacts at their directories, as the process
// runtime does, and records the question.
func (f *fakeRuntime) HasArtifact(ctx context.Context, art scheduler.Artifact) bool {
	f.mu.Lock()
	f.asked = append(f.asked, art.ID)
	f.mu.Unlock()
	_, err := os.Stat(art.Dir)
	return err == nil
}

func (f *fakeRuntime) CancelBuilds(ctx context.Context, deploymentID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.canceled = append(f.canceled, deploymentID)
	return nil
}

func (f *fakeRuntime) RemoveArtifact(ctx context.Context, art scheduler.Artifact) error {
	return os.RemoveAll(art.Dir)
}

func (f *fakeRuntime) RemoveJobLogs(ctx context.Context, jobID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logsRemoved = append(f.logsRemoved, jobID)
	return nil
}

func newFakeRuntime(t testing.TB) *fakeRuntime {
	return &fakeRuntime{dir: t.TempDir(), jobs: map[string]map[string]scheduler.WorkloadStatus{}, ran: map[string]scheduler.Job{},
		host: scheduler.Host{CPUMillis: 2000, MemoryBytes: 4 << 30}}
}

func (f *fakeRuntime) Build(ctx context.Context, req scheduler.BuildRequest) (scheduler.Artifact, error) {
	f.mu.Lock()
	f.builds++
	f.built = append(f.built, req.Source)
	gate, err := f.gate, f.buildErr
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return scheduler.Artifact{}, ctx.Err()
		}
	}
	if req.Log != nil {
		req.Log(scheduler.StreamStdout, "building "+req.ID)
	}
	if err != nil {
		return scheduler.Artifact{}, err
	}
	dir := filepath.Join(f.dir, req.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return scheduler.Artifact{}, err
	}
	return scheduler.Artifact{ID: req.ID, Kind: req.Build.Kind, Dir: dir}, nil
}

func (f *fakeRuntime) Run(ctx context.Context, job scheduler.Job) (scheduler.JobStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs++
	if f.runErr != nil {
		return scheduler.JobStatus{}, f.runErr
	}
	st := map[string]scheduler.WorkloadStatus{}
	for name := range job.Workloads {
		st[name] = scheduler.WorkloadStatus{Running: true, Health: scheduler.HealthPassing, Address: "127.0.0.1:1"}
		if f.notReady {
			st[name] = scheduler.WorkloadStatus{Running: true, Health: scheduler.HealthUnknown, Address: "127.0.0.1:1"}
		}
	}
	f.jobs[job.ID] = st
	f.ran[job.ID] = job
	return scheduler.JobStatus{ID: job.ID, Workloads: st}, nil
}

func (f *fakeRuntime) Stop(ctx context.Context, jobID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.jobs[jobID]; !ok {
		return errcode.New(errcode.NotFound, "no job %s", jobID)
	}
	delete(f.jobs, jobID)
	return nil
}

func (f *fakeRuntime) Status(ctx context.Context, jobID string) (scheduler.JobStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.jobs[jobID]
	if !ok {
		return scheduler.JobStatus{}, errcode.New(errcode.NotFound, "no job %s", jobID)
	}
	out := map[string]scheduler.WorkloadStatus{}
	for k, v := range st {
		out[k] = v
	}
	return scheduler.JobStatus{ID: jobID, Workloads: out}, nil
}

func (f *fakeRuntime) Restart(ctx context.Context, jobID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.jobs[jobID]
	if !ok {
		return errcode.New(errcode.NotFound, "no job %s", jobID)
	}
	f.restarts++
	for k, v := range st {
		v.Restarts++
		st[k] = v
	}
	return nil
}

func (f *fakeRuntime) Host(context.Context) (scheduler.Host, error) { return f.host, nil }

// set changes every workload of every running job.
func (f *fakeRuntime) set(change func(*scheduler.WorkloadStatus)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, st := range f.jobs {
		for k, v := range st {
			change(&v)
			st[k] = v
		}
	}
}

func (f *fakeRuntime) running() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id := range f.jobs {
		out = append(out, id)
	}
	return out
}

func (f *fakeRuntime) count() (builds, runs, restarts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.builds, f.runs, f.restarts
}

type oneRuntime struct{ rt scheduler.Runtime }

func (o oneRuntime) Runtime(string) (scheduler.Runtime, error) { return o.rt, nil }

// planAll plans every revision deployable on the fake runtime, unless
// refuse is set.
type planAll struct{ refuse *errcode.Error }

func (p planAll) Plan(appID string, n uint64) (plan.Result, error) {
	if p.refuse != nil {
		return plan.Result{Refusals: []*errcode.Error{p.refuse}}, nil
	}
	return plan.Result{Deployable: true, Runtime: "adp_fake"}, nil
}

// checkouts holds one-page static sites: the current one of an app whose
// record names no checkout (Ensure), and those uploads made (CheckoutOf),
// by checkout ID.
type checkouts struct {
	dir string

	mu    sync.Mutex
	trees map[string]string // checkout ID -> directory
}

// siteCheckouts is a checkout holding a one-page static site.
func siteCheckouts(tb testing.TB) *checkouts {
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("<h1>hi</h1>\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	return &checkouts{dir: dir, trees: map[string]string{}}
}

func (c *checkouts) Ensure(context.Context, string) (source.Checkout, error) {
	return source.Checkout{ID: "chk_1", Dir: c.dir}, nil
}

func (c *checkouts) CheckoutOf(_ context.Context, appID string, src apps.Source) (source.Checkout, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir, ok := c.trees[src.CheckoutID]
	if !ok {
		return source.Checkout{}, errcode.New(errcode.NotFound, "app %s's source (checkout %s) is on no svc server", appID, src.CheckoutID)
	}
	return source.Checkout{ID: src.CheckoutID, Dir: dir, Commit: src.Commit, Kind: src.Kind, Source: src}, nil
}

// upload records a new source of the app, a site saying content, as the
// source service does: a checkout, and the app's record naming it.
func (f *fixture) upload(t testing.TB, appID, content string) apps.Source {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	src := apps.Source{Kind: source.KindArchive, Commit: "sha256:" + hex.EncodeToString(sum[:]), CheckoutID: ids.New("chk")}
	f.sources.mu.Lock()
	f.sources.trees[src.CheckoutID] = dir
	f.sources.mu.Unlock()
	if err := f.apps.SetSource(alice, appID, src); err != nil {
		t.Fatal(err)
	}
	return src
}

// lose removes a checkout from every server.
func (c *checkouts) lose(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.trees, id)
}

type noSlots struct{}

func (noSlots) Resolve(appID, key, field string) (string, error) {
	return "slot-" + key + "-" + field, nil
}

// IsSealed: a slot's password is a credential.
func (noSlots) IsSealed(appID, key, field string) bool { return field == "password" }

// fakeSecrets holds values and versions.
type fakeSecrets struct {
	mu       sync.Mutex
	resolved int // values read
	vals     map[string]string
	vers     map[string]int64
}

func (f *fakeSecrets) Resolve(_ context.Context, appID, key string) (string, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resolved++
	v, ok := f.vals[key]
	if !ok {
		return "", 0, errcode.New(errcode.NotFound, "no secret %s", key)
	}
	return v, f.vers[key], nil
}

func (f *fakeSecrets) List(appID string) ([]secrets.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []secrets.View
	for k, v := range f.vers {
		out = append(out, secrets.View{Key: k, Version: v})
	}
	return out, nil
}

func (f *fakeSecrets) put(key, val string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vals[key] = val
	f.vers[key]++
}

type fixedPolicy struct{ p policy.Policy }

func (f fixedPolicy) Current() policy.Policy { return f.p }

type fixture struct {
	sources *checkouts
	store   *raftstore.Store
	sch     *scheduler.Service
	rt      *fakeRuntime
	apps    *apps.Service
	specs   *spec.Service
	secrets *fakeSecrets
	cancel  context.CancelFunc
}

type options struct {
	backoff   []time.Duration
	ports     [2]int
	refuse    *errcode.Error
	noWorkers bool
	// runtime replaces the fake runtime (a benchmark on the real one).
	runtime scheduler.Runtime
	// startTimeout and workers are the reconciler's (0: the defaults);
	// log receives the scheduler's log (nil: none), metrics its
	// measurements.
	startTimeout time.Duration
	workers      int
	log          *slog.Logger
	metrics      scheduler.Observer
	// diskInterval is CheckDisk's (0: the default).
	diskInterval time.Duration
}

func newFixture(t testing.TB, o options) *fixture {
	t.Helper()
	store := raftstoretest.Open(t, schema.Tables()...)
	now := func() time.Time { return time.Now().UTC() }
	f := &fixture{store: store, rt: newFakeRuntime(t), apps: apps.NewService(store, now), specs: spec.NewService(store, now),
		secrets: &fakeSecrets{vals: map[string]string{}, vers: map[string]int64{}}}
	if o.backoff == nil {
		o.backoff = []time.Duration{time.Millisecond, time.Millisecond}
	}
	cfg := scheduler.Config{Backoff: o.backoff, Interval: 20 * time.Millisecond, StableAfter: time.Hour,
		StartTimeout: o.startTimeout, Workers: o.workers, DiskInterval: o.diskInterval}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	if o.ports[0] > 0 {
		cfg.RoutingMode, cfg.PortStart, cfg.PortEnd = "port", o.ports[0], o.ports[1]
	}
	var rt scheduler.Runtime = f.rt
	if o.runtime != nil {
		rt = o.runtime
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	f.sources = siteCheckouts(t)
	f.sch = scheduler.NewService(cfg, scheduler.Deps{
		Store: store, Specs: f.specs, Plans: planAll{refuse: o.refuse}, Sources: f.sources,
		Slots: noSlots{}, Secrets: f.secrets, Policy: fixedPolicy{p: policy.Default()}, Runtimes: oneRuntime{rt: rt},
		Now: now, Log: o.log, Metrics: o.metrics,
	})
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	t.Cleanup(cancel)
	if !o.noWorkers {
		go func() { _ = f.sch.RunDeploys(ctx) }()
	}
	return f
}

const webSpec = `
workloads:
  web: {primary: true, build: {kind: command, command: "true"}, run: {command: [./app], port: 8080}, env: {TOKEN: {secret: TOKEN}}}
`

func (f *fixture) app(t testing.TB, docs ...string) string {
	t.Helper()
	a, err := f.apps.Create(alice, authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: "usr_alice", UserID: "usr_alice"}}, apps.New{Name: "Web"})
	if err != nil {
		t.Fatal(err)
	}
	f.secrets.put("TOKEN", "t1")
	for _, y := range docs {
		f.revision(t, a.ID, y)
	}
	return a.ID
}

func (f *fixture) revision(t testing.TB, appID, yaml string) uint64 {
	t.Helper()
	doc, err := spec.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.specs.CreateAndPin(alice, appID, doc, "")
	if err != nil {
		t.Fatal(err)
	}
	return v.Number
}

// eventually polls cond until it holds or a generous deadline passes: a
// bound on waiting, never a timing assertion.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fixture) dep(t *testing.T, appID, id string) scheduler.Deployment {
	t.Helper()
	d, err := f.sch.Get(appID, id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *fixture) ended(t *testing.T, appID, id string) scheduler.Deployment {
	t.Helper()
	var d scheduler.Deployment
	eventually(t, "deployment "+id+" ends", func() bool { d = f.dep(t, appID, id); return !d.Active() })
	return d
}

func (f *fixture) state(t *testing.T, appID string) string {
	t.Helper()
	a, err := f.apps.Get(appID)
	if err != nil {
		t.Fatal(err)
	}
	return a.State
}

func (f *fixture) events(t *testing.T, name string) []events.Event {
	t.Helper()
	items, _ := events.Events.List(f.store.Read(), raftstore.Query{})
	var out []events.Event
	for _, it := range items {
		if it.Value.Type == name {
			out = append(out, it.Value)
		}
	}
	return out
}

func (f *fixture) deploy(t *testing.T, appID string) scheduler.Deployment {
	t.Helper()
	d, err := f.sch.Create(alice, appID, 0, scheduler.TriggerAPI)
	if err != nil {
		t.Fatal(err)
	}
	return f.ended(t, appID, d.ID)
}

func TestDeploySucceeds(t *testing.T) {
	f := newFixture(t, options{ports: [2]int{9000, 9001}})
	appID := f.app(t, webSpec)
	d, err := f.sch.Create(alice, appID, 0, scheduler.TriggerAPI)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != scheduler.DepQueued || d.Revision != 1 || d.CreatedBy != "usr_alice" {
		t.Fatalf("created = %+v", d)
	}
	d = f.ended(t, appID, d.ID)
	if d.State != scheduler.DepSucceeded || d.FinishedAt == nil || d.ErrorCode != nil {
		t.Fatalf("ended = %+v", d)
	}
	if s := f.state(t, appID); s != apps.StateRunning {
		t.Fatalf("state = %s, want running", s)
	}
	if jobs := f.rt.running(); len(jobs) != 1 || jobs[0] != d.ID {
		t.Fatalf("running jobs = %v, want [%s]", jobs, d.ID)
	}
	job := f.rt.ran[d.ID]
	if job.AppID != appID || job.Workloads["web"].Env["TOKEN"] != "t1" || job.Workloads["web"].SecretEnv["TOKEN"] != "TOKEN" || job.Primary != "web" || job.Order[0] != "web" {
		t.Fatalf("job = %+v", job)
	}
	if len(f.events(t, "deploy.started")) != 1 || len(f.events(t, "deploy.succeeded")) != 1 {
		t.Fatal("want one deploy.started and one deploy.succeeded")
	}
	moves := map[string]bool{}
	for _, e := range f.events(t, "app.state_changed") {
		moves[e.Data["from"].(string)+">"+e.Data["to"].(string)] = true
	}
	if !moves["draft>deploying"] || !moves["deploying>running"] {
		t.Fatalf("state moves = %v", moves)
	}
	if p, ok := f.sch.PortOf(appID); !ok || p != 9000 {
		t.Fatalf("port = %d, %v; want 9000", p, ok)
	}
	var lines []scheduler.LogLine
	if _, err := f.sch.FollowLogs(context.Background(), appID, d.ID, func(l scheduler.LogLine) error { lines = append(lines, l); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(lines) < 3 || lines[0].Stream != scheduler.LogSystem {
		t.Fatalf("log = %+v", lines)
	}
	list, _, err := f.sch.List(appID, "", 10)
	if err != nil || len(list) != 1 || list[0].ID != d.ID {
		t.Fatalf("list = %+v, %v", list, err)
	}
}

func TestFailedBuildKeepsThePreviousRevisionServing(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	first := f.deploy(t, appID)
	f.revision(t, appID, webSpec+"env: {V: \"2\"}\n")
	f.rt.mu.Lock()
	f.rt.buildErr = errcode.New(errcode.BuildFailed, "the build exited with code 3")
	f.rt.mu.Unlock()
	second := f.deploy(t, appID)
	if second.State != scheduler.DepFailed || second.ErrorCode == nil || *second.ErrorCode != "BUILD_FAILED" {
		t.Fatalf("second = %+v", second)
	}
	if s := f.state(t, appID); s != apps.StateRunning {
		t.Fatalf("state after a failed deploy = %s, want running", s)
	}
	if jobs := f.rt.running(); len(jobs) != 1 || jobs[0] != first.ID {
		t.Fatalf("running = %v, want the first deployment's job", jobs)
	}
	failed := f.events(t, "deploy.failed")
	if len(failed) != 1 || failed[0].Data["error_code"] != "BUILD_FAILED" || failed[0].Data["deployment_id"] != second.ID {
		t.Fatalf("deploy.failed = %+v", failed)
	}
}

// TestStatusSaysWhyTheLastDeployFailed: the runtime's reason for a failed
// deploy (its code, message and remedy) is the app's problem in GET
// …/status while the previous release serves, and the next successful
// deploy clears it.
func TestStatusSaysWhyTheLastDeployFailed(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	f.deploy(t, appID)
	ctx := context.Background()
	if st, err := f.sch.Status(ctx, appID); err != nil || st.Problem != nil {
		t.Fatalf("status after a good deploy = %+v, %v; want no problem", st, err)
	}
	f.revision(t, appID, webSpec+"env: {V: \"2\"}\n")
	f.rt.mu.Lock()
	f.rt.runErr = errcode.New(errcode.AdapterFailed, "workload web cannot start: its secrets template cannot read Vault path secret/data/svc/apps/a/K").
		WithRemedy("set the secret again while the vault secrets adapter is the primary one")
	f.rt.mu.Unlock()
	failed := f.deploy(t, appID)
	if failed.ErrorRemedy == nil || !strings.Contains(*failed.ErrorRemedy, "set the secret again") {
		t.Fatalf("failed deployment = %+v, want its remedy recorded", failed)
	}
	st, err := f.sch.Status(ctx, appID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != apps.StateRunning || st.Problem == nil || st.Problem.Code != "ADAPTER_FAILED" || st.Problem.DeploymentID != failed.ID ||
		!strings.Contains(st.Problem.Message, "secret/data/svc/apps/a/K") || !strings.Contains(st.Problem.Remedy, "set the secret again") {
		t.Fatalf("status = %+v, problem %+v; want running with the failed deploy's reason", st, st.Problem)
	}
	f.rt.mu.Lock()
	f.rt.runErr = nil
	f.rt.mu.Unlock()
	f.deploy(t, appID)
	if st, err := f.sch.Status(ctx, appID); err != nil || st.Problem != nil {
		t.Fatalf("status after the next good deploy = %+v, %v; want no problem", st.Problem, err)
	}
}

func TestFirstDeployFailingLeavesDraft(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	f.rt.runErr = errcode.New(errcode.StateAppExited, "workload web exited with code 1 before it was ready")
	d := f.deploy(t, appID)
	if d.State != scheduler.DepFailed || *d.ErrorCode != "STATE_APP_EXITED" {
		t.Fatalf("deployment = %+v", d)
	}
	if s := f.state(t, appID); s != apps.StateDraft {
		t.Fatalf("state = %s, want draft", s)
	}
}

func TestAppThatNeverListensFailsItsDeploy(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	first := f.deploy(t, appID)
	f.revision(t, appID, webSpec+"env: {V: \"2\"}\n")
	f.rt.mu.Lock()
	f.rt.notReady = true
	f.rt.mu.Unlock()
	d := f.deploy(t, appID)
	if d.State != scheduler.DepFailed || *d.ErrorCode != "STATE_APP_EXITED" {
		t.Fatalf("deployment = %+v", d)
	}
	if jobs := f.rt.running(); len(jobs) != 1 || jobs[0] != first.ID {
		t.Fatalf("running = %v: the job that never got ready must be stopped, the first kept", jobs)
	}
}

func TestUncodedFailureIsInternalWithoutItsText(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	f.rt.runErr = os.ErrPermission
	d := f.deploy(t, appID)
	if d.State != scheduler.DepFailed || *d.ErrorCode != "INTERNAL" || *d.ErrorMessage == os.ErrPermission.Error() {
		t.Fatalf("deployment = %+v", d)
	}
}

func TestOneDeployAtATime(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	gate := make(chan struct{})
	f.rt.gate = gate
	d, err := f.sch.Create(alice, appID, 0, scheduler.TriggerAPI)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "building", func() bool { return f.dep(t, appID, d.ID).State == scheduler.DepBuilding })
	_, err = f.sch.Create(alice, appID, 0, scheduler.TriggerAPI)
	if !errcode.Has(err, errcode.StateInvalid) {
		t.Fatalf("second deploy: %v, want STATE_INVALID", err)
	}
	if s := f.state(t, appID); s != apps.StateDeploying {
		t.Fatalf("state while building = %s", s)
	}
	// A deploy the service starts itself waits its turn.
	queued, err := f.sch.Create(alice, appID, 0, scheduler.TriggerSecretRotation)
	if err != nil {
		t.Fatal(err)
	}
	close(gate)
	if d := f.ended(t, appID, d.ID); d.State != scheduler.DepSucceeded {
		t.Fatalf("first = %+v", d)
	}
	if q := f.ended(t, appID, queued.ID); q.State != scheduler.DepSucceeded {
		t.Fatalf("queued = %+v", q)
	}
}

func TestUnknownRevisionAndPlanRefusal(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	if _, err := f.sch.Create(alice, appID, 7, scheduler.TriggerAPI); !errcode.Has(err, errcode.NotFound) {
		t.Fatalf("unknown revision: %v", err)
	}
	if _, err := f.sch.Create(alice, "app_missing", 0, scheduler.TriggerAPI); !errcode.Has(err, errcode.NotFound) {
		t.Fatalf("unknown app: %v", err)
	}
	g := newFixture(t, options{refuse: errcode.New(errcode.PlanSlotUnfilled, "slot db is not filled")})
	other := g.app(t, webSpec)
	_, err := g.sch.Create(alice, other, 0, scheduler.TriggerAPI)
	if !errcode.Has(err, errcode.PlanSlotUnfilled) {
		t.Fatalf("plan refusal: %v", err)
	}
}

func TestRollbackDeploysTheLastGoodRevision(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	if _, err := f.sch.Rollback(alice, appID); !errcode.Has(err, errcode.StateInvalid) {
		t.Fatalf("rollback with no history: %v", err)
	}
	f.deploy(t, appID)
	f.revision(t, appID, webSpec+"env: {V: \"2\"}\n")
	f.deploy(t, appID)
	d, err := f.sch.Rollback(alice, appID)
	if err != nil {
		t.Fatal(err)
	}
	d = f.ended(t, appID, d.ID)
	if d.Revision != 1 || d.Trigger != scheduler.TriggerRollback || d.State != scheduler.DepSucceeded {
		t.Fatalf("rollback = %+v", d)
	}
}

func TestApprovals(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec+"deploy: {approvals: 1}\n")
	d, err := f.sch.Create(alice, appID, 0, scheduler.TriggerAPI)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != scheduler.DepWaitingApproval || d.ApprovalsRequired != 1 || len(f.events(t, "deploy.waiting_approval")) != 1 {
		t.Fatalf("held = %+v", d)
	}
	if _, err := f.sch.Approve(alice, appID, d.ID); !errcode.Has(err, errcode.PermDenied) {
		t.Fatalf("self-approval: %v", err)
	}
	alicesToken := actor.With(context.Background(), actor.Actor{Kind: authz.KindToken, ID: "tok_alice2", UserID: "usr_alice"})
	if _, err := f.sch.Approve(alicesToken, appID, d.ID); !errcode.Has(err, errcode.PermDenied) {
		t.Fatalf("self-approval through another credential: %v", err)
	}
	if _, err := f.sch.Approve(bob, appID, d.ID); err != nil {
		t.Fatal(err)
	}
	if d = f.ended(t, appID, d.ID); d.State != scheduler.DepSucceeded || len(d.Approvals) != 1 || d.Approvals[0].PrincipalID != "usr_bob" {
		t.Fatalf("approved = %+v", d)
	}
	if len(f.events(t, "deploy.approved")) != 1 {
		t.Fatal("want deploy.approved")
	}
	held, err := f.sch.Create(alice, appID, 0, scheduler.TriggerAPI)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.sch.Reject(bob, appID, held.ID, "not on a Friday"); err != nil {
		t.Fatal(err)
	}
	if r := f.dep(t, appID, held.ID); r.State != scheduler.DepRejected || *r.RejectedReason != "not on a Friday" {
		t.Fatalf("rejected = %+v", r)
	}
	if _, err := f.sch.Approve(bob, appID, held.ID); !errcode.Has(err, errcode.StateInvalid) {
		t.Fatalf("approve after reject: %v", err)
	}
	// A new deploy supersedes one still waiting.
	w1, _ := f.sch.Create(alice, appID, 0, scheduler.TriggerAPI)
	w2, err := f.sch.Create(alice, appID, 0, scheduler.TriggerAPI)
	if err != nil {
		t.Fatal(err)
	}
	if s := f.dep(t, appID, w1.ID).State; s != scheduler.DepSuperseded || w2.State != scheduler.DepWaitingApproval {
		t.Fatalf("superseded = %s, new = %s", s, w2.State)
	}
}

func TestStopStartRestart(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	d := f.deploy(t, appID)
	ctx := context.Background()
	if _, err := f.sch.Stop(alice, appID); err != nil {
		t.Fatal(err)
	}
	f.sch.ReconcileOnce(ctx)
	if s := f.state(t, appID); s != apps.StateStopped || len(f.rt.running()) != 0 {
		t.Fatalf("after stop: state %s, jobs %v", s, f.rt.running())
	}
	if _, err := f.sch.Restart(alice, appID); !errcode.Has(err, errcode.StateInvalid) {
		t.Fatalf("restart of a stopped app: %v", err)
	}
	if _, err := f.sch.Start(alice, appID); err != nil {
		t.Fatal(err)
	}
	f.sch.ReconcileOnce(ctx)
	if s := f.state(t, appID); s != apps.StateRunning || len(f.rt.running()) != 1 || f.rt.running()[0] != d.ID {
		t.Fatalf("after start: state %s, jobs %v", s, f.rt.running())
	}
	if _, err := f.sch.Restart(alice, appID); err != nil {
		t.Fatal(err)
	}
	f.sch.ReconcileOnce(ctx)
	f.sch.ReconcileOnce(ctx)
	if _, _, restarts := f.rt.count(); restarts != 1 {
		t.Fatalf("restarts = %d, want exactly 1", restarts)
	}
	if len(f.events(t, "app.restarted")) != 1 {
		t.Fatal("want one app.restarted")
	}
	st, err := f.sch.Status(ctx, appID)
	if err != nil || st.State != apps.StateRunning || !st.Workloads["web"].Running || st.Workloads["web"].Restarts != 1 || !st.Workloads["web"].Primary {
		t.Fatalf("status = %+v, %v", st, err)
	}
}

func TestHealthMovesBetweenRunningAndDegraded(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	f.deploy(t, appID)
	ctx := context.Background()
	f.rt.set(func(w *scheduler.WorkloadStatus) { w.Health = scheduler.HealthFailing })
	f.sch.ReconcileOnce(ctx)
	if s := f.state(t, appID); s != apps.StateDegraded {
		t.Fatalf("state = %s, want degraded", s)
	}
	f.rt.set(func(w *scheduler.WorkloadStatus) { w.Health = scheduler.HealthPassing })
	f.sch.ReconcileOnce(ctx)
	if s := f.state(t, appID); s != apps.StateRunning {
		t.Fatalf("state = %s, want running", s)
	}
	moves := []string{}
	for _, e := range f.events(t, "app.state_changed") {
		moves = append(moves, e.Data["from"].(string)+">"+e.Data["to"].(string))
	}
	want := []string{"draft>deploying", "deploying>running", "running>degraded", "degraded>running"}
	if len(moves) != len(want) {
		t.Fatalf("moves = %v, want %v", moves, want)
	}
	for i := range want {
		if moves[i] != want[i] {
			t.Fatalf("moves = %v, want %v", moves, want)
		}
	}
}

func TestRepeatedFailuresEndFailedAndStayFailed(t *testing.T) {
	f := newFixture(t, options{backoff: []time.Duration{time.Millisecond, time.Millisecond}})
	appID := f.app(t, webSpec)
	f.deploy(t, appID)
	ctx := context.Background()
	exit := 2
	crash := func() {
		f.rt.set(func(w *scheduler.WorkloadStatus) { w.Running, w.Dead, w.ExitCode = false, true, &exit })
	}
	crash()
	f.sch.ReconcileOnce(ctx) // failure 1: stopped, retry scheduled
	if s := f.state(t, appID); s != scheduler.StateRestarting {
		t.Fatalf("state = %s, want restarting", s)
	}
	for i := 0; i < 3 && f.state(t, appID) != apps.StateFailed; i++ {
		time.Sleep(5 * time.Millisecond)
		f.sch.ReconcileOnce(ctx) // runs it again
		crash()
		f.sch.ReconcileOnce(ctx) // and it fails again
	}
	if s := f.state(t, appID); s != apps.StateFailed {
		t.Fatalf("state = %s, want failed", s)
	}
	gaveUp := f.events(t, "app.gave_up")
	if len(gaveUp) != 1 || gaveUp[0].Data["failures"] == nil || gaveUp[0].Data["reason"] == "" || gaveUp[0].Data["window"] == nil {
		t.Fatalf("app.gave_up = %+v", gaveUp)
	}
	_, runs, _ := f.rt.count()
	for range 5 {
		time.Sleep(5 * time.Millisecond)
		f.sch.ReconcileOnce(ctx)
	}
	if _, again, _ := f.rt.count(); again != runs || len(f.rt.running()) != 0 {
		t.Fatalf("the reconciler ran a failed app again (%d runs, then %d)", runs, again)
	}
	// Even starting it does not revive it; a deploy does.
	if _, err := f.sch.Start(alice, appID); err != nil {
		t.Fatal(err)
	}
	f.sch.ReconcileOnce(ctx)
	if s := f.state(t, appID); s != apps.StateFailed {
		t.Fatalf("after start: %s, want failed", s)
	}
	// A deploy that fails leaves it failed, not running.
	f.rt.mu.Lock()
	f.rt.runErr = errcode.New(errcode.StateAppExited, "workload web exited with code 1 before it was ready")
	f.rt.mu.Unlock()
	if d := f.deploy(t, appID); d.State != scheduler.DepFailed {
		t.Fatalf("deploy = %+v", d)
	}
	if s := f.state(t, appID); s != apps.StateFailed {
		t.Fatalf("after a failed deploy: %s, want failed", s)
	}
	f.rt.mu.Lock()
	f.rt.runErr = nil
	f.rt.mu.Unlock()
	if d := f.deploy(t, appID); d.State != scheduler.DepSucceeded {
		t.Fatalf("deploy = %+v", d)
	}
	if s := f.state(t, appID); s != apps.StateRunning {
		t.Fatalf("after deploy: %s", s)
	}
}

func TestLostJobIsRunAgain(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	d := f.deploy(t, appID)
	// The runtime forgets the job, as after svc was killed.
	_ = f.rt.Stop(context.Background(), d.ID)
	f.sch.ReconcileOnce(context.Background())
	if jobs := f.rt.running(); len(jobs) != 1 || jobs[0] != d.ID {
		t.Fatalf("jobs = %v", jobs)
	}
	if s := f.state(t, appID); s != apps.StateRunning {
		t.Fatalf("state = %s", s)
	}
}

func TestDeletedAppStopsAtOnce(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	f.deploy(t, appID)
	if err := f.apps.Delete(alice, appID, apps.Decision{Force: true}); err != nil {
		t.Fatal(err)
	}
	f.sch.ReconcileOnce(context.Background())
	if jobs := f.rt.running(); len(jobs) != 0 {
		t.Fatalf("a deleted app's job still runs: %v", jobs)
	}
	if _, _, ok := scheduler.Releases.Get(f.store.Read(), appID); ok {
		t.Fatal("the deleted app's release is still there")
	}
}

func TestSecretRotationDeploysAgainWithoutABuild(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	f.deploy(t, appID)
	builds, _, _ := f.rt.count()
	f.secrets.mu.Lock()
	before := f.secrets.resolved
	f.secrets.mu.Unlock()
	for range 3 {
		f.sch.ReconcileOnce(context.Background())
	}
	f.secrets.mu.Lock()
	if f.secrets.resolved != before {
		t.Errorf("the reconciler read %d secret values while nothing changed", f.secrets.resolved-before)
	}
	f.secrets.mu.Unlock()
	f.secrets.put("TOKEN", "t2")
	f.sch.ReconcileOnce(context.Background())
	list, _, _ := f.sch.List(appID, "", 10)
	if len(list) != 2 || list[0].Trigger != scheduler.TriggerSecretRotation {
		t.Fatalf("deployments = %+v", list)
	}
	d := f.ended(t, appID, list[0].ID)
	if d.State != scheduler.DepSucceeded || f.rt.ran[d.ID].Workloads["web"].Env["TOKEN"] != "t2" {
		t.Fatalf("rotation deploy = %+v", d)
	}
	if after, _, _ := f.rt.count(); after != builds {
		t.Fatalf("builds %d -> %d: a rotation must reuse the build", builds, after)
	}
	f.sch.ReconcileOnce(context.Background())
	if list, _, _ := f.sch.List(appID, "", 10); len(list) != 2 {
		t.Fatalf("a second rotation deploy for the same versions: %d deployments", len(list))
	}
}

func TestCapacity(t *testing.T) {
	f := newFixture(t, options{ports: [2]int{9000, 9000}})
	big := `
workloads:
  web: {primary: true, build: {kind: command, command: "true"}, run: {command: [./app], port: 8080}, resources: {cpu_millis: 1500}}
`
	a := f.app(t, big)
	f.deploy(t, a)
	b := f.app(t, big)
	_, err := f.sch.Create(alice, b, 0, scheduler.TriggerAPI)
	if !errcode.Has(err, errcode.CapacityOversubscribe) {
		t.Fatalf("oversubscribe: %v", err)
	}
	c := f.app(t, webSpec)
	if _, err := f.sch.Create(alice, c, 0, scheduler.TriggerAPI); !errcode.Has(err, errcode.CapacityNoFreePort) {
		t.Fatalf("no free port: %v", err)
	}
	capa, err := f.sch.Capacity(context.Background())
	if err != nil || capa.Committed.CPUMillis != 1500 || capa.Free.CPUMillis != 500 || capa.Ports.Used != 1 || capa.Ports.Free != 0 {
		t.Fatalf("capacity = %+v, %v", capa, err)
	}
	// Stopping frees what it committed; starting again must fit.
	if _, err := f.sch.Stop(alice, a); err != nil {
		t.Fatal(err)
	}
	if capa, _ := f.sch.Capacity(context.Background()); capa.Committed.CPUMillis != 0 {
		t.Fatalf("committed after stop = %d", capa.Committed.CPUMillis)
	}
}

func TestInterruptedDeployFailsCleanly(t *testing.T) {
	f := newFixture(t, options{noWorkers: true})
	appID := f.app(t, webSpec)
	d, err := f.sch.Create(alice, appID, 0, scheduler.TriggerAPI)
	if err != nil {
		t.Fatal(err)
	}
	// Left building by a leader that died.
	r := f.store.Read()
	cur, meta, _ := scheduler.Deployments.Get(r, d.ID)
	cur.State = scheduler.DepBuilding
	if _, err := f.store.Apply(context.Background(), scheduler.Deployments.PutIf(&cur, meta.ModifyIndex)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = f.sch.RunDeploys(ctx) }()
	d = f.ended(t, appID, d.ID)
	if d.State != scheduler.DepFailed || *d.ErrorCode != "INTERNAL" || !strings.Contains(*d.ErrorMessage, "interrupted") {
		t.Fatalf("interrupted = %+v", d)
	}
}

// TestInterruptedDeployIsClearedFromTheRuntime: what a dead leader's
// deploy left on the runtime goes: its half-started job is stopped and
// its builds are canceled; the release's job keeps running.
func TestInterruptedDeployIsClearedFromTheRuntime(t *testing.T) {
	f := newFixture(t, options{noWorkers: true})
	appID := f.app(t, webSpec)
	d, err := f.sch.Create(alice, appID, 0, scheduler.TriggerAPI)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Left starting by a leader that died, its job half up.
	if _, err := f.rt.Run(ctx, scheduler.Job{ID: d.ID, Workloads: map[string]scheduler.Task{"web": {}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.rt.Run(ctx, scheduler.Job{ID: "job-of-the-release", Workloads: map[string]scheduler.Task{"web": {}}}); err != nil {
		t.Fatal(err)
	}
	r := f.store.Read()
	cur, meta, _ := scheduler.Deployments.Get(r, d.ID)
	cur.State = scheduler.DepStarting
	if _, err := f.store.Apply(ctx, scheduler.Deployments.PutIf(&cur, meta.ModifyIndex)); err != nil {
		t.Fatal(err)
	}
	go func() { _ = f.sch.RunDeploys(ctx) }()
	f.ended(t, appID, d.ID)
	for {
		f.rt.mu.Lock()
		_, running := f.rt.jobs[d.ID]
		_, release := f.rt.jobs["job-of-the-release"]
		canceled := slices.Contains(f.rt.canceled, d.ID)
		f.rt.mu.Unlock()
		if !release {
			t.Fatalf("the release's job was stopped")
		}
		if !running && canceled {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestSyncArtifacts: every node keeps its copies of store-kept artifacts
// in step: the release's are asked for (fetched when missing), copies of
// builds Prune lets go of are removed, and no job's logs are touched (that
// is the leader's Prune).
func TestSyncArtifacts(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	var deps []scheduler.Deployment
	for i := range scheduler.KeepBuilds + 2 {
		f.revision(t, appID, webSpec+fmt.Sprintf("env: {V: \"%d\"}\n", i))
		deps = append(deps, f.deploy(t, appID))
	}
	// The deploys removed the logs of the jobs they replaced (the last
	// one's after its deploy ended); what follows counts only the sync's.
	eventually(t, "the replaced jobs' logs removed", func() bool {
		f.rt.mu.Lock()
		defer f.rt.mu.Unlock()
		return len(f.rt.logsRemoved) >= len(deps)-1
	})
	f.rt.mu.Lock()
	f.rt.asked, f.rt.logsRemoved = nil, nil
	f.rt.mu.Unlock()
	if err := f.sch.SyncArtifacts(context.Background()); err != nil {
		t.Fatal(err)
	}
	release := deps[len(deps)-1].Artifacts["web"].ID
	f.rt.mu.Lock()
	asked, logs := slices.Clone(f.rt.asked), len(f.rt.logsRemoved)
	f.rt.mu.Unlock()
	if !slices.Contains(asked, release) {
		t.Errorf("the release's build %s was not asked for (asked %v)", release, asked)
	}
	for i, d := range deps {
		_, err := os.Stat(d.Artifacts["web"].Dir)
		kept := i >= len(deps)-scheduler.KeepBuilds
		if kept != (err == nil) {
			t.Errorf("deployment %d of %d: build kept = %v, want %v", i+1, len(deps), err == nil, kept)
		}
	}
	if logs != 0 {
		t.Errorf("sync removed %d jobs' logs; that is Prune's, on the leader", logs)
	}
}

func TestPruneKeepsRecentBuildsAndForgetsDeletedApps(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	var deps []scheduler.Deployment
	for i := range scheduler.KeepBuilds + 3 {
		f.revision(t, appID, webSpec+fmt.Sprintf("env: {V: \"%d\"}\n", i))
		deps = append(deps, f.deploy(t, appID))
	}
	// Each deploy that replaced a release removed the replaced job's logs
	// (max_log_disk_bytes caps what an app keeps); the sweep removes those
	// of every job but the release's again, which is no error.
	// (The last one's follows its deploy's end.)
	var replaced []string
	eventually(t, "the replaced jobs' logs removed", func() bool {
		f.rt.mu.Lock()
		defer f.rt.mu.Unlock()
		replaced = slices.Clone(f.rt.logsRemoved)
		return len(replaced) >= len(deps)-1
	})
	f.rt.mu.Lock()
	f.rt.logsRemoved = nil
	f.rt.mu.Unlock()
	var want []string
	for _, d := range deps[:len(deps)-1] {
		want = append(want, d.ID)
	}
	if !slices.Equal(replaced, want) {
		t.Errorf("logs removed while deploying %v, want the replaced jobs %v", replaced, want)
	}
	if err := f.sch.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, d := range deps {
		_, err := os.Stat(d.Artifacts["web"].Dir)
		kept := i >= len(deps)-scheduler.KeepBuilds
		if kept != (err == nil) {
			t.Errorf("deployment %d of %d: build kept = %v, want %v", i+1, len(deps), err == nil, kept)
		}
	}
	if len(f.rt.logsRemoved) != len(deps)-1 {
		t.Errorf("logs removed for %d jobs, want %d (all but the release's)", len(f.rt.logsRemoved), len(deps)-1)
	}
	if err := f.apps.Delete(alice, appID, apps.Decision{Force: true}); err != nil {
		t.Fatal(err)
	}
	f.sch.ReconcileOnce(context.Background())
	if err := f.sch.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := scheduler.Deployments.Count(f.store.Read()); n != 0 {
		t.Errorf("%d deployments of a deleted app remain", n)
	}
	for _, d := range deps {
		if _, err := os.Stat(d.Artifacts["web"].Dir); err == nil {
			t.Errorf("a deleted app's build remains: %s", d.Artifacts["web"].Dir)
		}
	}
}

func TestRoutes(t *testing.T) {
	f := newFixture(t, options{ports: [2]int{9100, 9110}})
	appID := f.app(t, webSpec)
	other := f.app(t, webSpec)
	f.deploy(t, appID)
	routes := map[string]scheduler.RouteInfo{}
	for _, ri := range f.sch.Routes(context.Background()) {
		routes[ri.AppID] = ri
	}
	if ri := routes[appID]; ri.Port != 9100 || ri.Upstream != "127.0.0.1:1" || ri.Slug == "" {
		t.Fatalf("route of the deployed app = %+v", ri)
	}
	if ri, ok := routes[other]; !ok || ri.Upstream != "" || ri.Port != 0 {
		t.Fatalf("route of the app never deployed = %+v, %v", ri, ok)
	}
	f.rt.set(func(w *scheduler.WorkloadStatus) { w.Health = scheduler.HealthFailing })
	for _, ri := range f.sch.Routes(context.Background()) {
		if ri.AppID == appID && ri.Upstream != "" {
			t.Fatalf("an app failing its health check is routed: %+v", ri)
		}
	}
}

// TestTheOnlyWorkloadIsPrimaryWithoutSayingSo: a spec whose only workload
// leaves primary out has it as its primary (spec.Document.Primary): the
// release routes to it and the status names it primary.
func TestTheOnlyWorkloadIsPrimaryWithoutSayingSo(t *testing.T) {
	f := newFixture(t, options{ports: [2]int{9100, 9110}})
	appID := f.app(t, strings.Replace(webSpec, "primary: true, ", "", 1))
	if d := f.ended(t, appID, f.deploy(t, appID).ID); d.State != scheduler.DepSucceeded {
		t.Fatalf("deploy: %+v", d)
	}
	// Routes read the runtime's live status, which the reconciler may be
	// looking at too: wait for the route rather than read it once.
	var route scheduler.RouteInfo
	eventually(t, "the only workload routed", func() bool {
		for _, ri := range f.sch.Routes(context.Background()) {
			if ri.AppID == appID {
				route = ri
			}
		}
		return route.Upstream == "127.0.0.1:1"
	})
	st, err := f.sch.Status(context.Background(), appID)
	if err != nil || !st.Workloads["web"].Primary {
		t.Errorf("status = %+v, %v; want web primary", st, err)
	}
}

func TestSlotCredentialsAreMarkedSealed(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, `
workloads:
  web: {primary: true, build: {kind: command, command: "true"}, run: {command: [./app], port: 8080}, env: {DB_PASSWORD: {slot: db, field: password}, DB_HOST: {slot: db, field: host}}}
slots: {db: {type: postgres}}
`)
	d := f.deploy(t, appID)
	task := f.rt.ran[d.ID].Workloads["web"]
	if !task.SealedEnv["DB_PASSWORD"] || task.SealedEnv["DB_HOST"] || task.Env["DB_PASSWORD"] != "slot-db-password" {
		t.Fatalf("task env %v, sealed %v", task.Env, task.SealedEnv)
	}
}

func TestJobStartOrder(t *testing.T) {
	job := scheduler.Job{Workloads: map[string]scheduler.Task{"a": {}, "b": {}, "c": {}, "d": {}}, Order: []string{"c", "a"}}
	if got, err := job.StartOrder(); err != nil || fmt.Sprint(got) != "[c a b d]" {
		t.Fatalf("StartOrder = %v, %v; want [c a b d]", got, err)
	}
	for _, order := range [][]string{{"x"}, {"a", "a"}} {
		job.Order = order
		if _, err := job.StartOrder(); !errcode.Has(err, errcode.ValidInvalid) {
			t.Errorf("order %v: %v, want VALID_INVALID", order, err)
		}
	}
}

// TestQuiesce: an app never deployed runs nothing to pause ("stopped"); an
// app on a runtime that keeps its volumes elsewhere (this fake, as Nomad's
// host volumes) cannot be backed up here: PLAN_CAPABILITY_UNSUPPORTED.
func TestQuiesce(t *testing.T) {
	f := newFixture(t, options{ports: [2]int{9000, 9001}})
	appID := f.app(t, webSpec)
	resume, how, err := f.sch.Quiesce(alice, appID)
	if err != nil || how != "stopped" || resume == nil {
		t.Fatalf("quiesce before a deploy = %q, %v", how, err)
	}
	resume()
	if d := f.deploy(t, appID); d.State != scheduler.DepSucceeded {
		t.Fatalf("deploy %s", d.State)
	}
	if _, _, err := f.sch.Quiesce(alice, appID); !errcode.Has(err, errcode.PlanCapabilityUnsupp) {
		t.Fatalf("quiesce on a runtime without local volumes = %v; want PLAN_CAPABILITY_UNSUPPORTED", err)
	}
	if err := f.sch.CopyVolumeOut(alice, appID, "data", t.TempDir()); !errcode.Has(err, errcode.PlanCapabilityUnsupp) {
		t.Fatalf("copy out on a runtime that copies nothing = %v; want PLAN_CAPABILITY_UNSUPPORTED", err)
	}
}

// copyingRuntime is the fake runtime copying volumes from elsewhere, as
// Nomad's runtime does: it records the copies.
type copyingRuntime struct {
	*fakeRuntime
	copies []string
}

func (c *copyingRuntime) CopyVolumeOut(_ context.Context, appID, volume, dst string) error {
	c.copies = append(c.copies, "out "+appID+" "+volume+" "+dst)
	return nil
}

func (c *copyingRuntime) CopyVolumeIn(_ context.Context, appID, volume, src string) error {
	c.copies = append(c.copies, "in "+appID+" "+volume+" "+src)
	return nil
}

// TestQuiesceCopier: an app whose runtime copies its volumes from
// elsewhere (a VolumeCopier, as Nomad's) is backed up live: Quiesce
// answers "live" and CanQuiesce does not refuse it; Copier names its
// runtime, whose copies the scheduler's CopyVolumeOut and CopyVolumeIn
// reach; an app never deployed has no copier.
func TestQuiesceCopier(t *testing.T) {
	rt := &copyingRuntime{fakeRuntime: newFakeRuntime(t)}
	f := newFixture(t, options{ports: [2]int{9000, 9001}, runtime: rt})
	appID := f.app(t, webSpec)
	if _, ok := f.sch.Copier(appID); ok {
		t.Fatalf("an app never deployed has a copier")
	}
	if d := f.deploy(t, appID); d.State != scheduler.DepSucceeded {
		t.Fatalf("deploy %s", d.State)
	}
	if err := f.sch.CanQuiesce(appID); err != nil {
		t.Fatalf("CanQuiesce = %v, want nil", err)
	}
	resume, how, err := f.sch.Quiesce(alice, appID)
	if err != nil || how != "live" {
		t.Fatalf("Quiesce = %q, %v; want live", how, err)
	}
	resume()
	c, ok := f.sch.Copier(appID)
	if !ok || c != rt || !f.sch.CopiesVolumes(appID) {
		t.Fatalf("Copier = %v, %v; want the app's runtime", c, ok)
	}
	if err := f.sch.CopyVolumeOut(alice, appID, "data", "/x"); err != nil {
		t.Fatal(err)
	}
	if err := f.sch.CopyVolumeIn(alice, appID, "data", "/y"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"out " + appID + " data /x", "in " + appID + " data /y"}; !slices.Equal(rt.copies, want) {
		t.Fatalf("copies %q, want %q", rt.copies, want)
	}
}
