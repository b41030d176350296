// Package raftstoretest opens real stores for the tests of the packages
// that declare tables, on disk in a temporary directory and closed when the
// test ends: a single node, returned only once it leads and serves
// consistent reads, or a cluster node that never catches up (OpenBehind).
//
// It is for tests only and must not be imported by production code.
package raftstoretest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/svchost/svc/raftstore"
)

// Open returns a single-node store of the given tables, ready for writes and
// consistent reads.
func Open(t testing.TB, tables ...raftstore.Def) *raftstore.Store {
	t.Helper()
	s, err := raftstore.Open(raftstore.Config{NodeID: "n1", Dir: t.TempDir(), Tables: tables})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.ConsistentRead(ctx); err != nil {
		t.Fatalf("store did not become ready: %v", err)
	}
	return s
}

// OpenBehind returns a cluster node of the given tables that never catches
// up with its cluster: its two peers are addresses nobody listens on, so it
// never learns a leader, as a node partitioned from the others since its
// start. It holds no state; CaughtUp answers STORE_UNAVAILABLE, saying why.
func OpenBehind(t testing.TB, tables ...raftstore.Def) *raftstore.Store {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peers := []raftstore.Peer{{ID: "n1", Addr: ln.Addr().String()}}
	for _, id := range []string{"n2", "n3"} {
		gone, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		peers = append(peers, raftstore.Peer{ID: id, Addr: gone.Addr().String()})
		_ = gone.Close()
	}
	s, err := raftstore.Open(raftstore.Config{
		NodeID: "n1", Dir: t.TempDir(), RaftAddr: ln.Addr().String(), Listener: ln,
		Peers: peers, Secret: []byte("raftstoretest-cluster-secret"), Tables: tables,
	})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return s
}
