// Package secrets owns apps' secrets: which secrets an app has, where each
// is kept (its origin: the secrets adapter that holds the value) and at which
// version, and setting, reading, listing and deleting them with their audit
// entries and events. It declares the Backend interface that secrets
// adapters implement (builtin and vault, in package vaultsecrets).
//
// It must never put a value in a response other than Value's, in an audit
// entry, an event, a log line or the store unencrypted. It must not import an
// adapter: cmd/svc wires them in.
package secrets

import (
	"context"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// Ref names one secret of one app.
type Ref struct {
	AppID string
	Key   string
}

// Stored is what a backend answers a write with, and what a secret's row
// tells it to read. A backend that numbers versions itself (vault) answers
// the version the value now has and when it made it, by its own clock (At:
// that backend's writes are ordered by it); a backend that keeps values in
// the replicated store itself (builtin) answers the sealed value to keep in
// the secret's row and no version: the row numbers its versions.
type Stored struct {
	Version int64
	Sealed  []byte
	At      time.Time
}

// Entry is a secret as a backend lists it; never its value.
type Entry struct {
	Key       string
	Version   int64
	UpdatedAt time.Time
}

// Backend keeps secret values: a secrets adapter.
type Backend interface {
	// Put writes a value, as a new version when the secret exists. The
	// secrets service calls it once per change, before it writes the row.
	Put(ctx context.Context, ref Ref, value string) (Stored, error)
	// Get reads the value of the secret whose row holds s: the version
	// the row names, not a newer one no row names (a write whose row was
	// never written).
	Get(ctx context.Context, ref Ref, s Stored) (string, error)
	// Delete removes every version of a secret; a missing one is no error.
	Delete(ctx context.Context, ref Ref) error
	// List names an app's secrets with their versions.
	List(ctx context.Context, appID string) ([]Entry, error)
}

// Secret is a secret as the store keeps it. Sealed is set only for secrets
// whose origin keeps values in the store (builtin), and is never shown.
// VersionAt is when the origin made Version, by the origin's clock, for an
// origin that numbers versions itself (see Stored).
type Secret struct {
	ID        string    `json:"id"` // <app id>/<key>
	AppID     string    `json:"app_id"`
	Key       string    `json:"key"`
	Origin    string    `json:"origin"` // adapter ID
	Version   int64     `json:"version"`
	VersionAt time.Time `json:"version_at,omitzero"`
	Sealed    []byte    `json:"sealed,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// stored is what the row tells its origin to read.
func (s Secret) stored() Stored { return Stored{Version: s.Version, Sealed: s.Sealed, At: s.VersionAt} }

// View is a secret as the API lists it.
type View struct {
	Key       string    `json:"key"`
	Origin    string    `json:"origin"`
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (s Secret) view() View {
	return View{Key: s.Key, Origin: s.Origin, Version: s.Version, UpdatedAt: s.UpdatedAt}
}

// RowID is the ID of a secret's row.
func RowID(appID, key string) string { return appID + "/" + key }

// Secrets is the table of secrets.
var Secrets = &raftstore.Table[Secret]{
	Name: "secrets",
	ID:   func(s *Secret) string { return s.ID },
	Indexes: []raftstore.Index[Secret]{
		{Name: "app", Key: func(s *Secret) (string, bool) { return s.AppID, true }},
		{Name: "origin", Key: func(s *Secret) (string, bool) { return s.Origin, true }},
	},
}

// The rule reads the table it guards, so it is attached in init.
func init() { Secrets.Validate = validateSecret }

func validateSecret(r *raftstore.Reader, old, s *Secret) error {
	if s == nil {
		return nil
	}
	if s.ID != RowID(s.AppID, s.Key) || CheckKey(s.Key) != nil || s.Origin == "" {
		return errcode.New(errcode.ValidInvalid, "malformed secret row %q", s.ID)
	}
	if old == nil {
		// Counted where the write is applied, so that new secrets written
		// concurrently cannot pass the limit together.
		if n, _ := Secrets.List(r, raftstore.Query{Index: "app", Key: s.AppID, Limit: MaxPerApp + 1}); len(n) > MaxPerApp {
			return tooMany()
		}
	}
	return nil
}

func tooMany() *errcode.Error {
	return errcode.New(errcode.StateInvalid, "an app may have at most %d secrets", MaxPerApp)
}

// Resealed is the operation that keeps a secret's value sealed anew (by
// its origin, after a keyring rotation) in the row it read: nothing else of
// the row changes, and the row must not have changed since it was read.
// Secrets adapters that keep values in the store re-seal through it.
func Resealed(it raftstore.Item[Secret], sealed []byte) raftstore.Op {
	row := it.Value
	row.Sealed = sealed
	return Secrets.PutIf(&row, it.Meta.ModifyIndex)
}

// Tables lists the tables this package declares.
func Tables() []raftstore.Def { return []raftstore.Def{Secrets} }

// Limits on keys and values.
const (
	MaxKeyLen     = 128
	MaxValueBytes = 64 << 10
	MaxPerApp     = 500
)

// Keys are environment variable names: that is how workloads receive them.
var keyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckKey validates a secret's key.
func CheckKey(key string) error {
	if len(key) > MaxKeyLen || !keyRE.MatchString(key) {
		return errcode.Invalid("key", "a secret's key is an environment variable name: letters, digits and underscores, not starting with a digit, at most %d characters", MaxKeyLen).
			WithRemedy("for example DATABASE_PASSWORD")
	}
	return nil
}

// CheckValue validates a secret's value.
func CheckValue(v string) error {
	switch {
	case len(v) > MaxValueBytes:
		return errcode.Invalid("value", "a secret's value must be at most %d bytes", MaxValueBytes)
	case !utf8.ValidString(v):
		return errcode.Invalid("value", "a secret's value must be UTF-8 text")
	case containsNUL(v):
		return errcode.Invalid("value", "a secret's value must not contain NUL bytes: it becomes an environment variable")
	}
	return nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}
