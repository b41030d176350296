package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/internal/testserver"
	"github.com/svchost/svc/scheduler"
)

// Releases on the fake runtime: what a deploy ships, which builds it
// starts again, and what rollback restores. The same cases run on the real
// runtimes in scheduler/releasetest.

// TestBuildKeyFollowsTheDiff: a change the spec diff classifies as a
// restart never changes a workload's build key; one it classifies as a
// rebuild of the workload does; so does a change of the source, the
// runtime, or the policy a build runs under. The source's checkout and
// repository address do not (a commit names its tree).
func TestBuildKeyFollowsTheDiff(t *testing.T) {
	const base = `
env: {A: "1"}
volumes: {data: {size_bytes: 1048576}}
workloads:
  web: {primary: true, build: {kind: go, context: app, command: "go build -o app ."}, run: {command: [./app], port: 8080}, env: {B: "2"}, mounts: [{volume: data, path: /data}]}
  worker: {run: {command: [./worker]}, depends_on: [web]}
`
	v1 := &apps.Source{Kind: "archive", Commit: "sha256:aaa", CheckoutID: "chk_1"}
	key := func(doc spec.Document, name string, src *apps.Source) string {
		return scheduler.BuildKey("adp_a", src, doc.Workloads[name].Build, "none", []string{"b.example", "a.example"})
	}
	parse := func(y string) spec.Document {
		d, err := spec.Parse([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := parse(base)
	for _, c := range []struct {
		name, from, to string
		effect         string // the diff's effect
		rebuilds       []string
	}{
		{"app env", `A: "1"`, `A: "9"`, spec.EffectRestart, nil},
		{"workload env", `B: "2"`, `B: "3"`, spec.EffectRestart, nil},
		{"run command", `command: [./app]`, `command: [./app, -v]`, spec.EffectRestart, nil},
		{"port", `port: 8080`, `port: 9090`, spec.EffectRestart, nil},
		{"mount path", `path: /data`, `path: /srv`, spec.EffectRestart, nil},
		{"volume size", `size_bytes: 1048576`, `size_bytes: 2097152`, spec.EffectRestart, nil},
		{"dependencies", `depends_on: [web]`, `depends_on: []`, spec.EffectRestart, nil},
		{"build command", `command: "go build -o app ."`, `command: "go build -trimpath -o app ."`, spec.EffectRebuild, []string{"web"}},
		{"build context", `context: app`, `context: src`, spec.EffectRebuild, []string{"web"}},
		{"build context spelled otherwise", `context: app`, `context: ./app/`, spec.EffectRebuild, nil},
		{"build added", `worker: {run:`, `worker: {build: {kind: command, command: make}, run:`, spec.EffectRebuild, []string{"worker"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(base, c.from) {
				t.Fatalf("the base spec has no %q", c.from)
			}
			b := parse(strings.Replace(base, c.from, c.to, 1))
			if got := spec.Diff(a, b).Effect; got != c.effect {
				t.Fatalf("diff effect = %s, want %s", got, c.effect)
			}
			for _, name := range []string{"web", "worker"} {
				changed := key(a, name, v1) != key(b, name, v1)
				if want := slices.Contains(c.rebuilds, name); changed != want {
					t.Errorf("workload %s: key changed = %v, want %v", name, changed, want)
				}
			}
		})
	}
	same := key(a, "web", v1)
	for name, k := range map[string]string{
		"another commit":    key(a, "web", &apps.Source{Kind: "archive", Commit: "sha256:bbb"}),
		"another subdir":    key(a, "web", &apps.Source{Kind: "archive", Commit: "sha256:aaa", Subdir: "svc"}),
		"another runtime":   scheduler.BuildKey("adp_b", v1, a.Workloads["web"].Build, "none", []string{"a.example", "b.example"}),
		"sandboxed builds":  scheduler.BuildKey("adp_a", v1, a.Workloads["web"].Build, "sandbox", []string{"a.example", "b.example"}),
		"another allowlist": scheduler.BuildKey("adp_a", v1, a.Workloads["web"].Build, "none", []string{"a.example"}),
	} {
		if k == same {
			t.Errorf("%s: same build key", name)
		}
	}
	if k := key(a, "web", &apps.Source{Kind: "archive", Commit: "sha256:aaa", CheckoutID: "chk_2", Repository: "https://x"}); k != same {
		t.Error("another checkout of the same commit changed the build key")
	}
	if k := key(a, "worker", v1); k != scheduler.BuildKey("adp_a", v1, &spec.Build{Kind: spec.BuildCommand, Context: "."}, "none", []string{"a.example", "b.example"}) {
		t.Error("no build section is not the command build of the source's root")
	}
	if k := key(a, "web", &apps.Source{Kind: "archive"}); k != "" {
		t.Errorf("a source without a commit has build key %q; want none", k)
	}
}

// deployLog is a finished deployment's kept log, one line per entry.
func (f *fixture) deployLog(t *testing.T, id string) string {
	t.Helper()
	l, _, ok := scheduler.DeployLogs.Get(f.store.Read(), id)
	if !ok {
		t.Fatalf("deployment %s kept no log", id)
	}
	var b strings.Builder
	for _, line := range l.Lines {
		fmt.Fprintf(&b, "%s: %s\n", line.Stream, line.Line)
	}
	return b.String()
}

// succeeded deploys revision n (0: the pinned one) and fails the test
// unless it succeeds.
func (f *fixture) succeeded(t *testing.T, appID string, n uint64) scheduler.Deployment {
	t.Helper()
	d, err := f.sch.Create(alice, appID, n, scheduler.TriggerAPI)
	if err != nil {
		t.Fatal(err)
	}
	return f.mustSucceed(t, d)
}

func (f *fixture) mustSucceed(t *testing.T, d scheduler.Deployment) scheduler.Deployment {
	t.Helper()
	d = f.ended(t, d.AppID, d.ID)
	if d.State != scheduler.DepSucceeded {
		t.Fatalf("deployment %s ended %s (%v); its log:\n%s", d.ID, d.State, deref(d.ErrorMessage), f.deployLog(t, d.ID))
	}
	return d
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// builtBy says which deployment built each workload's artifact.
func builtBy(d scheduler.Deployment) map[string]string {
	out := map[string]string{}
	for name, b := range d.Builds {
		out[name] = b.BuiltBy
	}
	return out
}

// TestSourceChangeRebuilds: a deploy after a new upload (no new revision)
// builds from the new source, and records it; the build of the same
// revision from the old source is not reused.
func TestSourceChangeRebuilds(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	v1 := f.upload(t, appID, "v1")
	first := f.succeeded(t, appID, 0)
	v2 := f.upload(t, appID, "v2")
	second := f.succeeded(t, appID, 0)
	if builds, _, _ := f.rt.count(); builds != 2 {
		t.Fatalf("%d builds; want one per source", builds)
	}
	if first.Source.Commit != v1.Commit || second.Source.Commit != v2.Commit || second.Source.CheckoutID != v2.CheckoutID {
		t.Errorf("sources recorded: %+v then %+v; want v1 then v2", first.Source, second.Source)
	}
	if second.Builds["web"].BuiltBy != second.ID || second.Artifacts["web"].ID == first.Artifacts["web"].ID {
		t.Errorf("the second deploy started %+v built by %v; want its own build", second.Artifacts, builtBy(second))
	}
	if second.Builds["web"].Key == first.Builds["web"].Key || second.Builds["web"].Key == "" {
		t.Errorf("build keys %q and %q: a source change must change the key", first.Builds["web"].Key, second.Builds["web"].Key)
	}
	f.rt.mu.Lock()
	builtFrom := slices.Clone(f.rt.built)
	f.rt.mu.Unlock()
	if builtFrom[1] != f.sources.trees[v2.CheckoutID] {
		t.Errorf("the second build ran on %s; want v2's checkout %s", builtFrom[1], f.sources.trees[v2.CheckoutID])
	}
	rel, _, _ := scheduler.Releases.Get(f.store.Read(), appID)
	if rel.Source == nil || rel.Source.Commit != v2.Commit || rel.Builds["web"].BuiltBy != second.ID {
		t.Errorf("release = %+v; want v2's source and build", rel)
	}
}

// TestEnvOnlyChangeStartsTheKeptBuild: a revision that changes only the
// environment starts the artifact of the deployment before it, without
// building, and says so.
func TestEnvOnlyChangeStartsTheKeptBuild(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	f.upload(t, appID, "v1")
	first := f.succeeded(t, appID, 0)
	f.revision(t, appID, webSpec+"env: {V: \"2\"}\n")
	second := f.succeeded(t, appID, 0)
	if builds, runs, _ := f.rt.count(); builds != 1 || runs != 2 {
		t.Fatalf("builds %d, runs %d; want 1 build, 2 runs", builds, runs)
	}
	if second.Artifacts["web"] != first.Artifacts["web"] || second.Builds["web"] != first.Builds["web"] {
		t.Errorf("second deploy: %+v %+v; want the first's artifact and build", second.Artifacts, second.Builds)
	}
	if ran := f.rt.ran[second.ID]; ran.Workloads["web"].Env["V"] != "2" || ran.Workloads["web"].Artifact != first.Artifacts["web"] {
		t.Errorf("job run = %+v; want the new env on the first build", ran.Workloads["web"])
	}
	if log := f.deployLog(t, second.ID); !strings.Contains(log, "starting the kept build of deployment "+first.ID) || strings.Contains(log, "build: ") {
		t.Errorf("the deploy log does not say it started the kept build, or shows a build:\n%s", log)
	}
}

// TestRollbackShipsThePreviousRelease: rollback ships the last release
// before the current one as it ran (revision, source, artifacts) without
// building; a second rollback goes back to the release rolled back from.
func TestRollbackShipsThePreviousRelease(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	v1 := f.upload(t, appID, "v1")
	a := f.succeeded(t, appID, 0)
	f.revision(t, appID, webSpec+"env: {V: \"2\"}\n")
	v2 := f.upload(t, appID, "v2")
	b := f.succeeded(t, appID, 0)
	builds, _, _ := f.rt.count()

	d, err := f.sch.Rollback(alice, appID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Redeploys != a.ID || d.Revision != a.Revision || d.Source.Commit != v1.Commit || d.Trigger != scheduler.TriggerRollback {
		t.Fatalf("rollback = %+v; want deployment %s again (revision %d, %s)", d, a.ID, a.Revision, v1.Commit)
	}
	d = f.mustSucceed(t, d)
	if after, _, _ := f.rt.count(); after != builds {
		t.Errorf("the rollback built %d workloads; want none", after-builds)
	}
	if d.Artifacts["web"] != a.Artifacts["web"] || d.Builds["web"].BuiltBy != a.ID {
		t.Errorf("rollback started %+v (%v); want deployment %s's artifact", d.Artifacts, builtBy(d), a.ID)
	}
	if ran := f.rt.ran[d.ID]; ran.Workloads["web"].Env["V"] != "" {
		t.Errorf("the rollback's job has revision 2's env: %v", ran.Workloads["web"].Env)
	}
	rel, _, _ := scheduler.Releases.Get(f.store.Read(), appID)
	if rel.DeploymentID != d.ID || rel.Revision != a.Revision || rel.Source.Commit != v1.Commit {
		t.Errorf("release after the rollback = %+v", rel)
	}
	// The app's recorded source is still v2: a deploy now ships v2 again
	// (b's kept build), and a second rollback from the rollback goes back
	// to b.
	d2, err := f.sch.Rollback(alice, appID)
	if err != nil {
		t.Fatal(err)
	}
	if d2.Redeploys != b.ID || d2.Source.Commit != v2.Commit {
		t.Errorf("second rollback redeploys %s (%v); want %s with v2", d2.Redeploys, d2.Source, b.ID)
	}
	f.mustSucceed(t, d2)
	if after, _, _ := f.rt.count(); after != builds {
		t.Errorf("rolling back twice built %d workloads; want none", after-builds)
	}
}

// TestRollbackBuildsFromItsOwnSource: when the target's artifact is gone,
// the rollback builds again, from the target's source, not the app's
// current one; when that source is gone as well, the rollback is refused
// before anything is created, saying what to do.
func TestRollbackBuildsFromItsOwnSource(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	v1 := f.upload(t, appID, "v1")
	a := f.succeeded(t, appID, 0)
	f.upload(t, appID, "v2")
	f.succeeded(t, appID, 0)
	if err := os.RemoveAll(a.Artifacts["web"].Dir); err != nil {
		t.Fatal(err)
	}
	d, err := f.sch.Rollback(alice, appID)
	if err != nil {
		t.Fatal(err)
	}
	d = f.mustSucceed(t, d)
	f.rt.mu.Lock()
	last := f.rt.built[len(f.rt.built)-1]
	f.rt.mu.Unlock()
	if d.Builds["web"].BuiltBy != d.ID || last != f.sources.trees[v1.CheckoutID] {
		t.Errorf("the rollback built %v from %s; want a build from v1's checkout %s", builtBy(d), last, f.sources.trees[v1.CheckoutID])
	}
	if d.Builds["web"].Key != a.Builds["web"].Key {
		t.Errorf("the rebuild has key %s; want the release's %s", d.Builds["web"].Key, a.Builds["web"].Key)
	}

	// Now the current release is v1 again: lose v2's build and checkout,
	// and roll back to it.
	list, _, _ := f.sch.List(appID, "", 10)
	b := list[1]
	if err := os.RemoveAll(b.Artifacts["web"].Dir); err != nil {
		t.Fatal(err)
	}
	f.sources.lose(b.Source.CheckoutID)
	before := scheduler.Deployments.Count(f.store.Read())
	_, err = f.sch.Rollback(alice, appID)
	e, ok := errcode.As(err)
	if !ok || e.Code != errcode.StateInvalid || !strings.Contains(e.Remedy, "upload that source again") || e.Details["deployment_id"] != b.ID {
		t.Fatalf("rollback to a release whose build and source are gone = %v; want STATE_INVALID naming it, with a remedy", err)
	}
	if n := scheduler.Deployments.Count(f.store.Read()); n != before {
		t.Errorf("a refused rollback created a deployment (%d -> %d)", before, n)
	}
}

// TestRedeployOfAKeptReleaseBuildsNothing: the same source uploaded again
// (another checkout, same digest) and deployed starts the kept build of
// the release that shipped it.
func TestRedeployOfAKeptReleaseBuildsNothing(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	f.upload(t, appID, "v1")
	a := f.succeeded(t, appID, 0)
	f.upload(t, appID, "v2")
	f.succeeded(t, appID, 0)
	f.upload(t, appID, "v1")
	builds, _, _ := f.rt.count()
	c := f.succeeded(t, appID, 0)
	if after, _, _ := f.rt.count(); after != builds {
		t.Errorf("a redeploy of a kept release built %d workloads", after-builds)
	}
	if c.Artifacts["web"] != a.Artifacts["web"] || c.Builds["web"].BuiltBy != a.ID {
		t.Errorf("redeploy started %+v; want deployment %s's build", c.Artifacts, a.ID)
	}
	// The same deploy again (nothing changed) starts the same build too.
	d := f.succeeded(t, appID, 0)
	if after, _, _ := f.rt.count(); after != builds || d.Artifacts["web"] != a.Artifacts["web"] {
		t.Errorf("deploying the release again built %d workloads and started %+v", after-builds, d.Artifacts)
	}
}

// TestSecretRotationShipsTheRelease: a secret rotation deploys the release
// again, its source included, even when another source was uploaded
// since; it builds nothing.
func TestSecretRotationShipsTheRelease(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	v1 := f.upload(t, appID, "v1")
	a := f.succeeded(t, appID, 0)
	f.upload(t, appID, "v2")
	f.secrets.put("TOKEN", "t2")
	f.sch.ReconcileOnce(context.Background())
	list, _, _ := f.sch.List(appID, "", 10)
	if len(list) != 2 || list[0].Trigger != scheduler.TriggerSecretRotation {
		t.Fatalf("deployments = %+v", list)
	}
	d := f.mustSucceed(t, list[0])
	if d.Source.Commit != v1.Commit || d.Redeploys != a.ID || d.Artifacts["web"] != a.Artifacts["web"] {
		t.Errorf("rotation shipped %+v %+v; want the release (v1, its build)", d.Source, d.Artifacts)
	}
	if builds, _, _ := f.rt.count(); builds != 1 {
		t.Errorf("%d builds; a rotation builds nothing", builds)
	}
}

// TestKeptReleasesCountBuilds: deploys that start the same builds count as
// one kept release, so many env-only deploys never push an older build
// out; the sources of the kept releases are the checkouts kept.
func TestKeptReleasesCountBuilds(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	var first []scheduler.Deployment
	for i := range scheduler.KeepBuilds {
		f.upload(t, appID, fmt.Sprintf("v%d", i))
		first = append(first, f.succeeded(t, appID, 0))
	}
	for i := range scheduler.KeepBuilds + 2 {
		f.revision(t, appID, webSpec+fmt.Sprintf("env: {V: \"%d\"}\n", i))
		f.succeeded(t, appID, 0)
	}
	if err := f.sch.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, d := range first {
		if _, err := os.Stat(d.Artifacts["web"].Dir); err != nil {
			t.Errorf("release %d's build was pruned after env-only deploys: %v", i+1, err)
		}
	}
	kept := scheduler.KeptCheckouts(f.store.Read(), appID)
	for i, d := range first {
		if !slices.Contains(kept, d.Source.CheckoutID) {
			t.Errorf("release %d's checkout %s is not kept (kept: %v)", i+1, d.Source.CheckoutID, kept)
		}
	}
	f.upload(t, appID, "newest")
	f.succeeded(t, appID, 0)
	if err := f.sch.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(first[0].Artifacts["web"].Dir); err == nil {
		t.Error("the oldest build outlived a sixth build")
	}
	if slices.Contains(scheduler.KeptCheckouts(f.store.Read(), appID), first[0].Source.CheckoutID) {
		t.Error("the oldest release's checkout is still kept")
	}
}

// records are the JSON log lines about deployment depID, in order.
func records(t *testing.T, out *testserver.Output, depID string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(out.String(), "\n") {
		var rec map[string]any
		if len(line) == 0 {
			continue
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["deployment_id"] == depID {
			recs = append(recs, rec)
		}
	}
	return recs
}

// TestDeployPhasesAreLogged: every phase of a deploy is a structured line
// of the server's log, in order, naming the app, the deployment and the
// request that asked for it: queued, the source (its checkout, or none
// needed), each workload built or started from a kept build, starting,
// health, the switch of the release, and how it ended (with the code when
// it failed). Neither a secret nor an env value is in it.
func TestDeployPhasesAreLogged(t *testing.T) {
	var buf testserver.Output
	f := newFixture(t, options{log: slog.New(slog.NewJSONHandler(&buf, nil))})
	f.secrets.put("TOKEN", "sekrit-token")
	appID := f.app(t, webSpec)
	f.upload(t, appID, "v1")
	req := actor.With(alice, actor.Actor{Kind: "user", ID: "usr_alice", UserID: "usr_alice", RequestID: "req_first"})
	d, err := f.sch.Create(req, appID, 0, scheduler.TriggerAPI)
	if err != nil {
		t.Fatal(err)
	}
	f.mustSucceed(t, d)
	f.revision(t, appID, webSpec+"env: {V: \"sekrit-env\"}\n")
	req2 := actor.With(alice, actor.Actor{Kind: "user", ID: "usr_alice", UserID: "usr_alice", RequestID: "req_second"})
	d2, err := f.sch.Create(req2, appID, 0, scheduler.TriggerAPI)
	if err != nil {
		t.Fatal(err)
	}
	f.mustSucceed(t, d2)
	f.rt.mu.Lock()
	f.rt.buildErr = errcode.New(errcode.BuildFailed, "the build failed")
	f.rt.mu.Unlock()
	f.upload(t, appID, "v2")
	req3 := actor.With(alice, actor.Actor{Kind: "user", ID: "usr_alice", UserID: "usr_alice", RequestID: "req_third"})
	d3, err := f.sch.Create(req3, appID, 0, scheduler.TriggerAPI)
	if err != nil {
		t.Fatal(err)
	}
	f.ended(t, appID, d3.ID)

	for _, c := range []struct {
		dep  scheduler.Deployment
		req  string
		msgs []string
		// check looks further at the line of each message it has.
		check map[string]func(rec map[string]any) bool
	}{
		{d, "req_first", []string{"deploy queued", "deploy source", "deploy build", "deploy starting", "deploy health", "deploy switched", "deploy succeeded"},
			map[string]func(map[string]any) bool{
				"deploy source": func(rec map[string]any) bool { return strings.HasPrefix(fmt.Sprint(rec["checkout_id"]), "chk_") },
				"deploy build": func(rec map[string]any) bool {
					return rec["workload"] == "web" && rec["reused"] == false && rec["built_by"] == d.ID && strings.HasPrefix(fmt.Sprint(rec["build_key"]), "sha256:")
				},
				"deploy health": func(rec map[string]any) bool {
					w, _ := rec["workloads"].(map[string]any)
					return rec["ready"] == true && w["web"] == scheduler.HealthPassing
				},
				"deploy switched": func(rec map[string]any) bool { return rec["job_id"] == d.ID && rec["previous_deployment_id"] == "" },
			}},
		{d2, "req_second", []string{"deploy queued", "deploy source", "deploy build", "deploy starting", "deploy health", "deploy switched", "deploy succeeded"},
			map[string]func(map[string]any) bool{
				"deploy source": func(rec map[string]any) bool { return rec["checkout_id"] == nil && rec["checkout"] != nil },
				"deploy build":  func(rec map[string]any) bool { return rec["reused"] == true && rec["built_by"] == d.ID },
				"deploy switched": func(rec map[string]any) bool {
					return rec["job_id"] == d2.ID && rec["previous_deployment_id"] == d.ID && rec["previous_job_id"] == d.ID
				},
			}},
		{d3, "req_third", []string{"deploy queued", "deploy source", "deploy failed"},
			map[string]func(map[string]any) bool{
				"deploy failed": func(rec map[string]any) bool {
					return rec["error_code"] == string(errcode.BuildFailed) && rec["level"] == "WARN"
				},
			}},
	} {
		// The deployment's end is stored before its last line is logged
		// (after the failed or replaced job is retired): wait for the line.
		last := c.msgs[len(c.msgs)-1]
		eventually(t, c.dep.ID+" logs "+last, func() bool {
			return slices.ContainsFunc(records(t, &buf, c.dep.ID), func(rec map[string]any) bool { return rec["msg"] == last })
		})
		recs := records(t, &buf, c.dep.ID)
		var msgs []string
		for _, rec := range recs {
			msgs = append(msgs, fmt.Sprint(rec["msg"]))
			if rec["app_id"] != appID || rec["request_id"] != c.req {
				t.Errorf("%s line = %v; want app %s, request %s", rec["msg"], rec, appID, c.req)
			}
			if check := c.check[fmt.Sprint(rec["msg"])]; check != nil && !check(rec) {
				t.Errorf("deployment %s: %s line = %v", c.dep.ID, rec["msg"], rec)
			}
		}
		// "deploy queued" is the request's line, logged once its write is
		// applied; the worker, woken by the same write, may log its first
		// phase before it. The worker's phases come in order.
		worker := slices.DeleteFunc(slices.Clone(msgs), func(m string) bool { return m == "deploy queued" })
		if queued := len(msgs) - len(worker); queued != 1 || !slices.Equal(worker, c.msgs[1:]) {
			t.Errorf("deployment %s logged %q; want %q (deploy queued once, anywhere)", c.dep.ID, msgs, c.msgs)
		}
	}
	if strings.Contains(buf.String(), "sekrit") {
		t.Errorf("the log holds a secret or an env value:\n%s", buf.String())
	}
}
