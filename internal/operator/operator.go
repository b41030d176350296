// Package operator owns the installation's self-checks for operators: the
// state of the replicated store as this node sees it, and write probes, small
// records written through the real replicated write path (as etcd's "check
// perf" does) to prove and time that writes commit, from any node.
//
// It must not touch HTTP or adapters. Probes are removed by a leader loop an
// hour after they are written.
package operator

import (
	"context"
	"fmt"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// Probe is one write probe.
type Probe struct {
	ID        string    `json:"id"`
	Node      string    `json:"node"`
	WrittenAt time.Time `json:"written_at"`
	Payload   []byte    `json:"payload,omitempty"`
}

// Probes is the table of write probes. It is a history table: probes live
// in each node's history store on disk until they expire.
var Probes = &raftstore.Table[Probe]{
	Name:    "probes",
	ID:      func(p *Probe) string { return p.ID },
	History: true,
}

// Limits.
const (
	MaxProbePayload = 64 << 10
	ProbeTTL        = time.Hour
	gcBatch         = 1000
)

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
	Status() raftstore.Status
	Digest() (string, error)
	VerifyHistory(ctx context.Context) (raftstore.HistoryReport, error)
}

var _ Store = (*raftstore.Store)(nil)

// Service answers operator requests.
type Service struct {
	store Store
	node  string
	now   func() time.Time
}

// New returns the service of the node named node.
func New(store Store, node string, now func() time.Time) *Service {
	return &Service{store: store, node: node, now: now}
}

// RaftStatus is the store's state as this node sees it.
type RaftStatus struct {
	raftstore.Status
	Digest string `json:"digest,omitempty"`
}

// Status returns this node's view of the store, with a digest of the whole
// state when asked (a walk of every row; nodes that applied the same index
// have the same digest).
func (s *Service) Status(withDigest bool) (RaftStatus, error) {
	st := RaftStatus{Status: s.store.Status()}
	if withDigest {
		d, err := s.store.Digest()
		if err != nil {
			return st, fmt.Errorf("digest: %w", err)
		}
		st.Digest = d
	}
	return st, nil
}

// VerifyHistory checks this node's history chain (the audit log, events,
// deploy logs and probes) from its first record to its head.
func (s *Service) VerifyHistory(ctx context.Context) (raftstore.HistoryReport, error) {
	rep, err := s.store.VerifyHistory(ctx)
	if err != nil {
		return rep, fmt.Errorf("verify history: %w", err)
	}
	return rep, nil
}

// ProbeResult is the outcome of a write probe.
type ProbeResult struct {
	ID         string  `json:"id"`
	Index      uint64  `json:"index"`
	Node       string  `json:"node"`
	Leader     string  `json:"leader"`
	DurationMS float64 `json:"duration_ms"`
}

// WriteProbe writes one probe with payloadBytes of payload through the
// replicated write path and reports how long the commit took.
func (s *Service) WriteProbe(ctx context.Context, payloadBytes int) (ProbeResult, error) {
	if payloadBytes < 0 || payloadBytes > MaxProbePayload {
		return ProbeResult{}, errcode.Invalid("payload_bytes", "payload_bytes must be 0 to %d", MaxProbePayload)
	}
	now := s.now().UTC()
	p := Probe{ID: ids.NewAt(ids.Probe, now), Node: s.node, WrittenAt: now, Payload: make([]byte, payloadBytes)}
	start := time.Now()
	index, err := s.store.Update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) {
		return []raftstore.Op{Probes.Insert(&p),
			audit.Record(ctx, p.WrittenAt, "operator.probe.create", "", audit.Target{Kind: "probe", ID: p.ID}, map[string]any{"payload_bytes": payloadBytes})}, nil
	})
	if err != nil {
		return ProbeResult{}, fmt.Errorf("write probe: %w", err)
	}
	leader := s.store.Status().LeaderID
	return ProbeResult{ID: p.ID, Index: index, Node: s.node, Leader: leader, DurationMS: float64(time.Since(start).Microseconds()) / 1000}, nil
}

// Probe returns a probe as this node's state holds it.
func (s *Service) Probe(id string) (Probe, raftstore.Meta, error) {
	p, m, ok := Probes.Get(s.store.Read(), id)
	if !ok {
		return Probe{}, m, errcode.New(errcode.NotFound, "no probe %s on this node", id)
	}
	p.Payload = nil
	return p, m, nil
}

// Probes lists the probes this node holds after the given ID, oldest first,
// and whether more follow.
func (s *Service) Probes(after string, limit int) ([]Probe, bool) {
	items, more := Probes.List(s.store.Read(), raftstore.Query{After: after, Limit: limit})
	out := make([]Probe, len(items))
	for i, it := range items {
		out[i] = it.Value
		out[i].Payload = nil
	}
	return out, more
}

// Expire deletes probes older than ProbeTTL.
func (s *Service) Expire(ctx context.Context) (int, error) {
	cutoff := s.now().Add(-ProbeTTL)
	// A probe's ID carries the time it was written: the walk stops after
	// the cutoff's millisecond.
	older := raftstore.Query{Before: ids.Lowest(ids.Probe, cutoff.Add(time.Millisecond))}
	n, err := Probes.Sweep(ctx, s.store, older, func(p *Probe) bool { return p.WrittenAt.Before(cutoff) }, gcBatch)
	if err != nil {
		return n, fmt.Errorf("expire probes: %w", err)
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
