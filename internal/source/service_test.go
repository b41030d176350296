package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
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
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

// fakePolicy is a host policy with a source allowlist.
type fakePolicy struct {
	mu   sync.Mutex
	list []string
}

var _ policyReader = (*fakePolicy)(nil)

func (f *fakePolicy) Current() policy.Policy {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := policy.Default()
	p.SourceAllowlist = f.list
	return p
}

type fixture struct {
	store *raftstore.Store
	apps  *apps.Service
	pol   *fakePolicy
	svc   *Service
	work  string
	ctx   context.Context
	hooks chan Checkout
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	store := raftstoretest.Open(t, append([]raftstore.Def{apps.Apps, audit.Entries, events.Events, events.Cursors}, identity.Tables()...)...)
	f := &fixture{store: store, apps: apps.NewService(store, func() time.Time { return time.Now().UTC() }), pol: &fakePolicy{},
		work: t.TempDir(), hooks: make(chan Checkout, 10),
		ctx: actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_1"})}
	svc, err := New(Deps{WorkDir: f.work, Apps: f.apps, Policy: f.pol, Git: Fetcher{AllowFile: true},
		OnCheckout: func(_ context.Context, _ string, c Checkout) { f.hooks <- c }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	f.svc = svc
	return f
}

func (f *fixture) app(t *testing.T, name string) string {
	t.Helper()
	caller := authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: "usr_1", UserID: "usr_1"}}
	a, err := f.apps.Create(f.ctx, caller, apps.New{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}

func (f *fixture) source(t *testing.T, id string) *apps.Source {
	t.Helper()
	a, err := f.apps.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return a.Source
}

func (f *fixture) actions(t *testing.T, appID string) []string {
	t.Helper()
	items, _ := audit.Entries.List(f.store.Read(), raftstore.Query{})
	var out []string
	for _, it := range items {
		if it.Value.AppID != nil && *it.Value.AppID == appID {
			out = append(out, it.Value.Action)
		}
	}
	return out
}

// entriesOf lists a directory's names.
func entriesOf(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestFromArchiveRecordsAndSwaps(t *testing.T) {
	f := newFixture(t)
	id := f.app(t, "Upload")
	first := gz(t, makeTar(t, file("app/main.py", "v1")))
	c1, err := f.svc.FromArchive(f.ctx, id, "application/gzip", bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(first)
	want := apps.Source{Kind: KindArchive, Commit: "sha256:" + hex.EncodeToString(sum[:]), CheckoutID: c1.ID}
	if got := f.source(t, id); got == nil || *got != want || c1.Source != want || c1.Commit != want.Commit || c1.Kind != KindArchive {
		t.Fatalf("source = %+v, checkout %+v; want %+v", got, c1, want)
	}
	srcDir := filepath.Join(f.work, "apps", id, "source")
	if c1.Dir != filepath.Join(srcDir, c1.ID) || !strings.HasPrefix(c1.ID, "chk_") {
		t.Fatalf("checkout at %s (%s)", c1.Dir, c1.ID)
	}
	if b, _ := os.ReadFile(filepath.Join(srcDir, "current", "app", "main.py")); string(b) != "v1" {
		t.Fatalf("current/app/main.py = %q", b)
	}
	if h := <-f.hooks; h.ID != c1.ID {
		t.Fatalf("hook got %+v", h)
	}
	if cur, err := f.svc.Current(id); err != nil || cur.ID != c1.ID || cur.Commit != c1.Commit {
		t.Fatalf("Current = %+v, %v", cur, err)
	}

	c2, err := f.svc.FromArchive(f.ctx, id, "application/zip", bytes.NewReader(makeZip(t, file("index.html", "v2"))))
	if err != nil {
		t.Fatal(err)
	}
	<-f.hooks
	if got := entriesOf(t, srcDir); strings.Join(got, " ") != c2.ID+" "+c2.ID+".json current" {
		t.Fatalf("after a second upload the source dir holds %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(srcDir, "current", "index.html")); string(b) != "v2" {
		t.Fatalf("current/index.html = %q", b)
	}
	if got := f.actions(t, id); strings.Join(got, ",") != "app.create,source.upload,source.upload" {
		t.Fatalf("audit actions = %v", got)
	}

	// A hostile archive changes nothing: no checkout, same source, same
	// current, no audit entry, no hook.
	before := *f.source(t, id)
	_, err = f.svc.FromArchive(f.ctx, id, "application/x-tar", bytes.NewReader(makeTar(t, file("ok", "x"), file("../../escape", "x"))))
	if errcode.CodeOf(err) != errcode.ValidInvalid || !strings.Contains(err.Error(), "path traversal") {
		t.Fatalf("hostile archive: %v", err)
	}
	if got := *f.source(t, id); got != before {
		t.Fatalf("a refused archive changed the source to %+v", got)
	}
	if got := entriesOf(t, srcDir); strings.Join(got, " ") != c2.ID+" "+c2.ID+".json current" {
		t.Fatalf("a refused archive left %v", got)
	}
	if len(f.actions(t, id)) != 3 || len(f.hooks) != 0 {
		t.Fatal("a refused archive was audited or announced")
	}
	if _, err := os.Stat(filepath.Join(f.work, "apps", id, "escape")); err == nil {
		t.Fatal("escaped")
	}
}

func TestFromArchiveRefusals(t *testing.T) {
	f := newFixture(t)
	id := f.app(t, "Refusals")
	data := makeTar(t, file("a", "b"))
	cases := []struct {
		name, app, ct string
		code          errcode.Code
		status        int
	}{
		{"unknown app", "app_01JZZZZZZZZZZZZZZZZZZZZZZZ", "application/x-tar", errcode.NotFound, 404},
		{"app ID with a path", "../../etc", "application/x-tar", errcode.NotFound, 404},
		{"wrong content type", id, "application/json", errcode.ValidInvalid, 415},
	}
	for _, c := range cases {
		_, err := f.svc.FromArchive(f.ctx, c.app, c.ct, bytes.NewReader(data))
		e, ok := errcode.As(err)
		if !ok || e.Code != c.code || e.Status() != c.status {
			t.Errorf("%s: %v, want %s %d", c.name, err, c.code, c.status)
		}
	}
	if _, err := os.Stat(filepath.Join(f.work, "apps")); err == nil {
		if got := entriesOf(t, filepath.Join(f.work, "apps")); len(got) != 0 {
			t.Errorf("refusals left %v", got)
		}
	}
}

func TestFromRepository(t *testing.T) {
	f := newFixture(t)
	r := newTestRepo(t)
	id := f.app(t, "Repo")
	c, err := f.svc.FromRepository(f.ctx, id, apps.Source{Repository: r.bare, Ref: "main", Subdir: "./svc/web/"})
	if err != nil {
		t.Fatal(err)
	}
	want := apps.Source{Kind: KindRepository, Repository: r.bare, Ref: "main", Commit: r.main, Subdir: "svc/web", CheckoutID: c.ID}
	if got := f.source(t, id); *got != want || c.Commit != r.main {
		t.Fatalf("source = %+v, want %+v", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(c.AppDir(), "index.html")); string(b) != "<p>hi</p>\n" {
		t.Fatalf("the app's dir holds %q", b)
	}
	<-f.hooks
	if got := f.actions(t, id); strings.Join(got, ",") != "app.create,source.fetch" {
		t.Fatalf("audit = %v", got)
	}

	// Host policy's allowlist applies.
	f.pol.mu.Lock()
	f.pol.list = []string{"github.com/acme/"}
	f.pol.mu.Unlock()
	_, err = f.svc.FromRepository(f.ctx, id, apps.Source{Repository: "https://github.com/evil/app"})
	if e, ok := errcode.As(err); !ok || e.Code != errcode.PolicySourceNotAllow || e.Details["host"] != "github.com" {
		t.Fatalf("allowlist: %v", err)
	}
	if err := f.svc.Fetch(f.ctx, id, apps.Source{Repository: r.bare}); errcode.CodeOf(err) != errcode.PolicySourceNotAllow {
		t.Fatalf("Fetch under the allowlist: %v", err)
	}
	f.pol.mu.Lock()
	f.pol.list = nil
	f.pol.mu.Unlock()

	// Fetch runs in the background and announces the checkout.
	if err := f.svc.Fetch(f.ctx, id, apps.Source{Repository: r.bare, Ref: "feature"}); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-f.hooks:
		if c.Commit != r.feature || f.source(t, id).Commit != r.feature {
			t.Fatalf("background fetch checked out %s", c.Commit)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the background fetch did not finish")
	}
	for _, bad := range []apps.Source{{Repository: "ext::sh"}, {Repository: r.bare, Ref: "-x"}, {Repository: r.bare, Subdir: "../x"}, {Kind: "archive", Repository: r.bare}} {
		if _, err := f.svc.FromRepository(f.ctx, id, bad); errcode.CodeOf(err) != errcode.ValidInvalid {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if err := f.svc.Fetch(f.ctx, "app_01JZZZZZZZZZZZZZZZZZZZZZZZ", apps.Source{Repository: r.bare}); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("Fetch of an unknown app: %v", err)
	}
}

// Credentials in a repository address are used for the clone but never
// recorded on the app.
func TestRecordedRepositoryHasNoCredentials(t *testing.T) {
	if got := withoutCredentials("https://x-token:s3cret@github.com/acme/app.git"); got != "https://github.com/acme/app.git" {
		t.Fatalf("withoutCredentials = %s", got)
	}
}

func TestSweepRemovesDeletedAppsCheckouts(t *testing.T) {
	f := newFixture(t)
	keep, gone := f.app(t, "Keep"), f.app(t, "Gone")
	for _, id := range []string{keep, gone} {
		if _, err := f.svc.FromArchive(f.ctx, id, "application/x-tar", bytes.NewReader(makeTar(t, file("a", id)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.apps.Delete(f.ctx, gone, apps.Decision{Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := entriesOf(t, filepath.Join(f.work, "apps")); strings.Join(got, " ") != keep {
		t.Fatalf("after the sweep: %v", got)
	}
	if _, err := f.svc.Current(keep); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Current(gone); errcode.CodeOf(err) != errcode.NotFound {
		t.Fatalf("Current of a swept app: %v", err)
	}
}

// Uploads for one app run one at a time; each ends with its own checkout
// current and the others removed.
func TestConcurrentUploads(t *testing.T) {
	f := newFixture(t)
	id := f.app(t, "Concurrent")
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.svc.FromArchive(f.ctx, id, "application/x-tar", bytes.NewReader(makeTar(t, file("n", strings.Repeat("x", i+1)))))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	cur, err := f.svc.Current(id)
	if err != nil {
		t.Fatal(err)
	}
	srcDir := filepath.Join(f.work, "apps", id, "source")
	if got := entriesOf(t, srcDir); len(got) != 3 {
		t.Fatalf("source dir holds %v", got)
	}
	if f.source(t, id).Commit != cur.Commit {
		t.Fatalf("recorded %s, current %s", f.source(t, id).Commit, cur.Commit)
	}
}
