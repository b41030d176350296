// Package keyring owns the encryption of every value the product keeps but
// never shows again: secret values of the builtin secrets adapter, adapter
// credentials, and later webhook header values and backup keys.
//
// Values are sealed with AES-256-GCM under a data key. Data keys live in the
// replicated store, each wrapped (AES-256-GCM again) by the key-encryption
// key (KEK): a 32-byte file in the work dir, readable only by the service,
// that never enters the store, the log or a snapshot. Rotation adds a new
// data key that seals everything from then on and re-seals what was sealed
// before; old keys stay to open anything a re-seal has not reached.
//
// A cluster's nodes must share the KEK file, as they share the cluster
// secret: a node whose KEK did not wrap the data keys cannot open anything
// and says so (ADAPTER_FAILED with a remedy).
//
// It must not know what it encrypts: callers pass associated data naming the
// purpose (for example "secret/app_…/API_KEY"), so that a sealed value moved
// to another row does not open.
package keyring

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// KeySize is the size of the KEK and of every data key.
const KeySize = 32

// KEK is the key-encryption key read from the work dir.
type KEK struct {
	key  []byte
	id   string // first 16 hex digits of SHA-256(key): names the key, reveals nothing
	path string
}

// ID names the KEK in data key rows.
func (k *KEK) ID() string { return k.id }

// Path is where the KEK file is.
func (k *KEK) Path() string { return k.path }

// LoadKEK reads the KEK file, creating it (mode 0600, its directory 0700)
// with 32 random bytes when it does not exist. A file that others may read,
// or of the wrong size, is refused: failing closed beats using a key that
// may have leaked or been truncated.
func LoadKEK(path string) (*KEK, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("keyring: create the directory of %s: %w", path, err)
	}
	key, err := readKEK(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createKEK(path)
	}
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(key)
	return &KEK{key: key, id: hex.EncodeToString(sum[:8]), path: path}, nil
}

func readKEK(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("keyring: %s: %w", path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("keyring: the key-encryption key %s may be read by others (mode %v); run chmod 600 on it", path, st.Mode().Perm())
	}
	key, err := io.ReadAll(io.LimitReader(f, KeySize+1))
	if err != nil {
		return nil, fmt.Errorf("keyring: read %s: %w", path, err)
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("keyring: the key-encryption key %s must hold exactly %d bytes, it holds %d", path, KeySize, len(key))
	}
	return key, nil
}

func createKEK(path string) ([]byte, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("keyring: draw a key: %w", err)
	}
	// A temporary file of its own (mode 0600), so that concurrent first
	// starts and a crash's leftovers do not collide.
	f, err := os.CreateTemp(filepath.Dir(path), ".kek-*")
	if err != nil {
		return nil, fmt.Errorf("keyring: create a key file beside %s: %w", path, err)
	}
	tmp := f.Name()
	if _, err := f.Write(key); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("keyring: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("keyring: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("keyring: close %s: %w", tmp, err)
	}
	// Link, not rename: if another process created the file meanwhile,
	// its key wins and ours is dropped.
	if err := os.Link(tmp, path); err != nil {
		os.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			return readKEK(path)
		}
		return nil, fmt.Errorf("keyring: install %s: %w", path, err)
	}
	os.Remove(tmp)
	return key, nil
}

// DataKey is a data key as the store keeps it: wrapped by the KEK.
type DataKey struct {
	ID        string    `json:"id"` // key_<ULID>; the newest seals
	Wrapped   []byte    `json:"wrapped"`
	KEKID     string    `json:"kek_id"`
	CreatedAt time.Time `json:"created_at"`
}

// Keys is the table of data keys. Rows are only ever added: a key that
// sealed something must stay to open it.
var Keys = &raftstore.Table[DataKey]{
	Name:       "keyring",
	ID:         func(k *DataKey) string { return k.ID },
	AppendOnly: true,
	Validate: func(_ *raftstore.Reader, _, k *DataKey) error {
		if k != nil && (len(k.Wrapped) != 12+KeySize+16 || k.KEKID == "") {
			return errcode.New(errcode.ValidInvalid, "a data key row must carry a wrapped %d-byte key", KeySize)
		}
		return nil
	},
}

// Store is what the ring needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

var _ Store = (*raftstore.Store)(nil)

// Resealer re-seals, under the current data key, every value its owner
// keeps sealed; it returns how many it re-sealed.
type Resealer interface {
	Reseal(ctx context.Context) (int, error)
}

// Ring seals and opens values with the data keys of the store.
type Ring struct {
	store Store
	kek   *KEK
	now   func() time.Time

	mu        sync.Mutex
	plain     map[string][]byte // unwrapped data keys by ID
	resealers []Resealer
}

// New returns a ring over the store's data keys and the KEK.
func New(store Store, kek *KEK, now func() time.Time) *Ring {
	return &Ring{store: store, kek: kek, now: now, plain: map[string][]byte{}}
}

// OnRotate registers a resealer that Rotate runs after adding a key.
func (r *Ring) OnRotate(rs Resealer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resealers = append(r.resealers, rs)
}

const envelopeVersion = 1

// Seal encrypts plaintext under the current data key (creating the first
// one on first use), binding it to aad. The result names its key, so that
// it opens after rotations.
//
// Seal writes to the store only to create the first data key: once Ready
// has returned, it writes nothing, so a store Update's build may call it.
func (r *Ring) Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error) {
	id, key, err := r.current(ctx)
	if err != nil {
		return nil, err
	}
	gcm, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("keyring: draw a nonce: %w", err)
	}
	out := make([]byte, 0, 2+len(id)+len(nonce)+len(plaintext)+gcm.Overhead())
	out = append(out, envelopeVersion, byte(len(id)))
	out = append(out, id...)
	out = append(out, nonce...)
	return gcm.Seal(out, nonce, plaintext, bindAAD(id, aad)), nil
}

// Open decrypts a value Seal returned for the same aad.
func (r *Ring) Open(sealed, aad []byte) ([]byte, error) {
	id, nonce, ct, err := parseEnvelope(sealed)
	if err != nil {
		return nil, err
	}
	key, err := r.key(id)
	if err != nil {
		return nil, err
	}
	gcm, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	pt, err := gcm.Open(nil, nonce, ct, bindAAD(id, aad))
	if err != nil {
		return nil, errcode.New(errcode.AdapterFailed, "a sealed value did not open: it was altered, or sealed for something else")
	}
	return pt, nil
}

// KeyID returns the ID of the data key that sealed a value.
func KeyID(sealed []byte) string {
	id, _, _, err := parseEnvelope(sealed)
	if err != nil {
		return ""
	}
	return id
}

func parseEnvelope(b []byte) (id string, nonce, ct []byte, err error) {
	bad := errcode.New(errcode.AdapterFailed, "a sealed value is malformed")
	if len(b) < 2 || b[0] != envelopeVersion {
		return "", nil, nil, bad
	}
	n := int(b[1])
	if len(b) < 2+n+12+16 {
		return "", nil, nil, bad
	}
	return string(b[2 : 2+n]), b[2+n : 2+n+12], b[2+n+12:], nil
}

func bindAAD(id string, aad []byte) []byte {
	return bytes.Join([][]byte{[]byte("svc-keyring-v1"), []byte(id), aad}, []byte{0})
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	return cipher.NewGCM(block)
}

// Ready makes sure a data key exists, creating the first when there is
// none, so that Seal writes nothing from then on. Call it before a store
// Update whose build seals.
func (r *Ring) Ready(ctx context.Context) error {
	_, _, err := r.current(ctx)
	return err
}

// current returns the newest data key, creating the first when there is
// none.
func (r *Ring) current(ctx context.Context) (string, []byte, error) {
	items, _ := Keys.List(r.store.Read(), raftstore.Query{Reverse: true, Limit: 1})
	if len(items) == 0 {
		k, err := r.add(ctx, nil)
		if err != nil {
			return "", nil, err
		}
		items = []raftstore.Item[DataKey]{{Value: k}}
	}
	id := items[0].Value.ID
	key, err := r.key(id)
	return id, key, err
}

// key returns an unwrapped data key.
func (r *Ring) key(id string) ([]byte, error) {
	r.mu.Lock()
	k, ok := r.plain[id]
	r.mu.Unlock()
	if ok {
		return k, nil
	}
	dk, _, ok := Keys.Get(r.store.Read(), id)
	if !ok {
		return nil, errcode.New(errcode.AdapterFailed, "the data key %s that sealed a value is not in the store", id)
	}
	if dk.KEKID != r.kek.id {
		return nil, errcode.New(errcode.AdapterFailed,
			"this node's key-encryption key (%s, id %s) did not wrap data key %s (wrapped by KEK id %s)", r.kek.path, r.kek.id, id, dk.KEKID).
			WithRemedy("give every node of the cluster the same key-encryption key file: copy it from the node that created it, then restart this node")
	}
	gcm, err := newGCM(r.kek.key)
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, dk.Wrapped[:12], dk.Wrapped[12:], []byte("svc-data-key/"+id))
	if err != nil {
		return nil, errcode.New(errcode.AdapterFailed, "data key %s does not unwrap with the key-encryption key %s", id, r.kek.path).
			WithRemedy("restore the key-encryption key file this installation was created with")
	}
	r.mu.Lock()
	r.plain[id] = plain
	r.mu.Unlock()
	return plain, nil
}

// add draws a new data key, wraps it and stores it, with an audit entry
// when rotating (entry non-nil). The first key (entry nil) is written only
// if the table is still empty: when two first seals race, one key is made
// and both use it.
func (r *Ring) add(ctx context.Context, entry *audit.Entry) (DataKey, error) {
	now := r.now()
	plain := make([]byte, KeySize)
	if _, err := rand.Read(plain); err != nil {
		return DataKey{}, fmt.Errorf("keyring: draw a data key: %w", err)
	}
	id := ids.NewAt(ids.DataKey, now)
	gcm, err := newGCM(r.kek.key)
	if err != nil {
		return DataKey{}, err
	}
	nonce := make([]byte, 12)
	if _, err := rand.Read(nonce); err != nil {
		return DataKey{}, fmt.Errorf("keyring: draw a nonce: %w", err)
	}
	dk := DataKey{ID: id, Wrapped: gcm.Seal(nonce, nonce, plain, []byte("svc-data-key/"+id)), KEKID: r.kek.id, CreatedAt: now}
	if entry != nil {
		entry.TargetKind, entry.TargetID = ptr("data_key"), ptr(id)
	}
	got := dk
	_, err = r.store.Update(ctx, func(v *raftstore.Reader) ([]raftstore.Op, error) {
		got = dk
		if entry != nil {
			return []raftstore.Op{Keys.Insert(&dk), audit.Insert(entry)}, nil
		}
		if items, _ := Keys.List(v, raftstore.Query{Reverse: true, Limit: 1}); len(items) > 0 {
			got = items[0].Value // another first seal made it meanwhile
			return nil, nil
		}
		return []raftstore.Op{Keys.CheckTable(v.TableIndex(Keys)), Keys.Insert(&dk)}, nil
	})
	if err != nil {
		return DataKey{}, fmt.Errorf("keyring: store a data key: %w", err)
	}
	if got.ID == id {
		r.mu.Lock()
		r.plain[id] = plain
		r.mu.Unlock()
	}
	return got, nil
}

func ptr(s string) *string { return &s }

// KeyInfo describes a data key without its material.
type KeyInfo struct {
	ID        string    `json:"id"`
	KEKID     string    `json:"kek_id"`
	CreatedAt time.Time `json:"created_at"`
	Current   bool      `json:"current"`
}

// Info lists the data keys, newest first.
func (r *Ring) Info() []KeyInfo {
	items, _ := Keys.List(r.store.Read(), raftstore.Query{Reverse: true})
	out := make([]KeyInfo, len(items))
	for i, it := range items {
		out[i] = KeyInfo{ID: it.Value.ID, KEKID: it.Value.KEKID, CreatedAt: it.Value.CreatedAt, Current: i == 0}
	}
	return out
}

// Rotation is what a rotation did.
type Rotation struct {
	Key      KeyInfo `json:"key"`
	Resealed int     `json:"resealed"`
}

// Rotate adds a data key, which seals everything from now on, audited as
// keyring.rotate, then has every registered owner re-seal its values under
// it. A failed re-seal leaves values under older keys, which still open;
// rotating again finishes the work.
func (r *Ring) Rotate(ctx context.Context) (Rotation, error) {
	entry := audit.New(ctx, r.now(), "keyring.rotate", "", audit.Target{}, map[string]any{"kek_id": r.kek.id})
	dk, err := r.add(ctx, entry)
	if err != nil {
		return Rotation{}, err
	}
	r.mu.Lock()
	rs := append([]Resealer(nil), r.resealers...)
	r.mu.Unlock()
	rot := Rotation{Key: KeyInfo{ID: dk.ID, KEKID: dk.KEKID, CreatedAt: dk.CreatedAt, Current: true}}
	for _, s := range rs {
		n, err := s.Reseal(ctx)
		rot.Resealed += n
		if err != nil {
			return rot, fmt.Errorf("keyring: re-seal after rotation: %w", err)
		}
	}
	return rot, nil
}

// Check says whether this node can seal and open: its KEK unwraps the
// current data key. With no data key yet there is nothing to check.
func (r *Ring) Check() error {
	items, _ := Keys.List(r.store.Read(), raftstore.Query{Reverse: true, Limit: 1})
	if len(items) == 0 {
		return nil
	}
	_, err := r.key(items[0].Value.ID)
	return err
}
