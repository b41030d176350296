package upgrade

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	goruntime "runtime"
	"sync"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// MaxBinaryBytes caps an uploaded binary.
const MaxBinaryBytes = 512 << 20

// Store is the replicated store: the audit entries, the events and the
// rollouts table.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

// Cluster is the store's cluster, for rollouts (rollout.go): its servers
// and leader, leadership handed on, and a rollout's binary fetched from
// another server.
type Cluster interface {
	Status() raftstore.Status
	TransferLeadership() error
	FetchBlob(ctx context.Context, name string, w io.Writer) (int64, error)
}

var (
	_ Store   = (*raftstore.Store)(nil)
	_ Cluster = (*raftstore.Store)(nil)
)

// Deps are what the service needs.
type Deps struct {
	Store Store
	// Exe is the running executable's path (resolved at the process's
	// start); the new binary is written next to it.
	Exe string
	// Dir is the work directory, which holds the marker.
	Dir string
	// Version is the running binary's; Node this node's id.
	Version, Node string
	// PublicKey, when set, is upgrade.signing_public_key: every binary
	// must carry a signature it verifies. Nil: unsigned binaries are
	// accepted.
	PublicKey ed25519.PublicKey
	// Begin hands a checked binary (path) and its marker, already saved,
	// to the process, which swaps it in and restarts. It must return at
	// once. Nil: upgrading is not available.
	Begin func(m Marker, path string)
	// Cluster, when set, is the store's cluster: with more than one
	// voting server, an upload starts a rollout of every server instead
	// of upgrading this one alone. StepTimeout bounds one server's step
	// of a rollout (the leader marks a longer one failed).
	Cluster     Cluster
	StepTimeout time.Duration
	Log         *slog.Logger
	Now         func() time.Time
}

// Service takes uploads and answers the latest upgrade's state.
type Service struct {
	d Deps

	mu       sync.Mutex
	checking *Marker // the upload being checked, nil when none
	begun    bool    // an upgrade was handed to the process in this generation
}

// New makes the service.
func New(d Deps) *Service { return &Service{d: d} }

// TooLarge refuses a binary over MaxBinaryBytes.
func TooLarge() *errcode.Error {
	return errcode.New(errcode.ValidInvalid, "the binary exceeds %d bytes", MaxBinaryBytes).
		WithStatus(http.StatusRequestEntityTooLarge).WithDetail("limit_bytes", MaxBinaryBytes).
		WithRemedy("upload the svc binary itself (uncompressed, at most %d MiB); strip debug symbols (go build -ldflags=-s) if it is larger", MaxBinaryBytes>>20)
}

// Node is one server's part in an upgrade.
type Node struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	State   string `json:"state"`
	// StartedAt and FinishedAt are the server's step of a rollout
	// (rollout.go): when it began upgrading and when it ended.
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// Status is an upgrade as the API shows it.
type Status struct {
	Record
	Nodes []Node `json:"nodes"`
}

// Current is the answer of GET /api/v1/upgrade.
type Current struct {
	// Upgrade is the latest upgrade of this node, nil when it never had one.
	Upgrade *Status `json:"upgrade"`
	// Version is the running binary's.
	Version string `json:"version"`
	// SignatureRequired says whether upgrade.signing_public_key is set:
	// false means unsigned binaries are accepted.
	SignatureRequired bool `json:"signature_required"`
}

// Latest answers the state of the latest upgrade.
func (s *Service) Latest() (Current, error) {
	cur := Current{Version: s.d.Version, SignatureRequired: s.d.PublicKey != nil}
	s.mu.Lock()
	checking := s.checking
	s.mu.Unlock()
	m := checking
	if m == nil {
		var err error
		if m, err = Load(s.d.Dir); err != nil {
			return cur, err
		}
	}
	if ro := LatestRollout(s.d.Store.Read()); ro != nil && (m == nil || ro.ID >= m.ID) {
		st := ro.status(s.d.Node, s.d.Version)
		cur.Upgrade = &st
	} else if m != nil {
		st := s.status(*m)
		cur.Upgrade = &st
	}
	return cur, nil
}

func (s *Service) status(m Marker) Status {
	node := Node{ID: s.d.Node, Version: s.d.Version, State: m.State}
	return Status{Record: m.Record, Nodes: []Node{node}}
}

// Start checks the binary in body (signature: base64, "" when none) and,
// when it passes, records the upgrade (audit entry svc.upgrade, marker)
// and returns its status with go, which hands it to the process: call go
// once the answer is sent. A refusal leaves nothing behind.
func (s *Service) Start(ctx context.Context, body io.Reader, signature string) (st Status, begin func(), err error) {
	if s.d.Begin == nil {
		return st, nil, errcode.New(errcode.StateInvalid, "this server cannot upgrade in place").
			WithRemedy("replace the binary and restart the service by hand")
	}
	now := s.d.Now().UTC().Truncate(time.Microsecond)
	m := &Marker{Record: Record{ID: ids.NewAt(ids.Upgrade, now), From: s.d.Version, State: StateChecking, StartedAt: now}}
	s.mu.Lock()
	if s.checking != nil || s.begun {
		s.mu.Unlock()
		return st, nil, errcode.New(errcode.StateInvalid, "an upgrade is already under way").
			WithRemedy("wait for it to finish (GET /api/v1/upgrade), then try again")
	}
	s.checking = m
	s.mu.Unlock()
	defer func() {
		if err != nil {
			s.mu.Lock()
			s.checking = nil
			s.mu.Unlock()
		}
	}()

	path, digest, size, err := Receive(s.d.Exe, body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return st, nil, TooLarge()
		}
		return st, nil, err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	if size == 0 {
		return st, nil, errcode.New(errcode.ValidInvalid, "the body is empty: it must be the new svc binary").
			WithRemedy("send the binary as the body, Content-Type application/octet-stream (svc upgrade FILE)")
	}
	if s.d.PublicKey != nil {
		if err := Verify(s.d.PublicKey, digest, signature); err != nil {
			remedy := "sign the binary with the private key of upgrade.signing_public_key (svc upgrade sign --key KEYFILE FILE) and send the signature in ?signature= (svc upgrade FILE --signature SIGFILE)"
			return st, nil, errcode.New(errcode.ValidInvalid, "upgrade refused: %v", err).WithRemedy("%s", remedy).
				WithDetail("signature", map[bool]string{true: "missing", false: "invalid"}[errors.Is(err, ErrNoSignature)])
		}
	}
	to, err := Check(ctx, path)
	if err != nil {
		return st, nil, errcode.New(errcode.ValidInvalid, "the uploaded file is not a binary that runs here: %v", err).
			WithRemedy("upload an svc binary built for %s/%s that prints its version for \"svc version\"", goruntime.GOOS, goruntime.GOARCH)
	}
	if to == s.d.Version {
		return st, nil, errcode.New(errcode.StateInvalid, "the uploaded binary is version %s, which already runs", to).
			WithRemedy("upload a binary of another version")
	}
	m.To = to
	if s.clustered() {
		st, err := s.startRollout(ctx, m, path, digest, size, signature)
		return st, func() {}, err
	}
	entry := audit.New(ctx, now, "svc.upgrade", "", audit.Target{Kind: "node", ID: s.d.Node}, map[string]any{"from": m.From, "to": m.To, "upgrade_id": m.ID, "bytes": size})
	if _, err := s.d.Store.Update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) { return []raftstore.Op{audit.Insert(entry)}, nil }); err != nil {
		return st, nil, fmt.Errorf("record the upgrade: %w", err)
	}
	m.State = StateRestarting
	if err := Save(s.d.Dir, m); err != nil {
		return st, nil, err
	}
	s.mu.Lock()
	s.checking, s.begun = nil, true
	s.mu.Unlock()
	return s.status(*m), func() { s.d.Begin(*m, path) }, nil
}

// Report writes the event of an upgrade's outcome (svc.upgraded or
// svc.upgrade_failed) and marks the marker reported.
func Report(ctx context.Context, store Store, dir string, m *Marker, node string, now time.Time) error {
	var op raftstore.Op
	step, reason := StepDone, ""
	switch m.State {
	case StateDone:
		op = events.Emit(ctx, now, "svc.upgraded", nil, "node", node, map[string]any{"from": m.From, "to": m.To})
	case StateFailed:
		if m.Reason != nil {
			reason = *m.Reason
		}
		step = StepFailed
		said := reason
		if m.Rollout != "" {
			said = node + ": " + reason // the rollout's failure names its server
		}
		op = events.Emit(ctx, now, "svc.upgrade_failed", nil, "node", node, map[string]any{"from": m.From, "to": m.To, "reason": said})
	default:
		return fmt.Errorf("upgrade %s is %s: nothing to report", m.ID, m.State)
	}
	if _, err := store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		ops := []raftstore.Op{op}
		if m.Rollout == "" {
			return ops, nil
		}
		// This server's step of a rollout ends with its event (and starts
		// the next server's turn); one already ended (abandoned by the
		// leader) keeps its end.
		_, stepped, err := stepOps(r, m.Rollout, node, []string{StepUpgrading}, step, reason, now)
		if err != nil && !errors.Is(err, errStepMoved) {
			return nil, err
		}
		return append(ops, stepped...), nil
	}); err != nil {
		return fmt.Errorf("report upgrade %s: %w", m.ID, err)
	}
	m.Reported = true
	return Save(dir, m)
}
