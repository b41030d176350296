package main

import (
	"log/slog"
	goruntime "runtime"
	"time"

	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/internal/password"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/throttle"
	"github.com/svchost/svc/raftstore"
)

// The sharing service is what the edge asks about admissions by passcode;
// it seals admission keys with the keyring, and re-seals them when it
// rotates.
var (
	_ edge.Passcodes     = (*identity.Sharing)(nil)
	_ keyring.Resealer   = (*identity.Sharing)(nil)
	_ identity.Sealer    = (*keyring.Ring)(nil)
	_ identity.AppFinder = appFinder
)

// buildSharing wires app sharing: grants, principal searches, and the
// passcode of the grant to everyone. Ten wrong passcodes per app and client
// address, or a hundred per app from addresses that have not entered the
// right one in a day, in fifteen minutes make the caller wait. Passcodes are checked by their own Argon2id hasher, so
// that a flood of guesses does not hold up sign-ins; admission keys are
// sealed by the keyring and re-sealed when it rotates.
func buildSharing(store *raftstore.Store, pol *policy.Service, ring *keyring.Ring, now func() time.Time, log *slog.Logger) *identity.Sharing {
	sh := identity.NewSharing(identity.SharingDeps{
		Store:        store,
		Hasher:       password.NewHasher(password.DefaultParams, goruntime.GOMAXPROCS(0)),
		Policy:       pol,
		Ring:         ring,
		Apps:         appFinder,
		ClientLimit:  throttle.New(10, 15*time.Minute, now, 100_000),
		AppLimit:     throttle.New(100, 15*time.Minute, now, 10_000),
		KnownClients: throttle.NewRecent(24*time.Hour, now, 100_000),
		Now:          now,
		Logger:       log,
	})
	ring.OnRotate(sh)
	return sh
}

// appFinder lets the sharing service find apps: identity cannot import the
// apps package, which imports it.
var appFinder = identity.AppFinderFunc(func(r *raftstore.Reader, id string) (events.AppRef, bool) {
	a, _, ok := apps.Apps.Get(r, id)
	return events.AppRef{ID: a.ID, Name: a.Name, Slug: a.Slug}, ok
})
