package source

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
)

// nowhere is a cluster where no other server has any blob.
type nowhere struct{ asked atomic.Int32 }

var _ Peers = (*nowhere)(nil)

func (n *nowhere) FetchBlob(_ context.Context, name string, _ io.Writer) (int64, error) {
	n.asked.Add(1)
	return 0, fmt.Errorf("blob %s: %w", name, fs.ErrNotExist)
}

// A repository checkout no server has is cloned again at the recorded
// commit, wherever the branch has moved since, under the recorded
// checkout ID and without recording anything; a repository that is gone
// too is NOT_FOUND.
func TestEnsureClonesTheRepositoryAgain(t *testing.T) {
	f := newFixture(t)
	r := newTestRepo(t)
	id := f.app(t, "Repo")
	first, err := f.svc.FromRepository(f.ctx, id, apps.Source{Repository: r.bare, Ref: "main", Subdir: "svc/web"})
	if err != nil {
		t.Fatal(err)
	}
	<-f.hooks
	gitCmd(t, r.bare, "update-ref", "refs/heads/main", r.feature) // main moves on

	peers := &nowhere{}
	other, err := New(Deps{WorkDir: t.TempDir(), Apps: f.apps, Policy: f.pol, Git: Fetcher{AllowFile: true}, Peers: peers,
		OnCheckout: func(_ context.Context, _ string, c Checkout) { f.hooks <- c }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	got, err := other.Ensure(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rec := *f.source(t, id)
	if got.ID != first.ID || got.Commit != r.main || got.Source != rec || got.Kind != KindRepository {
		t.Fatalf("Ensure = %+v, want checkout %s at %s with source %+v", got, first.ID, r.main, rec)
	}
	if b, _ := os.ReadFile(filepath.Join(got.AppDir(), "index.html")); string(b) != "<p>hi</p>\n" {
		t.Fatalf("the app's dir holds %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(got.Dir, "app.py")); string(b) != "print('v2')\n" {
		t.Fatalf("app.py = %q, want main's commit", b)
	}
	if _, err := os.Stat(filepath.Join(got.Dir, "feature.txt")); err == nil {
		t.Fatal("cloned the branch, not the recorded commit")
	}
	if _, err := os.Stat(filepath.Join(got.Dir, ".git")); err == nil {
		t.Fatal("the checkout has .git")
	}
	if peers.asked.Load() != 1 || len(f.hooks) != 0 || strings.Join(f.actions(t, id), ",") != "app.create,source.fetch" {
		t.Fatalf("asked %d, hooks %d, audit %v", peers.asked.Load(), len(f.hooks), f.actions(t, id))
	}

	// The repository is gone too.
	if err := os.RemoveAll(r.bare); err != nil {
		t.Fatal(err)
	}
	third, err := New(Deps{WorkDir: t.TempDir(), Apps: f.apps, Policy: f.pol, Git: Fetcher{AllowFile: true}, Peers: peers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = third.Close() })
	_, err = third.Ensure(f.ctx, id)
	e, ok := errcode.As(err)
	if !ok || e.Code != errcode.NotFound || !strings.Contains(e.Message, "cloning") || e.Remedy == "" {
		t.Fatalf("Ensure with the repository gone: %v", err)
	}
	if got := entriesOf(t, filepath.Join(third.d.WorkDir, "apps", id, "source")); len(got) != 0 {
		t.Fatalf("a failed clone left %v", got)
	}
}

// A record made before checkouts were named (no checkout ID) means
// whatever is current here: nothing is fetched.
func TestEnsureWithAnOlderRecord(t *testing.T) {
	f := newFixture(t)
	id := f.app(t, "Old")
	c, err := f.svc.FromArchive(f.ctx, id, "application/x-tar", strings.NewReader(string(makeTar(t, file("a", "b")))))
	if err != nil {
		t.Fatal(err)
	}
	<-f.hooks
	if err := f.apps.SetSource(f.ctx, id, apps.Source{Kind: KindArchive, Commit: c.Commit}); err != nil {
		t.Fatal(err)
	}
	peers := &nowhere{}
	f.svc.d.Peers = peers
	if got, err := f.svc.Ensure(f.ctx, id); err != nil || got.ID != c.ID {
		t.Fatalf("Ensure = %+v, %v; want the current checkout %s", got, err, c.ID)
	}
	other, err := New(Deps{WorkDir: t.TempDir(), Apps: f.apps, Policy: f.pol, Peers: peers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	if _, err := other.Ensure(f.ctx, id); errcode.CodeOf(err) != errcode.NotFound {
		t.Fatalf("Ensure on a server without it: %v", err)
	}
	if n := peers.asked.Load(); n != 0 {
		t.Fatalf("asked the peers %d times", n)
	}
}

func TestBlobNames(t *testing.T) {
	app, chk := "app_01JZZZZZZZZZZZZZZZZZZZZZZZ", "chk_01JZZZZZZZZZZZZZZZZZZZZZZY"
	name := BlobName(app, chk)
	if name != "checkout-"+app+"-"+chk+".tar.gz" {
		t.Fatalf("BlobName = %s", name)
	}
	if a, c, ok := parseBlobName(name); !ok || a != app || c != chk {
		t.Fatalf("parseBlobName(%s) = %s, %s, %v", name, a, c, ok)
	}
	for _, bad := range []string{"", "checkout-", app + "-" + chk + ".tar.gz", "checkout-" + app + "-" + chk, "checkout-" + app + chk + ".tar.gz",
		"checkout-" + app + "-" + chk + ".tar.gz.tar.gz", "checkout-" + app + "-../" + chk + ".tar.gz", "checkout-app_x-" + chk + ".tar.gz"} {
		if _, _, ok := parseBlobName(bad); ok {
			t.Errorf("parseBlobName(%q) accepted", bad)
		}
	}
}

// A release's repository checkout that no server has any more is cloned
// again at its own commit by CheckoutOf, however far the record moved
// since (another commit is current), and does not become current.
func TestCheckoutOfClonesAReleaseAgain(t *testing.T) {
	f := newFixture(t)
	r := newTestRepo(t)
	id := f.app(t, "Repo")
	first, err := f.svc.FromRepository(f.ctx, id, apps.Source{Repository: r.bare, Ref: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	<-f.hooks
	second, err := f.svc.FromRepository(f.ctx, id, apps.Source{Repository: r.bare, Ref: "main"})
	if err != nil {
		t.Fatal(err)
	}
	<-f.hooks
	if first.Commit != r.first || second.Commit != r.main {
		t.Fatalf("commits %s, %s; want %s, %s", first.Commit, second.Commit, r.first, r.main)
	}

	other, err := New(Deps{WorkDir: t.TempDir(), Apps: f.apps, Policy: f.pol, Git: Fetcher{AllowFile: true}, Peers: &nowhere{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	got, err := other.CheckoutOf(f.ctx, id, first.Source)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != first.ID || got.Commit != r.first || got.Source != first.Source {
		t.Fatalf("CheckoutOf = %+v, want checkout %s at %s", got, first.ID, r.first)
	}
	if b, _ := os.ReadFile(filepath.Join(got.Dir, "app.py")); string(b) != "print('v1')\n" {
		t.Fatalf("app.py = %q, want the release's commit", b)
	}
	if _, err := other.Current(id); !errcode.Has(err, errcode.NotFound) {
		t.Fatalf("the release's checkout became current: %v", err)
	}
}
