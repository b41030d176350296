package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/bbolt"

	"github.com/svchost/svc/internal/errcode"
)

// record is the row of the history test tables: hlog (history, rows may be
// dropped), hevents (history, append-only, dropped only by retention once
// expired) and mlog, the memdb twin of hlog that the history tables'
// answers are checked against.
type record struct {
	ID      string   `json:"id"`
	Kind    string   `json:"kind"`
	Who     string   `json:"who"`
	Tags    []string `json:"tags,omitempty"`
	Expired bool     `json:"expired,omitempty"`
}

func recordIndexes() []Index[record] {
	return []Index[record]{
		{Name: "kind", Key: func(r *record) (string, bool) { return r.Kind, r.Kind != "" }},
		{Name: "who", Key: func(r *record) (string, bool) { return r.Who, r.Who != "" }},
		{Name: "tag", Keys: func(r *record) []string { return r.Tags }},
	}
}

var (
	hlog    = &Table[record]{Name: "hlog", ID: func(r *record) string { return r.ID }, History: true, Indexes: recordIndexes()}
	mlog    = &Table[record]{Name: "mlog", ID: func(r *record) string { return r.ID }, Indexes: recordIndexes()}
	hevents = &Table[record]{
		Name: "hevents", ID: func(r *record) string { return r.ID }, History: true, AppendOnly: true,
		Indexes: recordIndexes(),
		Retain: func(_ *Reader, r *record, _ Meta) error {
			if !r.Expired {
				return errors.New("not expired")
			}
			return nil
		},
	}
)

func init() { testTables = append(testTables, hlog, mlog, hevents) }

// genRecord makes a record with a skewed choice of keys, so that some keys
// have many rows and most few.
func genRecord(rng *rand.Rand, id string) record {
	kinds := []string{"app.create", "app.delete", "app.deploy", "secret.read", "secret.write", "user.login", "user"}
	who := func() string { return fmt.Sprintf("u%02d", int(20*rng.Float64()*rng.Float64())) }
	r := record{ID: id, Kind: kinds[rng.IntN(len(kinds))], Who: who()}
	if rng.IntN(5) == 0 {
		r.Who = ""
	}
	for range rng.IntN(3) {
		r.Tags = append(r.Tags, fmt.Sprintf("t%d", rng.IntN(6)))
	}
	slices.Sort(r.Tags)
	r.Tags = slices.Compact(r.Tags)
	return r
}

// twinFSM is an FSM fed the same rows in hlog and mlog, with some dropped
// from both.
func twinFSM(t testing.TB, n int, seed uint64) (*fsm, []record) {
	t.Helper()
	f := newTestFSM(t)
	a := &applier{t: t, f: f}
	rng := rand.New(rand.NewPCG(seed, 9))
	var live []record
	for i := 0; i < n; {
		var ops []Op
		for k := 0; k < 1+rng.IntN(5) && i < n; k++ {
			r := genRecord(rng, fmt.Sprintf("r%05d", rng.IntN(100*n)))
			if slices.ContainsFunc(live, func(x record) bool { return x.ID == r.ID }) ||
				slices.ContainsFunc(ops, func(op Op) bool { return op.ID == r.ID }) {
				continue
			}
			ops = append(ops, hlog.Insert(&r), mlog.Insert(&r))
			live = append(live, r)
			i++
		}
		if len(live) > 3 && rng.IntN(4) == 0 {
			j := rng.IntN(len(live))
			ops = append(ops, hlog.Delete(live[j].ID), mlog.Delete(live[j].ID))
			live = slices.Delete(live, j, j+1)
		}
		if err := a.txn(ops...); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	return f, live
}

// TestHistoryTableAnswersAsMemdb checks every read of a history table
// against the same rows in memdb: Get, First, List by ID and by index (exact
// and prefix, both directions, bounds, limits, filters) and Count.
func TestHistoryTableAnswersAsMemdb(t *testing.T) {
	f, live := twinFSM(t, 400, 1)
	r := readFSM(f)
	if got, want := hlog.Count(r), mlog.Count(r); got != want || got != len(live) {
		t.Fatalf("count: history %d, memdb %d, want %d", got, want, len(live))
	}
	rng := rand.New(rand.NewPCG(2, 2))
	ids := make([]string, len(live))
	for i, x := range live {
		ids[i] = x.ID
	}
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	for _, id := range append(ids[:20], "r-missing", "") {
		hv, hm, hok := hlog.Get(r, id)
		mv, mm, mok := mlog.Get(r, id)
		if hok != mok || !cmp.Equal(hv, mv) || hm != mm {
			t.Fatalf("Get(%q): history %v %+v %v, memdb %v %+v %v", id, hok, hv, hm, mok, mv, mm)
		}
	}
	for _, c := range []struct{ index, key string }{
		{"kind", "app.deploy"}, {"kind_prefix", "app."}, {"kind_prefix", "user"}, {"who", "u03"}, {"tag", "t2"},
		{"kind", "none"}, {"kind_prefix", "zzz"}, {"id", ids[5]},
	} {
		hv, hm, hok := hlog.First(r, c.index, c.key)
		mv, mm, mok := mlog.First(r, c.index, c.key)
		if hok != mok || !cmp.Equal(hv, mv) || hm != mm {
			t.Fatalf("First(%s, %q): history %v %+v, memdb %v %+v", c.index, c.key, hok, hv, mok, mv)
		}
	}
	for i := range 600 {
		q := Query{Reverse: rng.IntN(2) == 0, Limit: rng.IntN(30)}
		switch rng.IntN(5) {
		case 0:
		case 1:
			q.Index, q.Key = "kind", pick([]string{"app.create", "secret.read", "user", "nope"})
		case 2:
			q.Index, q.Key, q.Prefix = "kind", pick([]string{"app", "app.d", "user", "s", ""}), true
		case 3:
			q.Index, q.Key = "who", fmt.Sprintf("u%02d", rng.IntN(22))
		case 4:
			q.Index, q.Key = "tag", fmt.Sprintf("t%d", rng.IntN(7))
		}
		if rng.IntN(3) == 0 {
			q.After = pick(ids)
		}
		if rng.IntN(3) == 0 {
			q.Before = pick(ids)
		}
		if rng.IntN(4) == 0 {
			q.Filter = func(v any) bool { return strings.HasSuffix(v.(*record).ID, "3") }
		}
		hi, hmore := hlog.List(r, q)
		mi, mmore := mlog.List(r, q)
		if !cmp.Equal(hi, mi) || hmore != mmore {
			t.Fatalf("query %d %+v:\nhistory (more %v) %v\nmemdb   (more %v) %v", i, q, hmore, idsOfItems(hi), mmore, idsOfItems(mi))
		}
	}
}

func idsOfItems(items []Item[record]) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Value.ID
	}
	return out
}

// TestHistoryWhere checks Query.Where (an AND of ORs of index keys,
// prefixes included) against a brute-force answer.
func TestHistoryWhere(t *testing.T) {
	f, live := twinFSM(t, 600, 3)
	r := readFSM(f)
	slices.SortFunc(live, func(a, b record) int { return strings.Compare(a.ID, b.ID) })
	keyOf := func(x record, index string) []string {
		switch index {
		case "kind":
			return []string{x.Kind}
		case "who":
			if x.Who == "" {
				return nil
			}
			return []string{x.Who}
		}
		return x.Tags
	}
	matches := func(x record, m Match) bool {
		for _, k := range keyOf(x, m.Index) {
			if k == m.Key || m.Prefix && strings.HasPrefix(k, m.Key) {
				return true
			}
		}
		return false
	}
	rng := rand.New(rand.NewPCG(4, 4))
	randomMatch := func() Match {
		switch rng.IntN(5) {
		case 0:
			return Match{Index: "kind", Key: []string{"app.", "secret.", "user", "a", ""}[rng.IntN(5)], Prefix: true}
		case 1:
			return Match{Index: "kind", Key: []string{"app.create", "user.login", "user", "none"}[rng.IntN(4)]}
		case 2, 3:
			return Match{Index: "who", Key: fmt.Sprintf("u%02d", rng.IntN(8))}
		}
		return Match{Index: "tag", Key: fmt.Sprintf("t%d", rng.IntN(7))}
	}
	for i := range 800 {
		var where [][]Match
		for range 1 + rng.IntN(3) {
			var group []Match
			for range 1 + rng.IntN(2) {
				group = append(group, randomMatch())
			}
			where = append(where, group)
		}
		q := Query{Where: where, Reverse: rng.IntN(3) > 0, Limit: rng.IntN(25)}
		if rng.IntN(3) == 0 {
			q.Before = live[rng.IntN(len(live))].ID
		}
		if rng.IntN(4) == 0 {
			q.After = live[rng.IntN(len(live))].ID
		}
		var want []string
		for _, x := range live {
			if q.After != "" && x.ID <= q.After || q.Before != "" && x.ID >= q.Before {
				continue
			}
			ok := true
			for _, g := range where {
				ok = ok && slices.ContainsFunc(g, func(m Match) bool { return matches(x, m) })
			}
			if ok {
				want = append(want, x.ID)
			}
		}
		if q.Reverse {
			slices.Reverse(want)
		}
		wantMore := q.Limit > 0 && len(want) > q.Limit
		if wantMore {
			want = want[:q.Limit]
		}
		got, more := hlog.List(r, q)
		if !slices.Equal(idsOfItems(got), want) || more != wantMore {
			t.Fatalf("query %d %+v:\n got (more %v) %v\nwant (more %v) %v", i, q, more, idsOfItems(got), wantMore, want)
		}
	}
}

func TestHistoryWhereOnMemdbTablePanics(t *testing.T) {
	f := newTestFSM(t)
	defer func() {
		if recover() == nil {
			t.Errorf("Where on a memdb table did not panic")
		}
	}()
	mlog.List(readFSM(f), Query{Where: [][]Match{{{Index: "kind", Key: "x"}}}})
}

// TestHistoryRefusals checks that operations on history tables get the
// refusals the same operations get on memdb tables, and that a refused
// command leaves the history untouched.
func TestHistoryRefusals(t *testing.T) {
	f := newTestFSM(t)
	a := &applier{t: t, f: f}
	one := record{ID: "e1", Kind: "k"}
	if err := a.txn(hlog.Insert(&one), hevents.Insert(&one)); err != nil {
		t.Fatal(err)
	}
	head := f.hist.currentHead()
	two := record{ID: "e2", Kind: "k"}
	for _, c := range []struct {
		name string
		ops  []Op
		want Reason
	}{
		{"insert over a row", []Op{hlog.Insert(&two), hlog.Insert(&one)}, ReasonExists},
		{"insert over an append-only row", []Op{hevents.Insert(&one)}, ReasonAppendOnly},
		{"put", []Op{hlog.Put(&one)}, ReasonAppendOnly},
		{"delete from an append-only table", []Op{hevents.Delete("e1")}, ReasonAppendOnly},
		{"delete of a missing row", []Op{hlog.Insert(&two), hlog.Delete("nope")}, ReasonNotFound},
		{"stale delete", []Op{hlog.DeleteIf("e1", 99)}, ReasonStale},
		{"check of a missing row", []Op{hlog.Check("nope", 1)}, ReasonNotFound},
		{"stale check", []Op{hlog.Check("e1", 99)}, ReasonStale},
		{"stale table check", []Op{hlog.CheckTable(99), hlog.Insert(&two)}, ReasonStale},
		{"memdb refusal after a history write", []Op{hlog.Insert(&two), things.Insert(&thing{ID: "x", N: -1})}, ReasonRejected},
	} {
		t.Run(c.name, func(t *testing.T) {
			a.index++
			resp := f.Apply(logOf(t, a.index, cmdTxn, txnCmd{Ops: c.ops}))
			if got := reasonOf(asErr(resp)); got != c.want {
				t.Fatalf("reason %q, want %q (%v)", got, c.want, resp)
			}
			if got := f.hist.currentHead(); got != head {
				t.Errorf("a refused command moved the history head from %d to %d", head.Seq, got.Seq)
			}
			if _, _, ok := hlog.Get(readFSM(f), "e2"); ok {
				t.Errorf("a refused command's insert is visible")
			}
		})
	}
	// Passing checks, an insert and its drop in one command (neither
	// happens), then a drop and a retention.
	m := Meta{CreateIndex: 1, ModifyIndex: 1}
	if err := a.txn(hlog.Check("e1", m.ModifyIndex), hlog.Check("nope", 0), hlog.Insert(&two), hlog.Delete("e2")); err != nil {
		t.Fatal(err)
	}
	if got := f.hist.currentHead(); got != head {
		t.Errorf("an insert and its drop in one command moved the head from %d to %d", head.Seq, got.Seq)
	}
	if err := a.txn(hlog.DeleteIf("e1", 1)); err != nil {
		t.Fatal(err)
	}
	r := readFSM(f)
	if _, _, ok := hlog.Get(r, "e1"); ok || hlog.Count(r) != 0 {
		t.Errorf("a dropped row is still read (count %d)", hlog.Count(r))
	}
	if items, _ := hlog.List(r, Query{Index: "kind", Key: "k"}); len(items) != 0 {
		t.Errorf("a dropped row is still indexed: %v", idsOfItems(items))
	}
	if err := a.retain("hevents", "e1"); reasonOf(err) != ReasonRejected {
		t.Errorf("retention of an unexpired event: %v", err)
	}
	expired := record{ID: "e3", Expired: true}
	if err := a.txn(hevents.Insert(&expired)); err != nil {
		t.Fatal(err)
	}
	if err := a.retain("hevents", "e3"); err != nil {
		t.Fatalf("retention of an expired event: %v", err)
	}
	if _, _, ok := hevents.Get(readFSM(f), "e3"); ok {
		t.Errorf("a retained event is still read")
	}
}

// openHist opens a single-node store with the test tables in dir.
func openHist(t testing.TB, dir string) *Store {
	t.Helper()
	s := openSingle(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.ConsistentRead(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// writeRecords writes n records (and a row of things) through the store at()
// returns, one command each. A write whose outcome a leader change left
// unknown is read back and made again only if it was not applied, as a
// careful client does.
func writeRecords(t testing.TB, at func() *Store, table *Table[record], from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		r := record{ID: fmt.Sprintf("r%05d", i), Kind: fmt.Sprintf("k%d", i%3), Who: fmt.Sprintf("u%d", i%5)}
		write(t, at, func(r *Reader) bool { _, _, ok := table.Get(r, fmt.Sprintf("r%05d", i)); return ok },
			table.Insert(&r), things.Put(&thing{ID: "counter", N: i}))
	}
}

func dropRecords(t *testing.T, at func() *Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		write(t, at, func(r *Reader) bool { _, _, ok := hlog.Get(r, id); return !ok }, hlog.Delete(id))
	}
}

// write applies ops through the store at() returns; done says whether they
// were applied, for a write whose outcome is unknown.
func write(t testing.TB, at func() *Store, done func(*Reader) bool, ops ...Op) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for try := 1; ; try++ {
		s := at()
		_, err := s.Apply(ctx, ops...)
		if err == nil {
			return
		}
		if e, ok := errcode.As(err); !ok || e.Code != errcode.StoreUnavailable || try == 5 {
			t.Fatalf("write: %v", err)
		}
		r, rerr := at().ConsistentRead(ctx)
		if rerr != nil {
			t.Fatalf("read back after %v: %v", err, rerr)
		}
		if done(r) {
			return
		}
	}
}

func single(s *Store) func() *Store { return func() *Store { return s } }

// leading returns a function that finds the cluster's leader.
func (c *cluster) leading(ctx context.Context) func() *Store {
	return func() *Store { return c.nodes[c.leader(ctx)] }
}

func listIDs(s *Store, table *Table[record]) []string {
	items, _ := table.List(s.Read(), Query{})
	return idsOfItems(items)
}

// TestHistoryAcrossRestarts: a restart restores the last snapshot and
// replays the log after it, so the history store, which is ahead of the
// snapshot, first undoes what came after it (inserts and drops alike);
// the node ends where it was, with a chain that verifies. Values of rows
// dropped before a snapshot leave the disk.
func TestHistoryAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := openHist(t, dir)
	writeRecords(t, single(s), hlog, 0, 40)
	dropRecords(t, single(s), "r00003", "r00004")
	if err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	dropRecords(t, single(s), "r00005", "r00006")
	writeRecords(t, single(s), hlog, 40, 10)
	writeRecords(t, single(s), hevents, 100, 5)
	wantIDs, wantHead, wantDigest := listIDs(s, hlog), s.HistoryHead(), digestOf(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openHist(t, dir)
	if got := listIDs(s, hlog); !slices.Equal(got, wantIDs) {
		t.Fatalf("after a restart the rows are\n%v\nwant\n%v", got, wantIDs)
	}
	if got := s.HistoryHead(); got != wantHead {
		t.Fatalf("after a restart the head is %+v, want %+v", got, wantHead)
	}
	if got := digestOf(t, s); got != wantDigest {
		t.Errorf("after a restart the state differs")
	}
	if rep := verify(t, s); rep.Checked != wantHead.Records || rep.Dropped != 4 {
		t.Errorf("verify checked %d records (%d dropped), want %d (4 dropped)", rep.Checked, rep.Dropped, wantHead.Records)
	}
	// A snapshot and another batch take the dropped values off the disk.
	if err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	writeRecords(t, single(s), hlog, 60, 1)
	s.fsm.hist.drain()
	if n := valuesHeld(t, s); n != int(wantHead.Records)+1-4 {
		t.Errorf("the disk holds %d values, want %d (dropped ones gone)", n, int(wantHead.Records)+1-4)
	}
	verify(t, s)
	_ = ctx
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Without any snapshot, Raft replays the whole log: the history store
	// starts empty and ends the same.
	dir2 := t.TempDir()
	s = openHist(t, dir2)
	writeRecords(t, single(s), hlog, 0, 10)
	dropRecords(t, single(s), "r00002")
	want := listIDs(s, hlog)
	head := s.HistoryHead()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openHist(t, dir2)
	waitFor(t, context.Background(), "the log is replayed", func() bool { return s.HistoryHead() == head })
	if got := listIDs(s, hlog); !slices.Equal(got, want) {
		t.Errorf("after a replay of the whole log: %v, want %v", got, want)
	}
	verify(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func digestOf(t *testing.T, s *Store) string {
	t.Helper()
	d, err := s.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func verify(t *testing.T, s *Store) HistoryReport {
	t.Helper()
	rep, err := s.VerifyHistory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("verify found problems: %v", rep.Problems)
	}
	return rep
}

func valuesHeld(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	err := s.fsm.hist.db.View(func(tx *bbolt.Tx) error {
		n = tx.Bucket(bucketValues).Stats().KeyN
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHistoryLostOnASingleNode: a node whose history file is gone, with a
// snapshot that names a history, refuses to start rather than serve a state
// whose history is missing.
func TestHistoryLostOnASingleNode(t *testing.T) {
	dir := t.TempDir()
	s := openHist(t, dir)
	writeRecords(t, single(s), hlog, 0, 5)
	if err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, historyFileName)); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Config{NodeID: "node-1", Dir: dir, Tables: testTables, Logger: testLogger(t), Timing: fastTiming})
	if err == nil {
		s.Close()
		t.Fatal("a node without its history started")
	}
	if !strings.Contains(err.Error(), "history") {
		t.Errorf("the error does not say what is missing: %v", err)
	}
}

// TestVerifyHistoryFindsTampering changes the history file behind the
// store's back: a value, a record of the chain, a removed value.
func TestVerifyHistoryFindsTampering(t *testing.T) {
	for _, c := range []struct {
		name   string
		tamper func(tx *bbolt.Tx) error
		want   string
	}{
		{"a value", func(tx *bbolt.Tx) error {
			return tx.Bucket(bucketValues).Put(u64(3), []byte(`{"id":"r00002","kind":"forged"}`))
		}, "record 3 (hlog r00002): its value does not match"},
		{"a record", func(tx *bbolt.Tx) error {
			raw := bytes.Clone(tx.Bucket(bucketChain).Get(u64(2)))
			raw[len(raw)-40] ^= 1 // in the value hash
			return tx.Bucket(bucketChain).Put(u64(2), raw)
		}, "record 2 (hlog r00001): its hash does not follow"},
		{"a removed value", func(tx *bbolt.Tx) error {
			return tx.Bucket(bucketValues).Delete(u64(4))
		}, "record 4 (hlog r00003): its value is missing and no drop is recorded"},
		{"a removed record", func(tx *bbolt.Tx) error {
			return tx.Bucket(bucketChain).Delete(u64(5))
		}, "records 5 to 5 are missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := openHist(t, t.TempDir())
			writeRecords(t, single(s), hlog, 0, 8)
			verify(t, s)
			if err := s.fsm.hist.db.Update(c.tamper); err != nil {
				t.Fatal(err)
			}
			rep, err := s.VerifyHistory(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(rep.Problems, func(p string) bool { return strings.Contains(p, c.want) }) {
				t.Errorf("problems %q, want one saying %q", rep.Problems, c.want)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHistoryCatchUpFromPeers: a follower that was down while the others
// wrote, dropped and compacted their logs gets a snapshot from the leader
// and fetches the history it lacks from the others; one whose history file
// was lost fetches all of it. Every node ends with the same chain.
func TestHistoryCatchUpFromPeers(t *testing.T) {
	c := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	writeRecords(t, c.leading(ctx), hlog, 0, 20)
	writeRecords(t, c.leading(ctx), hevents, 0, 5)
	c.converged(ctx)
	behind := c.leaveBehind(ctx)
	writeRecords(t, c.leading(ctx), hlog, 20, 80)
	dropRecords(t, c.leading(ctx), "r00001", "r00030", "r00031")
	writeRecords(t, c.leading(ctx), hevents, 5, 20)
	if err := c.nodes[c.leader(ctx)].Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	writeRecords(t, c.leading(ctx), hlog, 100, 5)
	c.start(behind, nil)
	c.converged(ctx)
	if c.nodes[behind].fsm.fetches.Load() == 0 {
		t.Errorf("the follower caught up without fetching history (the test missed its point)")
	}
	lead := c.leader(ctx)
	for i, s := range c.nodes {
		if got, want := listIDs(s, hlog), listIDs(c.nodes[lead], hlog); !slices.Equal(got, want) {
			t.Fatalf("node %d reads %d rows, the leader %d", i, len(got), len(want))
		}
		verify(t, s)
	}

	// A follower that lost its history file restores its own snapshot at
	// start and fetches the whole history from the others.
	lead = c.leader(ctx)
	lost := c.follower(lead)
	if err := c.nodes[lost].Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	c.stop(lost)
	if err := os.Remove(filepath.Join(c.dirs[lost], historyFileName)); err != nil {
		t.Fatal(err)
	}
	writeRecords(t, c.leading(ctx), hlog, 200, 10)
	c.start(lost, nil)
	c.converged(ctx)
	if c.nodes[lost].fsm.fetches.Load() == 0 {
		t.Errorf("the node that lost its history did not fetch it")
	}
	if got, want := c.nodes[lost].HistoryHead(), c.nodes[lead].HistoryHead(); got != want {
		t.Fatalf("the node that lost its history has head %+v, want %+v", got, want)
	}
	if got := hlog.Count(c.nodes[lost].Read()); got != 112 {
		t.Errorf("the node that lost its history reads %d rows, want 112", got)
	}
	verify(t, c.nodes[lost])
}

// TestLegacySnapshotImportsHistoryRows: a snapshot of format 1 carried
// history tables' rows among the others; a restore moves them into the
// history store, chained the same way on every node.
func TestLegacySnapshotImportsHistoryRows(t *testing.T) {
	var buf bytes.Buffer
	enc := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	enc(snapshotHeader{Format: 1, Applied: 30})
	for i, id := range []string{"b", "a", "c"} {
		enc(snapshotRecord{Table: "hlog", ID: id, C: uint64(10 + i%2), M: uint64(10 + i%2), Value: []byte(fmt.Sprintf(`{"id":%q,"kind":"k"}`, id))})
	}
	enc(snapshotRecord{Table: "things", ID: "x", C: 5, M: 5, Value: []byte(`{"id":"x"}`)})
	enc(snapshotRecord{IndexOf: "hlog", Index: 11})
	var heads []histHead
	for range 2 {
		f := newTestFSM(t)
		if err := f.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
			t.Fatal(err)
		}
		r := readFSM(f)
		if got := idsOfItems(must2(hlog.List(r, Query{}))); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("imported rows %v", got)
		}
		if _, m, _ := hlog.Get(r, "a"); m.CreateIndex != 11 {
			t.Errorf("an imported row keeps its create index: got %d, want 11", m.CreateIndex)
		}
		heads = append(heads, f.hist.currentHead())
	}
	if heads[0] != heads[1] || heads[0].Seq != 3 {
		t.Errorf("two restores of one snapshot chained differently: %+v", heads)
	}
}

func must2[T any](v T, _ bool) T { return v }

func TestParseHistoryRange(t *testing.T) {
	r := historyRange{FromSeq: 3, ToSeq: 90, DropsAfter: 7, Through: 120}
	if got, ok := parseHistoryRange(r.name()); !ok || got != r {
		t.Fatalf("round trip of %s: %+v %v", r.name(), got, ok)
	}
	if err := ValidBlobName(r.name()); err != nil {
		t.Errorf("a range's name is no valid blob name: %v", err)
	}
	for _, bad := range []string{"raftstore-history.1.2.3", "raftstore-history.1.2.3.4.5", "raftstore-history.a.2.3.4",
		"raftstore-history.5.2.3.4", "raftstore-history.1.2.9.4", "history.1.2.3.4", "raftstore-history.-1.2.3.4"} {
		if _, ok := parseHistoryRange(bad); ok {
			t.Errorf("parseHistoryRange(%q) accepted it", bad)
		}
	}
}

func FuzzParseHistoryRange(f *testing.F) {
	f.Add("raftstore-history.1.2.3.4")
	f.Add("raftstore-history.0.0.0.0")
	f.Fuzz(func(t *testing.T, name string) {
		r, ok := parseHistoryRange(name)
		if !ok {
			return
		}
		if r.FromSeq > r.ToSeq || r.DropsAfter > r.Through {
			t.Fatalf("accepted an inverted range %+v", r)
		}
		if again, ok := parseHistoryRange(r.name()); !ok || again != r {
			t.Fatalf("%q parses to %+v, whose name does not", name, r)
		}
	})
}

// FuzzImportHistory feeds fetched-history streams to a node's history
// store: whatever it is sent, the import refuses or appends records that
// continue the chain; it never panics, and a refused import leaves a chain
// that verifies.
func FuzzImportHistory(f *testing.F) {
	src, _ := twinFSM(f, 6, 5)
	f.Add(exportOf(f, src))
	f.Add([]byte(`{"s":1,"i":2,"t":"hlog","id":"a","vh":"00","h":"00","v":{"id":"a"}}`))
	f.Add([]byte(`{"s":1,"drop":true,"d":3}`))
	f.Add([]byte("{}\n{}"))
	f.Add([]byte(`{"s":1,"i":2,"t":"things","id":"a"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsm := newTestFSM(t)
		defer fsm.hist.close()
		if _, err := fsm.hist.importRange(bytes.NewReader(data), histHead{}); err != nil {
			return
		}
		rep, err := fsm.hist.verify(context.Background())
		if err != nil || len(rep.Problems) > 0 {
			t.Fatalf("an accepted import does not verify: %v %v", err, rep.Problems)
		}
	})
}

// exportOf returns a node's whole history as a range fetch carries it.
func exportOf(t testing.TB, f *fsm) []byte {
	t.Helper()
	f.hist.drain()
	head := f.hist.currentHead()
	rc, _, err := f.hist.export(historyRange{ToSeq: head.Seq, Through: f.applied.Load()}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHistorySince follows a history table as a log: rows come in the order
// the log wrote them (not by ID), after the index asked for, paged by
// limit, without rows dropped since and without other tables' records.
func TestHistorySince(t *testing.T) {
	s := openHist(t, t.TempDir())
	ctx := context.Background()
	// IDs that fall while the log order rises: Since must follow the log.
	var want []string
	for i := 0; i < 40; i++ {
		id := fmt.Sprintf("r%05d", 1000-i)
		ops := []Op{hlog.Insert(&record{ID: id, Kind: "k"})}
		if i%3 == 0 {
			ops = append(ops, hevents.Insert(&record{ID: fmt.Sprintf("e%05d", i)})) // another table's records between
		}
		if _, err := s.Apply(ctx, ops...); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	if _, err := s.Apply(ctx, hlog.Delete(want[5])); err != nil {
		t.Fatal(err)
	}
	live := slices.Delete(slices.Clone(want), 5, 6)
	var got []string
	var after uint64
	for pages := 0; ; pages++ {
		items, more := hlog.Since(s.Read(), after, 7)
		for _, it := range items {
			if it.Meta.CreateIndex <= after {
				t.Fatalf("row %s written at %d, not after %d", it.Value.ID, it.Meta.CreateIndex, after)
			}
			after = it.Meta.CreateIndex
			got = append(got, it.Value.ID)
		}
		if !more {
			break
		}
		if pages > 20 {
			t.Fatal("Since never ends")
		}
	}
	if diff := cmp.Diff(live, got); diff != "" {
		t.Errorf("rows in log order (-want +got):\n%s", diff)
	}
	if items, more := hlog.Since(s.Read(), after, 0); len(items) != 0 || more {
		t.Errorf("after the last row: %d rows, more %t", len(items), more)
	}
	all, _ := hlog.Since(s.Read(), 0, 0)
	if len(all) != len(live) {
		t.Errorf("Since(0) = %d rows; want %d", len(all), len(live))
	}
}
