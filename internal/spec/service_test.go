package spec_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

type fixture struct {
	store *raftstore.Store
	svc   *spec.Service
	app   string
	ctx   context.Context
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	tables := []raftstore.Def{spec.Revisions, spec.Heads, audit.Entries}
	tables = append(tables, apps.Tables()...)
	tables = append(tables, secrets.Tables()...)
	store := raftstoretest.Open(t, tables...)
	now := func() time.Time { return time.Now().UTC() }
	f := &fixture{store: store, svc: spec.NewService(store, now),
		ctx: actor.With(context.Background(), actor.Actor{Kind: "user", ID: "usr_tester", RequestID: "req_test"})}
	f.app = f.newApp(t, "shop")
	return f
}

func (f *fixture) newApp(t *testing.T, slug string) string {
	t.Helper()
	now := time.Now().UTC()
	a := apps.App{ID: ids.New(ids.App), Name: slug, Slug: slug, State: apps.StateDraft, DesiredState: apps.DesiredRunning, CreatedAt: now, UpdatedAt: now}
	if _, err := f.store.Apply(f.ctx, apps.Apps.Insert(&a)); err != nil {
		t.Fatal(err)
	}
	return a.ID
}

func doc(t *testing.T, port int) spec.Document {
	t.Helper()
	return spec.Document{Workloads: map[string]spec.Workload{"web": {
		Build: &spec.Build{Kind: spec.BuildGo},
		Run:   spec.Run{Command: []string{"./app"}, Port: port},
		Env:   map[string]spec.EnvValue{"DB_PASSWORD": spec.Literal("s3cret-literal")},
	}}}
}

func (f *fixture) actions(t *testing.T) []string {
	t.Helper()
	items, _ := audit.Entries.List(f.store.Read(), raftstore.Query{})
	var out []string
	for _, it := range items {
		out = append(out, it.Value.Action)
	}
	return out
}

func wantCode(t *testing.T, what string, err error, code errcode.Code) {
	t.Helper()
	if errcode.CodeOf(err) != code {
		t.Errorf("%s: err = %v, want %s", what, err, code)
	}
}

func TestServiceCreateListGetPin(t *testing.T) {
	f := newFixture(t)
	v1, err := f.svc.Create(f.ctx, f.app, doc(t, 8080))
	if err != nil {
		t.Fatal(err)
	}
	if v1.Number != 1 || v1.Pinned || v1.CreatedBy != "usr_tester" || !strings.HasPrefix(v1.ID, "spec_") || v1.Spec.Workloads["web"].Run.Port != 8080 {
		t.Fatalf("first revision = %+v", v1)
	}
	v2, err := f.svc.Create(f.ctx, f.app, doc(t, 9090))
	if err != nil || v2.Number != 2 {
		t.Fatalf("second revision = %+v, %v", v2, err)
	}

	l, err := f.svc.List(f.app, 0, 50)
	if err != nil || len(l.Items) != 2 || l.Items[0].Number != 2 || l.Items[1].Number != 1 || l.Pinned != 0 || l.More {
		t.Fatalf("list = %+v, %v", l, err)
	}
	if l, _ := f.svc.List(f.app, 0, 1); len(l.Items) != 1 || !l.More || l.Items[0].Number != 2 {
		t.Errorf("first page of one = %+v", l)
	}
	if l, _ := f.svc.List(f.app, 2, 1); len(l.Items) != 1 || l.More || l.Items[0].Number != 1 {
		t.Errorf("page below 2 = %+v", l)
	}

	p, err := f.svc.Pin(f.ctx, f.app, 1)
	if err != nil || !p.Pinned || p.Number != 1 {
		t.Fatalf("pin = %+v, %v", p, err)
	}
	app, _, _ := apps.Apps.Get(f.store.Read(), f.app)
	if app.Pinned == nil || app.Pinned.SpecID != v1.ID || app.Pinned.Revision != 1 {
		t.Errorf("the app row's pin = %+v", app.Pinned)
	}
	if g, _ := f.svc.Get(f.app, 1); !g.Pinned {
		t.Errorf("revision 1 after the pin = %+v", g)
	}
	if g, _ := f.svc.Get(f.app, 2); g.Pinned || g.Spec.Workloads["web"].Run.Port != 9090 {
		t.Errorf("revision 2 = %+v", g)
	}
	if l, _ := f.svc.List(f.app, 0, 50); l.Pinned != 1 || !l.Items[1].Pinned || l.Items[0].Pinned {
		t.Errorf("list after the pin = %+v", l)
	}

	d, err := f.svc.Diff(f.app, 1, 2)
	if err != nil || d.Effect != spec.EffectRestart || len(d.Changes) != 1 || d.Changes[0].Path != "workloads.web.run.port" {
		t.Errorf("diff = %+v, %v", d, err)
	}
	if got := strings.Join(f.actions(t), " "); got != "spec.create spec.create spec.pin" {
		t.Errorf("audit actions = %s", got)
	}
}

func TestServiceRefusals(t *testing.T) {
	f := newFixture(t)
	ghost := ids.New(ids.App)
	_, err := f.svc.Create(f.ctx, ghost, doc(t, 80))
	wantCode(t, "create for no app", err, errcode.NotFound)
	_, err = f.svc.Create(f.ctx, f.app, doc(t, 70000))
	wantCode(t, "create an invalid document", err, errcode.ValidInvalid)
	_, err = f.svc.Pin(f.ctx, f.app, 1)
	wantCode(t, "pin a revision that does not exist", err, errcode.NotFound)
	_, err = f.svc.Get(f.app, 1)
	wantCode(t, "get a revision that does not exist", err, errcode.NotFound)
	_, err = f.svc.Get(ghost, 1)
	wantCode(t, "get of no app", err, errcode.NotFound)
	_, err = f.svc.List(ghost, 0, 10)
	wantCode(t, "list of no app", err, errcode.NotFound)
	_, err = f.svc.Diff(f.app, 1, 2)
	wantCode(t, "diff of missing revisions", err, errcode.NotFound)
	_, err = f.svc.Export(ghost)
	wantCode(t, "export of no app", err, errcode.NotFound)
	if a := f.actions(t); len(a) != 0 {
		t.Errorf("refusals wrote audit entries %v", a)
	}
}

func TestServiceCreateAndPin(t *testing.T) {
	f := newFixture(t)
	v, err := f.svc.CreateAndPin(f.ctx, f.app, doc(t, 8080), "accept")
	if err != nil || !v.Pinned || v.Number != 1 {
		t.Fatalf("create and pin = %+v, %v", v, err)
	}
	app, _, _ := apps.Apps.Get(f.store.Read(), f.app)
	if app.Pinned == nil || app.Pinned.SpecID != v.ID {
		t.Errorf("the app row's pin = %+v", app.Pinned)
	}
	items, _ := audit.Entries.List(f.store.Read(), raftstore.Query{})
	if len(items) != 1 || items[0].Value.Action != "detection.accept" || items[0].Value.Details["trigger"] != "accept" || items[0].Value.Details["pinned"] != true {
		t.Errorf("audit = %+v", items)
	}
}

func TestServiceExport(t *testing.T) {
	f := newFixture(t)
	e, err := f.svc.Export(f.app)
	if err != nil || e.Spec != nil || e.Revision != nil || e.App.Slug != "shop" {
		t.Fatalf("export without revisions = %+v, %v", e, err)
	}
	now := time.Now().UTC()
	for _, k := range []string{"ZED", "API_KEY"} {
		row := secrets.Secret{ID: secrets.RowID(f.app, k), AppID: f.app, Key: k, Origin: "adp_builtin_secrets", Version: 1, Sealed: []byte("sealed"), CreatedAt: now, UpdatedAt: now}
		if _, err := f.store.Apply(f.ctx, secrets.Secrets.Insert(&row)); err != nil {
			t.Fatal(err)
		}
	}
	for _, port := range []int{1000, 2000, 3000} {
		if _, err := f.svc.Create(f.ctx, f.app, doc(t, port)); err != nil {
			t.Fatal(err)
		}
	}
	e, _ = f.svc.Export(f.app)
	if *e.Revision != 3 || e.Spec.Workloads["web"].Run.Port != 3000 {
		t.Errorf("without a pin the latest is exported: revision %d", *e.Revision)
	}
	if _, err := f.svc.Pin(f.ctx, f.app, 2); err != nil {
		t.Fatal(err)
	}
	e, _ = f.svc.Export(f.app)
	if *e.Revision != 2 || e.Spec.Workloads["web"].Run.Port != 2000 {
		t.Errorf("the pinned revision is exported: revision %d", *e.Revision)
	}
	if e.Spec.Workloads["web"].Env["DB_PASSWORD"] != spec.Literal(spec.Redacted) {
		t.Errorf("DB_PASSWORD = %+v", e.Spec.Workloads["web"].Env["DB_PASSWORD"])
	}
	if len(e.Secrets) != 2 || e.Secrets[0] != (spec.ExportSecret{Key: "API_KEY", Value: spec.Redacted}) || e.Secrets[1].Key != "ZED" {
		t.Errorf("secrets = %+v", e.Secrets)
	}
	if g, _ := f.svc.Get(f.app, 2); g.Spec.Workloads["web"].Env["DB_PASSWORD"] != spec.Literal("s3cret-literal") {
		t.Error("exporting changed the stored revision")
	}
}

// Retention removes what the table's rule lets go: revisions that are not
// pinned, not among the last ten pinned, and older than the newest of those.
func TestServiceSweepRetention(t *testing.T) {
	f := newFixture(t)
	other := f.newApp(t, "other")
	for n := 1; n <= 14; n++ {
		if _, err := f.svc.Create(f.ctx, f.app, doc(t, 1000+n)); err != nil {
			t.Fatal(err)
		}
		if n <= 12 {
			if _, err := f.svc.Pin(f.ctx, f.app, uint64(n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for n := 1; n <= 3; n++ { // never pinned: nothing to keep them behind
		if _, err := f.svc.Create(f.ctx, other, doc(t, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.svc.SweepRetention(f.ctx); err != nil {
		t.Fatal(err)
	}
	l, _ := f.svc.List(f.app, 0, 100)
	var got []uint64
	for _, it := range l.Items {
		got = append(got, it.Number)
	}
	want := []uint64{14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3}
	if !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	if l, _ := f.svc.List(other, 0, 100); len(l.Items) != 3 {
		t.Errorf("an app without pins lost revisions: %+v", l.Items)
	}
	_, err := f.svc.Get(f.app, 1)
	wantCode(t, "a retained revision", err, errcode.NotFound)
	if err := f.svc.SweepRetention(f.ctx); err != nil {
		t.Errorf("a second sweep: %v", err)
	}
	// Numbers stay contiguous: the next revision is 15.
	if v, err := f.svc.Create(f.ctx, f.app, doc(t, 80)); err != nil || v.Number != 15 {
		t.Errorf("after retention: %+v, %v", v, err)
	}
}

// Concurrent creates are all applied, one after another: each gets its
// own number and the numbers are contiguous, none lost.
func TestServiceConcurrentCreates(t *testing.T) {
	f := newFixture(t)
	const n = 16
	nums := make(chan uint64, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			v, err := f.svc.Create(f.ctx, f.app, doc(t, 8000+i))
			nums <- v.Number
			errs <- err
		}()
	}
	seen := map[uint64]bool{}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
		seen[<-nums] = true
	}
	for i := uint64(1); i <= n; i++ {
		if !seen[i] {
			t.Errorf("no create got revision %d: %v", i, seen)
		}
	}
	l, _ := f.svc.List(f.app, 0, 2*n)
	if len(l.Items) != n || l.Items[0].Number != n {
		t.Errorf("list = %+v", l.Items)
	}
	if got := f.actions(t); len(got) != n {
		t.Errorf("%d audit entries for %d creates", len(got), n)
	}
}

// Concurrent pins, and creates beside them, are all applied; the head and
// the app row agree on the pinned revision at the end (both are written in
// each pin's one write, the app row by apps.PinOps).
func TestServiceConcurrentPins(t *testing.T) {
	f := newFixture(t)
	const n = 8
	for i := range n {
		if _, err := f.svc.Create(f.ctx, f.app, doc(t, 9000+i)); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 2*n)
	for i := range n {
		go func() {
			_, err := f.svc.Pin(f.ctx, f.app, uint64(i+1))
			errs <- err
		}()
		go func() {
			_, err := f.svc.CreateAndPin(f.ctx, f.app, doc(t, 9100+i), "")
			errs <- err
		}()
	}
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	l, _ := f.svc.List(f.app, 0, 4*n)
	a, _, _ := apps.Apps.Get(f.store.Read(), f.app)
	if len(l.Items) != 2*n || l.Pinned == 0 || a.Pinned == nil || uint64(a.Pinned.Revision) != l.Pinned {
		t.Fatalf("%d revisions, head pins %d, app row pins %+v", len(l.Items), l.Pinned, a.Pinned)
	}
	if rev, err := f.svc.Get(f.app, l.Pinned); err != nil || rev.ID != a.Pinned.SpecID {
		t.Errorf("the app row pins %s; revision %d is %s (%v)", a.Pinned.SpecID, l.Pinned, rev.ID, err)
	}
	h, _, _ := spec.Heads.Get(f.store.Read(), f.app)
	if len(h.PinHistory) != spec.KeepPinned {
		t.Errorf("pin history %v: want the last %d pins", h.PinHistory, spec.KeepPinned)
	}
}
