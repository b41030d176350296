package backups_test

import (
	"context"
	"io/fs"
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
	"github.com/svchost/svc/internal/backups"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/idle"
	"github.com/svchost/svc/internal/security"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/internal/volumes"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

var (
	ctx    = actor.With(context.Background(), actor.Actor{Kind: authz.KindUser, ID: "usr_1"})
	member = authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: "usr_1", UserID: "usr_1"}}
)

// dirRepo stands for the backup repository in these tests of the
// service's rules (internal/backuprepo has its own, over real storage; the
// end-to-end test runs the two together): a backup is a copy of each
// part's tree under dir/<backup>/<part>. broken makes Verify report a
// backup incomplete; fail makes Write fail.
type dirRepo struct {
	dir    string
	mu     sync.Mutex
	broken map[string]bool
	fail   error
	// written are the part names of each backup written.
	written map[string][]string
}

func (d *dirRepo) parts(t *testing.T, id string) []string {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.written[id]
}

var _ backups.Repo = (*dirRepo)(nil)

func (d *dirRepo) Write(_ context.Context, id string, parts []backups.Part) (backups.Stored, error) {
	if d.fail != nil {
		return backups.Stored{}, d.fail
	}
	var n int64
	var names []string
	for _, p := range parts {
		if p.Hold != nil { // as the repository does
			release, err := p.Hold(context.Background())
			if err != nil {
				return backups.Stored{}, err
			}
			defer release()
		}
		if err := copyTree(p.Dir, filepath.Join(d.dir, id, filepath.FromSlash(p.Name))); err != nil {
			return backups.Stored{}, err
		}
		n += treeSize(p.Dir)
		names = append(names, p.Name)
	}
	d.mu.Lock()
	if d.written == nil {
		d.written = map[string][]string{}
	}
	d.written[id] = names
	d.mu.Unlock()
	return backups.Stored{SizeBytes: n, PlainBytes: n}, nil
}

func (d *dirRepo) Verify(_ context.Context, id string) []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := os.Stat(filepath.Join(d.dir, id)); err != nil {
		return []error{errcode.New(errcode.NotFound, "no backup %s", id)}
	}
	if d.broken[id] {
		return []error{errcode.New(errcode.BackupIncomplete, "backup %s: chunk 3 of volume data does not match its hash", id)}
	}
	return nil
}

func (d *dirRepo) Restore(ctx context.Context, id string, targets map[string]string) error {
	if errs := d.Verify(ctx, id); len(errs) > 0 {
		return errs[0]
	}
	for part, target := range targets {
		if err := os.RemoveAll(target); err != nil {
			return err
		}
		if err := copyTree(filepath.Join(d.dir, id, filepath.FromSlash(part)), target); err != nil {
			return err
		}
	}
	return nil
}

func (d *dirRepo) Delete(_ context.Context, id string) error {
	return os.RemoveAll(filepath.Join(d.dir, id))
}

func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if e.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	})
}

func treeSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// host keeps volumes in a directory and records what the service asked
// of the runtime and the scheduler.
type host struct {
	dir       string
	mu        sync.Mutex
	paused    int
	resumed   int
	restarted []string
	handed    []string
	// unpausable are the runtime's refusals to pause apps, by app ID.
	unpausable map[string]error
	// live are the apps whose runtime cannot pause them (Nomad's).
	live map[string]bool
}

var (
	_ backups.Data   = (*host)(nil)
	_ backups.Runner = (*host)(nil)
)

func (h *host) VolumePath(id string) string { return filepath.Join(h.dir, id, "data") }

func (h *host) HandOver(_ context.Context, _, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handed = append(h.handed, id)
	return nil
}

func (h *host) CanQuiesce(appID string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unpausable[appID]
}

func (h *host) Quiesce(_ context.Context, appID string) (func(), string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.unpausable[appID]; err != nil {
		return nil, "", err
	}
	if h.live[appID] {
		return func() {}, "live", nil
	}
	h.paused++
	return func() { h.mu.Lock(); h.resumed++; h.mu.Unlock() }, "paused", nil
}

// node stands for a runtime that keeps apps' volumes on another machine
// and copies them (Nomad's, through the scheduler): the volumes of the
// apps in remote are directories dir/<app>/<volume>. It records each
// copy, and what the directory a copy in came from held.
type node struct {
	dir    string
	mu     sync.Mutex
	remote map[string]bool
	copies []string
	// staged is the content of sub/file in each copy in's source.
	staged []string
}

var _ backups.Remote = (*node)(nil)

func (n *node) path(appID, volume string) string { return filepath.Join(n.dir, appID, volume) }

func (n *node) CopiesVolumes(appID string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.remote[appID]
}

func (n *node) CopyVolumeOut(_ context.Context, appID, volume, dst string) error {
	n.mu.Lock()
	n.copies = append(n.copies, "out "+appID+" "+volume)
	n.mu.Unlock()
	return copyTree(n.path(appID, volume), dst)
}

func (n *node) CopyVolumeIn(_ context.Context, appID, volume, src string) error {
	b, _ := os.ReadFile(filepath.Join(src, "sub", "file"))
	n.mu.Lock()
	n.copies = append(n.copies, "in "+appID+" "+volume)
	n.staged = append(n.staged, string(b))
	n.mu.Unlock()
	if err := os.RemoveAll(n.path(appID, volume)); err != nil {
		return err
	}
	return copyTree(src, n.path(appID, volume))
}

// put writes sub/file into an app's volume on the node.
func (n *node) put(t *testing.T, appID, volume, content string) {
	t.Helper()
	dir := filepath.Join(n.path(appID, volume), "sub")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (n *node) get(t *testing.T, appID, volume string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.path(appID, volume), "sub", "file"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (h *host) Restart(_ context.Context, appID string) (apps.App, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.restarted = append(h.restarted, appID)
	return apps.App{}, nil
}

type fixture struct {
	store *raftstore.Store
	svc   *backups.Service
	vols  *volumes.Service
	apps  *apps.Service
	specs *spec.Service
	repo  *dirRepo
	host  *host
	node  *node
	// remoteStaging is where volumes copied from the node are staged.
	remoteStaging string
	now           time.Time
	mu            sync.Mutex
}

func newFixture(t *testing.T, opts ...func(*backups.Deps)) *fixture {
	t.Helper()
	tables := append([]raftstore.Def{apps.Apps, volumes.Volumes, idle.Activities, security.Results, backups.Backups, audit.Entries, events.Events, events.Cursors, spec.Revisions, spec.Heads}, identity.Tables()...)
	f := &fixture{store: raftstoretest.Open(t, tables...), repo: &dirRepo{dir: t.TempDir(), broken: map[string]bool{}},
		host: &host{dir: t.TempDir(), live: map[string]bool{}}, node: &node{dir: t.TempDir(), remote: map[string]bool{}},
		remoteStaging: t.TempDir(), now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	now := func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); f.now = f.now.Add(time.Second); return f.now }
	f.vols = volumes.NewService(f.store, now, nil)
	f.apps = apps.NewService(f.store, now)
	f.specs = spec.NewService(f.store, now)
	d := backups.Deps{Store: f.store, Repo: func() (backups.Repo, error) { return f.repo, nil },
		Data: f.host, Runner: f.host, Volumes: f.vols, Now: now,
		Installation: f.store, Dirs: map[string]string{"keyring": t.TempDir()}, Staging: t.TempDir(),
		Remote: f.node, RemoteStaging: f.remoteStaging}
	for _, o := range opts {
		o(&d)
	}
	f.svc = backups.New(d)
	return f
}

// app makes an app with a volume "data" holding one file.
func (f *fixture) app(t *testing.T, name, content string) (appID, volumeID string) {
	t.Helper()
	a, err := f.apps.Create(ctx, member, apps.New{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := spec.Parse([]byte("workloads:\n  web: {primary: true, build: {kind: static}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.specs.Create(ctx, a.ID, doc); err != nil {
		t.Fatal(err)
	}
	c, err := f.vols.Create(ctx, member, a.ID, volumes.Request{Name: "data", Path: "/data"})
	if err != nil {
		t.Fatal(err)
	}
	f.write(t, *c.Volume.ID, content)
	return a.ID, *c.Volume.ID
}

func (f *fixture) write(t *testing.T, volumeID, content string) {
	t.Helper()
	dir := f.host.VolumePath(volumeID)
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "file"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) read(t *testing.T, volumeID string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.host.VolumePath(volumeID), "sub", "file"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// run runs the backups' leader loop until cond holds.
func (f *fixture) run(t *testing.T, what string, cond func() bool) {
	t.Helper()
	loop, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = f.svc.Run(loop); close(done) }()
	defer func() { stop(); <-done }()
	end := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) events(name string) []events.Event {
	items, _ := events.Events.List(f.store.Read(), raftstore.Query{})
	var out []events.Event
	for _, it := range items {
		if it.Value.Type == name {
			out = append(out, it.Value)
		}
	}
	return out
}

// TestBackupTakenVerifiedRestored: a backup asked for is taken by the
// runner with the app paused (backup.completed with its size); verify
// stamps it; the data changed and the backup restored: the old data is
// back, handed to the app's user, the app restarted, with
// app.data_restored and backup.restored.
func TestBackupTakenVerifiedRestored(t *testing.T) {
	f := newFixture(t)
	appID, vol := f.app(t, "Notes", "version one")
	b, err := f.svc.Create(ctx, backups.Request{AppID: appID})
	if err != nil || b.State != backups.StatePending || b.Kind != backups.KindRolling || len(b.Volumes) != 1 || b.Volumes[0].ID != vol {
		t.Fatalf("create = %+v, %v", b, err)
	}
	f.run(t, "the backup taken", func() bool { got, _ := f.svc.Get(b.ID); return got.State == backups.StateCompleted })
	got, _ := f.svc.Get(b.ID)
	if got.SizeBytes != int64(len("version one")) || got.Consistency != "paused" || got.CompletedAt == nil || f.host.paused != 1 || f.host.resumed != 1 {
		t.Fatalf("taken = %+v (paused %d, resumed %d)", got, f.host.paused, f.host.resumed)
	}
	if ev := f.events("backup.completed"); len(ev) != 1 || ev[0].Data["backup_id"] != b.ID || ev[0].Data["kind"] != "rolling" {
		t.Fatalf("backup.completed = %+v", ev)
	}

	v, err := f.svc.Verify(ctx, b.ID)
	if err != nil || !v.OK || len(v.Problems) != 0 || v.Backup.VerifiedAt == nil {
		t.Fatalf("verify = %+v, %v", v, err)
	}

	f.write(t, vol, "version two")
	if _, err := f.svc.RestoreApp(ctx, appID, b.ID); err != nil {
		t.Fatal(err)
	}
	f.svc.Wait()
	if got := f.read(t, vol); got != "version one" {
		t.Fatalf("after the restore the volume holds %q", got)
	}
	if !slices.Equal(f.host.restarted, []string{appID}) || !slices.Equal(f.host.handed, []string{vol}) {
		t.Errorf("restarted %v, handed over %v", f.host.restarted, f.host.handed)
	}
	if ev := f.events("app.data_restored"); len(ev) != 1 || ev[0].App == nil || ev[0].App.ID != appID {
		t.Errorf("app.data_restored = %+v", ev)
	}
	if ev := f.events("backup.restored"); len(ev) != 1 {
		t.Errorf("backup.restored = %+v", ev)
	}

	// Another app's backup is not this app's to restore.
	other, _ := f.app(t, "Other", "x")
	if _, err := f.svc.RestoreApp(ctx, other, b.ID); !errcode.Has(err, errcode.NotFound) {
		t.Errorf("restore another app's backup: %v", err)
	}
}

// TestIncompleteBackupIsRefusedBeforeAnythingChanges: verify reports the
// problem and leaves verified_at unset; restore refuses with
// BACKUP_INCOMPLETE and the live data, the app and the events are as
// they were.
func TestIncompleteBackupIsRefusedBeforeAnythingChanges(t *testing.T) {
	f := newFixture(t)
	appID, vol := f.app(t, "Notes", "old")
	b, err := f.svc.Create(ctx, backups.Request{AppID: appID})
	if err != nil {
		t.Fatal(err)
	}
	f.run(t, "the backup taken", func() bool { got, _ := f.svc.Get(b.ID); return got.State == backups.StateCompleted })
	f.repo.broken[b.ID] = true
	v, err := f.svc.Verify(ctx, b.ID)
	if err != nil || v.OK || len(v.Problems) != 1 || v.Problems[0].Code != errcode.BackupIncomplete || v.Backup.VerifiedAt != nil {
		t.Fatalf("verify = %+v, %v", v, err)
	}
	f.write(t, vol, "live")
	_, err = f.svc.RestoreApp(ctx, appID, b.ID)
	if !errcode.Has(err, errcode.BackupIncomplete) {
		t.Fatalf("restore = %v, want BACKUP_INCOMPLETE", err)
	}
	f.svc.Wait()
	if got := f.read(t, vol); got != "live" || len(f.host.restarted) != 0 || f.host.paused != 1 || len(f.events("backup.restored")) != 0 {
		t.Errorf("after the refusal: %q, restarted %v, paused %d", got, f.host.restarted, f.host.paused)
	}
	// A runtime that cannot pause the app: refused before the answer
	// (not a 202 followed by nothing), the data as it was.
	f.repo.broken[b.ID] = false
	f.host.mu.Lock()
	f.host.unpausable = map[string]error{appID: errcode.New(errcode.PlanCapabilityUnsupp, "app %s runs on a runtime whose volumes are elsewhere", appID)}
	f.host.mu.Unlock()
	if _, err := f.svc.RestoreApp(ctx, appID, b.ID); !errcode.Has(err, errcode.PlanCapabilityUnsupp) {
		t.Fatalf("restore on a runtime that cannot pause = %v, want PLAN_CAPABILITY_UNSUPPORTED", err)
	}
	f.svc.Wait()
	if got := f.read(t, vol); got != "live" || len(f.events("backup.restored")) != 0 || len(f.events("backup.failed")) != 0 {
		t.Errorf("after the refusal: %q", got)
	}
	f.host.mu.Lock()
	f.host.unpausable = nil
	f.host.mu.Unlock()
	// A backup gone from the storage is incomplete too.
	if err := f.repo.Delete(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if v, _ := f.svc.Verify(ctx, b.ID); v.OK || v.Problems[0].Code != errcode.BackupIncomplete {
		t.Errorf("verify of a backup the storage lost = %+v", v)
	}
}

// TestBundleHoldsTheStoreAndEveryVolume: a bundle (no app_id) saves the
// store with its digest and holds every volume, pausing each app once
// while its volume is read; a volume of an app whose runtime keeps
// volumes elsewhere is left out and listed as skipped, not failing the
// bundle.
func TestBundleHoldsTheStoreAndEveryVolume(t *testing.T) {
	f := newFixture(t)
	a, va := f.app(t, "Notes", "notes")
	n, vn := f.app(t, "Nomadic", "elsewhere")
	f.host.mu.Lock()
	f.host.unpausable = map[string]error{n: errcode.New(errcode.PlanCapabilityUnsupp, "app %s runs on nomad", n)}
	f.host.mu.Unlock()
	b, err := f.svc.Create(ctx, backups.Request{})
	if err != nil || b.Kind != backups.KindDR || b.AppID != nil || len(b.Volumes) != 2 {
		t.Fatalf("create = %+v, %v", b, err)
	}
	got := f.taken(t, b.ID)
	if got.State != backups.StateCompleted || got.Store == nil || len(got.Store.Digest) != 64 || got.Store.Applied == 0 {
		t.Fatalf("bundle = %+v", got)
	}
	if len(got.Skipped) != 1 || got.Skipped[0].ID != vn || got.Skipped[0].AppID != n {
		t.Errorf("skipped = %+v, want the volume of %s", got.Skipped, n)
	}
	// (The runner may have taken app a's rolling backup since: a pause each.)
	if f.host.paused < 1 || f.host.resumed != f.host.paused {
		t.Errorf("paused %d, resumed %d times; want app %s paused and resumed", f.host.paused, f.host.resumed, a)
	}
	parts := f.repo.parts(t, b.ID)
	if !slices.Contains(parts, "store") || !slices.Contains(parts, "keyring") || !slices.Contains(parts, "volume/"+va) || slices.Contains(parts, "volume/"+vn) {
		t.Errorf("the bundle holds %v", parts)
	}
	if ev := f.events("backup.completed"); len(ev) == 0 || ev[0].App != nil || ev[0].Data["kind"] != "dr_bundle" || ev[0].Data["backup_id"] != b.ID {
		t.Errorf("backup.completed = %+v", ev)
	}
	if _, err := f.svc.Restore(ctx, b.ID); !errcode.Has(err, errcode.PlanCapabilityUnsupp) {
		t.Errorf("a bundle restored in place: %v", err)
	}
}

// TestScheduledBundlesAndTheirRetention: with BundleEvery set, the runner
// takes a scheduled bundle and no second one within the interval.
// ExpiredBundles keeps the newest completed scheduled bundles (at least
// one) and drops failed ones after a day.
func TestScheduledBundlesAndTheirRetention(t *testing.T) {
	f := newFixture(t, func(d *backups.Deps) { d.BundleEvery, d.BundleKeep = time.Hour, 2 })
	f.app(t, "Notes", "x")
	f.run(t, "a scheduled bundle taken", func() bool {
		list, _ := f.svc.List(backups.Filter{Kind: backups.KindDR})
		return len(list) == 1 && list[0].State == backups.StateCompleted
	})
	f.run(t, "the runner again", func() bool { return true })
	list, _ := f.svc.List(backups.Filter{Kind: backups.KindDR})
	if len(list) != 1 || !list[0].Scheduled || list[0].Store == nil {
		t.Fatalf("bundles = %+v", list)
	}

	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(id, state string, ago time.Duration) backups.Backup {
		return backups.Backup{ID: id, Kind: backups.KindDR, State: state, Scheduled: true, CreatedAt: now.Add(-ago)}
	}
	all := []backups.Backup{at("b1", "completed", 72*time.Hour), at("b2", "completed", 48*time.Hour), at("b3", "completed", 24*time.Hour),
		at("b4", "failed", 30*time.Hour), at("b5", "failed", time.Hour), at("b6", "running", 10*time.Minute)}
	if got := backups.ExpiredBundles(all, 2, now); !slices.Equal(got, []string{"b1", "b4"}) {
		t.Errorf("keep 2: expired %v, want b1 and b4", got)
	}
	if got := backups.ExpiredBundles(all, 0, now); !slices.Equal(got, []string{"b2", "b1", "b4"}) {
		t.Errorf("keep 0 (at least one kept): expired %v", got)
	}
}

// nomadApp makes an app with a volume "data" that a runtime keeps on
// another machine (the node) and copies, holding content there; its
// directory on this server holds something else, which no backup may
// read.
func (f *fixture) nomadApp(t *testing.T, name, content string) (appID, volumeID string) {
	t.Helper()
	appID, volumeID = f.app(t, name, "not the volume: the node has it")
	f.host.mu.Lock()
	f.host.live[appID] = true
	f.host.mu.Unlock()
	f.node.mu.Lock()
	f.node.remote[appID] = true
	f.node.mu.Unlock()
	f.node.put(t, appID, "data", content)
	return appID, volumeID
}

// taken runs the backups' leader loop until the backup has ended, and
// returns it.
func (f *fixture) taken(t *testing.T, id string) backups.Backup {
	t.Helper()
	f.run(t, "backup "+id+" taken", func() bool {
		got, _ := f.svc.Get(id)
		return got.State != backups.StatePending && got.State != backups.StateRunning
	})
	got, _ := f.svc.Get(id)
	return got
}

// stored is sub/file of a volume's part in a backup the repository holds.
func (f *fixture) stored(t *testing.T, backupID, volumeID string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.repo.dir, backupID, "volume", volumeID, "sub", "file"))
	if err != nil {
		t.Fatalf("the backup holds no volume %s: %v", volumeID, err)
	}
	return string(b)
}

// staged lists what is left in the remote staging directory.
func (f *fixture) staged(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(f.remoteStaging)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestRemoteVolumeBackupAndRestore: the backup of an app whose runtime
// keeps its volume on another machine (Nomad) holds the data copied from
// there (not this server's directory), says it was copied live, and
// leaves nothing staged; a restore checks the backup whole first (a broken
// one is refused and nothing is copied in), restores into staging, copies
// that in (the node holds the backup's data again), restarts the app and
// leaves nothing staged.
func TestRemoteVolumeBackupAndRestore(t *testing.T) {
	f := newFixture(t)
	appID, vol := f.nomadApp(t, "Nomadic", "version one")
	b, err := f.svc.Create(ctx, backups.Request{AppID: appID})
	if err != nil {
		t.Fatal(err)
	}
	got := f.taken(t, b.ID)
	if got.State != backups.StateCompleted || got.Consistency != "live" || got.SizeBytes != int64(len("version one")) {
		t.Fatalf("taken = %+v", got)
	}
	if data := f.stored(t, b.ID, vol); data != "version one" {
		t.Errorf("the backup holds %q, want the node's data", data)
	}
	if left := f.staged(t); len(left) != 0 {
		t.Errorf("left staged: %v", left)
	}
	if f.host.paused != 0 {
		t.Errorf("paused %d times; the runtime cannot pause", f.host.paused)
	}

	f.node.put(t, appID, "data", "version two")
	f.repo.broken[b.ID] = true
	if _, err := f.svc.RestoreApp(ctx, appID, b.ID); !errcode.Has(err, errcode.BackupIncomplete) {
		t.Fatalf("restore of a broken backup = %v, want BACKUP_INCOMPLETE", err)
	}
	f.svc.Wait()
	f.repo.broken[b.ID] = false
	if _, err := f.svc.RestoreApp(ctx, appID, b.ID); err != nil {
		t.Fatal(err)
	}
	f.svc.Wait()
	if data := f.node.get(t, appID, "data"); data != "version one" {
		t.Errorf("after the restore the node holds %q", data)
	}
	f.node.mu.Lock()
	copies, staged := slices.Clone(f.node.copies), slices.Clone(f.node.staged)
	f.node.mu.Unlock()
	if want := []string{"in " + appID + " data"}; !slices.Equal(slices.DeleteFunc(copies, func(c string) bool { return strings.HasPrefix(c, "out ") }), want) ||
		!slices.Equal(staged, []string{"version one"}) {
		t.Errorf("copies %v (staged %q), want one copy in of the restored data", copies, staged)
	}
	if !slices.Equal(f.host.restarted, []string{appID}) || len(f.host.handed) != 0 {
		t.Errorf("restarted %v, handed over %v", f.host.restarted, f.host.handed)
	}
	if ev := f.events("backup.restored"); len(ev) != 1 {
		t.Errorf("backup.restored = %+v", ev)
	}
	if left := f.staged(t); len(left) != 0 {
		t.Errorf("left staged: %v", left)
	}
}

// TestBundleCopiesRemoteVolumes: a bundle holds the volume of an app whose
// runtime copies it from another machine (no longer skipped), as the node
// has it, and says the copy was live.
func TestBundleCopiesRemoteVolumes(t *testing.T) {
	f := newFixture(t)
	_, va := f.app(t, "Notes", "notes")
	_, vn := f.nomadApp(t, "Nomadic", "elsewhere")
	b, err := f.svc.Create(ctx, backups.Request{})
	if err != nil {
		t.Fatal(err)
	}
	got := f.taken(t, b.ID)
	if got.State != backups.StateCompleted || len(got.Skipped) != 0 || got.Consistency != "live" {
		t.Fatalf("bundle = %+v", got)
	}
	if data := f.stored(t, b.ID, vn); data != "elsewhere" {
		t.Errorf("the bundle holds %q of the remote volume, want the node's data", data)
	}
	if data := f.stored(t, b.ID, va); data != "notes" {
		t.Errorf("the bundle holds %q of the local volume", data)
	}
}

// TestDeleteWithBackup: backup=true takes an on_delete backup first and
// app.deleted names it; a backup that fails keeps the app (backup.failed);
// force discards without a copy.
func TestDeleteWithBackup(t *testing.T) {
	f := newFixture(t)
	appID, vol := f.app(t, "Notes", "kept")
	f.repo.fail = errcode.New(errcode.AdapterUnavailable, "backup storage unreachable")
	err := f.svc.DeleteApp(ctx, appID, apps.Decision{Backup: true}, "")
	if !errcode.Has(err, errcode.AdapterUnavailable) || !apps.Exists(f.store.Read(), appID) {
		t.Fatalf("delete with a failing backup = %v; the app must stay", err)
	}
	if ev := f.events("backup.failed"); len(ev) != 1 || ev[0].Data["scheduled"] != false || ev[0].Data["reason"] != "ADAPTER_UNAVAILABLE" {
		t.Errorf("backup.failed = %+v", ev)
	}
	f.repo.fail = nil
	if err := f.svc.DeleteApp(ctx, appID, apps.Decision{Backup: true}, ""); err != nil {
		t.Fatal(err)
	}
	deleted := f.events("app.deleted")
	list, _ := f.svc.List(backups.Filter{AppID: appID, Kind: backups.KindOnDelete})
	var done []backups.Backup
	for _, b := range list {
		if b.State == backups.StateCompleted {
			done = append(done, b)
		}
	}
	if len(deleted) != 1 || len(done) != 1 || deleted[0].Data["backup_id"] != done[0].ID || deleted[0].Data["volumes_discarded"] != false {
		t.Fatalf("app.deleted %+v, on_delete backups %+v", deleted, list)
	}
	if _, err := f.svc.List(backups.Filter{Kind: "weekly"}); !errcode.Has(err, errcode.ValidInvalid) {
		t.Errorf("an unknown kind: %v", err)
	}
	_ = vol

	other, _ := f.app(t, "Scratch", "gone")
	if err := f.svc.DeleteApp(ctx, other, apps.Decision{Force: true}, ""); err != nil {
		t.Fatal(err)
	}
	if ev := f.events("app.deleted"); ev[len(ev)-1].Data["backup_id"] != nil || ev[len(ev)-1].Data["volumes_discarded"] != true {
		t.Errorf("forced app.deleted = %+v", ev[len(ev)-1].Data)
	}
	if err := f.svc.DeleteApp(ctx, "app_none", apps.Decision{Backup: true}, ""); !errcode.Has(err, errcode.NotFound) {
		t.Errorf("delete a missing app: %v", err)
	}
}

// TestRollingBackupsScheduledAndFailedOnes: the runner schedules a rolling
// backup of every app with volumes (scheduled: true), and one that fails
// emits backup.failed with scheduled true.
func TestRollingBackupsScheduledAndFailedOnes(t *testing.T) {
	f := newFixture(t)
	appID, _ := f.app(t, "Notes", "x")
	f.repo.fail = errcode.New(errcode.AdapterFailed, "the bucket refused the write")
	f.run(t, "a scheduled backup that fails", func() bool { return len(f.events("backup.failed")) == 1 })
	ev := f.events("backup.failed")[0]
	if ev.Data["scheduled"] != true || ev.App == nil || ev.App.ID != appID || !strings.Contains(ev.Data["message"].(string), "refused") {
		t.Errorf("backup.failed = %+v", ev)
	}
	list, _ := f.svc.List(backups.Filter{AppID: appID})
	if len(list) != 1 || !list[0].Scheduled || list[0].State != backups.StateFailed || list[0].Error == nil || list[0].Error.Code != "ADAPTER_FAILED" {
		t.Errorf("backups = %+v", list)
	}
	if _, err := f.svc.Create(ctx, backups.Request{AppID: "app_none"}); !errcode.Has(err, errcode.NotFound) {
		t.Errorf("a backup of no app: %v", err)
	}
	bare, err := f.apps.Create(ctx, member, apps.New{Name: "Bare"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Create(ctx, backups.Request{AppID: bare.ID}); !errcode.Has(err, errcode.StateInvalid) {
		t.Errorf("a backup of an app without volumes: %v", err)
	}
}

// TestExpiredKeepsHourlyAndDaily: retention keeps the newest completed
// rolling backup of each of the last 24 hours and of each of the last 7
// days, drops the rest and failed ones after a day, and never touches
// other kinds or running ones.
func TestExpiredKeepsHourlyAndDaily(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 30, 0, 0, time.UTC)
	var list []backups.Backup
	add := func(id string, age time.Duration, kind, state string) {
		list = append(list, backups.Backup{ID: id, Kind: kind, State: state, CreatedAt: now.Add(-age)})
	}
	// Two in this hour: the older goes.
	add("h0-old", 20*time.Minute, backups.KindRolling, backups.StateCompleted)
	add("h0-new", 10*time.Minute, backups.KindRolling, backups.StateCompleted)
	// One an hour for 10 days back.
	for h := 1; h < 240; h++ {
		add("h"+time.Duration(h).String(), time.Duration(h)*time.Hour, backups.KindRolling, backups.StateCompleted)
	}
	add("failed-new", time.Hour, backups.KindRolling, backups.StateFailed)
	add("failed-old", 30*time.Hour, backups.KindRolling, backups.StateFailed)
	add("running", 300*time.Hour, backups.KindRolling, backups.StateRunning)
	add("on-delete", 300*time.Hour, backups.KindOnDelete, backups.StateCompleted)
	expired := backups.Expired(list, now)
	gone := map[string]bool{}
	for _, id := range expired {
		gone[id] = true
	}
	kept := 0
	for _, b := range list {
		if !gone[b.ID] && b.Kind == backups.KindRolling && b.State == backups.StateCompleted {
			kept++
		}
	}
	// 24 hourly (this hour and 23 before) and the newest of each of the
	// last 7 days, of which today's and yesterday's (23:30) are among the
	// hourly ones.
	if kept != 24+5 {
		t.Errorf("kept %d completed rolling backups, want 29", kept)
	}
	for id, want := range map[string]bool{"h0-old": true, "h0-new": false, "failed-new": false, "failed-old": true, "running": false, "on-delete": false} {
		if gone[id] != want {
			t.Errorf("%s expired %v, want %v", id, gone[id], want)
		}
	}
	if again := backups.Expired(slices.DeleteFunc(list, func(b backups.Backup) bool { return gone[b.ID] }), now); len(again) != 0 {
		t.Errorf("expiring again removes %v", again)
	}
}

// TestBackupKey: the installation's key is made once (0600) and read back
// the same; a file that is not an age identity is refused; recipients
// parse or are refused by number.
func TestBackupKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyring", "backup-key")
	a, err := backups.LoadIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := backups.LoadIdentity(path)
	if err != nil || b.String() != a.String() {
		t.Fatalf("read back %v, %v", b, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	if err := os.WriteFile(path, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := backups.LoadIdentity(path); err == nil {
		t.Error("a broken key file was taken")
	}
	if rs, err := backups.ParseRecipients([]string{a.Recipient().String()}); err != nil || len(rs) != 1 {
		t.Errorf("recipients %v, %v", rs, err)
	}
	if _, err := backups.ParseRecipients([]string{a.Recipient().String(), "age1nope"}); !errcode.Has(err, errcode.ValidInvalid) || !strings.Contains(err.Error(), "recipient 2") {
		t.Errorf("a bad recipient: %v", err)
	}
}

// TestRequireFinalCopy: under require_backup_before_destroy a kept volume
// may be discarded only while a completed backup holds it as its app left
// it. A volume kept without one (its app deleted before the policy, with
// no final copy taken), with only a rolling backup from before the app
// went, is refused; a bundle taken since allows it, as does an app's
// on_delete backup; without the guard nothing is asked.
func TestRequireFinalCopy(t *testing.T) {
	f := newFixture(t)
	appID, vol := f.app(t, "Notes", "kept")
	rolling, err := f.svc.Create(ctx, backups.Request{AppID: appID})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.taken(t, rolling.ID); got.State != backups.StateCompleted {
		t.Fatalf("rolling backup = %+v", got)
	}
	f.write(t, vol, "written after the rolling backup")
	// Kept with no final copy, as before the policy was set.
	if err := f.vols.DeleteApp(ctx, appID, apps.Decision{Backup: true}, ""); err != nil {
		t.Fatal(err)
	}
	err = f.vols.Delete(ctx, vol, backups.RequireFinalCopy)
	if e, ok := errcode.As(err); !ok || e.Code != errcode.PolicyBackupRequired || e.Status() != 403 || e.Remedy == "" || e.Details["volume_id"] != vol {
		t.Fatalf("delete with only an older rolling backup: %v, want POLICY_BACKUP_REQUIRED naming the volume, with a remedy", err)
	}
	bundle, err := f.svc.Create(ctx, backups.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.taken(t, bundle.ID); got.State != backups.StateCompleted {
		t.Fatalf("bundle = %+v", got)
	}
	if err := f.vols.Delete(ctx, vol, backups.RequireFinalCopy); err != nil {
		t.Fatalf("delete after a bundle holding it: %v", err)
	}

	// An app deleted through backups keeps its on_delete copy: allowed.
	other, otherVol := f.app(t, "Other", "final")
	if err := f.svc.DeleteApp(ctx, other, apps.Decision{Backup: true, RequireBackup: true}, ""); err != nil {
		t.Fatal(err)
	}
	if err := f.vols.Delete(ctx, otherVol, backups.RequireFinalCopy); err != nil {
		t.Fatalf("delete a volume its on_delete backup holds: %v", err)
	}

	// The setting off (no guard): a volume with no copy at all goes.
	third, thirdVol := f.app(t, "Third", "none")
	if err := f.vols.DeleteApp(ctx, third, apps.Decision{Backup: true}, ""); err != nil {
		t.Fatal(err)
	}
	if err := f.vols.Delete(ctx, thirdVol, nil); err != nil {
		t.Fatalf("delete without the policy: %v", err)
	}
}
