package server

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/internal/launcher"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler/process"
	"github.com/svchost/svc/vaultsecrets"
)

// wired are the app, secrets and adapter services of a test server, wired
// as cmd/svc wires them on the embedded defaults.
type wired struct {
	apps     *apps.Service
	launcher *launcher.Service
	secrets  *secrets.Service
	adapters *adapters.Service
	ring     *keyring.Ring
	set      *adapters.Set
}

func wireStorage(t testing.TB, store *raftstore.Store, dir string, now func() time.Time, log *slog.Logger) wired {
	t.Helper()
	kek, err := keyring.LoadKEK(filepath.Join(dir, "keyring.kek"))
	if err != nil {
		t.Fatal(err)
	}
	ring := keyring.New(store, kek, now)
	ad, err := adapters.New(adapters.Deps{Store: store, Ring: ring, Now: now, Logger: log, StartedAt: now(), Kinds: []adapters.Kind{
		process.Kind(), edge.RoutesKind(), vaultsecrets.BuiltinKind(store, ring), vaultsecrets.VaultKind(log), identity.LocalKind(),
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
	return wired{apps: apps.NewService(store, now), launcher: launcher.NewService(store, now), secrets: sec, adapters: ad, ring: ring, set: set}
}
