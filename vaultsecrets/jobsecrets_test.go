package vaultsecrets_test

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/vaultsecrets"
)

// jobSecrets is what the Nomad runtime asks of the adapter
// (nomad.JobSecrets, restated: this package's tests do not need the
// runtime).
type jobSecrets interface {
	PutJobSecrets(ctx context.Context, appID, jobID string, values map[string]map[string]string) error
	DeleteJobSecrets(ctx context.Context, appID, jobID string) error
	SweepJobSecrets(ctx context.Context, exists func(appID string) bool) error
}

const (
	jobsApp   = "app_01JJOBSJOBSJOBSJOBSJOBSJO"
	otherApp  = "app_01JOTHEROTHEROTHEROTHERO"
	slotCreds = "postgres://app:canary-pw-4b7d@db.internal:5432/app \"quoted\"\nline"
)

// entry reads a job entry's fields as the root token sees them; nil when
// vault has no version of it left (its metadata is gone).
func (d *devVault) entry(t *testing.T, prefix, appID, jobID, workload string) map[string]any {
	t.Helper()
	rel := prefix + "/apps/" + appID + "/job-env/" + jobID + "/" + workload
	meta, err := d.root.Logical().Read("secret/metadata/" + rel)
	if err != nil {
		t.Fatalf("read the metadata of %s: %v", rel, err)
	}
	if meta == nil {
		return nil
	}
	kv, err := d.root.KVv2("secret").Get(bg, rel)
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return kv.Data
}

// TestVaultJobSecrets: with the policy the adapter documents, a job's
// sealed variables are written one entry per workload at
// <prefix>/apps/<app>/job-env/<job>/<workload>, one field per variable; a
// second write replaces an entry's fields; jobs keep entries of their own;
// the app's secrets live beside them untouched and listed alone; deleting
// a job removes every version of its entries, and deleting it again is no
// error.
func TestVaultJobSecrets(t *testing.T) {
	d := startVault(t)
	for _, prefix := range []string{"svc", "teams/platform/svc"} {
		t.Run(prefix, func(t *testing.T) {
			token := d.policyToken(t, prefix, nil)
			v := d.adapter(t, vaultsecrets.VaultConfig{Token: token, Prefix: prefix})
			put := func(jobID string, values map[string]map[string]string) {
				t.Helper()
				if err := v.PutJobSecrets(bg, jobsApp, jobID, values); err != nil {
					t.Fatalf("PutJobSecrets %s: %v", jobID, err)
				}
			}
			put("dep_1", map[string]map[string]string{
				"web":    {"DATABASE_URL": slotCreds, "DB_PASSWORD": "canary-pw-4b7d"},
				"worker": {"DATABASE_URL": slotCreds + "-worker"},
				"idle":   {},
			})
			if got := d.entry(t, prefix, jobsApp, "dep_1", "web"); len(got) != 2 || got["DATABASE_URL"] != slotCreds || got["DB_PASSWORD"] != "canary-pw-4b7d" {
				t.Errorf("web's entry has fields %v; want DATABASE_URL and DB_PASSWORD with their values", slices.Sorted(maps.Keys(got)))
			}
			if got := d.entry(t, prefix, jobsApp, "dep_1", "worker"); len(got) != 1 || got["DATABASE_URL"] != slotCreds+"-worker" {
				t.Errorf("worker's entry has fields %v; want its DATABASE_URL", slices.Sorted(maps.Keys(got)))
			}
			if got := d.entry(t, prefix, jobsApp, "dep_1", "idle"); got != nil {
				t.Errorf("a workload without variables has an entry")
			}

			// The app's secret of the same name is its own, and the job
			// folder is no secret.
			ref := secrets.Ref{AppID: jobsApp, Key: "DATABASE_URL"}
			if _, err := v.Put(bg, ref, "app-secret"); err != nil {
				t.Fatal(err)
			}
			list, err := v.List(bg, jobsApp)
			if err != nil || len(list) != 1 || list[0].Key != "DATABASE_URL" {
				t.Fatalf("List = %+v, %v; want the app's one secret", list, err)
			}

			// A new write replaces the entry's fields.
			put("dep_1", map[string]map[string]string{"web": {"DATABASE_URL": slotCreds + "-rotated"}})
			if got := d.entry(t, prefix, jobsApp, "dep_1", "web"); len(got) != 1 || got["DATABASE_URL"] != slotCreds+"-rotated" {
				t.Errorf("web's entry after a second write has fields %v; want the new DATABASE_URL alone", slices.Sorted(maps.Keys(got)))
			}
			put("dep_2", map[string]map[string]string{"web": {"DATABASE_URL": slotCreds + "-2"}})

			if err := v.DeleteJobSecrets(bg, jobsApp, "dep_1"); err != nil {
				t.Fatalf("DeleteJobSecrets: %v", err)
			}
			for _, w := range []string{"web", "worker"} {
				if got := d.entry(t, prefix, jobsApp, "dep_1", w); got != nil {
					t.Errorf("dep_1's %s entry survived its deletion", w)
				}
			}
			if got := d.entry(t, prefix, jobsApp, "dep_2", "web"); got["DATABASE_URL"] != slotCreds+"-2" {
				t.Errorf("deleting dep_1 took dep_2's entry")
			}
			if got, err := v.Get(bg, ref, secrets.Stored{}); err != nil || got != "app-secret" {
				t.Errorf("the app's secret after deleting a job = %q, %v", got, err)
			}
			if err := v.DeleteJobSecrets(bg, jobsApp, "dep_1"); err != nil {
				t.Errorf("DeleteJobSecrets of a deleted job: %v", err)
			}
			if err := v.DeleteJobSecrets(bg, otherApp, "dep_never"); err != nil {
				t.Errorf("DeleteJobSecrets of a job that never wrote: %v", err)
			}
		})
	}
}

// TestVaultSweepsDeletedAppsJobSecrets: the sweep deletes the job entries
// of apps that exist no more, and nothing else: not a live app's, not a
// deleted app's secrets (the secrets service sweeps those by their rows).
func TestVaultSweepsDeletedAppsJobSecrets(t *testing.T) {
	d := startVault(t)
	token := d.policyToken(t, "svc", nil)
	// Through the kind, as cmd/svc opens it.
	inst, err := vaultsecrets.VaultKind(nil).Open(bg, adapters.Config{ID: "adp_vault",
		Settings:    map[string]string{"address": d.srv.Addr, "mount": "secret", "prefix": "svc", "tls_skip_verify": "false"},
		Credentials: map[string]string{"token": token}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.(interface{ Close() error }).Close() })
	v, ok := inst.(jobSecrets)
	if !ok {
		t.Fatalf("the vault kind's instance (%T) keeps no job secrets", inst)
	}
	backend := inst.(secrets.Backend)
	for _, app := range []string{jobsApp, otherApp} {
		for _, job := range []string{"dep_1", "dep_2"} {
			if err := v.PutJobSecrets(bg, app, job, map[string]map[string]string{"web": {"DATABASE_URL": slotCreds}, "worker": {"X": "y"}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := backend.Put(bg, secrets.Ref{AppID: app, Key: "TOKEN"}, "app-secret"); err != nil {
			t.Fatal(err)
		}
	}
	var asked atomic.Int32
	if err := v.SweepJobSecrets(bg, func(appID string) bool { asked.Add(1); return appID == jobsApp }); err != nil {
		t.Fatalf("SweepJobSecrets: %v", err)
	}
	if asked.Load() != 2 {
		t.Errorf("the sweep asked about %d apps, want 2", asked.Load())
	}
	for _, job := range []string{"dep_1", "dep_2"} {
		for _, w := range []string{"web", "worker"} {
			if d.entry(t, "svc", otherApp, job, w) != nil {
				t.Errorf("the deleted app's %s/%s entry survived the sweep", job, w)
			}
			if d.entry(t, "svc", jobsApp, job, w) == nil {
				t.Errorf("the sweep took the live app's %s/%s entry", job, w)
			}
		}
	}
	if got, err := backend.Get(bg, secrets.Ref{AppID: otherApp, Key: "TOKEN"}, secrets.Stored{}); err != nil || got != "app-secret" {
		t.Errorf("the sweep touched the deleted app's secret: %q, %v", got, err)
	}
	if err := v.SweepJobSecrets(bg, func(string) bool { return false }); err != nil {
		t.Errorf("a second sweep: %v", err)
	}
}

// TestVaultJobSecretsRefusesWhatCannotBeAPath: IDs and workload names
// that are not one path segment, variable names that are not environment
// variable names and values an environment cannot hold are refused before
// anything is sent, and the refusal shows no value.
func TestVaultJobSecretsRefusesWhatCannotBeAPath(t *testing.T) {
	var writes atomic.Int32
	srv := fakeVault(t, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if strings.HasPrefix(r.URL.Path, "/v1/secret/") {
			writes.Add(1)
		}
		return false
	})
	v := newFakeAdapter(t, fakeConfig(srv))
	ok := map[string]map[string]string{"web": {"DATABASE_URL": fakeValue}}
	for name, tc := range map[string]struct {
		app, job string
		values   map[string]map[string]string
	}{
		"app outside its folder": {"../other", "dep_1", ok},
		"job with a slash":       {jobsApp, "dep_1/x", ok},
		"job with a dot":         {jobsApp, "..", ok},
		"empty job":              {jobsApp, "", ok},
		"workload with a slash":  {jobsApp, "dep_1", map[string]map[string]string{"web/x": {"A": fakeValue}}},
		"workload dot-dot":       {jobsApp, "dep_1", map[string]map[string]string{"..": {"A": fakeValue}}},
		"variable name":          {jobsApp, "dep_1", map[string]map[string]string{"web": {"1BAD": fakeValue}}},
		"value with a NUL":       {jobsApp, "dep_1", map[string]map[string]string{"web": {"A": fakeValue + "\x00"}}},
	} {
		t.Run(name, func(t *testing.T) {
			err := v.PutJobSecrets(context.Background(), tc.app, tc.job, tc.values)
			if errcode.CodeOf(err) != errcode.ValidInvalid || strings.Contains(err.Error(), fakeValue) {
				t.Errorf("PutJobSecrets = %v, want VALID_INVALID showing no value", err)
			}
			if strings.Contains(name, "app") || strings.Contains(name, "job") {
				if err := v.DeleteJobSecrets(context.Background(), tc.app, tc.job); errcode.CodeOf(err) != errcode.ValidInvalid {
					t.Errorf("DeleteJobSecrets = %v, want VALID_INVALID", err)
				}
			}
		})
	}
	if n := writes.Load(); n != 0 {
		t.Errorf("%d requests reached vault's KV paths, want none", n)
	}
}

// TestVaultJobSecretsErrorsShowNoValue: a refused write says what to
// allow, and shows neither the token nor a value.
func TestVaultJobSecretsErrorsShowNoValue(t *testing.T) {
	d := startVault(t)
	token := d.policyToken(t, "elsewhere", nil)
	v := d.adapter(t, vaultsecrets.VaultConfig{Token: token, Prefix: "svc"})
	err := v.PutJobSecrets(bg, jobsApp, "dep_1", map[string]map[string]string{"web": {"DATABASE_URL": slotCreds}})
	e := wantCoded(t, err, errcode.AdapterFailed, token, slotCreds, "canary-pw-4b7d")
	if !strings.Contains(e.Message, "workload web of job dep_1") || !strings.Contains(e.Remedy, "secret/data/svc/apps/*") {
		t.Errorf("message %q, remedy %q", e.Message, e.Remedy)
	}
	wantCoded(t, v.DeleteJobSecrets(bg, jobsApp, "dep_1"), errcode.AdapterFailed, token)
	wantCoded(t, v.SweepJobSecrets(bg, func(string) bool { return false }), errcode.AdapterFailed, token)
}
