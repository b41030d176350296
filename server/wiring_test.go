package server

import (
	"context"
	"crypto/rand"
	"github.com/svchost/svc/backupstores/local"
	"github.com/svchost/svc/internal/backuprepo"
	"github.com/svchost/svc/internal/backups"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/adapters/dependents"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/config"
	"github.com/svchost/svc/internal/detection"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/icon"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/internal/launcher"
	"github.com/svchost/svc/internal/plan"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/slots"
	"github.com/svchost/svc/internal/source"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/internal/subscriptions"
	"github.com/svchost/svc/internal/throttle"
	"github.com/svchost/svc/internal/volumes"
	"github.com/svchost/svc/internal/webhook"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scanners/ai"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
	"github.com/svchost/svc/scheduler/process"
	"github.com/svchost/svc/slots/postgres"
	"github.com/svchost/svc/vaultsecrets"
)

// wired are the app, secrets and adapter services of a test server, wired
// as cmd/svc wires them on the embedded defaults.
type wired struct {
	apps     *apps.Service
	launcher *launcher.Service
	icons    *icon.Service
	secrets  *secrets.Service
	specs    *spec.Service
	adapters *adapters.Service
	ring     *keyring.Ring
	set      *adapters.Set
	slots    *slots.Service
	volumes  *volumes.Service
}

func wireStorage(t testing.TB, store *raftstore.Store, dir string, procs *process.Runtime, now func() time.Time, log *slog.Logger) wired {
	t.Helper()
	kek, err := keyring.LoadKEK(filepath.Join(dir, "keyring.kek"))
	if err != nil {
		t.Fatal(err)
	}
	ring := keyring.New(store, kek, now)
	ad, err := adapters.New(adapters.Deps{Store: store, Ring: ring, Now: now, Logger: log, StartedAt: now(), Dependents: dependents.Find, Kinds: []adapters.Kind{
		process.KindFor(procs), edge.RoutesKind(), vaultsecrets.BuiltinKind(store, ring), vaultsecrets.VaultKind(log), identity.LocalKind(),
		postgres.Kind(), nomadKind(t, dir, procs), ai.Kind(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	set := ad.Load(context.Background())
	t.Cleanup(func() { _ = ad.Close() })
	sec := secrets.NewService(secrets.Deps{Store: store, Now: now, Backends: func() (map[string]secrets.Backend, string) {
		return secrets.BackendsOf(ad.Current())
	}})
	ring.OnRotate(ad)
	ring.OnRotate(vaultsecrets.NewBuiltin(vaultsecrets.BuiltinID, store, ring))
	sl := slots.NewService(slots.Deps{Store: store, Ring: ring, Now: now, Logger: log,
		Provisioners: func() []slots.Loaded { return slots.ProvisionersOf(ad.Current()) }})
	ring.OnRotate(sl)
	return wired{apps: apps.NewService(store, now), launcher: launcher.NewService(store, now), icons: icon.NewService(store, now), secrets: sec, specs: spec.NewService(store, now), adapters: ad, ring: ring, set: set, slots: sl, volumes: volumes.NewService(store, now, procs)}
}

// wireSources builds the sources service as cmd/svc does, with the work dir
// under dir and local repositories allowed (tests clone bare repositories
// made in a temporary directory).
func wireSources(t testing.TB, dir string, a *apps.Service, pol *policy.Service, log *slog.Logger, onCheckout func(context.Context, string, source.Checkout), onFailed func(context.Context, string, string)) *source.Service {
	t.Helper()
	src, err := source.New(source.Deps{WorkDir: filepath.Join(dir, "work"), Apps: a, Policy: pol, Git: source.Fetcher{AllowFile: true}, Logger: log,
		OnCheckout: onCheckout, OnFetchFailed: onFailed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	return src
}

// wireDetection builds sources and detection as cmd/svc does, except that
// detection runs inside the request that made the checkout, so that tests
// read its result at once.
func wireDetection(t testing.TB, dir string, w wired, store *raftstore.Store, pol *policy.Service, log *slog.Logger) (*detection.Service, *source.Service) {
	t.Helper()
	var det *detection.Service
	src := wireSources(t, dir, w.apps, pol, log, func(ctx context.Context, appID string, c source.Checkout) { det.OnCheckout(ctx, appID, c) },
		func(ctx context.Context, appID, msg string) { det.OnFetchFailed(ctx, appID, msg) })
	det = detection.New(detection.Deps{Store: store, Checkouts: src, Specs: w.specs, Secrets: w.secrets, Now: func() time.Time { return time.Now().UTC() }, Logger: log})
	return det, src
}

// newTestRuntime opens a process runtime under dir with short waits: health
// checks every 100ms, a workload without a port ready after 200ms. Go
// builds start from a Go build cache seed kept between runs (under the
// user's cache directory, as internal/e2e's), so that only the first run
// compiles the standard library.
func newTestRuntime(t testing.TB, dir string) *process.Runtime {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	rt, err := process.New(process.Config{
		WorkDir: filepath.Join(dir, "runtime"), StartTimeout: 30 * time.Second, HealthInterval: 100 * time.Millisecond,
		SettleTime: 200 * time.Millisecond, StopGrace: 2 * time.Second, RestartBackoff: 100 * time.Millisecond, MaxRestartBackoff: time.Second,
		// The API's tests look at what the server does, not at the
		// sandbox (scheduler/process and internal/e2e test that).
		Isolation:   "none",
		GoCacheSeed: filepath.Join(cache, "svc-tests", "go-seed"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// testRuntimes is the scheduler's runtime source in tests: the harness's
// process runtime, whatever the adapter ID.
type testRuntimes struct{ rt scheduler.Runtime }

var _ scheduler.Runtimes = testRuntimes{}

func (r testRuntimes) Runtime(string) (scheduler.Runtime, error) { return r.rt, nil }

// wireScheduler builds the scheduler as cmd/svc does, with a short retry
// schedule and interval, and starts its leader loops on the store.
func wireScheduler(store *raftstore.Store, cfg *config.Config, w wired, plans *plan.Service, sources *source.Service, pol *policy.Service,
	rt *process.Runtime, now func() time.Time, log *slog.Logger) *scheduler.Service {
	sch := scheduler.NewService(scheduler.Config{
		Backoff:     []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond},
		Interval:    100 * time.Millisecond,
		RoutingMode: cfg.Server.RoutingMode, PortStart: cfg.App.PortStart, PortEnd: cfg.App.PortEnd,
	}, scheduler.Deps{
		Store: store, Specs: w.specs, Plans: plans, Sources: sources, Slots: w.slots, Secrets: w.secrets,
		Policy: pol, Runtimes: testRuntimes{rt: rt}, Now: now, Log: log,
	})
	store.RunWhileLeader("deploys", sch.RunDeploys)
	store.RunWhileLeader("reconciler", sch.Reconcile)
	return sch
}

// wireSharing builds the sharing service as cmd/svc does: passcode tries
// limited per app and address (10) and per app (100) in fifteen minutes,
// admission keys sealed by the ring and re-sealed when it rotates.
func wireSharing(store *raftstore.Store, hasher identity.Hasher, pol *policy.Service, ring *keyring.Ring, now func() time.Time, log *slog.Logger) *identity.Sharing {
	sh := identity.NewSharing(identity.SharingDeps{
		Store: store, Hasher: hasher, Policy: pol, Ring: ring, Apps: appFinder,
		ClientLimit:  throttle.New(10, 15*time.Minute, now, 1000),
		AppLimit:     throttle.New(100, 15*time.Minute, now, 1000),
		KnownClients: throttle.NewRecent(24*time.Hour, now, 1000),
		Now:          now, Logger: log,
	})
	ring.OnRotate(sh)
	return sh
}

// appFinder finds apps for the sharing service, as cmd/svc's does.
var appFinder = identity.AppFinderFunc(func(r *raftstore.Reader, id string) (events.AppRef, bool) {
	a, _, ok := apps.Apps.Get(r, id)
	return events.AppRef{ID: a.ID, Name: a.Name, Slug: a.Slug}, ok
})

// nomadKind is the nomad runtime kind with its artifacts under dir; no
// Nomad is reached unless a test configures one.
func nomadKind(t testing.TB, dir string, procs *process.Runtime) adapters.Kind {
	return nomad.KindFor(nomad.KindDeps{Builder: procs, ArtifactBaseURL: "http://127.0.0.1:1",
		Artifacts: func() (*nomad.Artifacts, error) {
			key := make([]byte, 32)
			if _, err := rand.Read(key); err != nil {
				return nil, err
			}
			return nomad.NewArtifacts(nomad.ArtifactsConfig{Dir: filepath.Join(dir, "nomad-artifacts"), Key: key})
		}})
}

// wireSubscriptions wires event subscriptions and runs the dispatcher on
// the store's leader, on the configuration's schedule, sending webhooks
// through the real egress-checked sender.
func wireSubscriptions(store *raftstore.Store, cfg *config.Config, ring *keyring.Ring, pol *policy.Service, now func() time.Time, log *slog.Logger) *subscriptions.Service {
	svc := subscriptions.NewService(subscriptions.Deps{Store: store, Ring: ring, Policy: pol, Now: now})
	sender := webhook.NewSender(webhook.Options{Timeout: cfg.Events.AttemptTimeout, Now: now, UserAgent: "svc/test",
		AllowPrivate: func() bool { return pol.Current().AllowPrivateWebhooks }})
	d := subscriptions.NewDispatcher(subscriptions.DispatchDeps{Store: store, Ring: ring, Policy: pol, Sender: sender, Now: now,
		Logger: log.With("component", "dispatcher"), NodeID: "n1", ConsoleURL: cfg.Server.ExternalURL,
		Schedule: cfg.Events.RetrySchedule, AttemptTimeout: cfg.Events.AttemptTimeout, DisableAfter: cfg.Events.DisableAfter})
	store.RunWhileLeader("dispatcher", d.Run)
	return svc
}

// wireBackups builds the backups service as cmd/svc does: the repository
// over the local backup storage in the harness's directory, encrypted to
// a key of its own, the process runtime's volumes, the scheduler's pause
// and restart and its copies of volumes kept elsewhere, and the runner.
func wireBackups(t testing.TB, store *raftstore.Store, dir string, w wired, rt *process.Runtime, sched *scheduler.Service, now func() time.Time, log *slog.Logger) *backups.Service {
	t.Helper()
	id, err := backups.LoadIdentity(filepath.Join(dir, "keyring", "backup-key"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := local.New(filepath.Join(dir, "backups"))
	if err != nil {
		t.Fatal(err)
	}
	repo := backups.Over(backuprepo.New(st, backuprepo.Keys{Identity: id}, filepath.Join(dir, "restores")))
	svc := backups.New(backups.Deps{Store: store, Repo: func() (backups.Repo, error) { return repo, nil },
		Data: rt, Runner: sched, Volumes: w.volumes, Now: now, Log: log,
		Remote: sched, RemoteStaging: filepath.Join(dir, "backups-staging"),
		Installation: store, Dirs: map[string]string{"keyring": filepath.Join(dir, "keyring")}, Staging: filepath.Join(dir, "bundles")})
	store.RunWhileLeader("backups", svc.Run)
	t.Cleanup(svc.Wait)
	return svc
}
