package raftstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/svchost/svc/internal/errcode"
)

// Peer is one voting member of the initial cluster.
type Peer struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
}

// DefaultSnapshotInterval is how often a node checks whether its log has
// grown past the snapshot threshold, unless Timing says otherwise. Raft's
// default is two minutes; a snapshot here holds live state only (history
// tables stay on disk), so checking often keeps the log, and its file,
// short at little cost: two minutes of writes at a thousand a second is a
// log of 120,000 entries.
const DefaultSnapshotInterval = 10 * time.Second

// Timing tunes Raft's timeouts. Zero values take Raft's defaults, which suit
// a LAN, but for SnapshotInterval (DefaultSnapshotInterval); tests use
// shorter ones.
type Timing struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// SnapshotThreshold is the number of log entries after which a snapshot
	// is taken; SnapshotInterval how often that is checked.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
}

// Config configures a store node.
type Config struct {
	// NodeID names this node in the cluster; it must not change. Empty
	// means the id kept in Dir, or a new one generated and kept there.
	NodeID string
	// Dir holds the Raft log, stable store and snapshots.
	Dir string
	// RaftAddr is the cluster port this node listens on and others reach it
	// at. Empty means a single node that opens no port.
	RaftAddr string
	// Listener, if set, is the already bound cluster port (RaftAddr must be
	// its address); otherwise Open listens on RaftAddr.
	Listener net.Listener
	// Peers is the initial cluster, this node included. Empty means this
	// node alone. Every node of a new cluster is given the same list.
	Peers []Peer
	// Secret authenticates the cluster's nodes to each other; required with
	// RaftAddr.
	Secret []byte
	// Tables are the tables of the FSM. Every node of a cluster must declare
	// the same tables.
	Tables []Def
	Logger *slog.Logger
	// Metrics receives the store's measurements; nil discards them.
	Metrics Observer
	Timing  Timing
	// ApplyTimeout bounds a write that has no context deadline.
	ApplyTimeout time.Duration
	// Blobs are the named blobs this node serves to the other nodes, which
	// fetch them with FetchBlob; nil means it has none.
	Blobs BlobSource
	// Version is this node's binary version, which it announces to the
	// cluster for version-gated commands (versions.go); empty announces
	// nothing. CompareVersions orders two versions; nil refuses every
	// gated command.
	Version         string
	CompareVersions func(a, b string) int
	// VersionFloor, when set, counts as one more server's version for
	// the gate: a trial run of a new binary writes nothing the binary it
	// would replace could not apply.
	VersionFloor string
}

// Observer receives the store's measurements. The server implements it with
// Prometheus metrics.
type Observer interface {
	ObserveApply(d time.Duration, forwarded bool, outcome string)
	ObserveLeadership(leader bool)
}

// Store is one node of the replicated store: a Raft node whose FSM is a
// go-memdb database of the declared tables.
type Store struct {
	cfg  Config
	log  *slog.Logger
	fsm  *fsm
	raft *raft.Raft
	// started is raft once NewRaft returned, for the FSM's own goroutine,
	// which Raft starts before then (a restore fetching history asks the
	// configuration through it).
	started atomic.Pointer[raft.Raft]
	obs     Observer

	bolt      *raftboltdb.BoltStore
	snaps     raft.SnapshotStore
	transport raft.Transport
	mux       *mux
	fwd       *forwarder
	blobs     *blobPeer

	leaders *leaderLoops
	notifyC chan bool
	// updateLock is held by a change of Update from its second try on, so
	// that this node's colliding changes take turns.
	updateLock chan struct{}
	// readyReads is set once this node, as leader, has applied everything
	// earlier leaders committed (its leadership barrier), and cleared when
	// it loses leadership. Consistent reads are served only then.
	readyReads atomic.Bool
	// catchup says whether this node has caught up with the cluster since
	// it started or last restored a snapshot (catchup.go).
	catchup *catchUp

	closeOnce sync.Once
	closed    chan struct{}
	// raftUp is closed once s.raft is set: the cluster listener serves
	// from before (raft's own transport needs it), and a peer's forwarded
	// request arriving that early waits for it.
	raftUp chan struct{}
	wg     sync.WaitGroup
}

var nodeIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

const (
	inmemAddr           = "svc-local"
	defaultApplyTimeout = 15 * time.Second
)

// Open starts a store node. A node without existing state bootstraps the
// cluster its configuration names (or itself alone); a node with state
// rejoins the cluster recorded in its log.
func Open(cfg Config) (*Store, error) {
	if err := validateConfig(&cfg); err != nil {
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftstore: create %s: %w", cfg.Dir, err)
	}
	var err error
	if cfg.NodeID, err = resolveNodeID(cfg.Dir, cfg.NodeID); err != nil {
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	f, err := newFSM(cfg.Tables, cfg.Dir)
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			return nil, fmt.Errorf("raftstore: the store in %s is in use by another process (is another svc serve running with this work dir?)", cfg.Dir)
		}
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	s := &Store{
		cfg:        cfg,
		log:        cfg.Logger,
		fsm:        f,
		obs:        cfg.Metrics,
		notifyC:    make(chan bool, 8),
		updateLock: make(chan struct{}, 1),
		closed:     make(chan struct{}),
		raftUp:     make(chan struct{}),
		catchup:    newCatchUp(),
	}
	s.blobs = newBlobPeer(blobRouter{hist: func() *history { return f.hist }, dir: cfg.Dir, user: cfg.Blobs})
	f.catchUp = func(ctx context.Context, req historyRange, w io.Writer) error {
		_, err := s.FetchBlob(ctx, req.name(), w)
		return err
	}
	s.leaders = newLeaderLoops(s.log)
	if err := s.open(); err != nil {
		close(s.closed) // a peer's forward waiting for raft gives up
		s.release()
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	s.wg.Add(2)
	go s.watchLeadership()
	go s.catchUpLoop()
	go s.announce()
	return s, nil
}

func validateConfig(cfg *Config) error {
	if cfg.NodeID != "" && !nodeIDRE.MatchString(cfg.NodeID) {
		return fmt.Errorf("node id %q: want 1 to 64 of A-Z a-z 0-9 . _ -", cfg.NodeID)
	}
	if cfg.Dir == "" {
		return errors.New("no data directory")
	}
	if cfg.RaftAddr != "" && cfg.NodeID == "" {
		return errors.New("a cluster node needs a node id")
	}
	if cfg.RaftAddr == "" && len(cfg.Peers) > 1 {
		return errors.New("a cluster of several nodes needs a raft address")
	}
	if cfg.RaftAddr != "" && len(cfg.Secret) < 16 {
		return errors.New("a cluster node needs a cluster secret of at least 16 bytes")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopObserver{}
	}
	if cfg.ApplyTimeout <= 0 {
		cfg.ApplyTimeout = defaultApplyTimeout
	}
	return nil
}

func (s *Store) open() error {
	cfg := s.cfg
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(cfg.Dir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: 2 * time.Second},
	})
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			return fmt.Errorf("the store in %s is in use by another process (is another svc serve running with this work dir?)", cfg.Dir)
		}
		return fmt.Errorf("open log store: %w", err)
	}
	s.bolt = bolt
	logs, err := raft.NewLogCache(512, bolt)
	if err != nil {
		return fmt.Errorf("log cache: %w", err)
	}
	hlog := newHCLog(s.log, "raft")
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hlog)
	if err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	s.snaps = snaps
	if err := s.fsm.prepareHistory(snaps); err != nil {
		return err
	}

	var self raft.ServerAddress
	if cfg.RaftAddr == "" {
		var t *raft.InmemTransport
		self, t = raft.NewInmemTransport(inmemAddr)
		s.transport = t
	} else {
		ln := cfg.Listener
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", cfg.RaftAddr); err != nil {
				return fmt.Errorf("listen on raft address: %w", err)
			}
		}
		s.mux = newMux(ln, cfg.Secret, s.log.With("component", "cluster"))
		s.mux.forward = s.serveForward
		s.mux.blob = s.serveBlob
		s.fwd = &forwarder{m: s.mux}
		s.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  raftLayer{s.mux},
			MaxPool: 3,
			Timeout: 10 * time.Second,
			Logger:  newHCLog(s.log, "raft-net"),
		})
		self = raft.ServerAddress(cfg.RaftAddr)
		go s.mux.serve()
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = hlog
	rc.NotifyCh = s.notifyC
	rc.BatchApplyCh = true
	if cfg.RaftAddr == "" {
		// A single node has no peers to stay stable with: elect at once.
		rc.HeartbeatTimeout = 50 * time.Millisecond
		rc.ElectionTimeout = 50 * time.Millisecond
		rc.LeaderLeaseTimeout = 50 * time.Millisecond
	} else {
		// A follower learns that an entry committed from the leader's next
		// message, which comes with the next write or after CommitTimeout.
		// A forwarded write waits for that before it answers (so the writer
		// reads its own write on that node); raft's 50ms default made a lone
		// writer on a follower wait ~77ms a write. 5ms costs one small idle
		// message per follower every few milliseconds.
		rc.CommitTimeout = 5 * time.Millisecond
	}
	applyTiming(rc, cfg.Timing)

	has, err := raft.HasExistingState(logs, bolt, snaps)
	if err != nil {
		return fmt.Errorf("read existing state: %w", err)
	}
	if !has {
		servers := []raft.Server{{ID: rc.LocalID, Address: self}}
		if len(cfg.Peers) > 0 {
			servers = servers[:0]
			for _, p := range cfg.Peers {
				servers = append(servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
			}
		}
		if err := raft.BootstrapCluster(rc, logs, bolt, snaps, s.transport, raft.Configuration{Servers: servers}); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
		s.log.Info("bootstrapped a new cluster", "node_id", cfg.NodeID, "servers", len(servers))
	}
	r, err := raft.NewRaft(rc, restoreWatch{fsm: s.fsm, behind: s.fellBehind}, logs, bolt, snaps, s.transport)
	if err != nil {
		if rerr := s.fsm.restoreErr.Load(); rerr != nil {
			return fmt.Errorf("start raft: %w: %w", err, *rerr)
		}
		return fmt.Errorf("start raft: %w", err)
	}
	s.raft = r
	s.started.Store(r)
	close(s.raftUp)
	return nil
}

func applyTiming(rc *raft.Config, t Timing) {
	set := func(dst *time.Duration, v time.Duration) {
		if v > 0 {
			*dst = v
		}
	}
	set(&rc.HeartbeatTimeout, t.HeartbeatTimeout)
	set(&rc.ElectionTimeout, t.ElectionTimeout)
	set(&rc.LeaderLeaseTimeout, t.LeaderLeaseTimeout)
	set(&rc.CommitTimeout, t.CommitTimeout)
	rc.SnapshotInterval = DefaultSnapshotInterval
	set(&rc.SnapshotInterval, t.SnapshotInterval)
	if t.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = t.SnapshotThreshold
	}
	if t.TrailingLogs > 0 {
		rc.TrailingLogs = t.TrailingLogs
	}
}

// Apply commits the operations as one transaction: all of them apply, on
// every node, or none does. It returns the Raft index of the command. A
// refusal by the FSM is a *TxnError (carrying the public error); a store that
// cannot reach a leader answers STORE_UNAVAILABLE. On a follower the write is
// forwarded to the leader, and Apply returns once this node has applied it,
// so a read on this node afterwards sees it.
func (s *Store) Apply(ctx context.Context, ops ...Op) (uint64, error) {
	for _, op := range ops {
		if op.err != nil {
			return 0, errcode.Wrap(op.err, errcode.Internal, "a write could not be encoded")
		}
	}
	b, err := encodeCommand(cmdTxn, txnCmd{Ops: ops})
	if err != nil {
		return 0, errcode.Wrap(err, errcode.Internal, "a write could not be encoded")
	}
	return s.propose(ctx, b)
}

// Retain removes rows of an append-only table under its retention rule. It is
// the only removal an append-only table admits, and the FSM refuses the whole
// command if any row is not one the rule lets go.
func (s *Store) Retain(ctx context.Context, table Def, ids ...string) (uint64, error) {
	b, err := encodeCommand(cmdRetain, retainCmd{Table: table.TableName(), IDs: ids})
	if err != nil {
		return 0, errcode.Wrap(err, errcode.Internal, "a retention command could not be encoded")
	}
	return s.propose(ctx, b)
}

// propose commits a command through the leader, retrying only while the
// command has certainly not been accepted.
func (s *Store) propose(ctx context.Context, cmd []byte) (uint64, error) {
	if refusal := s.gate(cmd); refusal != nil {
		return 0, refusal
	}
	if err := validateCommand(cmd, s.fsm.tables); err != nil {
		return 0, errcode.Wrap(err, errcode.Internal, "a write was malformed and was not attempted")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.ApplyTimeout)
		defer cancel()
	}
	start := time.Now()
	for {
		if err := s.ctxErr(ctx); err != nil {
			s.obs.ObserveApply(time.Since(start), false, "unavailable")
			return 0, err
		}
		if s.IsLeader() {
			index, refused, err := s.applyLocal(cmd)
			switch {
			case err == nil && refused != nil:
				return index, refused
			case err == nil:
				return index, nil
			case notAccepted(err):
				s.pause(ctx)
				continue
			default:
				return 0, unknownOutcome(err)
			}
		}
		addr, id := s.raft.LeaderWithID()
		if addr == "" || string(id) == s.cfg.NodeID || s.fwd == nil {
			s.pause(ctx)
			continue
		}
		resp, err := s.fwd.call(ctx, string(addr), fwdApply, cmd)
		if errors.Is(err, errNotSent) {
			s.pause(ctx)
			continue
		}
		if err != nil {
			s.obs.ObserveApply(time.Since(start), true, "unknown")
			return 0, unknownOutcome(err)
		}
		if resp.Retry {
			s.pause(ctx)
			continue
		}
		if resp.Fail != nil {
			s.obs.ObserveApply(time.Since(start), true, "failed")
			return 0, resp.Fail
		}
		outcome := "ok"
		if resp.Refused != nil {
			outcome = "refused"
		}
		s.obs.ObserveApply(time.Since(start), true, outcome)
		// Read-your-writes on this node: wait until it applied the write.
		// The write is committed either way; a slow follower only delays.
		if err := s.WaitIndex(ctx, resp.Index); err != nil {
			s.log.Warn("forwarded write committed but not yet applied here", "index", resp.Index, "err", err)
		}
		if resp.Refused != nil {
			return resp.Index, resp.Refused
		}
		return resp.Index, nil
	}
}

// applyLocal proposes a command on this node, which believes it leads, for
// itself or for a follower that forwarded it.
func (s *Store) applyLocal(cmd []byte) (uint64, *TxnError, error) {
	start := time.Now()
	fut := s.raft.Apply(cmd, s.cfg.ApplyTimeout)
	if err := fut.Error(); err != nil {
		outcome := "unknown"
		if notAccepted(err) {
			outcome = "not_leader"
		}
		s.obs.ObserveApply(time.Since(start), false, outcome)
		return 0, nil, err
	}
	refused, _ := fut.Response().(*TxnError)
	outcome := "ok"
	if refused != nil {
		outcome = "refused"
	}
	s.obs.ObserveApply(time.Since(start), false, outcome)
	return fut.Index(), refused, nil
}

// notAccepted reports whether Raft refused a command before appending it, so
// that proposing it again cannot apply it twice.
func notAccepted(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrEnqueueTimeout)
}

func unknownOutcome(err error) *errcode.Error {
	e := errcode.Wrap(err, errcode.StoreUnavailable,
		"the store lost its leader before the write was confirmed; it may or may not have been applied")
	e.RetryAfter = 1
	return e.WithRemedy("read the object back before retrying, or retry with an Idempotency-Key")
}

func (s *Store) ctxErr(ctx context.Context) error {
	select {
	case <-s.closed:
		return errcode.New(errcode.StoreUnavailable, "the store is shutting down")
	default:
	}
	if ctx.Err() != nil {
		e := errcode.Wrap(ctx.Err(), errcode.StoreUnavailable, "no leader could be reached in time")
		e.RetryAfter = 1
		return e.WithRemedy("the cluster may be electing a leader or have lost its quorum; retry shortly")
	}
	return nil
}

// pause waits a little before another attempt.
func (s *Store) pause(ctx context.Context) {
	t := time.NewTimer(25 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.closed:
	}
}

// Read returns a read view of this node's state. It may lag the leader by
// the replication delay; use ConsistentRead where that matters.
func (s *Store) Read() *Reader {
	// The applied index is loaded first: the database loaded after it
	// includes at least that much, never less.
	index := s.fsm.applied.Load()
	return &Reader{tx: s.fsm.db.Load().Txn(false), index: index, hist: s.fsm.hist}
}

// ConsistentRead returns a read view that includes every write committed
// before the call: the leader confirms it still leads and names its applied
// index, and this node waits until it has applied that far (which also
// shows the node caught up, see CaughtUp).
func (s *Store) ConsistentRead(ctx context.Context) (*Reader, error) {
	for {
		if err := s.ctxErr(ctx); err != nil {
			return nil, err
		}
		attempt := s.catchup.attempt()
		index, err := s.leaderApplied(ctx)
		if err != nil {
			s.pause(ctx)
			continue
		}
		if err := s.WaitIndex(ctx, index); err != nil {
			return nil, s.ctxErr(ctx)
		}
		s.caughtUpSince(attempt)
		return s.Read(), nil
	}
}

// readIndex is the index a consistent read must see, as this node (the
// leader) knows it: the last command its FSM applied. Every write that was
// acknowledged anywhere is at or below it, because a write is acknowledged
// only once applied, and a new leader serves reads only after its barrier
// applied everything earlier leaders committed. (Raft's own commit index
// will not do: it counts no-op and barrier entries the FSM never sees.)
func (s *Store) readIndex() (uint64, bool) {
	if !s.readyReads.Load() {
		return 0, false
	}
	if err := s.raft.VerifyLeader().Error(); err != nil {
		return 0, false
	}
	return s.fsm.applied.Load(), true
}

// WaitIndex waits until this node has applied the given index.
func (s *Store) WaitIndex(ctx context.Context, index uint64) error {
	for {
		applied, ch := s.fsm.appliedWatch()
		if applied >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closed:
			return errors.New("store closed")
		}
	}
}

// NodeID returns this node's id.
func (s *Store) NodeID() string { return s.cfg.NodeID }

// IsLeader reports whether this node currently leads.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// Leader returns the ID and address of the leader this node knows of, empty
// when none is known.
func (s *Store) Leader() (id, addr string) {
	a, i := s.raft.LeaderWithID()
	return string(i), string(a)
}

// WaitForLeader waits until this node knows a leader.
func (s *Store) WaitForLeader(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if id, _ := s.Leader(); id != "" {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Status describes this node's view of the cluster.
type Status struct {
	NodeID       string       `json:"node_id"`
	State        string       `json:"state"`
	LeaderID     string       `json:"leader_id"`
	LeaderAddr   string       `json:"leader_addr"`
	Term         uint64       `json:"term"`
	LastIndex    uint64       `json:"last_index"`
	CommitIndex  uint64       `json:"commit_index"`
	AppliedIndex uint64       `json:"applied_index"`
	History      HistoryHead  `json:"history"`
	Servers      []ServerInfo `json:"servers"`
	Tables       []string     `json:"tables"`
}

// ServerInfo is one member of the Raft configuration.
type ServerInfo struct {
	ID       string `json:"id"`
	Addr     string `json:"addr"`
	Suffrage string `json:"suffrage"`
}

// Status returns this node's view of the cluster.
func (s *Store) Status() Status {
	st := Status{
		NodeID:       s.cfg.NodeID,
		State:        s.raft.State().String(),
		LastIndex:    s.raft.LastIndex(),
		CommitIndex:  s.raft.CommitIndex(),
		AppliedIndex: s.fsm.applied.Load(),
		History:      s.HistoryHead(),
		Tables:       s.fsm.tableNames(),
	}
	st.LeaderID, st.LeaderAddr = s.Leader()
	st.Term = s.raft.CurrentTerm()
	if fut := s.raft.GetConfiguration(); fut.Error() == nil {
		for _, srv := range fut.Configuration().Servers {
			st.Servers = append(st.Servers, ServerInfo{ID: string(srv.ID), Addr: string(srv.Address), Suffrage: srv.Suffrage.String()})
		}
	}
	return st
}

// Digest hashes this node's whole state; nodes that applied the same log
// agree. It costs a walk of every row.
func (s *Store) Digest() (string, error) { return s.fsm.digest() }

// Snapshot asks Raft to take a snapshot now and compact the log.
func (s *Store) Snapshot() error { return s.raft.Snapshot().Error() }

// RunWhileLeader runs fn on this node for as long as it leads, starting it
// again whenever it gains leadership. fn's context ends when leadership is
// lost or the store closes; an error return is logged and fn restarted after
// a pause while the node still leads.
func (s *Store) RunWhileLeader(name string, fn func(ctx context.Context) error) {
	s.leaders.add(name, fn)
}

func (s *Store) watchLeadership() {
	defer s.wg.Done()
	for {
		select {
		case <-s.closed:
			return
		case leader := <-s.notifyC:
			s.obs.ObserveLeadership(leader)
			if !leader {
				s.readyReads.Store(false)
				s.log.Info("lost leadership; stopping leader loops")
				s.leaders.stop()
				continue
			}
			// Before acting as leader, make sure the FSM has applied
			// everything earlier leaders committed.
			if !s.leadershipBarrier() {
				continue
			}
			s.readyReads.Store(true)
			s.log.Info("gained leadership; starting leader loops")
			s.leaders.start()
		}
	}
}

// leadershipBarrier runs a barrier, again and again while this node still
// leads, until it succeeds; it reports whether it did. Giving up early would
// leave a leader that never serves consistent reads nor runs its loops.
func (s *Store) leadershipBarrier() bool {
	for attempt := 1; ; attempt++ {
		err := s.raft.Barrier(s.cfg.ApplyTimeout).Error()
		if err == nil {
			return true
		}
		s.log.Warn("gained leadership but the barrier failed", "attempt", attempt, "err", err)
		select {
		case <-s.closed:
			return false
		case <-time.After(100 * time.Millisecond):
		}
		if !s.IsLeader() {
			return false
		}
	}
}

// TransferLeadership hands this node's leadership to another voter (the
// one furthest along), as a leader about to restart does; on a node that
// does not lead it does nothing.
func (s *Store) TransferLeadership() error {
	if !s.IsLeader() {
		return nil
	}
	return s.raft.LeadershipTransfer().Error()
}

// Close leaves leadership to another node if it can, stops the leader loops
// and shuts the node down.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		if s.raft != nil && s.IsLeader() && s.voters() > 1 {
			if e := s.raft.LeadershipTransfer().Error(); e != nil {
				s.log.Warn("leadership transfer before shutdown failed", "err", e)
			}
		}
		close(s.closed)
		s.wg.Wait()
		s.leaders.stop()
		if s.raft != nil {
			err = s.raft.Shutdown().Error()
		}
		s.release()
	})
	return err
}

func (s *Store) voters() int {
	fut := s.raft.GetConfiguration()
	if fut.Error() != nil {
		return 0
	}
	n := 0
	for _, srv := range fut.Configuration().Servers {
		if srv.Suffrage == raft.Voter {
			n++
		}
	}
	return n
}

// release closes what open acquired.
func (s *Store) release() {
	if s.fwd != nil {
		s.fwd.close()
	}
	if s.mux != nil {
		_ = s.mux.close()
	}
	if c, ok := s.transport.(interface{ Close() error }); ok {
		_ = c.Close()
	}
	if s.bolt != nil {
		_ = s.bolt.Close()
	}
	_ = s.fsm.hist.close()
}

type nopObserver struct{}

func (nopObserver) ObserveApply(time.Duration, bool, string) {}
func (nopObserver) ObserveLeadership(bool)                   {}
