package identity

import (
	"context"
	"testing"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/password"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/throttle"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

// fixedPolicy is a PolicySource returning one policy.
type fixedPolicy struct{ p policy.Policy }

func (f *fixedPolicy) Current() policy.Policy { return f.p }

var _ PolicySource = (*fixedPolicy)(nil)

// cheapHasher keeps Argon2id fast in tests.
var cheapHasher = password.NewHasher(password.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}, 4)

type env struct {
	store *raftstore.Store
	svc   *Service
	pol   *fixedPolicy
	now   time.Time
}

func newEnv(t *testing.T) *env {
	t.Helper()
	tables := append(Tables(), audit.Entries, events.Events)
	e := &env{store: raftstoretest.Open(t, tables...), pol: &fixedPolicy{p: policy.Default()}, now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	clock := func() time.Time { return e.now }
	e.svc = New(Deps{
		Store: e.store, Hasher: cheapHasher, Policy: e.pol,
		AccountLimit:    throttle.New(10, 15*time.Minute, clock, 1000),
		ClientLimit:     throttle.New(50, 15*time.Minute, clock, 1000),
		AccountAnyLimit: throttle.New(100, 15*time.Minute, clock, 1000),
		KnownClients:    throttle.NewRecent(30*24*time.Hour, clock, 1000),
		Now:             clock,
	})
	return e
}

func TestSetupRequiredUntilAnAccountExists(t *testing.T) {
	e := newEnv(t)
	if !e.svc.SetupRequired() {
		t.Fatal("a fresh installation does not wait for setup")
	}
	if _, err := e.svc.Setup(context.Background(), "Admin", "The Admin", "a-long-enough-password", Client{IP: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if e.svc.SetupRequired() {
		t.Error("setup is still required once an account exists")
	}
	_, err := e.store.Apply(context.Background(), Users.Insert(&User{ID: "usr_2", Username: "admin", Status: StatusActive}))
	if !raftstore.IsReason(err, raftstore.ReasonConflict) {
		t.Errorf("a second account named admin (other case) = %v, want a conflict", err)
	}
}
