package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/svchost/svc/backupstores/local"
	"github.com/svchost/svc/backupstores/s3"
	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/edge/consul"
	"github.com/svchost/svc/edge/nomadsd"
	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/adapters/dependents"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/config"
	"github.com/svchost/svc/internal/detection"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/icon"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/internal/launcher"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/slots"
	"github.com/svchost/svc/internal/source"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/internal/volumes"
	"github.com/svchost/svc/notifiers/chat"
	"github.com/svchost/svc/notifiers/email"
	"github.com/svchost/svc/notifiers/ntfy"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scanners/ai"
	"github.com/svchost/svc/scanners/builtin"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
	"github.com/svchost/svc/scheduler/process"
	"github.com/svchost/svc/slots/postgres"
	"github.com/svchost/svc/vaultsecrets"
)

// storage are the services over apps, their secrets, the keyring and the
// adapters.
type storage struct {
	apps     *apps.Service
	launcher *launcher.Service
	icons    *icon.Service
	secrets  *secrets.Service
	adapters *adapters.Service
	ring     *keyring.Ring
	slots    *slots.Service
	volumes  *volumes.Service
}

// kekFile is where the key-encryption key lives in the work dir.
func kekFile(workDir string) string { return filepath.Join(workDir, "keyring", "kek") }

// Health checks of adapters, and the sweep of deleted apps' secrets.
const (
	healthInterval = 30 * time.Second
	sweepInterval  = 10 * time.Minute
)

// buildStorage wires the keyring, every adapter kind this build runs, and
// the services over them. Adapters are loaded once the store has caught up
// with its leader (their configuration is replicated state); until then
// GET /adapters says loading and secrets answer ADAPTER_UNAVAILABLE.
func buildStorage(ctx context.Context, rt *runtime, gen *generation, store *raftstore.Store, now func() time.Time) (*storage, error) {
	kek, err := keyring.LoadKEK(kekFile(gen.cfg.Server.WorkDir))
	if err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("%w\nthe key-encryption key protects every secret; refusing to start without it", err)}
	}
	ring := keyring.New(store, kek, now)
	// The nomad runtime finds the loaded secrets adapters when it runs a
	// job (they load after the kinds are declared).
	var ad *adapters.Service
	loaded := func() *adapters.Set { return ad.Current() }
	ad, err = adapters.New(adapters.Deps{
		Store: store, Ring: ring, Now: now, Logger: gen.log, StartedAt: gen.startedAt, Dependents: dependents.Find,
		Declared: declaredAdapters(gen.cfg), Kinds: adapterKinds(gen, store, ring, now, loaded),
	})
	if err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("configuration refused:\n%w", err)}
	}
	rt.onClose("adapters", ad.Close)
	ring.OnRotate(ad)
	ring.OnRotate(vaultsecrets.NewBuiltin(vaultsecrets.BuiltinID, store, ring))
	sec := secrets.NewService(secrets.Deps{Store: store, Now: now, Backends: func() (map[string]secrets.Backend, string) {
		return secrets.BackendsOf(ad.Current())
	}})
	go loadAdapters(ctx, gen, store, ad)
	store.RunWhileLeader("adapter-health", func(ctx context.Context) error {
		ctx = actor.With(ctx, actor.System)
		check := func(ctx context.Context) error {
			if !ad.Current().Ready() {
				return nil
			}
			return ad.CheckHealth(ctx)
		}
		_ = check(ctx)
		return raftstore.Every(healthInterval, check)(ctx)
	})
	store.RunWhileLeader("secrets-sweep", raftstore.Every(sweepInterval, sec.SweepDeletedApps))
	store.RunWhileLeader("job-secrets-sweep", raftstore.Every(sweepInterval, func(ctx context.Context) error {
		// Deleted apps' slot credentials, which the nomad runtime kept in
		// Vault per job: no secret row names them.
		for _, l := range ad.Current().Of(adapters.CategorySecrets) {
			s, ok := l.Instance.(jobSecretsSweeper)
			if !ok {
				continue
			}
			if err := s.SweepJobSecrets(ctx, func(appID string) bool { return apps.Exists(store.Read(), appID) }); err != nil {
				gen.log.Warn("sweep the slot credentials of deleted apps", "adapter_id", l.Adapter.ID, "err", errcode.MessageOf(err))
			}
		}
		return nil
	}))
	icons := icon.NewService(store, now)
	store.RunWhileLeader("icons-sweep", raftstore.Every(sweepInterval, icons.SweepDeletedApps))
	sl := slots.NewService(slots.Deps{Store: store, Ring: ring, Now: now, Logger: gen.log,
		Provisioners: func() []slots.Loaded { return slots.ProvisionersOf(ad.Current()) }})
	ring.OnRotate(sl)
	store.RunWhileLeader("slots-sweep", raftstore.Every(sweepInterval, sl.SweepDeletedApps))
	vols := volumes.NewService(store, now, gen.procs)
	store.RunWhileLeader("volumes-sweep", raftstore.Every(sweepInterval, vols.Sweep))
	return &storage{apps: apps.NewService(store, now), launcher: launcher.NewService(store, now), icons: icons, secrets: sec, adapters: ad, ring: ring,
		slots: sl, volumes: vols}, nil
}

// buildSources wires apps' checkouts under the work dir: uploaded archives
// and clones (file:// and local paths refused), under host policy's
// source_allowlist. Every node sweeps its own work dir of deleted apps'
// checkouts and of those no kept release names (the scheduler's
// KeptCheckouts, read from the store), and fetches from the other servers
// the checkouts the apps' records name that it lacks (whichever node
// becomes leader builds).
func buildSources(ctx context.Context, rt *runtime, gen *generation, store *raftstore.Store, a *apps.Service, pol *policy.Service, now func() time.Time,
	onCheckout func(ctx context.Context, appID string, c source.Checkout), onFailed func(ctx context.Context, appID, message string)) (*source.Service, error) {
	src, err := source.New(source.Deps{WorkDir: gen.cfg.Server.WorkDir, Apps: a, Policy: pol, Now: now, Logger: gen.log,
		OnCheckout: onCheckout, OnFetchFailed: onFailed, Peers: clusterPeers{store}, Store: store,
		Keep: func(appID string) []string { return scheduler.KeptCheckouts(store.Read(), appID) }})
	if err != nil {
		return nil, err
	}
	rt.onClose("sources", src.Close)
	go func() { _ = raftstore.Every(sweepInterval, src.Sweep)(ctx) }()
	go func() {
		_ = src.SyncCheckouts(ctx)
		_ = raftstore.Every(syncInterval, src.SyncCheckouts)(ctx)
	}()
	return src, nil
}

// buildDetection wires detection over the sources, specs and secrets. It
// runs on every new checkout, behind the request that made it.
func buildDetection(ctx context.Context, rt *runtime, gen *generation, store *raftstore.Store, st *storage, pol *policy.Service, specs *spec.Service, now func() time.Time) (*detection.Service, *source.Service, error) {
	var det *detection.Service
	src, err := buildSources(ctx, rt, gen, store, st.apps, pol, now, func(ctx context.Context, appID string, c source.Checkout) {
		go det.OnCheckout(context.WithoutCancel(ctx), appID, c)
	}, func(ctx context.Context, appID, message string) { det.OnFetchFailed(ctx, appID, message) })
	if err != nil {
		return nil, nil, err
	}
	det = detection.New(detection.Deps{Store: store, Checkouts: src, Specs: specs, Secrets: st.secrets, Now: now, Logger: gen.log})
	store.RunWhileLeader("detection-sweep", raftstore.Every(sweepInterval, det.SweepDeletedApps))
	return det, src, nil
}

// adapterKinds are the adapter kinds this build runs. A kind only keeps
// the store, keyring and runtime it is given, for Open: checkDeclaredAdapters
// calls it without them.
func adapterKinds(gen *generation, store *raftstore.Store, ring *keyring.Ring, now func() time.Time, loaded func() *adapters.Set) []adapters.Kind {
	return []adapters.Kind{
		process.KindFor(gen.procs),
		nomadKind(gen, store, now, loaded),
		edge.RoutesKind(),
		consul.Kind(gen.log),
		nomadsd.Kind(gen.log),
		vaultsecrets.BuiltinKind(store, ring),
		vaultsecrets.VaultKind(gen.log),
		identity.LocalKind(),
		postgres.Kind(),
		chat.Kind(),
		email.Kind(),
		ntfy.Kind(),
		local.Kind(gen.cfg.Server.WorkDir),
		s3.Kind(),
		builtin.Kind(),
		ai.Kind(),
	}
}

// checkDeclaredAdapters checks the adapters cfg declares against the kinds
// this build runs (category, kind, settings, required ones, the kind's own
// validation), before anything starts, as an unreadable setting is: a
// refused declaration stops svc serve, or keeps the previous configuration
// at a restart.
func checkDeclaredAdapters(cfg *config.Config) error {
	if len(cfg.Adapters) == 0 {
		return nil
	}
	gen := &generation{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	return adapters.CheckDeclared(adapterKinds(gen, nil, nil, time.Now, nil), declaredAdapters(cfg))
}

// declaredAdapters are the adapters the configuration declares, with the
// credentials it read at this start.
func declaredAdapters(cfg *config.Config) []adapters.Declared {
	out := make([]adapters.Declared, 0, len(cfg.Adapters))
	for _, a := range cfg.Adapters {
		d := adapters.Declared{ID: a.ID, Category: a.Category, Kind: a.Kind, Settings: a.Settings, Primary: a.Primary,
			Credentials: map[string]string{}, Sources: map[string]string{}, Origin: string(a.Origin), Source: "SVC_ADAPTERS"}
		if a.Origin == config.OriginConfigFile {
			d.Source = "config file " + cfg.File
		}
		for _, c := range a.Credentials {
			d.Credentials[c.Name] = c.Value()
			d.Sources[c.Name] = c.From + " " + c.Source
		}
		out = append(out, d)
	}
	return out
}

// loadAdapters waits until the store serves consistent reads, then loads
// the adapters the replicated configuration names.
func loadAdapters(ctx context.Context, gen *generation, store *raftstore.Store, ad *adapters.Service) {
	for attempt := 1; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := store.ConsistentRead(rctx)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		if attempt%6 == 0 {
			gen.log.Warn("adapters wait for the store to reach its leader", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	set := ad.Load(ctx)
	for _, c := range adapters.Categories() {
		for _, l := range set.Of(c) {
			gen.log.Info("adapter loaded", "adapter_id", l.Adapter.ID, "category", c, "kind", l.Adapter.Kind, "primary", l.Primary, "ok", l.Instance != nil)
		}
	}
}

// jobSecretsSweeper is a secrets adapter that keeps the nomad runtime's
// per-job slot credentials (vaultsecrets' vault kind) and removes those
// of apps that no longer exist.
type jobSecretsSweeper interface {
	SweepJobSecrets(ctx context.Context, exists func(appID string) bool) error
}

var (
	_ jobSecretsSweeper = (*vaultsecrets.Vault)(nil)
	// The nomad runtime's capabilities ask the controller's builder (the
	// process runtime) what it builds.
	_ nomad.BuilderInfo = (*process.Runtime)(nil)
)
