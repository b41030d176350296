package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/raftstore"
)

// Store is what the service needs of the replicated store: every write is
// an Update (build the change from a view; a change that raced another is
// built again on a newer one, so it is applied, not refused).
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
	ConsistentRead(ctx context.Context) (*raftstore.Reader, error)
}

var _ Store = (*raftstore.Store)(nil)

// Hasher hashes and verifies passwords (Argon2id).
type Hasher interface {
	Hash(ctx context.Context, password string) (string, error)
	Verify(ctx context.Context, encoded, password string) (ok, needsRehash bool, err error)
	// Dummy spends the time of a verification, for unknown accounts.
	Dummy(ctx context.Context, password string)
}

// PolicySource returns the host policy in force.
type PolicySource interface {
	Current() policy.Policy
}

// Deps are the service's collaborators.
type Deps struct {
	Store  Store
	Hasher Hasher
	Policy PolicySource
	// Guesses at a password (sign-in, the current password of a change)
	// are throttled per account and client address (AccountLimit), per
	// client address (ClientLimit), and per account from any address
	// (AccountAnyLimit) except from the addresses KnownClients remembers
	// signing in to it. All four are required.
	AccountLimit, ClientLimit, AccountAnyLimit Limiter
	KnownClients                               KnownClients
	Now                                        func() time.Time
	Logger                                     *slog.Logger
}

// Session lifetimes: a session ends after SessionIdle without use and at the
// latest SessionMax after sign-in; use extends it at most once per
// sessionRefresh, so that reading a session is not a write.
const (
	SessionIdle    = 7 * 24 * time.Hour
	SessionMax     = 30 * 24 * time.Hour
	sessionRefresh = time.Hour
	tokenTouch     = time.Hour
)

// Service manages accounts, sessions, tokens, groups and roles.
type Service struct {
	d Deps
	// inflight holds the sessions and tokens whose background refresh is
	// under way, so that a burst of requests writes once.
	inflight sync.Map
	// adminPending: this node is to create the administrator from
	// SVC_ADMIN_PASSWORD and has not yet (see ExpectAdmin).
	adminPending atomic.Bool
}

// New returns the identity service. It panics without the limiters, which
// nothing may run without.
func New(d Deps) *Service {
	if d.AccountLimit == nil || d.ClientLimit == nil || d.AccountAnyLimit == nil || d.KnownClients == nil {
		panic("identity: Deps needs AccountLimit, ClientLimit, AccountAnyLimit and KnownClients")
	}
	if d.Now == nil {
		d.Now = func() time.Time { return time.Now().UTC() }
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{d: d}
}

func (s *Service) now() time.Time { return s.d.Now().UTC() }

// secret makes a credential: an ID, a dot and 32 random bytes in base64url.
// Only the SHA-256 of the random part is stored.
func newSecret(p ids.Prefix) (id, credential string, hash []byte) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("identity: crypto/rand: " + err.Error())
	}
	secret := base64.RawURLEncoding.EncodeToString(b)
	id = ids.New(p)
	sum := sha256.Sum256([]byte(secret))
	return id, id + "." + secret, sum[:]
}

// splitCredential parses "<id>.<secret>" for an ID of prefix p.
func splitCredential(p ids.Prefix, cred string) (id, secret string, ok bool) {
	id, secret, ok = strings.Cut(cred, ".")
	if !ok || !ids.Valid(p, id) || len(secret) != 43 {
		return "", "", false
	}
	return id, secret, true
}

// secretMatches compares a presented secret with a stored hash in constant
// time.
func secretMatches(secret string, hash []byte) bool {
	sum := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(sum[:], hash) == 1
}

// update makes one change through the store's Update, translating the
// store's refusals of this package's unique indexes into clear errors.
func (s *Service) update(ctx context.Context, build raftstore.Build) error {
	return update(ctx, s.d.Store, build)
}

// update makes one change through st's Update, translating the store's
// refusals of this package's unique indexes (a username, a group's or a
// role's name that is taken) into clear errors. A name taken by a write
// the view did not include is built again on a newer view, and then
// refused as taken.
func update(ctx context.Context, st Store, build raftstore.Build) error {
	_, err := st.Update(ctx, build)
	if err == nil {
		return nil
	}
	if te, ok := asTxnError(err); ok && te.Reason == raftstore.ReasonConflict {
		switch te.Table + "." + te.Index {
		case "users.username":
			return taken("username", "that username is taken")
		case "groups.name":
			return taken("name", "a group with that name exists")
		case "roles.name":
			return taken("name", "a role with that name exists")
		}
	}
	return err
}

func taken(field, msg string) *errcode.Error {
	return errcode.New(errcode.StateInvalid, "%s", msg).WithDetail("field", field).WithDetail("reason", "taken")
}

func asTxnError(err error) (*raftstore.TxnError, bool) {
	var te *raftstore.TxnError
	ok := errors.As(err, &te)
	return te, ok
}
