package nomad

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
)

// fakeJobSecrets records what the runtime asks of its JobSecrets.
type fakeJobSecrets struct {
	puts    []string // "app/job"
	deletes []string // "app/job"
	values  map[string]map[string]string
	err     error
}

var _ JobSecrets = (*fakeJobSecrets)(nil)

func (f *fakeJobSecrets) PutJobSecrets(_ context.Context, appID, jobID string, values map[string]map[string]string) error {
	f.puts = append(f.puts, appID+"/"+jobID)
	f.values = values
	return f.err
}

func (f *fakeJobSecrets) DeleteJobSecrets(_ context.Context, appID, jobID string) error {
	f.deletes = append(f.deletes, appID+"/"+jobID)
	return f.err
}

// sealedJob has a slot credential in web and worker (another value), a
// sealed variable web does not set, and plain variables.
func sealedJob() scheduler.Job {
	return scheduler.Job{ID: "dep_1", AppID: "app_1", Workloads: map[string]scheduler.Task{
		"web": {Command: []string{"./web"}, NoPort: true,
			Env:       map[string]string{"DATABASE_URL": "postgres://u:pw-web@db/x", "PLAIN": "p", "NOT_SEALED": "n"},
			SealedEnv: map[string]bool{"DATABASE_URL": true, "UNSET": true, "NOT_SEALED": false}},
		"worker": {Command: []string{"./worker"}, NoPort: true,
			Env:       map[string]string{"DATABASE_URL": "postgres://u:pw-worker@db/x"},
			SealedEnv: map[string]bool{"DATABASE_URL": true}},
		"site": {Command: []string{"./site"}, NoPort: true, Env: map[string]string{"A": "b"}},
	}}
}

func TestSealedValues(t *testing.T) {
	want := map[string]map[string]string{
		"web":    {"DATABASE_URL": "postgres://u:pw-web@db/x"},
		"worker": {"DATABASE_URL": "postgres://u:pw-worker@db/x"},
	}
	if diff := cmp.Diff(want, sealedValues(sealedJob())); diff != "" {
		t.Errorf("sealedValues (-want +got):\n%s", diff)
	}
	if got := sealedValues(scheduler.Job{Workloads: map[string]scheduler.Task{"web": {Env: map[string]string{"A": "b"}}}}); len(got) != 0 {
		t.Errorf("sealedValues of a job without slot credentials = %v", got)
	}
}

// TestPutJobSecrets: the values go to the writer under the job's app and
// ID; a job without slot credentials asks nothing; without a writer the
// job is refused, naming the workload and variables, never a value.
func TestPutJobSecrets(t *testing.T) {
	r := newTestRuntime(t, "http://127.0.0.1:1")
	ctx := context.Background()

	asked := false
	r.cfg.JobSecrets = func() JobSecrets { asked = true; return nil }
	plain := scheduler.Job{ID: "dep_2", Workloads: map[string]scheduler.Task{"web": {Env: map[string]string{"A": "b"}}}}
	if wrote, err := r.putJobSecrets(ctx, plain); wrote || err != nil || asked {
		t.Errorf("putJobSecrets of a job without slot credentials = %v, %v (writer asked: %v)", wrote, err, asked)
	}

	_, err := r.putJobSecrets(ctx, sealedJob())
	e, ok := errcode.As(err)
	if !ok || e.Code != errcode.PlanCapabilityUnsupp || !strings.Contains(e.Message, "DATABASE_URL of workload web") ||
		!strings.Contains(e.Remedy, "vault secrets adapter") {
		t.Fatalf("putJobSecrets without a writer = %v, want PLAN_CAPABILITY_UNSUPPORTED naming web's DATABASE_URL and the vault adapter", err)
	}
	if strings.Contains(e.Message+e.Remedy, "pw-") {
		t.Errorf("the refusal shows a value: %v", e)
	}

	w := &fakeJobSecrets{}
	r.cfg.JobSecrets = func() JobSecrets { return w }
	wrote, err := r.putJobSecrets(ctx, sealedJob())
	if !wrote || err != nil || len(w.puts) != 1 || w.puts[0] != "app_1/dep_1" {
		t.Fatalf("putJobSecrets = %v, %v; writes %v, want one for app_1/dep_1", wrote, err, w.puts)
	}
	if diff := cmp.Diff(sealedValues(sealedJob()), w.values); diff != "" {
		t.Errorf("values written (-want +got):\n%s", diff)
	}
	noAppJob := sealedJob()
	noAppJob.AppID = ""
	_, _ = r.putJobSecrets(ctx, noAppJob)
	if got := w.puts[len(w.puts)-1]; got != noApp+"/dep_1" {
		t.Errorf("a job without an app writes under %s, want %s/dep_1 (the app its job's paths name)", got, noApp)
	}

	w.err = errcode.New(errcode.AdapterUnavailable, "vault is sealed")
	if _, err := r.putJobSecrets(ctx, sealedJob()); errcode.CodeOf(err) != errcode.AdapterUnavailable || !strings.Contains(err.Error(), "dep_1") {
		t.Errorf("putJobSecrets with a failing writer = %v, want its ADAPTER_UNAVAILABLE naming the job", err)
	}
	if diff := cmp.Diff([]string{"app_1/dep_1"}, w.deletes); diff != "" {
		t.Errorf("a failed write must delete what it may have written; deletes (-want +got):\n%s", diff)
	}
}

// TestDiscardJobSecrets renders jobs as Run does and discards them: the
// entries of a job whose template reads slot credentials are deleted
// under its app and deployment (from its meta); a job without them, or
// not svc's, asks nothing of Vault.
func TestDiscardJobSecrets(t *testing.T) {
	r := newTestRuntime(t, "http://127.0.0.1:1")
	ctx := context.Background()
	render := func(job scheduler.Job) *api.Job {
		t.Helper()
		order, err := job.StartOrder()
		if err != nil {
			t.Fatal(err)
		}
		sources := map[string]artifactSource{}
		for name := range job.Workloads {
			sources[name] = artifactSource{URL: "http://127.0.0.1:1/a/" + name + ".tar.gz", SHA256: strings.Repeat("0", 64)}
		}
		out, err := r.render(ctx, job, order, sources, nil)
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		return out
	}
	sealed := render(sealedJob())
	secretOnly := render(scheduler.Job{ID: "dep_3", AppID: "app_1", Workloads: map[string]scheduler.Task{"web": {
		Command: []string{"./web"}, NoPort: true,
		Env: map[string]string{"TOKEN": "t"}, SecretEnv: map[string]string{"TOKEN": "TOKEN"}}}})
	notSvcs := render(sealedJob())
	delete(notSvcs.Meta, jobtemplates.MetaDeploymentID)

	w := &fakeJobSecrets{}
	r.cfg.JobSecrets = func() JobSecrets { return w }
	for _, j := range []*api.Job{sealed, secretOnly, notSvcs} {
		if err := r.discardJobSecrets(ctx, j); err != nil {
			t.Fatalf("discardJobSecrets(%s): %v", *j.ID, err)
		}
	}
	if diff := cmp.Diff([]string{"app_1/dep_1"}, w.deletes); diff != "" {
		t.Errorf("deletes (-want +got):\n%s", diff)
	}

	w.err = errcode.New(errcode.AdapterUnavailable, "vault is sealed")
	err := r.discardJobSecrets(ctx, sealed)
	if errcode.CodeOf(err) != errcode.AdapterUnavailable || !strings.Contains(err.Error(), "dep_1") {
		t.Errorf("discardJobSecrets with a failing writer = %v, want its error naming the job", err)
	}

	r.cfg.JobSecrets = nil
	if err := r.discardJobSecrets(ctx, sealed); err != nil {
		t.Errorf("discardJobSecrets without a writer = %v, want nothing to do", err)
	}
}

// TestDropJobSecrets: a failed run's cleanup deletes the job's entries even
// when the run's context has ended, and a failure is only logged.
func TestDropJobSecrets(t *testing.T) {
	r := newTestRuntime(t, "http://127.0.0.1:1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var seen error
	w := &ctxJobSecrets{check: func(ctx context.Context) { seen = ctx.Err() }}
	r.cfg.JobSecrets = func() JobSecrets { return w }
	r.dropJobSecrets(ctx, sealedJob())
	if w.deletes != 1 || seen != nil {
		t.Errorf("deletes %d with context error %v; want one delete with a live context", w.deletes, seen)
	}
	w.err = errors.New("unreachable")
	r.dropJobSecrets(ctx, sealedJob()) // logged, not returned
	if w.deletes != 2 {
		t.Errorf("deletes %d, want 2", w.deletes)
	}
}

// ctxJobSecrets checks the context each delete gets.
type ctxJobSecrets struct {
	check   func(ctx context.Context)
	deletes int
	err     error
}

var _ JobSecrets = (*ctxJobSecrets)(nil)

func (c *ctxJobSecrets) PutJobSecrets(context.Context, string, string, map[string]map[string]string) error {
	return nil
}

func (c *ctxJobSecrets) DeleteJobSecrets(ctx context.Context, _, _ string) error {
	c.deletes++
	c.check(ctx)
	return c.err
}
