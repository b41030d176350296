package edge

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// The signing keys of the assertions: Ed25519 key pairs kept in the
// replicated store, the private half sealed by the keyring. The newest key
// that is not retired is current: every node signs with it. Older keys stay
// published in the JWKS while an assertion they signed may still be
// presented, then are retired: kept, no longer published.

const (
	// KeyRotationInterval is how often the leader rotates the signing key
	// on its own.
	KeyRotationInterval = 30 * 24 * time.Hour
	// KeyRetireMargin is how long, beyond AssertionTTL, a key stays
	// published once its successor exists: room for nodes that learn of a
	// rotation late and for clocks that disagree.
	KeyRetireMargin = 10 * time.Minute
	// keyPrefix starts every key ID (kid): ek_<ULID>, so that IDs sort by
	// creation.
	keyPrefix = ids.EdgeKey
)

// Key is a signing key as the store keeps it.
type Key struct {
	KID string `json:"kid"`
	// Public is the 32-byte Ed25519 public key.
	Public []byte `json:"public"`
	// Sealed is the private key's 32-byte seed, sealed by the keyring for
	// "edge-key/<kid>".
	Sealed    []byte     `json:"sealed"`
	CreatedAt time.Time  `json:"created_at"`
	RetiredAt *time.Time `json:"retired_at"`
}

func keyAAD(kid string) []byte { return []byte("edge-key/" + kid) }

// Keys is the table of signing keys. A key is never deleted, and once
// written only its sealing (re-sealed by a keyring rotation) and its
// retirement (once, and never of the newest key) change.
var Keys = &raftstore.Table[Key]{
	Name: "edge_keys",
	ID:   func(k *Key) string { return k.KID },
}

// The rule reads the table it guards, so it is attached in init.
func init() { Keys.Validate = validateKey }

// Tables returns the edge's tables.
func Tables() []raftstore.Def { return []raftstore.Def{Keys} }

func validateKey(r *raftstore.Reader, old, k *Key) error {
	switch {
	case k == nil:
		return errcode.New(errcode.StateInvalid, "a signing key is never deleted; it is retired")
	case !strings.HasPrefix(k.KID, string(keyPrefix)+"_") || len(k.Public) != ed25519.PublicKeySize || len(k.Sealed) == 0 || k.CreatedAt.IsZero():
		return errcode.New(errcode.ValidInvalid, "a signing key row must carry a kid, a %d-byte public key, a sealed private key and its creation time", ed25519.PublicKeySize)
	case old == nil && k.RetiredAt != nil:
		return errcode.New(errcode.ValidInvalid, "a new signing key cannot be retired")
	case old != nil && (!bytes.Equal(old.Public, k.Public) || !old.CreatedAt.Equal(k.CreatedAt)):
		return errcode.New(errcode.StateInvalid, "signing key %s: only its sealing and its retirement may change", k.KID)
	case old != nil && old.RetiredAt != nil && (k.RetiredAt == nil || !old.RetiredAt.Equal(*k.RetiredAt)):
		return errcode.New(errcode.StateInvalid, "signing key %s is retired for good", k.KID)
	case k.RetiredAt != nil:
		// Never the newest key: some key must remain to sign with.
		newer, _ := Keys.List(r, raftstore.Query{After: k.KID, Limit: 1})
		if len(newer) == 0 {
			return errcode.New(errcode.StateInvalid, "signing key %s is the newest; it cannot be retired", k.KID)
		}
	}
	return nil
}

// KeyStore is what the signing keys need of the replicated store.
type KeyStore interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

// KeySealer seals the private keys: the keyring. Once Ready has returned,
// Seal writes nothing, so a store Update's build may call it.
type KeySealer interface {
	Ready(ctx context.Context) error
	Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error)
	Open(sealed, aad []byte) ([]byte, error)
}

var _ KeyStore = (*raftstore.Store)(nil)

// KeysDeps are the collaborators of the signing keys.
type KeysDeps struct {
	Store  KeyStore
	Ring   KeySealer
	Now    func() time.Time
	Logger *slog.Logger
}

// SigningKeys manages the signing keys: it creates the first, rotates,
// retires, re-seals, publishes the public halves, and hands the current
// private key to the signer.
type SigningKeys struct {
	d KeysDeps

	// cur is the key this node signs with; nil until first loaded.
	cur atomic.Pointer[signingKey]
	mu  sync.Mutex // serializes loading and replacing cur
}

// signingKey is an opened signing key.
type signingKey struct {
	kid   string
	priv  ed25519.PrivateKey
	index uint64 // the table index it was read at, or written with
}

// NewSigningKeys returns the signing keys over the store, sealed by the
// ring.
func NewSigningKeys(d KeysDeps) (*SigningKeys, error) {
	if d.Store == nil || d.Ring == nil {
		return nil, errors.New("edge: signing keys need a store and a keyring")
	}
	if d.Now == nil {
		d.Now = func() time.Time { return time.Now().UTC() }
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return &SigningKeys{d: d}, nil
}

// current returns the key to sign with now. Before any key exists it makes
// the first, through the store: when two nodes race, the store's
// precondition lets one write, and the other's change, built again, finds
// the winner's key and writes nothing. It fails (never returns a nil key)
// when no key can be opened or made.
func (k *SigningKeys) current(ctx context.Context) (*signingKey, error) {
	if sk := k.cur.Load(); sk != nil {
		return sk, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if sk := k.cur.Load(); sk != nil {
		return sk, nil
	}
	if sk, err := k.loadLocked(k.d.Store.Read()); err != nil || sk != nil {
		return sk, err
	}
	// No key yet: make the first, unless one appears meanwhile.
	sys := actor.With(ctx, actor.System)
	sk, err := k.addLocked(ctx, func(r *raftstore.Reader) *audit.Entry {
		if _, ok := newestKey(r); ok {
			return nil
		}
		return audit.New(sys, k.d.Now(), "edge_key.create", "", audit.Target{}, map[string]any{})
	})
	if err != nil || sk != nil {
		return sk, err
	}
	sk, err = k.loadLocked(k.d.Store.Read())
	if err == nil && sk == nil {
		err = errors.New("edge: no signing key was made")
	}
	return sk, err
}

// loadLocked opens the newest key of r, if it is not the one in use, and
// makes it current. It returns nil without error when the table holds no
// key.
func (k *SigningKeys) loadLocked(r *raftstore.Reader) (*signingKey, error) {
	index := r.TableIndex(Keys)
	cur := k.cur.Load()
	if cur != nil && cur.index >= index {
		return cur, nil
	}
	newest, ok := newestKey(r)
	if !ok {
		return nil, nil
	}
	if cur != nil && cur.kid == newest.KID {
		sk := &signingKey{kid: cur.kid, priv: cur.priv, index: index}
		k.cur.Store(sk)
		return sk, nil
	}
	priv, err := k.open(newest)
	if err != nil {
		return nil, err
	}
	sk := &signingKey{kid: newest.KID, priv: priv, index: index}
	k.cur.Store(sk)
	return sk, nil
}

// open unseals a key's private half and checks it against its public one.
func (k *SigningKeys) open(key Key) (ed25519.PrivateKey, error) {
	seed, err := k.d.Ring.Open(key.Sealed, keyAAD(key.KID))
	if err != nil {
		return nil, fmt.Errorf("edge: open signing key %s: %w", key.KID, err)
	}
	if len(seed) != ed25519.SeedSize {
		return nil, errcode.New(errcode.AdapterFailed, "signing key %s: the sealed private key is malformed", key.KID)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	if !bytes.Equal(priv.Public().(ed25519.PublicKey), key.Public) {
		return nil, errcode.New(errcode.AdapterFailed, "signing key %s: the private key does not match the public key", key.KID)
	}
	return priv, nil
}

// newestKey returns the newest key of r; it is never retired.
func newestKey(r *raftstore.Reader) (Key, bool) {
	items, _ := Keys.List(r, raftstore.Query{Reverse: true, Limit: 1})
	if len(items) == 0 {
		return Key{}, false
	}
	return items[0].Value, true
}

// addLocked draws a new key and writes it, sealed, as the newest, together
// with the retirement of the keys that are due and its audit entry, which
// entry makes from the view the change is built on: nil makes no key, and
// addLocked returns nil. The change is built again on a newer view when
// another write to the table came first, so the key is always the newest.
// On success the new key is current at once.
func (k *SigningKeys) addLocked(ctx context.Context, entry func(r *raftstore.Reader) *audit.Entry) (*signingKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("edge: draw a signing key: %w", err)
	}
	if err := k.d.Ring.Ready(ctx); err != nil {
		return nil, fmt.Errorf("edge: seal a signing key: %w", err)
	}
	var kid string
	index, err := k.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		kid = ""
		e := entry(r)
		if e == nil {
			return nil, nil
		}
		now := k.d.Now().UTC()
		created := now.Truncate(time.Millisecond)
		if newest, ok := newestKey(r); ok && !created.After(newest.CreatedAt) {
			// A clock behind the newest key's: still sort after it.
			created = newest.CreatedAt.Add(time.Millisecond)
		}
		kid = ids.NewAt(keyPrefix, created)
		sealed, err := k.d.Ring.Seal(ctx, priv.Seed(), keyAAD(kid))
		if err != nil {
			return nil, fmt.Errorf("edge: seal signing key %s: %w", kid, err)
		}
		key := &Key{KID: kid, Public: pub, Sealed: sealed, CreatedAt: created}
		ops := []raftstore.Op{Keys.CheckTable(r.TableIndex(Keys)), Keys.Insert(key)}
		ops = append(ops, retirements(r, now)...)
		targetKind, targetID := "edge_key", kid
		e.TargetKind, e.TargetID = &targetKind, &targetID
		return append(ops, audit.Insert(e)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("edge: store a signing key: %w", err)
	}
	if kid == "" {
		return nil, nil
	}
	sk := &signingKey{kid: kid, priv: priv, index: index}
	if cur := k.cur.Load(); cur == nil || cur.index < index {
		k.cur.Store(sk)
	}
	return sk, nil
}

// retirements are the puts that retire every key of r that is due at now.
// A key is due once its successor has existed for longer than an assertion
// lives plus KeyRetireMargin: no assertion it signed can still be valid.
// The newest key has no successor and is never due.
func retirements(r *raftstore.Reader, now time.Time) []raftstore.Op {
	items, _ := Keys.List(r, raftstore.Query{})
	var ops []raftstore.Op
	for i, it := range items {
		if it.Value.RetiredAt != nil || i+1 == len(items) {
			continue
		}
		if now.Sub(items[i+1].Value.CreatedAt) <= AssertionTTL+KeyRetireMargin {
			continue
		}
		key := it.Value
		at := now
		key.RetiredAt = &at
		ops = append(ops, Keys.PutIf(&key, it.Meta.ModifyIndex))
	}
	return ops
}

// KeyInfo describes a signing key without its private half.
type KeyInfo struct {
	KID string `json:"kid"`
	// PublicKey is the Ed25519 public key, base64url without padding (the
	// JWK's x).
	PublicKey string     `json:"public_key"`
	CreatedAt time.Time  `json:"created_at"`
	RetiredAt *time.Time `json:"retired_at"`
	// Current is the key new assertions are signed with.
	Current bool `json:"current"`
	// Published keys are in the JWKS: all but the retired.
	Published bool `json:"published"`
}

// List describes every signing key, newest first.
func (k *SigningKeys) List() []KeyInfo {
	items, _ := Keys.List(k.d.Store.Read(), raftstore.Query{Reverse: true})
	out := make([]KeyInfo, len(items))
	for i, it := range items {
		v := it.Value
		out[i] = KeyInfo{KID: v.KID, PublicKey: base64.RawURLEncoding.EncodeToString(v.Public), CreatedAt: v.CreatedAt,
			RetiredAt: v.RetiredAt, Current: i == 0, Published: v.RetiredAt == nil}
	}
	return out
}

// Rotate adds a signing key that signs every assertion from now on (on
// this node at once, on others as soon as they apply the write), retires
// the keys that are due, audited as edge_key.rotate in the same write, and
// returns the keys as List does.
func (k *SigningKeys) Rotate(ctx context.Context) ([]KeyInfo, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, err := k.addLocked(ctx, func(r *raftstore.Reader) *audit.Entry {
		entry := audit.New(ctx, k.d.Now(), "edge_key.rotate", "", audit.Target{}, map[string]any{})
		if prev, ok := newestKey(r); ok {
			entry.Details["previous_kid"] = prev.KID
		}
		return entry
	})
	if err != nil {
		return nil, err
	}
	return k.List(), nil
}

// Maintain is the leader's periodic work: it makes the first key when
// there is none, rotates when the current key is older than rotateEvery,
// and retires the keys that are due. What it does is decided on the view
// its change is built on, so a change another node made meanwhile (its
// first key, its rotation) is seen and not repeated.
func (k *SigningKeys) Maintain(ctx context.Context, rotateEvery time.Duration) error {
	ctx = actor.With(ctx, actor.System)
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.d.Now().UTC()
	newest, ok := newestKey(k.d.Store.Read())
	if !ok || now.Sub(newest.CreatedAt) >= rotateEvery {
		_, err := k.addLocked(ctx, func(r *raftstore.Reader) *audit.Entry {
			newest, ok := newestKey(r)
			switch {
			case !ok:
				return audit.New(ctx, now, "edge_key.create", "", audit.Target{}, map[string]any{})
			case now.Sub(newest.CreatedAt) >= rotateEvery:
				return audit.New(ctx, now, "edge_key.rotate", "", audit.Target{}, map[string]any{"previous_kid": newest.KID, "scheduled": true})
			}
			return nil // made or rotated meanwhile
		})
		return err
	}
	_, err := k.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		ops := retirements(r, now)
		if len(ops) == 0 {
			return nil, nil
		}
		retired := make([]string, 0, len(ops))
		for _, op := range ops {
			retired = append(retired, op.ID)
		}
		return append(ops, audit.Record(ctx, now, "edge_key.retire", "", audit.Target{}, map[string]any{"kids": retired})), nil
	})
	return err
}

// Loop returns the leader loop: Maintain at once, then every tick, rotating
// every rotateEvery. A round that fails (no key opens on this node, say) is
// logged and tried again at the next tick.
func (k *SigningKeys) Loop(rotateEvery, tick time.Duration) func(ctx context.Context) error {
	round := func(ctx context.Context) error {
		if err := k.Maintain(ctx, rotateEvery); err != nil && ctx.Err() == nil {
			k.d.Logger.Warn("edge: signing key maintenance failed; trying again later", "err", errcode.MessageOf(err))
		}
		return nil
	}
	return func(ctx context.Context) error {
		_ = round(ctx)
		return raftstore.Every(tick, round)(ctx)
	}
}

// Watch follows the table on this node until ctx ends, so that a rotation
// made on another node switches this node's signatures to the new key as
// soon as it applies the write. Every node runs it.
func (k *SigningKeys) Watch(ctx context.Context) error {
	for ctx.Err() == nil {
		r := k.d.Store.Read()
		_ = Keys.Count(r) // looks at the table, so that Wait wakes on its change
		if cur := k.cur.Load(); cur != nil && cur.index < r.TableIndex(Keys) {
			k.mu.Lock()
			_, err := k.loadLocked(r)
			k.mu.Unlock()
			if err != nil {
				// The key in use stays: it is still published.
				k.d.Logger.Warn("edge: the new signing key does not open on this node; signing with the previous one", "err", errcode.MessageOf(err))
			}
		}
		if err := r.Wait(ctx); err != nil {
			return nil
		}
	}
	return nil
}

// Reseal re-seals every private key under the keyring's current data key
// (a keyring.Resealer), in one write; it returns how many it re-sealed. A
// key retired meanwhile is re-sealed as it is then.
func (k *SigningKeys) Reseal(ctx context.Context) (int, error) {
	if err := k.d.Ring.Ready(ctx); err != nil {
		return 0, fmt.Errorf("edge: re-seal signing keys: %w", err)
	}
	n := 0
	_, err := k.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		items, _ := Keys.List(r, raftstore.Query{})
		ops := make([]raftstore.Op, 0, len(items))
		for _, it := range items {
			key := it.Value
			seed, err := k.d.Ring.Open(key.Sealed, keyAAD(key.KID))
			if err != nil {
				return nil, fmt.Errorf("edge: re-seal signing key %s: %w", key.KID, err)
			}
			if key.Sealed, err = k.d.Ring.Seal(ctx, seed, keyAAD(key.KID)); err != nil {
				return nil, fmt.Errorf("edge: re-seal signing key %s: %w", key.KID, err)
			}
			ops = append(ops, Keys.PutIf(&key, it.Meta.ModifyIndex))
		}
		n = len(ops)
		return ops, nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// JWK is a public signing key as the JWKS publishes it (RFC 8037).
type JWK struct {
	Kty string `json:"kty"` // OKP
	Crv string `json:"crv"` // Ed25519
	X   string `json:"x"`   // the public key, base64url without padding
	KID string `json:"kid"`
	Alg string `json:"alg"` // EdDSA
	Use string `json:"use"` // sig
}

// JWKS is the JSON Web Key Set at /.well-known/jwks.json.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// JWKS returns every published key, newest first: the current key and the
// keys an assertion still valid may have been signed with.
func (k *SigningKeys) JWKS() JWKS {
	items, _ := Keys.List(k.d.Store.Read(), raftstore.Query{Reverse: true})
	set := JWKS{Keys: make([]JWK, 0, len(items))}
	for _, it := range items {
		if it.Value.RetiredAt != nil {
			continue
		}
		set.Keys = append(set.Keys, JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(it.Value.Public),
			KID: it.Value.KID, Alg: "EdDSA", Use: "sig"})
	}
	return set
}
