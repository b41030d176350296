package slots_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
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
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/slots"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// fakeProvisioner records what it is asked and answers like the postgres
// adapter.
type fakeProvisioner struct {
	typ string
	mu  sync.Mutex
	got []slots.ProvisionRequest
	err error
}

var _ slots.Provisioner = (*fakeProvisioner)(nil)

func (f *fakeProvisioner) Type() string { return f.typ }

func (f *fakeProvisioner) Provision(_ context.Context, req slots.ProvisionRequest) (slots.Provisioned, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, req)
	if f.err != nil {
		return slots.Provisioned{}, f.err
	}
	pw := req.Password
	if pw == "" {
		pw = fmt.Sprintf("provisioned-pw-%d-canary", len(f.got))
	}
	name := "svc_" + req.AppSlug + "_" + req.Key
	return slots.Provisioned{
		Fields:       map[string]string{"host": "db.internal", "port": "5432", "database": name, "username": name},
		SecretFields: map[string]string{"password": pw, "url": "postgres://" + name + ":" + pw + "@db.internal:5432/" + name},
	}, nil
}

func (f *fakeProvisioner) Deprovision(context.Context, slots.ProvisionRequest, map[string]string) error {
	return nil
}

func (f *fakeProvisioner) last() slots.ProvisionRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.got[len(f.got)-1]
}

type fixture struct {
	dir    string
	store  *raftstore.Store
	ring   *keyring.Ring
	svc    *slots.Service
	specs  *spec.Service
	apps   *apps.Service
	pg     *fakeProvisioner
	loaded []slots.Loaded
	logs   *bytes.Buffer
	logMu  *sync.Mutex
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

var ctx = actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_1"})

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), logs: &bytes.Buffer{}, logMu: &sync.Mutex{}, pg: &fakeProvisioner{typ: "postgres"}}
	tables := append([]raftstore.Def{apps.Apps, audit.Entries, events.Events, events.Cursors, spec.Revisions, spec.Heads,
		keyring.Keys, secrets.Secrets}, identity.Tables()...)
	tables = append(tables, slots.Tables()...)
	store, err := raftstore.Open(raftstore.Config{NodeID: "n1", Dir: filepath.Join(f.dir, "store"), Tables: tables})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := store.ConsistentRead(rctx); err != nil {
		t.Fatal(err)
	}
	kek, err := keyring.LoadKEK(filepath.Join(f.dir, "kek"))
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Now().UTC() }
	f.store, f.ring = store, keyring.New(store, kek, now)
	f.loaded = []slots.Loaded{{AdapterID: "adp_pg", Kind: "postgres", Provisioner: f.pg}}
	f.svc = slots.NewService(slots.Deps{Store: store, Ring: f.ring, Now: now,
		Provisioners: func() []slots.Loaded { return f.loaded },
		Logger:       slog.New(slog.NewJSONHandler(lockedWriter{f.logMu, f.logs}, nil))})
	f.specs = spec.NewService(store, now)
	f.apps = apps.NewService(store, now)
	return f
}

func (f *fixture) logText() string {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	return f.logs.String()
}

// app creates an app whose latest spec revision declares the slots.
func (f *fixture) app(t *testing.T, name string, slotsYAML string) apps.App {
	t.Helper()
	a, err := f.apps.Create(ctx, authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: "usr_1", UserID: "usr_1"}}, apps.New{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	f.revise(t, a.ID, slotsYAML)
	return a
}

func (f *fixture) revise(t *testing.T, appID, slotsYAML string) {
	t.Helper()
	doc, err := spec.Parse([]byte("workloads:\n  web:\n    primary: true\n    build: {kind: go}\n    run: {command: [./app], port: 8080}\n" + slotsYAML))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.specs.Create(ctx, appID, doc); err != nil {
		t.Fatal(err)
	}
}

func byKey(t *testing.T, vs []slots.View, key string) slots.View {
	t.Helper()
	for _, v := range vs {
		if v.Key == key {
			return v
		}
	}
	t.Fatalf("no slot %s in %+v", key, vs)
	return slots.View{}
}

func resolve(t *testing.T, f *fixture, appID, key, field string) string {
	t.Helper()
	v, err := f.svc.Resolve(appID, key, field)
	if err != nil {
		t.Fatalf("resolve %s.%s: %v", key, field, err)
	}
	return v
}

func TestFillModes(t *testing.T) {
	f := newFixture(t)
	a := f.app(t, "Shop", "slots:\n  db: {type: postgres, required: true}\n  cache: {type: redis}\n")

	list, err := f.svc.List(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if db := byKey(t, list, "db"); db.Filled || !db.Required || !db.Declared || db.Type != "postgres" || db.Mode != nil || db.Effective != nil {
		t.Fatalf("db before filling = %+v", db)
	}

	t.Run("value, by fields", func(t *testing.T) {
		v, err := f.svc.Fill(ctx, a.ID, "db", slots.FillRequest{Value: map[string]any{
			"host": "pg.internal", "port": 6543, "database": "shop", "username": "shop", "password": "value-pw-canary", "sslmode": "require"}})
		if err != nil {
			t.Fatal(err)
		}
		if !v.Filled || *v.Mode != "value" || v.AdapterID != nil || *v.Effective != "next_deploy" ||
			v.Fields["port"] != "6543" || v.Fields["password"] != "" || !slices.Equal(v.SecretFields, []string{"password", "url"}) {
			t.Fatalf("view = %+v", v)
		}
		if got := resolve(t, f, a.ID, "db", "url"); got != "postgres://shop:value-pw-canary@pg.internal:6543/shop?sslmode=require" {
			t.Errorf("url = %s", got)
		}
		if got := resolve(t, f, a.ID, "db", "password"); got != "value-pw-canary" {
			t.Errorf("password = %s", got)
		}
	})
	t.Run("bind", func(t *testing.T) {
		const u = "postgresql://ro:bind-pw-canary@[::1]/reports?sslmode=verify-full"
		v, err := f.svc.Fill(ctx, a.ID, "db", slots.FillRequest{Bind: &slots.BindFill{URL: u}})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"host": "::1", "port": "5432", "database": "reports", "username": "ro"}
		if *v.Mode != "bind" || fmt.Sprint(v.Fields) != fmt.Sprint(want) {
			t.Fatalf("view = %+v", v)
		}
		if resolve(t, f, a.ID, "db", "url") != u || resolve(t, f, a.ID, "db", "password") != "bind-pw-canary" || resolve(t, f, a.ID, "db", "host") != "::1" {
			t.Error("resolved fields differ from the bound URL")
		}
	})
	t.Run("provision, again keeping the password, and rotating", func(t *testing.T) {
		v, err := f.svc.Fill(ctx, a.ID, "db", slots.FillRequest{Provision: &slots.ProvisionFill{}})
		if err != nil {
			t.Fatal(err)
		}
		if *v.Mode != "provision" || *v.AdapterID != "adp_pg" || v.Fields["database"] != "svc_shop_db" {
			t.Fatalf("view = %+v", v)
		}
		if got := f.pg.last(); got.AppID != a.ID || got.AppSlug != "shop" || got.Key != "db" || got.Password != "" {
			t.Fatalf("asked %+v", got)
		}
		first := resolve(t, f, a.ID, "db", "password")
		if _, err := f.svc.Fill(ctx, a.ID, "db", slots.FillRequest{Provision: &slots.ProvisionFill{AdapterID: "adp_pg"}}); err != nil {
			t.Fatal(err)
		}
		if got := f.pg.last(); got.Password != first || got.Previous["database"] != "svc_shop_db" {
			t.Errorf("a re-provision asked for password %q and previous %v, want the current ones", got.Password, got.Previous)
		}
		if _, err := f.svc.Fill(ctx, a.ID, "db", slots.FillRequest{Provision: &slots.ProvisionFill{RotatePassword: true}}); err != nil {
			t.Fatal(err)
		}
		if f.pg.last().Password != "" || resolve(t, f, a.ID, "db", "password") == first {
			t.Error("rotate_password kept the password")
		}
	})
	t.Run("value replacing a provisioned resource leaves it in place", func(t *testing.T) {
		before := len(auditOf(t, f, "slot.fill"))
		if _, err := f.svc.Fill(ctx, a.ID, "db", slots.FillRequest{Value: map[string]any{"url": "postgres://u:p@h/d"}}); err != nil {
			t.Fatal(err)
		}
		entries := auditOf(t, f, "slot.fill")
		if len(entries) != before+1 {
			t.Fatalf("%d slot.fill entries, want %d", len(entries), before+1)
		}
		d := entries[0].Details
		if d["previous_mode"] != "provision" || d["previous_left_in_place"] != true || d["mode"] != "value" {
			t.Errorf("details = %v", d)
		}
		if !strings.Contains(f.logText(), "left in place") {
			t.Errorf("the log does not say the resource was left in place:\n%s", f.logText())
		}
	})
	t.Run("another type keeps every value sealed", func(t *testing.T) {
		v, err := f.svc.Fill(ctx, a.ID, "cache", slots.FillRequest{Value: map[string]any{"host": "redis.internal", "token": "redis-canary"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Fields) != 0 || !slices.Equal(v.SecretFields, []string{"host", "token"}) {
			t.Fatalf("view = %+v", v)
		}
		if resolve(t, f, a.ID, "cache", "token") != "redis-canary" {
			t.Error("token")
		}
		if _, err := f.svc.Fill(ctx, a.ID, "cache", slots.FillRequest{Bind: &slots.BindFill{URL: "redis://:pw@cache:6379/0"}}); err != nil {
			t.Fatal(err)
		}
	})

	list, _ = f.svc.List(a.ID)
	if db := byKey(t, list, "db"); !db.Filled || db.UpdatedAt == nil {
		t.Errorf("db after filling = %+v", db)
	}
	for _, e := range auditOf(t, f, "slot.fill") {
		if e.AppID == nil || *e.AppID != a.ID || e.TargetKind == nil || *e.TargetKind != "slot" {
			t.Errorf("entry = %+v", e)
		}
	}
}

func auditOf(t *testing.T, f *fixture, action string) []audit.Entry {
	t.Helper()
	items, _ := audit.Entries.List(f.store.Read(), raftstore.Query{Reverse: true})
	var out []audit.Entry
	for _, it := range items {
		if it.Value.Action == action {
			out = append(out, it.Value)
		}
	}
	return out
}

func TestFillIsValidated(t *testing.T) {
	f := newFixture(t)
	a := f.app(t, "Blog", "slots:\n  db: {type: postgres}\n  cache: {type: redis}\n")
	const secret = "refused-pw-canary"
	provision := slots.FillRequest{Provision: &slots.ProvisionFill{}}
	tests := []struct {
		name  string
		app   string
		key   string
		req   slots.FillRequest
		code  errcode.Code
		field string
	}{
		{"no app", "app_none", "db", provision, errcode.NotFound, ""},
		{"undeclared slot", a.ID, "queue", provision, errcode.NotFound, ""},
		{"no way", a.ID, "db", slots.FillRequest{}, errcode.ValidInvalid, ""},
		{"two ways", a.ID, "db", slots.FillRequest{Provision: &slots.ProvisionFill{}, Bind: &slots.BindFill{URL: "postgres://u@h/d"}}, errcode.ValidInvalid, ""},
		{"bind not a URL", a.ID, "db", slots.FillRequest{Bind: &slots.BindFill{URL: "postgres://u:" + secret + "@h:x/d"}}, errcode.ValidInvalid, "bind.url"},
		{"bind another scheme", a.ID, "db", slots.FillRequest{Bind: &slots.BindFill{URL: "mysql://u:" + secret + "@h/d"}}, errcode.ValidInvalid, "bind.url"},
		{"bind without a database", a.ID, "db", slots.FillRequest{Bind: &slots.BindFill{URL: "postgres://u:" + secret + "@h"}}, errcode.ValidInvalid, "bind.url"},
		{"bind two hosts", a.ID, "db", slots.FillRequest{Bind: &slots.BindFill{URL: "postgres://u:" + secret + "@h1,h2/d"}}, errcode.ValidInvalid, "bind.url"},
		{"bind another type, relative", a.ID, "cache", slots.FillRequest{Bind: &slots.BindFill{URL: "cache:6379"}}, errcode.ValidInvalid, "bind.url"},
		{"value unknown field", a.ID, "db", slots.FillRequest{Value: map[string]any{"host": "h", "database": "d", "username": "u", "schema": "x"}}, errcode.ValidInvalid, "value.schema"},
		{"value missing username", a.ID, "db", slots.FillRequest{Value: map[string]any{"host": "h", "database": "d", "password": secret}}, errcode.ValidInvalid, "value.username"},
		{"value url and fields", a.ID, "db", slots.FillRequest{Value: map[string]any{"url": "postgres://u@h/d", "host": "h"}}, errcode.ValidInvalid, "value.url"},
		{"value bad port", a.ID, "db", slots.FillRequest{Value: map[string]any{"host": "h", "port": 70000, "database": "d", "username": "u"}}, errcode.ValidInvalid, "value.port"},
		{"value bad sslmode", a.ID, "db", slots.FillRequest{Value: map[string]any{"host": "h", "database": "d", "username": "u", "sslmode": "maybe"}}, errcode.ValidInvalid, "value.sslmode"},
		{"value NUL", a.ID, "cache", slots.FillRequest{Value: map[string]any{"token": "a\x00b"}}, errcode.ValidInvalid, "value.token"},
		{"value object", a.ID, "cache", slots.FillRequest{Value: map[string]any{"token": map[string]any{}}}, errcode.ValidInvalid, "value.token"},
		{"value bad name", a.ID, "cache", slots.FillRequest{Value: map[string]any{"Token": "x"}}, errcode.ValidInvalid, "value.Token"},
		{"value empty", a.ID, "cache", slots.FillRequest{Value: map[string]any{}}, errcode.ValidInvalid, "value"},
		{"provision a type nobody provisions", a.ID, "cache", provision, errcode.AdapterUnavailable, ""},
		{"provision with an unknown adapter", a.ID, "db", slots.FillRequest{Provision: &slots.ProvisionFill{AdapterID: "adp_nope"}}, errcode.AdapterUnavailable, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.svc.Fill(ctx, tt.app, tt.key, tt.req)
			e, ok := errcode.As(err)
			if !ok || e.Code != tt.code {
				t.Fatalf("err = %v, want %s", err, tt.code)
			}
			if tt.field != "" && e.Details["field"] != tt.field {
				t.Errorf("field = %v, want %s (%s)", e.Details["field"], tt.field, e.Message)
			}
			if b, _ := json.Marshal(e); strings.Contains(string(b)+e.Error(), secret) {
				t.Errorf("the error carries the password: %s", b)
			}
		})
	}
	e, _ := errcode.As(func() error { _, err := f.svc.Fill(ctx, a.ID, "queue", provision); return err }())
	if !strings.Contains(e.Remedy, "declare it in the spec") {
		t.Errorf("remedy = %q", e.Remedy)
	}

	t.Run("provision with an adapter of another type", func(t *testing.T) {
		f.loaded = append(f.loaded, slots.Loaded{AdapterID: "adp_redis", Kind: "redis", Provisioner: &fakeProvisioner{typ: "redis"}})
		_, err := f.svc.Fill(ctx, a.ID, "db", slots.FillRequest{Provision: &slots.ProvisionFill{AdapterID: "adp_redis"}})
		if errcode.CodeOf(err) != errcode.ValidInvalid {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("provision with an adapter that did not open", func(t *testing.T) {
		f.loaded = []slots.Loaded{{AdapterID: "adp_pg", Kind: "postgres", Err: errcode.New(errcode.AdapterFailed, "bad settings")}}
		_, err := f.svc.Fill(ctx, a.ID, "db", provision)
		if errcode.CodeOf(err) != errcode.AdapterUnavailable || !strings.Contains(err.Error(), "bad settings") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("the adapter's refusal", func(t *testing.T) {
		f.pg.err = errcode.New(errcode.AdapterFailed, "permission denied")
		f.loaded = []slots.Loaded{{AdapterID: "adp_pg", Kind: "postgres", Provisioner: f.pg}}
		_, err := f.svc.Fill(ctx, a.ID, "db", provision)
		if errcode.CodeOf(err) != errcode.AdapterFailed {
			t.Fatalf("err = %v", err)
		}
	})
	if n := len(auditOf(t, f, "slot.fill")); n != 0 {
		t.Errorf("refused fills wrote %d audit entries", n)
	}
	if _, _, ok := slots.Fills.Get(f.store.Read(), slots.RowID(a.ID, "db")); ok {
		t.Error("a refused fill was stored")
	}
}

func TestSecretFieldsAreSealedInTheStore(t *testing.T) {
	f := newFixture(t)
	a := f.app(t, "Vault", "slots:\n  db: {type: postgres}\n  cache: {type: redis}\n")
	canaries := []string{"canary-slot-pw-3e8a1f", "canary-bind-pw-7c2d90", "canary-redis-token-51ab", "provisioned-pw-1-canary"}
	must := func(_ slots.View, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.svc.Fill(ctx, a.ID, "db", slots.FillRequest{Value: map[string]any{"host": "h", "database": "d", "username": "u", "password": canaries[0]}}))
	must(f.svc.Fill(ctx, a.ID, "db", slots.FillRequest{Bind: &slots.BindFill{URL: "postgres://u:" + canaries[1] + "@h/d"}}))
	must(f.svc.Fill(ctx, a.ID, "cache", slots.FillRequest{Value: map[string]any{"token": canaries[2]}}))
	must(f.svc.Fill(ctx, a.ID, "db", slots.FillRequest{Provision: &slots.ProvisionFill{}}))
	if resolve(t, f, a.ID, "db", "password") != canaries[3] {
		t.Fatal("the provisioned password does not resolve")
	}
	// A row that keeps a secret field in the clear is refused by the FSM.
	bad := slots.Fill{ID: slots.RowID(a.ID, "db"), AppID: a.ID, Key: "db", Type: "postgres", Mode: "value",
		Fields: map[string]string{"password": "clear"}}
	if _, err := f.store.Apply(ctx, slots.Fills.Put(&bad)); err == nil {
		t.Error("the store took a password in the clear")
	}
	list, _ := f.svc.List(a.ID)
	shown, _ := json.Marshal(list)
	entries, _ := json.Marshal(auditOf(t, f, "slot.fill"))
	if err := f.store.Snapshot(); err != nil {
		t.Fatal(err)
	}
	files := 0
	scan := func(where, text string) {
		t.Helper()
		for _, c := range canaries {
			for _, form := range []string{c, base64.StdEncoding.EncodeToString([]byte(c)), base64.RawURLEncoding.EncodeToString([]byte(c))} {
				if strings.Contains(text, form) {
					t.Errorf("%s contains %s", where, c)
				}
			}
		}
	}
	scan("the list", string(shown))
	scan("the audit entries", string(entries))
	scan("the log", f.logText())
	err := filepath.WalkDir(filepath.Join(f.dir, "store"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		scan(path, string(b))
		return nil
	})
	if err != nil || files < 2 {
		t.Fatalf("scanned %d files: %v", files, err)
	}
	// The sealed values are bound to their slot and field.
	row, _, _ := slots.Fills.Get(f.store.Read(), slots.RowID(a.ID, "db"))
	if _, err := f.ring.Open(row.Sealed["password"], []byte("slot/"+a.ID+"/db/url")); err == nil {
		t.Error("a sealed password opens as another field")
	}
}

func TestListShowsFillsOfSlotsNoLongerDeclared(t *testing.T) {
	f := newFixture(t)
	a := f.app(t, "Old", "slots:\n  db: {type: postgres}\n")
	if _, err := f.svc.Fill(ctx, a.ID, "db", slots.FillRequest{Provision: &slots.ProvisionFill{}}); err != nil {
		t.Fatal(err)
	}
	f.revise(t, a.ID, "slots:\n  store: {type: s3, required: true}\n")
	list, err := f.svc.List(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Key != "store" || list[1].Key != "db" {
		t.Fatalf("list = %+v", list)
	}
	if db := list[1]; db.Declared || !db.Filled || *db.Mode != "provision" {
		t.Errorf("db = %+v", db)
	}
	// The pinned revision's slots count too: pin revision 1, the latest
	// still declares store.
	if _, err := f.specs.Pin(ctx, a.ID, 1); err != nil {
		t.Fatal(err)
	}
	list, _ = f.svc.List(a.ID)
	if len(list) != 2 || !byKey(t, list, "db").Declared || !byKey(t, list, "store").Declared {
		t.Errorf("list with revision 1 pinned = %+v", list)
	}
	// A slot whose type changed is not filled by the old fill.
	f.revise(t, a.ID, "slots:\n  db: {type: mysql}\n")
	if _, err := f.specs.Pin(ctx, a.ID, 3); err != nil {
		t.Fatal(err)
	}
	list, _ = f.svc.List(a.ID)
	if db := byKey(t, list, "db"); db.Filled || db.Type != "mysql" || db.Note == "" {
		t.Errorf("db of another type = %+v", db)
	}
}

func TestResolve(t *testing.T) {
	f := newFixture(t)
	a := f.app(t, "Res", "slots:\n  db: {type: postgres, required: true}\n")
	_, err := f.svc.Resolve(a.ID, "db", "url")
	if e, ok := errcode.As(err); !ok || e.Code != errcode.PlanSlotUnfilled || fmt.Sprint(e.Details["slots"]) != "[db]" {
		t.Fatalf("unfilled: %v", err)
	}
	if _, err := f.svc.Fill(ctx, a.ID, "db", slots.FillRequest{Value: map[string]any{"url": "postgres://u@h/d"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Resolve(a.ID, "db", "password"); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("a field the fill lacks: %v", err)
	}
	if resolve(t, f, a.ID, "db", "username") != "u" {
		t.Error("username")
	}
}

func TestSweepAndReseal(t *testing.T) {
	f := newFixture(t)
	keep := f.app(t, "Keep", "slots:\n  db: {type: postgres}\n")
	gone := f.app(t, "Gone", "slots:\n  db: {type: postgres}\n")
	for _, a := range []apps.App{keep, gone} {
		if _, err := f.svc.Fill(ctx, a.ID, "db", slots.FillRequest{Provision: &slots.ProvisionFill{}}); err != nil {
			t.Fatal(err)
		}
	}
	before := resolve(t, f, keep.ID, "db", "url")
	if _, err := f.ring.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := f.svc.Reseal(ctx)
	if err != nil || n != 4 {
		t.Fatalf("resealed %d: %v", n, err)
	}
	row, _, _ := slots.Fills.Get(f.store.Read(), slots.RowID(keep.ID, "db"))
	if keyring.KeyID(row.Sealed["url"]) != f.ring.Info()[0].ID {
		t.Errorf("sealed under %s, the current key is %s", keyring.KeyID(row.Sealed["url"]), f.ring.Info()[0].ID)
	}
	if resolve(t, f, keep.ID, "db", "url") != before {
		t.Error("the url changed with the re-seal")
	}

	if err := f.apps.Delete(ctx, gone.ID, apps.Decision{}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.SweepDeletedApps(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := slots.Fills.Get(f.store.Read(), slots.RowID(gone.ID, "db")); ok {
		t.Error("the deleted app's fill remains")
	}
	if _, _, ok := slots.Fills.Get(f.store.Read(), slots.RowID(keep.ID, "db")); !ok {
		t.Error("the sweep removed a live app's fill")
	}
	if !strings.Contains(f.logText(), "left in place") || !strings.Contains(f.logText(), gone.ID) {
		t.Errorf("the log does not say the deleted app's database was left in place:\n%s", f.logText())
	}
	if _, err := f.svc.List(gone.ID); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("list of a deleted app: %v", err)
	}
}

// Concurrent fills of one slot are all applied, one after another (the
// last one written wins), each with its audit entry: none is refused for
// having raced another.
func TestConcurrentFillsOfOneSlot(t *testing.T) {
	f := newFixture(t)
	a := f.app(t, "Race", "slots:\n  db: {type: postgres}\n")
	var wg sync.WaitGroup
	errs := make([]error, 12)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = f.svc.Fill(ctx, a.ID, "db", slots.FillRequest{Value: map[string]any{"url": fmt.Sprintf("postgres://u%d@h/d", i)}})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Errorf("fill: %v", err)
		}
	}
	if n := len(auditOf(t, f, "slot.fill")); n != len(errs) {
		t.Errorf("%d audit entries for %d fills", n, len(errs))
	}
	list, _ := f.svc.List(a.ID)
	if u := byKey(t, list, "db").Fields["username"]; !strings.HasPrefix(u, "u") {
		t.Errorf("username = %q", u)
	}
}
