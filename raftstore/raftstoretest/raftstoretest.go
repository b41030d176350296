// Package raftstoretest opens real single-node stores for the tests of the
// packages that declare tables: on disk in a temporary directory, closed
// when the test ends, and returned only once the node leads and serves
// consistent reads.
//
// It is for tests only and must not be imported by production code.
package raftstoretest

import (
	"context"
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
