package raftstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/svchost/svc/internal/errcode"
)

func compareForTest(a, b string) int { return strings.Compare(a, b) } // one-digit versions order as text

func TestGateDecision(t *testing.T) {
	for _, tc := range []struct {
		name     string
		need     string
		versions []string
		unknown  []string
		compare  func(a, b string) int
		refused  string // a substring of the refusal, "" when allowed
	}{
		{"ungated", "", []string{"1"}, []string{"n3"}, nil, ""},
		{"every server new enough", "2", []string{"2", "3", "2"}, nil, compareForTest, ""},
		{"one server older", "2", []string{"2", "1", "3"}, nil, compareForTest, "a server runs 1"},
		{"a server's version unknown", "2", []string{"2", "2"}, []string{"n3"}, compareForTest, "n3"},
		{"no way to compare", "2", []string{"2"}, nil, nil, "needs version 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := GateDecision(tc.need, tc.versions, tc.unknown, tc.compare)
			if (tc.refused == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.refused)) {
				t.Errorf("GateDecision = %v; want refused with %q", err, tc.refused)
			}
		})
	}
}

// cmdGatedForTest is a command type only binaries of version "2" apply;
// no handler applies it, as an older binary has none.
const cmdGatedForTest cmdType = 0x7d

func init() { since[cmdGatedForTest] = "2" }

// TestGatedCommandRefusedBelowTheLowestVersion: a store announces its
// version; a command gated on a later one is refused before it reaches the
// log (STATE_INVALID), and nothing is written.
func TestGatedCommandRefusedBelowTheLowestVersion(t *testing.T) {
	s, err := Open(Config{NodeID: "node-1", Dir: t.TempDir(), Tables: testTables, Logger: testLogger(t), Timing: fastTiming,
		Version: "1", CompareVersions: compareForTest})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitFor(t, ctx, "the node announced its version", func() bool { v, ok := s.fsm.servers.get("node-1"); return ok && v == "1" })
	before := s.Status().AppliedIndex
	_, err = s.propose(ctx, []byte{byte(cmdGatedForTest), '{', '}'})
	if e, ok := errcode.As(err); !ok || e.Code != errcode.StateInvalid || !strings.Contains(e.Message, "a server runs 1") || e.Remedy == "" {
		t.Fatalf("a gated command on a version-1 cluster: %v; want STATE_INVALID naming the version, with a remedy", err)
	}
	if after := s.Status().AppliedIndex; after != before {
		t.Errorf("the refused command moved the applied index from %d to %d", before, after)
	}
	// Ungated writes go on.
	if _, err := s.Apply(ctx, things.Insert(&thing{ID: "after"})); err != nil {
		t.Errorf("an ungated write: %v", err)
	}
}

// TestUnknownCommandStopsTheNode: a node that meets a log entry whose type
// it does not know stops applying (panics, which stops the process) rather
// than skipping it, unless the type is marked ignorable, as the server
// announcements are.
func TestUnknownCommandStopsTheNode(t *testing.T) {
	f := newTestFSM(t)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a gated command this binary has no handler for was applied without stopping")
			}
		}()
		f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{byte(cmdGatedForTest), '{', '}'}})
	}()
	f = newTestFSM(t)
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: mustEncode(t, cmdServer, serverCmd{ID: "n1", Version: "7"})})
	if v, ok := f.servers.get("n1"); !ok || v != "7" {
		t.Errorf("the announcement was not recorded: %q %v", v, ok)
	}
}

// TestVersionFloorGates: a store of version "2" (an upgrade's trial of it)
// whose floor is "1" refuses what needs "2".
func TestVersionFloorGates(t *testing.T) {
	s, err := Open(Config{NodeID: "node-1", Dir: t.TempDir(), Tables: testTables, Logger: testLogger(t), Timing: fastTiming,
		Version: "2", VersionFloor: "1", CompareVersions: compareForTest})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitFor(t, ctx, "the node announced its version", func() bool { v, ok := s.fsm.servers.get("node-1"); return ok && v == "2" })
	if _, err := s.propose(ctx, []byte{byte(cmdGatedForTest), '{', '}'}); errcode.CodeOf(err) != errcode.StateInvalid {
		t.Errorf("a gated command under the floor: %v; want STATE_INVALID", err)
	}
}
