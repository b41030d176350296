package source_test

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
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/source"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

// openPolicy is a host policy without a source allowlist.
type openPolicy struct{}

func (openPolicy) Current() policy.Policy { return policy.Default() }

// peers stands for the cluster: it fetches blobs from the other servers'
// OpenBlob, as raftstore does over the cluster port, saying "not found"
// the way the composition root translates it.
type peers struct {
	mu     sync.Mutex
	others []*source.Service
	asked  []string
	// down, when set, is every fetch's answer: no server could answer.
	down error
	// serve, when it has the name, is what a server sends instead.
	serve map[string][]byte
	// gate, when set, holds every fetch until it is closed; started is
	// told the name first.
	gate    chan struct{}
	started chan string
}

var _ source.Peers = (*peers)(nil)

func (p *peers) FetchBlob(ctx context.Context, name string, w io.Writer) (int64, error) {
	p.mu.Lock()
	p.asked = append(p.asked, name)
	gate, started, down, fake, others := p.gate, p.started, p.down, p.serve[name], p.others
	p.mu.Unlock()
	if gate != nil {
		started <- name
		<-gate
	}
	if down != nil {
		return 0, fmt.Errorf("fetch blob %s: %w", name, down)
	}
	if fake != nil {
		n, err := w.Write(fake)
		if err != nil {
			return int64(n), fmt.Errorf("fetch blob %s: write: %w", name, err)
		}
		return int64(n), nil
	}
	for _, o := range others {
		rc, size, err := o.OpenBlob(ctx, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("fetch blob %s: %w", name, err)
		}
		n, err := io.Copy(w, rc)
		rc.Close()
		if err == nil && n != size {
			err = fmt.Errorf("got %d of %d bytes", n, size)
		}
		if err != nil {
			return n, fmt.Errorf("fetch blob %s: %w", name, err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("fetch blob %s: %w", name, fs.ErrNotExist)
}

func (p *peers) names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.asked)
}

// node is one server: its work dir, source service and peers.
type node struct {
	work  string
	svc   *source.Service
	peers *peers
	log   *bytes.Buffer
}

// cluster is servers sharing one replicated store (one store stands for
// the replicated one: every server reads the same records).
type cluster struct {
	store *raftstore.Store
	apps  *apps.Service
	ctx   context.Context
	a, b  *node

	mu   sync.Mutex
	keep map[string][]string // app ID -> the checkouts kept besides the current one (Deps.Keep)
}

// kept is every server's Deps.Keep: what the test set with keepOnly.
func (c *cluster) kept(appID string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.keep[appID])
}

// keepOnly sets the checkouts of an app kept besides the current one.
func (c *cluster) keepOnly(appID string, ids ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keep[appID] = ids
}

func newCluster(t *testing.T, limitsB source.Limits) *cluster {
	t.Helper()
	store := raftstoretest.Open(t, append([]raftstore.Def{apps.Apps, audit.Entries, events.Events, events.Cursors}, identity.Tables()...)...)
	c := &cluster{store: store, apps: apps.NewService(store, func() time.Time { return time.Now().UTC() }),
		ctx: actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_1"}), keep: map[string][]string{}}
	c.a = c.node(t, source.Limits{})
	c.b = c.node(t, limitsB)
	c.a.peers.others = []*source.Service{c.b.svc}
	c.b.peers.others = []*source.Service{c.a.svc}
	return c
}

func (c *cluster) node(t *testing.T, lim source.Limits) *node {
	t.Helper()
	n := &node{work: t.TempDir(), peers: &peers{}, log: &bytes.Buffer{}}
	svc, err := source.New(source.Deps{WorkDir: n.work, Apps: c.apps, Policy: openPolicy{}, Limits: lim, Git: source.Fetcher{AllowFile: true},
		Peers: n.peers, Store: c.store, Logger: slog.New(slog.NewTextHandler(n.log, nil)), Keep: c.kept})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	n.svc = svc
	return n
}

func (c *cluster) app(t *testing.T, name string) string {
	t.Helper()
	caller := authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: "usr_1", UserID: "usr_1"}}
	a, err := c.apps.Create(c.ctx, caller, apps.New{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}

func (c *cluster) record(t *testing.T, appID string) apps.Source {
	t.Helper()
	a, err := c.apps.Get(appID)
	if err != nil || a.Source == nil {
		t.Fatalf("app %s: source %v, %v", appID, a.Source, err)
	}
	return *a.Source
}

func (n *node) upload(t *testing.T, c *cluster, appID string, data []byte) source.Checkout {
	t.Helper()
	co, err := n.svc.FromArchive(c.ctx, appID, "application/gzip", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return co
}

func (n *node) sourceDir(appID string) string { return filepath.Join(n.work, "apps", appID, "source") }

// listing is what a source dir holds, by name.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// tree describes every path under dir: type, permissions, and a file's
// body or a link's target.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "link -> " + target
			return err
		case fi.IsDir():
			out[rel] = fmt.Sprintf("dir %o", fi.Mode().Perm())
		default:
			b, err := os.ReadFile(p)
			out[rel] = fmt.Sprintf("file %o %q", fi.Mode().Perm(), b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type member struct {
	name, body, link string
	typ              byte
	mode             int64
	size             int64     // declared, for a reader
	r                io.Reader // the body, when not body
}

func tarGz(t testing.TB, ms ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, m := range ms {
		h := &tar.Header{Name: m.name, Typeflag: m.typ, Mode: m.mode, Linkname: m.link, Size: int64(len(m.body))}
		if m.r != nil {
			h.Size = m.size
		}
		if m.typ != tar.TypeReg {
			h.Size = 0
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		var err error
		if m.r != nil {
			_, err = io.Copy(tw, m.r)
		} else if m.typ == tar.TypeReg {
			_, err = io.WriteString(tw, m.body)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func reg(name, body string) member { return member{name: name, body: body, typ: tar.TypeReg} }

// sampleApp has what a checkout can hold: files (one executable), nested
// and empty directories, and links inside.
func sampleApp(t testing.TB, version string) []byte {
	return tarGz(t,
		member{name: "web/", typ: tar.TypeDir, mode: 0o755},
		reg("web/index.html", "<h1>"+version+"</h1>\n"),
		member{name: "web/run.sh", body: "#!/bin/sh\necho " + version + "\n", typ: tar.TypeReg, mode: 0o755},
		member{name: "web/empty/", typ: tar.TypeDir, mode: 0o755},
		member{name: "web/deep/er/", typ: tar.TypeDir, mode: 0o755},
		reg("web/deep/er/data.json", `{"v":"`+version+`"}`),
		member{name: "web/start", link: "run.sh", typ: tar.TypeSymlink},
		member{name: "current-web", link: "web/deep", typ: tar.TypeSymlink},
		reg("README", strings.Repeat("svc ", 10_000)),
	)
}

func wantCode(t *testing.T, what string, err error, code errcode.Code) *errcode.Error {
	t.Helper()
	e, ok := errcode.As(err)
	if !ok || e.Code != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
	return e
}

// A checkout uploaded to one server reaches another through OpenBlob and
// Ensure: the same tree, modes and links, the same record; then it is
// current there, and asking again fetches nothing.
func TestEnsureFetchesTheCheckoutFromAnotherServer(t *testing.T) {
	c := newCluster(t, source.Limits{})
	id := c.app(t, "Spread")
	up := c.a.upload(t, c, id, sampleApp(t, "v1"))
	rec := c.record(t, id)
	if rec.CheckoutID != up.ID || up.Source != rec {
		t.Fatalf("the record is %+v, the checkout %+v", rec, up)
	}

	got, err := c.b.svc.Ensure(c.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != up.ID || got.Commit != up.Commit || got.Kind != source.KindArchive || got.Source != rec ||
		got.Dir != filepath.Join(c.b.sourceDir(id), up.ID) || !got.CreatedAt.Equal(up.CreatedAt.Truncate(time.Millisecond)) {
		t.Fatalf("Ensure on b = %+v, want the checkout of a %+v", got, up)
	}
	if diff := cmp.Diff(tree(t, up.Dir), tree(t, got.Dir)); diff != "" {
		t.Fatalf("b's copy differs from a's checkout (-a +b):\n%s", diff)
	}
	if want := []string{up.ID, up.ID + ".json", "current"}; !slices.Equal(listing(t, c.b.sourceDir(id)), want) {
		t.Fatalf("b's source dir holds %v, want %v", listing(t, c.b.sourceDir(id)), want)
	}
	if cur, err := c.b.svc.Current(id); err != nil || cur != got {
		t.Fatalf("Current on b = %+v, %v; want %+v", cur, err, got)
	}
	if want := []string{source.BlobName(id, up.ID)}; !slices.Equal(c.b.peers.names(), want) {
		t.Fatalf("b asked for %v, want %v", c.b.peers.names(), want)
	}

	// Again, on either server: nothing to fetch.
	if again, err := c.b.svc.Ensure(c.ctx, id); err != nil || again != got {
		t.Fatalf("Ensure on b again = %+v, %v", again, err)
	}
	if mine, err := c.a.svc.Ensure(c.ctx, id); err != nil || mine.ID != up.ID {
		t.Fatalf("Ensure on a = %+v, %v", mine, err)
	}
	if len(c.b.peers.names()) != 1 || len(c.a.peers.names()) != 0 {
		t.Fatalf("asked again: a %v, b %v", c.a.peers.names(), c.b.peers.names())
	}
	// Packing left nothing in either work dir.
	for _, n := range []*node{c.a, c.b} {
		if got := listing(t, filepath.Join(n.work, "apps")); !slices.Equal(got, []string{id}) {
			t.Fatalf("%s/apps holds %v", n.work, got)
		}
	}
}

// OpenBlob serves a whole checkout that is here, and nothing else: any
// other name is "not found" (fs.ErrNotExist), never a path.
func TestOpenBlob(t *testing.T) {
	c := newCluster(t, source.Limits{})
	id := c.app(t, "Served")
	up := c.a.upload(t, c, id, sampleApp(t, "v1"))
	name := source.BlobName(id, up.ID)
	if len(name) > 128 || raftstore.ValidBlobName(name) != nil {
		t.Fatalf("blob name %q: %v", name, raftstore.ValidBlobName(name))
	}

	rc, size, err := c.a.svc.OpenBlob(c.ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(rc)
	if err != nil || int64(len(body)) != size {
		t.Fatalf("read %d bytes of %d: %v", len(body), size, err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	// It is a tar.gz of the checkout, whatever reads it.
	dest := filepath.Join(t.TempDir(), "x")
	if _, err := source.Extract(c.ctx, bytes.NewReader(body), source.TarGz, dest, source.Limits{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tree(t, up.Dir), tree(t, dest)); diff != "" {
		t.Fatalf("the blob differs from the checkout (-checkout +blob):\n%s", diff)
	}

	other := c.app(t, "Other")
	for _, bad := range []string{
		source.BlobName(id, "chk_01JZZZZZZZZZZZZZZZZZZZZZZZ"), // not here
		source.BlobName(other, up.ID),                         // another app
		strings.TrimSuffix(name, ".tar.gz"),
		"artifact-" + strings.TrimPrefix(name, source.BlobPrefix),
		source.BlobPrefix + id + "-..-..-etc.tar.gz",
		source.BlobPrefix + "app_x-" + up.ID + ".tar.gz",
		source.BlobPrefix + id + "-" + strings.ToLower(up.ID) + ".tar.gz",
		"",
	} {
		rc, _, err := c.a.svc.OpenBlob(c.ctx, bad)
		if rc != nil || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("OpenBlob(%q) = %v, %v; want fs.ErrNotExist", bad, rc, err)
		}
	}
	// b has nothing to serve until it fetched the checkout.
	if _, _, err := c.b.svc.OpenBlob(c.ctx, name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("b serves %s before it has it: %v", name, err)
	}
	if _, err := c.b.svc.Ensure(c.ctx, id); err != nil {
		t.Fatal(err)
	}
	if rc, _, err := c.b.svc.OpenBlob(c.ctx, name); err != nil {
		t.Fatalf("b does not serve what it fetched: %v", err)
	} else {
		rc.Close()
	}
}

// A blob the extractor refuses is never installed: nothing lands outside
// the checkout, nothing is left behind, the code says a server sent it.
func TestEnsureRefusesHostileBlobs(t *testing.T) {
	lim := source.Limits{MaxArchiveBytes: 1 << 20, MaxTotalBytes: 4 << 20, MaxFileBytes: 2 << 20, MaxEntries: 100}
	random := make([]byte, 7<<20) // over what 4 MiB in 100 entries packs to
	_, _ = rand.NewChaCha8([32]byte{7}).Read(random)
	cases := []struct {
		name, want string
		blob       []byte
	}{
		{"path traversal", "path traversal", tarGz(t, reg("ok", "x"), reg("../../escape", "pwned"))},
		{"absolute path", "absolute path", tarGz(t, reg("ok", "x"), reg("/tmp/escape", "pwned"))},
		{"symlink out", "outside the checkout", tarGz(t, reg("ok", "x"), member{name: "out", link: "../../../..", typ: tar.TypeSymlink})},
		{"write through a symlink", "symbolic link", tarGz(t, member{name: "d", link: ".", typ: tar.TypeSymlink}, reg("d/escape", "pwned"))},
		{"device", "device", tarGz(t, reg("ok", "x"), member{name: "null", typ: tar.TypeChar})},
		{"huge file", "over the limit", tarGz(t, member{name: "zeros", typ: tar.TypeReg, size: 8 << 20, r: io.LimitReader(zeroes{}, 8<<20)})},
		{"decompression bomb", "ratio", tarGz(t, zeroFile("a", 1<<20), zeroFile("b", 1<<20), zeroFile("c", 1<<20))},
		{"huge blob", "too large", random},
		{"not an archive", "refused", []byte("these are not the bytes you are looking for")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, lim)
			id := c.app(t, "Hostile")
			up := c.a.upload(t, c, id, sampleApp(t, "v1"))
			c.b.peers.serve = map[string][]byte{source.BlobName(id, up.ID): tc.blob}
			_, err := c.b.svc.Ensure(c.ctx, id)
			e := wantCode(t, "Ensure", err, errcode.AdapterFailed)
			if !strings.Contains(e.Message, tc.want) || e.Remedy == "" {
				t.Fatalf("refusal %q (remedy %q), want it to say %q", e.Message, e.Remedy, tc.want)
			}
			for p, what := range tree(t, c.b.work) {
				if !strings.HasPrefix(what, "dir ") {
					t.Errorf("b's work dir holds %s: %s", p, what)
				}
			}
			if got := listing(t, c.b.sourceDir(id)); len(got) != 0 {
				t.Fatalf("b's source dir holds %v", got)
			}
			if _, err := c.b.svc.Current(id); errcode.CodeOf(err) != errcode.NotFound {
				t.Fatalf("Current on b after a refusal: %v", err)
			}
		})
	}
}

func zeroFile(name string, size int64) member {
	return member{name: name, typ: tar.TypeReg, size: size, r: io.LimitReader(zeroes{}, size)}
}

type zeroes struct{}

func (zeroes) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// A newer upload while an older checkout is being fetched wins: the older
// one is never installed over it.
func TestEnsureNeverReplacesANewerCheckout(t *testing.T) {
	t.Run("upload on the fetching server", func(t *testing.T) {
		c := newCluster(t, source.Limits{})
		id := c.app(t, "Race")
		old := c.a.upload(t, c, id, sampleApp(t, "old"))
		c.b.peers.gate, c.b.peers.started = make(chan struct{}), make(chan string, 1)
		type result struct {
			co  source.Checkout
			err error
		}
		done := make(chan result, 1)
		go func() {
			co, err := c.b.svc.Ensure(c.ctx, id)
			done <- result{co, err}
		}()
		if name := <-c.b.peers.started; name != source.BlobName(id, old.ID) {
			t.Fatalf("b fetches %s", name)
		}
		newer := c.b.upload(t, c, id, sampleApp(t, "new")) // while the fetch is under way
		close(c.b.peers.gate)
		r := <-done
		if r.err != nil || r.co.ID != newer.ID {
			t.Fatalf("Ensure = %+v, %v; want the newer checkout %s", r.co, r.err, newer.ID)
		}
		if want := []string{newer.ID, newer.ID + ".json", "current"}; !slices.Equal(listing(t, c.b.sourceDir(id)), want) {
			t.Fatalf("b's source dir holds %v, want %v", listing(t, c.b.sourceDir(id)), want)
		}
		if b, _ := os.ReadFile(filepath.Join(c.b.sourceDir(id), "current", "web", "index.html")); string(b) != "<h1>new</h1>\n" {
			t.Fatalf("b's current index.html = %q", b)
		}
	})
	t.Run("upload on another server", func(t *testing.T) {
		c := newCluster(t, source.Limits{})
		id := c.app(t, "Race")
		old := c.a.upload(t, c, id, sampleApp(t, "old"))
		c.b.peers.gate, c.b.peers.started = make(chan struct{}), make(chan string, 2)
		done := make(chan error, 1)
		var got source.Checkout
		go func() {
			var err error
			got, err = c.b.svc.Ensure(c.ctx, id)
			done <- err
		}()
		<-c.b.peers.started
		newer := c.a.upload(t, c, id, sampleApp(t, "new"))
		close(c.b.peers.gate) // the old one arrives after the record moved on
		if err := <-done; err != nil || got.ID != newer.ID {
			t.Fatalf("Ensure = %+v, %v; want %s", got, err, newer.ID)
		}
		if want := []string{source.BlobName(id, old.ID), source.BlobName(id, newer.ID)}; !slices.Equal(c.b.peers.names(), want) {
			t.Fatalf("b asked for %v, want %v", c.b.peers.names(), want)
		}
		if want := []string{newer.ID, newer.ID + ".json", "current"}; !slices.Equal(listing(t, c.b.sourceDir(id)), want) {
			t.Fatalf("b's source dir holds %v, want %v", listing(t, c.b.sourceDir(id)), want)
		}
	})
}

// Many Ensure calls at once fetch the checkout once and agree.
func TestConcurrentEnsure(t *testing.T) {
	c := newCluster(t, source.Limits{})
	id := c.app(t, "Crowd")
	up := c.a.upload(t, c, id, sampleApp(t, "v1"))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			co, err := c.b.svc.Ensure(c.ctx, id)
			if err == nil && co.ID != up.ID {
				err = fmt.Errorf("got checkout %s", co.ID)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.b.peers.names()); n != 1 {
		t.Fatalf("fetched %d times", n)
	}
}

// An archive on no server is NOT_FOUND with a remedy; so is an app with
// no source. Servers that cannot answer are ADAPTER_UNAVAILABLE.
func TestEnsureWhenTheCheckoutIsNowhere(t *testing.T) {
	c := newCluster(t, source.Limits{})
	id := c.app(t, "Lost")
	c.a.upload(t, c, id, sampleApp(t, "v1"))
	if err := c.a.svc.Remove(c.ctx, id); err != nil { // the only copy is gone
		t.Fatal(err)
	}
	_, err := c.b.svc.Ensure(c.ctx, id)
	if e := wantCode(t, "on no server", err, errcode.NotFound); !strings.Contains(e.Remedy, "upload the source again") {
		t.Fatalf("remedy %q", e.Remedy)
	}
	_, err = c.a.svc.Ensure(c.ctx, id)
	wantCode(t, "on no server, asked by the server that lost it", err, errcode.NotFound)

	// A single server has no one to ask.
	single, err := source.New(source.Deps{WorkDir: t.TempDir(), Apps: c.apps, Policy: openPolicy{}})
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	_, err = single.Ensure(c.ctx, id)
	wantCode(t, "without peers", err, errcode.NotFound)

	bare := c.app(t, "Bare")
	_, err = c.b.svc.Ensure(c.ctx, bare)
	wantCode(t, "no source", err, errcode.NotFound)
	_, err = c.b.svc.Ensure(c.ctx, "app_01JZZZZZZZZZZZZZZZZZZZZZZZ")
	wantCode(t, "no app", err, errcode.NotFound)

	if got := listing(t, c.b.sourceDir(id)); len(got) != 0 {
		t.Fatalf("b's source dir holds %v", got)
	}
}

func TestEnsureWhenPeersAreDown(t *testing.T) {
	c := newCluster(t, source.Limits{})
	id := c.app(t, "Cut off")
	c.a.upload(t, c, id, sampleApp(t, "v1"))
	c.b.peers.down = errors.New("dial tcp 10.0.0.1:7000: connect: connection refused")
	_, err := c.b.svc.Ensure(c.ctx, id)
	if e := wantCode(t, "peers down", err, errcode.AdapterUnavailable); !strings.Contains(e.Remedy, "retry") {
		t.Fatalf("remedy %q", e.Remedy)
	}
	if got := listing(t, c.b.sourceDir(id)); len(got) != 0 {
		t.Fatalf("b's source dir holds %v", got)
	}
	c.b.peers.down = nil // they answer again
	if co, err := c.b.svc.Ensure(c.ctx, id); err != nil || co.ID != c.record(t, id).CheckoutID {
		t.Fatalf("Ensure once peers answer = %+v, %v", co, err)
	}
}

// SyncCheckouts fetches what this server lacks, leaves what it has, and
// goes on past an app whose checkout is nowhere.
func TestSyncCheckouts(t *testing.T) {
	c := newCluster(t, source.Limits{})
	lost := c.app(t, "Lost") // first in ID order
	fetched := c.app(t, "Fetched")
	kept := c.app(t, "Kept")
	bare := c.app(t, "Bare")
	c.a.upload(t, c, lost, sampleApp(t, "lost"))
	if err := c.a.svc.Remove(c.ctx, lost); err != nil {
		t.Fatal(err)
	}
	want := c.a.upload(t, c, fetched, sampleApp(t, "fetched"))
	mine := c.b.upload(t, c, kept, sampleApp(t, "kept"))
	keptInfo, err := os.Stat(mine.Dir)
	if err != nil {
		t.Fatal(err)
	}

	if err := c.b.svc.SyncCheckouts(c.ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := c.b.svc.Current(fetched); err != nil || got.ID != want.ID {
		t.Fatalf("b's checkout of the fetched app = %+v, %v; want %s", got, err, want.ID)
	}
	if got, err := c.b.svc.Current(kept); err != nil || got.ID != mine.ID {
		t.Fatalf("b's own checkout = %+v, %v", got, err)
	}
	if info, err := os.Stat(mine.Dir); err != nil || !os.SameFile(info, keptInfo) {
		t.Fatalf("b's own checkout was replaced: %v", err)
	}
	if _, err := c.b.svc.Current(bare); errcode.CodeOf(err) != errcode.NotFound {
		t.Fatalf("an app without a source: %v", err)
	}
	wantAsked := []string{source.BlobName(lost, c.record(t, lost).CheckoutID), source.BlobName(fetched, want.ID)}
	if !slices.Equal(c.b.peers.names(), wantAsked) {
		t.Fatalf("b asked for %v, want %v", c.b.peers.names(), wantAsked)
	}
	if log := c.b.log.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, lost) {
		t.Fatalf("the lost app's failure was not logged:\n%s", log)
	}

	// Again: only the lost app is still missing.
	if err := c.b.svc.SyncCheckouts(c.ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.b.peers.names()[len(wantAsked):]; !slices.Equal(got, wantAsked[:1]) {
		t.Fatalf("the second sync asked for %v", got)
	}
	// a lacks the app uploaded to b.
	if err := c.a.svc.SyncCheckouts(c.ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := c.a.svc.Current(kept); err != nil || got.ID != mine.ID {
		t.Fatalf("a's checkout of b's upload = %+v, %v", got, err)
	}

	ctx, cancel := context.WithCancel(c.ctx)
	cancel()
	if err := c.b.svc.SyncCheckouts(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("SyncCheckouts with an ended context: %v", err)
	}
	single, err := source.New(source.Deps{WorkDir: t.TempDir(), Apps: c.apps, Policy: openPolicy{}})
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	if err := single.SyncCheckouts(c.ctx); err == nil {
		t.Fatal("SyncCheckouts without a store did not fail")
	}
}
