package vaultsecrets

import (
	"context"
	"fmt"

	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/raftstore"
)

// Store is what the builtin adapter needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

// Ring seals and opens values; Check says whether this node can. Once Ready
// has returned, Seal writes nothing, so a store Update's build may call it.
type Ring interface {
	Ready(ctx context.Context) error
	Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error)
	Open(sealed, aad []byte) ([]byte, error)
	Check() error
}

var (
	_ Store    = (*raftstore.Store)(nil)
	_ Ring     = (*keyring.Ring)(nil)
	_ Resealer = (*Builtin)(nil)
)

// Resealer is keyring.Resealer, restated so the guard reads locally.
type Resealer = keyring.Resealer

// Builtin keeps secret values in the replicated store, sealed by the
// keyring: the value's ciphertext travels in the secret's own row, so the
// value, its audit entry and its event commit in one write.
type Builtin struct {
	id    string
	store Store
	ring  Ring
}

var _ secrets.Backend = (*Builtin)(nil)

// NewBuiltin returns the builtin secrets adapter with the given adapter ID.
func NewBuiltin(id string, store Store, ring Ring) *Builtin {
	return &Builtin{id: id, store: store, ring: ring}
}

func aad(ref secrets.Ref) []byte { return []byte("secret/" + ref.AppID + "/" + ref.Key) }

// Put seals the value. It writes nothing: the sealed value travels in the
// secret's row, which numbers its versions (no version of its own).
func (b *Builtin) Put(ctx context.Context, ref secrets.Ref, value string) (secrets.Stored, error) {
	sealed, err := b.ring.Seal(ctx, []byte(value), aad(ref))
	if err != nil {
		return secrets.Stored{}, err
	}
	return secrets.Stored{Sealed: sealed}, nil
}

// Get opens the sealed value of the row.
func (b *Builtin) Get(_ context.Context, ref secrets.Ref, s secrets.Stored) (string, error) {
	if len(s.Sealed) == 0 {
		return "", fmt.Errorf("builtin secrets: %s has no sealed value", ref.Key)
	}
	plain, err := b.ring.Open(s.Sealed, aad(ref))
	if err != nil {
		return "", err
	}
	return string(plain), nil
}

// Delete has nothing to do: the value goes with the row.
func (b *Builtin) Delete(context.Context, secrets.Ref) error { return nil }

// List names the app's secrets this adapter holds.
func (b *Builtin) List(_ context.Context, appID string) ([]secrets.Entry, error) {
	items, _ := secrets.Secrets.List(b.store.Read(), raftstore.Query{Index: "app", Key: appID})
	var out []secrets.Entry
	for _, it := range items {
		if it.Value.Origin == b.id {
			out = append(out, secrets.Entry{Key: it.Value.Key, Version: it.Value.Version, UpdatedAt: it.Value.UpdatedAt})
		}
	}
	return out, nil
}

// Reseal re-seals every value this adapter holds under the keyring's
// current data key (after a rotation), one secret per write, through the
// secrets package's Resealed. The version does not change: the value is
// the same. A secret deleted or moved to another adapter meanwhile is
// skipped; one set again meanwhile is re-sealed as it is then.
func (b *Builtin) Reseal(ctx context.Context) (int, error) {
	if err := b.ring.Ready(ctx); err != nil {
		return 0, err
	}
	items, _ := secrets.Secrets.List(b.store.Read(), raftstore.Query{Index: "origin", Key: b.id})
	n := 0
	for _, it := range items {
		resealed := false
		_, err := b.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
			row, meta, ok := secrets.Secrets.Get(r, it.Value.ID)
			if resealed = ok && row.Origin == b.id; !resealed {
				return nil, nil
			}
			ref := secrets.Ref{AppID: row.AppID, Key: row.Key}
			plain, err := b.ring.Open(row.Sealed, aad(ref))
			if err != nil {
				return nil, err
			}
			sealed, err := b.ring.Seal(ctx, plain, aad(ref))
			if err != nil {
				return nil, err
			}
			return []raftstore.Op{secrets.Resealed(raftstore.Item[secrets.Secret]{Value: row, Meta: meta}, sealed)}, nil
		})
		if err != nil {
			return n, fmt.Errorf("re-seal %s of %s: %w", it.Value.Key, it.Value.AppID, err)
		}
		if resealed {
			n++
		}
	}
	return n, nil
}
