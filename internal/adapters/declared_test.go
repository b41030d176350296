package adapters_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

// opened records what an instance was opened with.
type opened struct {
	flaky
	cfg adapters.Config
}

// declaredKinds are a built-in local backup, an s3 backup (a required
// bucket, a password credential) and a chat notification whose Validate
// wants a webhook URL, all opening an instance that keeps its Config.
func declaredKinds() []adapters.Kind {
	open := func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
		if c.Credentials["password"] == "refuse" {
			return nil, errors.New("refused to open")
		}
		return &opened{cfg: c}, nil
	}
	return []adapters.Kind{
		{Category: "backup", Name: "local", Default: true, DefaultID: "adp_builtin_backup", Settings: []adapters.Setting{{Name: "path", Default: "/var/backups"}}, Open: open},
		{Category: "backup", Name: "s3", Settings: []adapters.Setting{{Name: "bucket", Required: true}, {Name: "password", Credential: true, Required: true}}, Open: open},
		{Category: "notification", Name: "chat", Settings: []adapters.Setting{{Name: "url"}},
			Validate: func(s map[string]string, _ []string) error {
				if !strings.HasPrefix(s["url"], "https://") {
					return errcode.Invalid("config.url", "url must be an https URL")
				}
				return nil
			}, Open: open},
	}
}

// restarts makes services over one store and keyring, as the generations of
// a server do: each with its own declarations.
type restarts struct {
	t     *testing.T
	store adapters.Store
	ring  *keyring.Ring
}

func newRestarts(t *testing.T) *restarts {
	store := raftstoretest.Open(t, adapters.Adapters, adapters.Healths, keyring.Keys, audit.Entries, events.Events, events.Cursors)
	kek, err := keyring.LoadKEK(filepath.Join(t.TempDir(), "kek"))
	if err != nil {
		t.Fatal(err)
	}
	return &restarts{t: t, store: store, ring: keyring.New(store, kek, time.Now)}
}

func (r *restarts) start(decl ...adapters.Declared) (*adapters.Service, error) {
	return adapters.New(adapters.Deps{Store: r.store, Ring: r.ring, Now: func() time.Time { return time.Now().UTC() },
		Kinds: declaredKinds(), Declared: decl})
}

func (r *restarts) mustStart(decl ...adapters.Declared) *adapters.Service {
	r.t.Helper()
	svc, err := r.start(decl...)
	if err != nil {
		r.t.Fatal(err)
	}
	return svc
}

func s3Decl(id, password string) adapters.Declared {
	return adapters.Declared{ID: id, Category: "backup", Kind: "s3", Settings: map[string]string{"bucket": "b-" + id},
		Credentials: map[string]string{"password": password}, Sources: map[string]string{"password": "file /run/pw"},
		Origin: adapters.OriginConfigFile, Source: "config file /etc/svc.yaml"}
}

func TestDeclaredAdaptersRefusedAtStartup(t *testing.T) {
	r := newRestarts(t)
	yes := true
	with := func(f func(d *adapters.Declared)) adapters.Declared {
		d := s3Decl("adp_x", "pw")
		f(&d)
		return d
	}
	for _, tt := range []struct {
		name string
		decl []adapters.Declared
		want string
	}{
		{"unknown category", []adapters.Declared{with(func(d *adapters.Declared) { d.Category = "mail" })}, "adapter adp_x: category: unknown adapter category \"mail\""},
		{"unknown kind", []adapters.Declared{with(func(d *adapters.Declared) { d.Kind = "gcs" })}, `adapter adp_x: kind: this build has no backup adapter of kind "gcs" (kinds: [local s3])`},
		{"built-in kind elsewhere", []adapters.Declared{with(func(d *adapters.Declared) { d.Kind, d.Credentials, d.Settings = "local", nil, nil })},
			"adapter adp_x: id: the backup adapter of kind local is built in and exists once, as adp_builtin_backup; declare it with that id"},
		{"well-known ID, other kind", []adapters.Declared{s3Decl("adp_builtin_backup", "pw")}, "adapter adp_builtin_backup: id: adp_builtin_backup is the built-in backup adapter of kind local"},
		{"unknown setting", []adapters.Declared{with(func(d *adapters.Declared) { d.Settings["region"] = "x" })}, `adapter adp_x: settings.region: backup/s3 has no setting "region" (settings: [bucket])`},
		{"credential as a setting", []adapters.Declared{with(func(d *adapters.Declared) { d.Settings["password"] = "x" })}, `adapter adp_x: settings.password: "password" is a credential: declare it under credentials`},
		{"unknown credential", []adapters.Declared{with(func(d *adapters.Declared) { d.Credentials["token"] = "x" })}, `adapter adp_x: credentials.token: backup/s3 has no credential "token" (credentials: [password])`},
		{"required setting missing", []adapters.Declared{with(func(d *adapters.Declared) { delete(d.Settings, "bucket") })}, "adapter adp_x: settings.bucket: backup/s3 needs [bucket]"},
		{"required credential missing", []adapters.Declared{with(func(d *adapters.Declared) { d.Credentials = nil })}, "adapter adp_x: credentials.password: backup/s3 needs [password]"},
		{"kind's validation", []adapters.Declared{{ID: "adp_chat", Category: "notification", Kind: "chat", Settings: map[string]string{"url": "http://x"}, Source: "SVC_ADAPTERS"}},
			"SVC_ADAPTERS: adapter adp_chat: settings.url: url must be an https URL"},
		{"two primaries", []adapters.Declared{with(func(d *adapters.Declared) { d.Primary = &yes }), func() adapters.Declared { d := s3Decl("adp_y", "pw"); d.Primary = &yes; return d }()},
			"adapter adp_y: primary: adp_x is already the declared primary backup adapter; one per category"},
		{"twice", []adapters.Declared{s3Decl("adp_x", "a"), s3Decl("adp_x", "b")}, "adapter adp_x: id: declared twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.start(tt.decl...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v\nwant it to contain: %s", err, tt.want)
			}
			if strings.Contains(err.Error(), "pw") && !strings.Contains(tt.want, "pw") {
				t.Errorf("the error repeats a credential: %v", err)
			}
		})
	}
}

func TestDeclaredAdaptersOverrideAndGoBack(t *testing.T) {
	r := newRestarts(t)
	// Through the API: an s3 adapter, stored.
	api := r.mustStart()
	pw := "stored-pw"
	stored, _, err := api.Configure(ctx, adapters.Request{Category: "backup", Kind: "s3", Config: map[string]any{"bucket": "stored"}, Credentials: map[string]*string{"password": &pw}})
	if err != nil {
		t.Fatal(err)
	}

	// A restart with a declaration of the same ID and another one.
	svc := r.mustStart(s3Decl(stored.AdapterID, "declared-pw"), s3Decl("adp_extra", "extra-pw"))
	set := svc.Load(ctx)
	l, ok := set.Get(stored.AdapterID)
	if !ok || l.Instance == nil || l.Origin != adapters.OriginConfigFile || !l.Virtual {
		t.Fatalf("the overriding declaration loaded as %+v", l)
	}
	if c := l.Instance.(*opened).cfg; c.Credentials["password"] != "declared-pw" || c.Settings["bucket"] != "b-"+stored.AdapterID {
		t.Errorf("opened with %v", c.Settings)
	}
	// The first declared adapter of the category is its primary.
	if p, _ := set.Primary("backup"); p.Adapter.ID != stored.AdapterID {
		t.Errorf("primary %s, want the first declared %s", p.Adapter.ID, stored.AdapterID)
	}
	list := svc.List()
	origins := map[string]string{}
	for _, v := range list.Items {
		if _, dup := origins[v.AdapterID]; dup {
			t.Errorf("%s listed twice", v.AdapterID)
		}
		origins[v.AdapterID] = v.Origin
		if v.Origin == adapters.OriginConfigFile && (v.PendingRestart || strings.Join(v.CredentialsSet, ",") != "password" || v.CredentialSources["password"] != "file /run/pw") {
			t.Errorf("declared view %+v", v)
		}
	}
	want := map[string]string{stored.AdapterID: "config_file", "adp_extra": "config_file", "adp_builtin_backup": "default"}
	if len(origins) != len(want) || origins[stored.AdapterID] != want[stored.AdapterID] || origins["adp_extra"] != "config_file" || origins["adp_builtin_backup"] != "default" {
		t.Errorf("origins %v, want %v", origins, want)
	}
	if list.RestartNeeded {
		t.Error("declarations are pending a restart")
	}

	// Neither can be configured or deleted through the API.
	for _, id := range []string{stored.AdapterID, "adp_extra"} {
		_, _, err := svc.Configure(ctx, adapters.Request{AdapterID: id, Category: "backup", Kind: "s3", Config: map[string]any{"bucket": "x"}})
		if e, ok := errcode.As(err); !ok || e.Code != errcode.StateInvalid || !strings.Contains(e.Remedy, "config file") || e.Details["origin"] != "config_file" {
			t.Errorf("configure %s: %v", id, err)
		}
		if err := svc.Delete(ctx, id); !errcode.Has(err, errcode.StateInvalid) || !strings.Contains(err.Error(), "declared in config file /etc/svc.yaml and fixed at startup") {
			t.Errorf("delete %s: %v", id, err)
		}
	}
	// Nor found as the one s3 adapter stored (which the declaration
	// overrides) by a request without adapter_id.
	if _, _, err := svc.Configure(ctx, adapters.Request{Category: "backup", Kind: "s3", Config: map[string]any{"bucket": "x"}}); !errcode.Has(err, errcode.StateInvalid) {
		t.Errorf("configure the stored s3 adapter a declaration overrides: %v", err)
	}
	// Another adapter through the API keeps working beside them.
	if _, created, err := svc.Configure(ctx, adapters.Request{New: true, Category: "backup", Kind: "s3", Config: map[string]any{"bucket": "new"}, Credentials: map[string]*string{"password": &pw}}); err != nil || !created {
		t.Errorf("configure another s3 adapter: %v", err)
	}

	// Without the declarations, the stored adapter is back as it was.
	set = r.mustStart().Load(ctx)
	l, ok = set.Get(stored.AdapterID)
	if !ok || l.Origin != adapters.OriginAPI || l.Virtual || l.Instance.(*opened).cfg.Credentials["password"] != "stored-pw" {
		t.Fatalf("after removing the declaration: %+v", l)
	}
	if _, ok := set.Get("adp_extra"); ok {
		t.Error("adp_extra is still loaded without its declaration")
	}
}

func TestDeclaredPrimaryRule(t *testing.T) {
	yes, no := true, false
	mark := func(d adapters.Declared, p *bool) adapters.Declared { d.Primary = p; return d }
	for _, tt := range []struct {
		name   string
		stored bool // an s3 adapter configured through the API (adp stored)
		decl   []adapters.Declared
		want   string
	}{
		{"nothing: the default", false, nil, "adp_builtin_backup"},
		{"the first declared over the default", false, []adapters.Declared{s3Decl("adp_a", "p"), s3Decl("adp_b", "p")}, "adp_a"},
		{"the first declared over a stored one", true, []adapters.Declared{s3Decl("adp_a", "p")}, "adp_a"},
		{"primary: true over the first", true, []adapters.Declared{s3Decl("adp_a", "p"), mark(s3Decl("adp_b", "p"), &yes)}, "adp_b"},
		{"primary: false leaves it to the stored one", true, []adapters.Declared{mark(s3Decl("adp_a", "p"), &no)}, "stored"},
		{"primary: false leaves it to the default", false, []adapters.Declared{mark(s3Decl("adp_a", "p"), &no)}, "adp_builtin_backup"},
		{"primary: false, alone in its category", false, []adapters.Declared{
			mark(adapters.Declared{ID: "adp_builtin_backup", Category: "backup", Kind: "local", Settings: map[string]string{"path": "/srv"}, Origin: "environment", Source: "SVC_ADAPTERS"}, &no),
		}, "adp_builtin_backup"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRestarts(t)
			storedID := ""
			if tt.stored {
				pw := "p"
				v, _, err := r.mustStart().Configure(ctx, adapters.Request{Category: "backup", Kind: "s3", Config: map[string]any{"bucket": "s"}, Credentials: map[string]*string{"password": &pw}})
				if err != nil {
					t.Fatal(err)
				}
				storedID = v.AdapterID
			}
			set := r.mustStart(tt.decl...).Load(ctx)
			p, ok := set.Primary("backup")
			got := ""
			if ok {
				got = p.Adapter.ID
			}
			want := tt.want
			if want == "stored" {
				want = storedID
			}
			if got != want {
				t.Errorf("primary %q, want %q", got, want)
			}
		})
	}
}
