// Package idempotency owns Idempotency-Key records: the first answer to a POST
// that creates infrastructure, kept in the replicated store so that a retry
// with the same key (on any node, after a restart or a leader change) replays
// it instead of repeating the action.
//
// A request first reserves its key with a pending record (compare-and-set, so
// two concurrent requests cannot both act); when the handler answers, the
// record is completed with the answer, or released if the answer was a server
// error. This package must not touch HTTP: the server's middleware calls it.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// Record states.
const (
	StatePending = "pending"
	StateDone    = "done"
)

// Limits.
const (
	// TTL is how long an answer is kept for replay (the contract says at
	// least 24 hours).
	TTL = 24 * time.Hour
	// PendingTTL is how long a reservation blocks others before it is
	// considered abandoned (its holder crashed) and may be taken over.
	PendingTTL = 2 * time.Minute
	// MaxKeyLength bounds the header value.
	MaxKeyLength = 255
	// MaxBody bounds the stored answer; a larger answer is not kept.
	MaxBody = 1 << 20
)

// Record is one key's reservation or answer.
type Record struct {
	ID          string    `json:"id"`
	State       string    `json:"state"`
	RequestHash string    `json:"request_hash"`
	Status      int       `json:"status,omitempty"`
	ContentType string    `json:"content_type,omitempty"`
	Location    string    `json:"location,omitempty"`
	Body        []byte    `json:"body,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	LockedUntil time.Time `json:"locked_until"`
}

// Records is the table of idempotency records.
var Records = &raftstore.Table[Record]{
	Name: "idempotency",
	ID:   func(r *Record) string { return r.ID },
}

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
}

var _ Store = (*raftstore.Store)(nil)

// Service reserves, completes and replays idempotency records.
type Service struct {
	store Store
	now   func() time.Time
}

// New returns a service over store reading the given clock.
func New(store Store, now func() time.Time) *Service {
	return &Service{store: store, now: now}
}

// ID derives a record's ID from the scope of a key: the principal, the
// method, the path and the key itself.
func ID(principal, method, path, key string) string {
	h := sha256.New()
	for _, part := range []string{principal, method, path, key} {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ValidKey checks an Idempotency-Key header value.
func ValidKey(key string) error {
	if key == "" || len(key) > MaxKeyLength {
		return errcode.Invalid("Idempotency-Key", "Idempotency-Key must be 1 to %d characters", MaxKeyLength)
	}
	for _, r := range key {
		if r < 0x21 || r > 0x7e {
			return errcode.Invalid("Idempotency-Key", "Idempotency-Key must be printable ASCII without spaces")
		}
	}
	return nil
}

// Reservation is a key reserved for one request.
type Reservation struct {
	rec   Record
	index uint64
}

// Begin reserves the key for a request whose body hashes to requestHash. It
// returns either a completed record to replay, or a reservation that the
// caller must Complete or Release. Of requests racing for one key, one
// reserves it; the others, built again on the state it left, are told the
// key is in use (or replay its answer).
func (s *Service) Begin(ctx context.Context, id, requestHash string) (*Record, *Reservation, error) {
	var replay *Record
	var res Record
	index, err := s.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		replay = nil
		now := s.now()
		rec, meta, ok := Records.Get(r, id)
		live := ok && now.Before(rec.ExpiresAt)
		if live {
			if rec.RequestHash != requestHash {
				return nil, errcode.New(errcode.StateInvalid,
					"this Idempotency-Key was already used with a different request").
					WithRemedy("use a new key for a different request")
			}
			if rec.State == StateDone {
				replay = &rec
				return nil, nil
			}
			if now.Before(rec.LockedUntil) {
				e := errcode.New(errcode.StateInvalid, "a request with this Idempotency-Key is still in progress").
					WithRemedy("retry once the first request has answered")
				e.RetryAfter = 1
				return nil, e
			}
		}
		res = Record{
			ID: id, State: StatePending, RequestHash: requestHash,
			CreatedAt: now, ExpiresAt: now.Add(TTL), LockedUntil: now.Add(PendingTTL),
		}
		return []raftstore.Op{Records.PutIf(&res, meta.ModifyIndex)}, nil
	})
	switch {
	case err != nil:
		if _, ok := errcode.As(err); ok {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("reserve idempotency key: %w", err)
	case replay != nil:
		return replay, nil, nil
	}
	return nil, &Reservation{rec: res, index: index}, nil
}

// Complete records the answer to replay. An answer over MaxBody is not kept:
// the reservation is released instead.
func (s *Service) Complete(ctx context.Context, res *Reservation, status int, contentType, location string, body []byte) error {
	if len(body) > MaxBody {
		return s.Release(ctx, res)
	}
	rec := res.rec
	rec.State, rec.Status, rec.ContentType, rec.Location, rec.Body = StateDone, status, contentType, location, body
	if err := s.held(ctx, res, Records.PutIf(&rec, res.index)); err != nil {
		return fmt.Errorf("complete idempotency record: %w", err)
	}
	return nil
}

// Release drops a reservation so that a retry runs the request again.
func (s *Service) Release(ctx context.Context, res *Reservation) error {
	if err := s.held(ctx, res, Records.DeleteIf(res.rec.ID, res.index)); err != nil {
		return fmt.Errorf("release idempotency record: %w", err)
	}
	return nil
}

// held writes op, a change of the reservation's record, while the record
// is still the reservation; once another request took the key over (the
// reservation was abandoned past PendingTTL), it is refused.
func (s *Service) held(ctx context.Context, res *Reservation, op raftstore.Op) error {
	_, err := s.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		if _, meta, ok := Records.Get(r, res.rec.ID); !ok || meta.ModifyIndex != res.index {
			return nil, errcode.New(errcode.StateInvalid, "the reservation of this Idempotency-Key was taken over by another request")
		}
		return []raftstore.Op{op}, nil
	})
	return err
}

// gcBatch bounds the rows one expiry command removes.
const gcBatch = 500

// Expire deletes records past their expiry and returns how many it removed
// (a record reserved again meanwhile is left alone).
func (s *Service) Expire(ctx context.Context) (int, error) {
	now := s.now()
	n, err := Records.Sweep(ctx, s.store, raftstore.Query{}, func(r *Record) bool { return !now.Before(r.ExpiresAt) }, gcBatch)
	if err != nil {
		return n, fmt.Errorf("expire idempotency records: %w", err)
	}
	return n, nil
}

// ExpiryLoop runs Expire every interval. It is a leader loop.
func (s *Service) ExpiryLoop(interval time.Duration) func(ctx context.Context) error {
	return raftstore.Every(interval, func(ctx context.Context) error {
		_, err := s.Expire(ctx)
		return err
	})
}
