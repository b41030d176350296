package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/svchost/svc/internal/errcode"
)

// Test tables: a mutable one with a unique index, an append-only one whose
// rows retention may remove once marked expired, and an append-only one with
// no retention rule at all.
type thing struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Owner string `json:"owner"`
	N     int    `json:"n"`
}

type entry struct {
	ID      string `json:"id"`
	Text    string `json:"text"`
	Expired bool   `json:"expired"`
}

var (
	things = &Table[thing]{
		Name: "things",
		ID:   func(t *thing) string { return t.ID },
		Indexes: []Index[thing]{
			{Name: "name", Unique: true, Key: func(t *thing) (string, bool) { return t.Name, t.Name != "" }},
			{Name: "owner", Key: func(t *thing) (string, bool) { return t.Owner, t.Owner != "" }},
		},
		Validate: func(r *Reader, old, new *thing) error {
			if new != nil && new.N < 0 {
				return errcode.Invalid("n", "n must not be negative")
			}
			return nil
		},
	}
	entries = &Table[entry]{
		Name:       "entries",
		ID:         func(e *entry) string { return e.ID },
		AppendOnly: true,
		Retain: func(r *Reader, e *entry, _ Meta) error {
			if !e.Expired {
				return errors.New("entry has not expired")
			}
			return nil
		},
	}
	notes = &Table[entry]{
		Name:       "notes",
		ID:         func(e *entry) string { return e.ID },
		AppendOnly: true,
	}
	testTables = []Def{things, entries, notes}
)

func newTestFSM(t testing.TB) *fsm {
	t.Helper()
	f, err := newFSM(testTables, t.TempDir())
	if err != nil {
		t.Fatalf("newFSM: %v", err)
	}
	t.Cleanup(func() { _ = f.hist.close() })
	return f
}

// logOf encodes a command as the log entry at index.
func logOf(t testing.TB, index uint64, ct cmdType, payload any) *raft.Log {
	t.Helper()
	b, err := encodeCommand(ct, payload)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: b}
}

// applier feeds commands to an FSM at increasing indexes.
type applier struct {
	t     testing.TB
	f     *fsm
	index uint64
}

func (a *applier) txn(ops ...Op) error {
	a.t.Helper()
	for _, op := range ops {
		if op.err != nil {
			a.t.Fatalf("op: %v", op.err)
		}
	}
	if err := validateCommand(mustEncode(a.t, cmdTxn, txnCmd{Ops: ops}), a.f.tables); err != nil {
		a.t.Fatalf("validate: %v", err)
	}
	a.index++
	return asErr(a.f.Apply(logOf(a.t, a.index, cmdTxn, txnCmd{Ops: ops})))
}

func (a *applier) retain(table string, ids ...string) error {
	a.t.Helper()
	a.index++
	return asErr(a.f.Apply(logOf(a.t, a.index, cmdRetain, retainCmd{Table: table, IDs: ids})))
}

func asErr(resp any) error {
	if resp == nil {
		return nil
	}
	if te, ok := resp.(*TxnError); ok && te != nil {
		return te
	}
	return nil
}

func mustEncode(t testing.TB, ct cmdType, payload any) []byte {
	t.Helper()
	b, err := encodeCommand(ct, payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func reasonOf(err error) Reason {
	var te *TxnError
	if errors.As(err, &te) {
		return te.Reason
	}
	return ""
}

func readFSM(f *fsm) *Reader { return &Reader{tx: f.db.Load().Txn(false), hist: f.hist} }

func TestTxnOperations(t *testing.T) {
	tests := []struct {
		name   string
		setup  [][]Op
		ops    func(a *applier) []Op
		reason Reason
		code   errcode.Code
	}{
		{name: "insert new", ops: func(*applier) []Op { return []Op{things.Insert(&thing{ID: "a", Name: "x"})} }},
		{name: "insert existing", setup: [][]Op{{things.Insert(&thing{ID: "a"})}},
			ops: func(*applier) []Op { return []Op{things.Insert(&thing{ID: "a"})} }, reason: ReasonExists, code: errcode.StateInvalid},
		{name: "put creates", ops: func(*applier) []Op { return []Op{things.Put(&thing{ID: "a"})} }},
		{name: "put replaces", setup: [][]Op{{things.Insert(&thing{ID: "a", N: 1})}},
			ops: func(*applier) []Op { return []Op{things.Put(&thing{ID: "a", N: 2})} }},
		{name: "put if current index", setup: [][]Op{{things.Insert(&thing{ID: "a"})}},
			ops: func(*applier) []Op { return []Op{things.PutIf(&thing{ID: "a", N: 2}, 1)} }},
		{name: "put if stale index", setup: [][]Op{{things.Insert(&thing{ID: "a"})}, {things.Put(&thing{ID: "a", N: 3})}},
			ops: func(*applier) []Op { return []Op{things.PutIf(&thing{ID: "a", N: 2}, 1)} }, reason: ReasonStale, code: errcode.StateInvalid},
		{name: "put if zero on missing creates", ops: func(*applier) []Op { return []Op{things.PutIf(&thing{ID: "a"}, 0)} }},
		{name: "put if zero on existing is stale", setup: [][]Op{{things.Insert(&thing{ID: "a"})}},
			ops: func(*applier) []Op { return []Op{things.PutIf(&thing{ID: "a"}, 0)} }, reason: ReasonStale},
		{name: "put if on missing", ops: func(*applier) []Op { return []Op{things.PutIf(&thing{ID: "a"}, 7)} }, reason: ReasonNotFound, code: errcode.NotFound},
		{name: "delete existing", setup: [][]Op{{things.Insert(&thing{ID: "a"})}},
			ops: func(*applier) []Op { return []Op{things.Delete("a")} }},
		{name: "delete missing", ops: func(*applier) []Op { return []Op{things.Delete("a")} }, reason: ReasonNotFound, code: errcode.NotFound},
		{name: "delete if stale", setup: [][]Op{{things.Insert(&thing{ID: "a"})}},
			ops: func(*applier) []Op { return []Op{things.DeleteIf("a", 9)} }, reason: ReasonStale},
		{name: "unique index conflict", setup: [][]Op{{things.Insert(&thing{ID: "a", Name: "x"})}},
			ops: func(*applier) []Op { return []Op{things.Insert(&thing{ID: "b", Name: "x"})} }, reason: ReasonConflict, code: errcode.StateInvalid},
		{name: "unique index kept by same row", setup: [][]Op{{things.Insert(&thing{ID: "a", Name: "x"})}},
			ops: func(*applier) []Op { return []Op{things.Put(&thing{ID: "a", Name: "x", N: 1})} }},
		{name: "unique index freed by rename in same txn", setup: [][]Op{{things.Insert(&thing{ID: "a", Name: "x"})}},
			ops: func(*applier) []Op {
				return []Op{things.Put(&thing{ID: "a", Name: "y"}), things.Insert(&thing{ID: "b", Name: "x"})}
			}},
		{name: "validate hook refuses", ops: func(*applier) []Op { return []Op{things.Insert(&thing{ID: "a", N: -1})} },
			reason: ReasonRejected, code: errcode.ValidInvalid},
		{name: "validate hook sees final state", ops: func(*applier) []Op {
			return []Op{things.Insert(&thing{ID: "a", N: -1}), things.Put(&thing{ID: "a", N: 1})}
		}},
		{name: "check row current", setup: [][]Op{{things.Insert(&thing{ID: "a"})}},
			ops: func(*applier) []Op { return []Op{things.Check("a", 1), things.Insert(&thing{ID: "b"})} }},
		{name: "check row stale", setup: [][]Op{{things.Insert(&thing{ID: "a"})}, {things.Put(&thing{ID: "a"})}},
			ops: func(*applier) []Op { return []Op{things.Check("a", 1), things.Insert(&thing{ID: "b"})} }, reason: ReasonStale},
		{name: "check absent row", ops: func(*applier) []Op { return []Op{things.Check("a", 0), things.Insert(&thing{ID: "b"})} }},
		{name: "check table current", setup: [][]Op{{things.Insert(&thing{ID: "a"})}},
			ops: func(*applier) []Op { return []Op{things.CheckTable(1), things.Insert(&thing{ID: "b"})} }},
		{name: "check table stale", setup: [][]Op{{things.Insert(&thing{ID: "a"})}, {things.Insert(&thing{ID: "c"})}},
			ops: func(*applier) []Op { return []Op{things.CheckTable(1), things.Insert(&thing{ID: "b"})} }, reason: ReasonStale},
		{name: "append-only insert new", ops: func(*applier) []Op { return []Op{entries.Insert(&entry{ID: "e"})} }},
		{name: "append-only insert existing", setup: [][]Op{{entries.Insert(&entry{ID: "e"})}},
			ops: func(*applier) []Op { return []Op{entries.Insert(&entry{ID: "e", Text: "changed"})} }, reason: ReasonAppendOnly},
		{name: "append-only put", setup: [][]Op{{entries.Insert(&entry{ID: "e"})}},
			ops: func(*applier) []Op { return []Op{entries.Put(&entry{ID: "e", Text: "changed"})} }, reason: ReasonAppendOnly},
		{name: "append-only put new", ops: func(*applier) []Op { return []Op{entries.Put(&entry{ID: "e"})} }, reason: ReasonAppendOnly},
		{name: "append-only delete", setup: [][]Op{{entries.Insert(&entry{ID: "e"})}},
			ops: func(*applier) []Op { return []Op{entries.Delete("e")} }, reason: ReasonAppendOnly},
		{name: "append-only insert then put in one txn", ops: func(*applier) []Op {
			return []Op{entries.Insert(&entry{ID: "e"}), entries.Put(&entry{ID: "e", Text: "x"})}
		}, reason: ReasonAppendOnly},
		{name: "append-only insert then delete in one txn", ops: func(*applier) []Op {
			return []Op{entries.Insert(&entry{ID: "e"}), entries.Delete("e")}
		}, reason: ReasonAppendOnly},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &applier{t: t, f: newTestFSM(t)}
			for _, ops := range tt.setup {
				if err := a.txn(ops...); err != nil {
					t.Fatalf("setup: %v", err)
				}
			}
			before, _ := a.f.digest()
			err := a.txn(tt.ops(a)...)
			if got := reasonOf(err); got != tt.reason {
				t.Fatalf("reason = %q (err %v), want %q", got, err, tt.reason)
			}
			if tt.reason == "" {
				return
			}
			if tt.code != "" && errcode.CodeOf(err) != tt.code {
				t.Errorf("code = %s, want %s", errcode.CodeOf(err), tt.code)
			}
			if after, _ := a.f.digest(); after != before {
				t.Errorf("a refused command changed the state")
			}
		})
	}
}

func TestTxnIsAtomic(t *testing.T) {
	a := &applier{t: t, f: newTestFSM(t)}
	if err := a.txn(things.Insert(&thing{ID: "a", Name: "taken"})); err != nil {
		t.Fatal(err)
	}
	// The change, its audit-like entry and a third write commit together or
	// not at all: the last operation fails, so neither earlier one applies.
	err := a.txn(
		things.Put(&thing{ID: "a", Name: "taken", N: 5}),
		entries.Insert(&entry{ID: "e1", Text: "a changed"}),
		things.Insert(&thing{ID: "b", Name: "taken"}),
	)
	if reasonOf(err) != ReasonConflict {
		t.Fatalf("err = %v, want conflict", err)
	}
	r := readFSM(a.f)
	if got, _, _ := things.Get(r, "a"); got.N != 0 {
		t.Errorf("thing a N = %d after a refused command, want 0", got.N)
	}
	if _, _, ok := entries.Get(r, "e1"); ok {
		t.Errorf("entry e1 exists after a refused command")
	}
	if err := a.txn(things.Put(&thing{ID: "a", Name: "taken", N: 5}), entries.Insert(&entry{ID: "e1"})); err != nil {
		t.Fatal(err)
	}
	r = readFSM(a.f)
	got, meta, _ := things.Get(r, "a")
	if got.N != 5 || meta.CreateIndex != 1 || meta.ModifyIndex != 3 {
		t.Errorf("thing a = %+v %+v, want N=5 created at 1 modified at 3", got, meta)
	}
	if _, m, ok := entries.Get(r, "e1"); !ok || m.CreateIndex != 3 {
		t.Errorf("entry e1 = %v %+v, want created at 3", ok, m)
	}
}

func TestInvariantRunsOncePerCommand(t *testing.T) {
	runs := 0
	inv := &Invariant{Name: "at most three things", Check: func(r *Reader) error {
		runs++
		if things.Count(r) > 3 {
			return errcode.New(errcode.StateInvalid, "too many things")
		}
		return nil
	}}
	tbl := &Table[thing]{Name: "things", ID: func(t *thing) string { return t.ID }, Invariant: inv}
	other := &Table[entry]{Name: "others", ID: func(e *entry) string { return e.ID }, Invariant: inv}
	f, err := newFSM([]Def{tbl, other}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := &applier{t: t, f: f}
	if err := a.txn(tbl.Insert(&thing{ID: "a"}), tbl.Insert(&thing{ID: "b"}), other.Insert(&entry{ID: "x"})); err != nil {
		t.Fatal(err)
	}
	if runs != 1 {
		t.Errorf("the invariant ran %d times for one command, want 1", runs)
	}
	err = a.txn(tbl.Insert(&thing{ID: "c"}), tbl.Insert(&thing{ID: "d"}))
	var te *TxnError
	if !errors.As(err, &te) || te.Reason != ReasonRejected || te.Index != "at most three things" || errcode.CodeOf(err) != errcode.StateInvalid {
		t.Fatalf("breaking the invariant = %#v", err)
	}
	if n := things.Count(readFSM(f)); n != 2 {
		t.Errorf("a refused command left %d things", n)
	}
}

func TestRetention(t *testing.T) {
	tests := []struct {
		name   string
		table  string
		ids    []string
		reason Reason
		left   []string
	}{
		{name: "expired rows go", table: "entries", ids: []string{"e1", "e3"}, left: []string{"e2"}},
		{name: "a kept row refuses the whole command", table: "entries", ids: []string{"e1", "e2"}, reason: ReasonRejected, left: []string{"e1", "e2", "e3"}},
		{name: "missing row", table: "entries", ids: []string{"e9"}, reason: ReasonNotFound, left: []string{"e1", "e2", "e3"}},
		{name: "table without retention rule", table: "notes", ids: []string{"n1"}, reason: ReasonRejected},
		{name: "mutable table without rule", table: "things", ids: []string{"t1"}, reason: ReasonRejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &applier{t: t, f: newTestFSM(t)}
			err := a.txn(
				entries.Insert(&entry{ID: "e1", Expired: true}),
				entries.Insert(&entry{ID: "e2"}),
				entries.Insert(&entry{ID: "e3", Expired: true}),
				notes.Insert(&entry{ID: "n1", Expired: true}),
				things.Insert(&thing{ID: "t1"}),
			)
			if err != nil {
				t.Fatal(err)
			}
			err = a.retain(tt.table, tt.ids...)
			if got := reasonOf(err); got != tt.reason {
				t.Fatalf("reason = %q (%v), want %q", got, err, tt.reason)
			}
			if tt.left == nil {
				return
			}
			var got []string
			items, _ := entries.List(readFSM(a.f), Query{})
			for _, it := range items {
				got = append(got, it.Value.ID)
			}
			if strings.Join(got, ",") != strings.Join(tt.left, ",") {
				t.Errorf("entries left = %v, want %v", got, tt.left)
			}
		})
	}
}

// TestAppendOnlyRowsNeverChange drives every command type with every kind of
// operation at the rows of the append-only tables and checks that none ever
// changes or disappears, except by retention under the table's own rule.
func TestAppendOnlyRowsNeverChange(t *testing.T) {
	for _, table := range []*Table[entry]{entries, notes} {
		t.Run(table.Name, func(t *testing.T) {
			a := &applier{t: t, f: newTestFSM(t)}
			if err := a.txn(table.Insert(&entry{ID: "kept", Text: "original"})); err != nil {
				t.Fatal(err)
			}
			want, wantMeta, _ := table.Get(readFSM(a.f), "kept")
			attempts := map[string][]Op{
				"insert over":      {table.Insert(&entry{ID: "kept", Text: "new"})},
				"put":              {table.Put(&entry{ID: "kept", Text: "new"})},
				"put if current":   {table.PutIf(&entry{ID: "kept", Text: "new"}, wantMeta.ModifyIndex)},
				"put if absent":    {table.PutIf(&entry{ID: "kept", Text: "new"}, 0)},
				"delete":           {table.Delete("kept")},
				"delete if":        {table.DeleteIf("kept", wantMeta.ModifyIndex)},
				"insert then put":  {table.Insert(&entry{ID: "other"}), table.Put(&entry{ID: "kept", Text: "new"})},
				"check then put":   {table.Check("kept", wantMeta.ModifyIndex), table.Put(&entry{ID: "kept"})},
				"delete among ops": {things.Insert(&thing{ID: "t"}), table.Delete("kept")},
			}
			for name, ops := range attempts {
				if err := a.txn(ops...); err == nil {
					t.Errorf("%s: accepted", name)
				}
			}
			// Retention may only remove what the rule allows: "kept" has
			// not expired (entries) or there is no rule (notes).
			if err := a.retain(table.Name, "kept"); err == nil {
				t.Errorf("retention removed a row its rule keeps")
			}
			// A server's announcement writes no table (versions.go).
			a.f.Apply(&raft.Log{Index: 1000, Type: raft.LogCommand, Data: mustEncode(t, cmdServer, serverCmd{ID: "n", Version: "1"})})
			// Every command type the FSM knows has now been tried.
			for ct := range handlers {
				if ct != cmdTxn && ct != cmdRetain && ct != cmdServer {
					t.Errorf("command type %d is not covered by this test; add it", ct)
				}
			}
			got, gotMeta, ok := table.Get(readFSM(a.f), "kept")
			if !ok || got != want || gotMeta != wantMeta {
				t.Errorf("row = %+v %+v (present %v), want %+v %+v", got, gotMeta, ok, want, wantMeta)
			}
		})
	}
}

func TestApplyPanicsOnWhatItCannotApply(t *testing.T) {
	tests := []struct {
		name  string
		data  []byte
		panic bool
	}{
		{"empty entry", []byte{}, true},
		{"unknown type", []byte{0x7f, '{', '}'}, true},
		{"unknown ignorable type", []byte{0x80 | 0x7f, '{', '}'}, false},
		{"undecodable transaction", append([]byte{byte(cmdTxn)}, "not json"...), true},
		{"unknown table", mustEncode(t, cmdTxn, txnCmd{Ops: []Op{{Kind: opDelete, Table: "nope", ID: "x"}}}), true},
		{"undecodable retention", append([]byte{byte(cmdRetain)}, "[1]"...), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestFSM(t)
			defer func() {
				if r := recover(); (r != nil) != tt.panic {
					t.Errorf("panicked = %v (%v), want %v", r != nil, r, tt.panic)
				}
			}()
			f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: tt.data})
		})
	}
}

func TestValidateCommand(t *testing.T) {
	tables := newTestFSM(t).tables
	good := things.Insert(&thing{ID: "a"})
	tests := []struct {
		name string
		cmd  []byte
		ok   bool
	}{
		{"good txn", mustEncode(t, cmdTxn, txnCmd{Ops: []Op{good}}), true},
		{"good retain", mustEncode(t, cmdRetain, retainCmd{Table: "entries", IDs: []string{"e"}}), true},
		{"empty", nil, false},
		{"unknown type", []byte{9, '{', '}'}, false},
		{"no ops", mustEncode(t, cmdTxn, txnCmd{}), false},
		{"unknown field", append([]byte{byte(cmdTxn)}, `{"ops":[],"x":1}`...), false},
		{"trailing data", append(mustEncode(t, cmdTxn, txnCmd{Ops: []Op{good}}), "{}"...), false},
		{"unknown table", mustEncode(t, cmdTxn, txnCmd{Ops: []Op{{Kind: opDelete, Table: "nope", ID: "x"}}}), false},
		{"unknown op", mustEncode(t, cmdTxn, txnCmd{Ops: []Op{{Kind: "upsert", Table: "things", ID: "x"}}}), false},
		{"id mismatch", mustEncode(t, cmdTxn, txnCmd{Ops: []Op{{Kind: opInsert, Table: "things", ID: "b", Value: json.RawMessage(`{"id":"a"}`)}}}), false},
		{"empty id", mustEncode(t, cmdTxn, txnCmd{Ops: []Op{{Kind: opInsert, Table: "things", Value: json.RawMessage(`{}`)}}}), false},
		{"bad value", mustEncode(t, cmdTxn, txnCmd{Ops: []Op{{Kind: opInsert, Table: "things", ID: "a", Value: json.RawMessage(`{"n":"x"}`)}}}), false},
		{"delete with value", mustEncode(t, cmdTxn, txnCmd{Ops: []Op{{Kind: opDelete, Table: "things", ID: "a", Value: json.RawMessage(`{}`)}}}), false},
		{"check without index", mustEncode(t, cmdTxn, txnCmd{Ops: []Op{{Kind: opCheck, Table: "things", ID: "a"}}}), false},
		{"long id", mustEncode(t, cmdTxn, txnCmd{Ops: []Op{things.Delete(strings.Repeat("x", maxIDLength+1))}}), false},
		{"retain unknown table", mustEncode(t, cmdRetain, retainCmd{Table: "nope", IDs: []string{"e"}}), false},
		{"retain nothing", mustEncode(t, cmdRetain, retainCmd{Table: "entries"}), false},
		{"retain empty id", mustEncode(t, cmdRetain, retainCmd{Table: "entries", IDs: []string{""}}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateCommand(tt.cmd, tables)
			if (err == nil) != tt.ok {
				t.Errorf("validateCommand = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// FuzzValidatedCommandsApply checks the property the leader relies on: a
// command that passes validateCommand never makes Apply panic.
func FuzzValidatedCommandsApply(f *testing.F) {
	f.Add(mustEncode(f, cmdTxn, txnCmd{Ops: []Op{things.Insert(&thing{ID: "a", Name: "x"})}}))
	f.Add(mustEncode(f, cmdTxn, txnCmd{Ops: []Op{entries.Insert(&entry{ID: "e"}), things.Delete("a")}}))
	f.Add(mustEncode(f, cmdRetain, retainCmd{Table: "entries", IDs: []string{"e"}}))
	f.Add([]byte{byte(cmdTxn), '{', '}'})
	f.Fuzz(func(t *testing.T, cmd []byte) {
		fs := newTestFSM(t)
		if validateCommand(cmd, fs.tables) != nil {
			return
		}
		fs.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: cmd})
	})
}

func TestSnapshotRestore(t *testing.T) {
	a := &applier{t: t, f: newTestFSM(t)}
	for _, ops := range [][]Op{
		{things.Insert(&thing{ID: "a", Name: "x", Owner: "o"}), entries.Insert(&entry{ID: "e1", Text: "hello\nworld"})},
		{things.Put(&thing{ID: "a", Name: "y", Owner: "o", N: 3}), notes.Insert(&entry{ID: "n1"})},
		{things.Insert(&thing{ID: "b", Owner: "o"})},
	} {
		if err := a.txn(ops...); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := a.f.digest()

	snap, _ := a.f.Snapshot()
	var buf bytes.Buffer
	if err := snap.(*fsmSnapshot).write(&buf); err != nil {
		t.Fatal(err)
	}
	// Changes after the snapshot is taken are not in it.
	if err := a.txn(things.Insert(&thing{ID: "late"})); err != nil {
		t.Fatal(err)
	}

	g := newTestFSM(t)
	if err := g.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got, _ := g.digest(); got != want {
		t.Errorf("restored digest differs from the snapshotted state")
	}
	r := readFSM(g)
	if v, m, _ := things.Get(r, "a"); v.Name != "y" || m.CreateIndex != 1 || m.ModifyIndex != 2 {
		t.Errorf("restored thing a = %+v %+v", v, m)
	}
	if _, _, ok := things.First(r, "name", "y"); !ok {
		t.Errorf("secondary index not rebuilt on restore")
	}
	if got := r.TableIndex(things); got != 3 {
		t.Errorf("things table index = %d, want 3", got)
	}
	// The restored FSM keeps enforcing the rules.
	b := &applier{t: t, f: g, index: 10}
	if err := b.txn(entries.Put(&entry{ID: "e1"})); reasonOf(err) != ReasonAppendOnly {
		t.Errorf("put over restored append-only row: %v", err)
	}

	t.Run("unknown table refuses the restore", func(t *testing.T) {
		other, err := newFSM([]Def{things}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err == nil || !strings.Contains(err.Error(), "does not know") {
			t.Errorf("restore = %v, want unknown table error", err)
		}
		if _, _, ok := things.Get(readFSM(other), "a"); ok {
			t.Errorf("a failed restore replaced the state")
		}
	})
	t.Run("garbage refuses the restore", func(t *testing.T) {
		if err := newTestFSM(t).Restore(io.NopCloser(strings.NewReader(`{"format":99}`))); err == nil {
			t.Errorf("restore of an unknown format succeeded")
		}
	})
}

func TestListAndIndexes(t *testing.T) {
	a := &applier{t: t, f: newTestFSM(t)}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		owner := "odd"
		if id == "b" || id == "d" {
			owner = "even"
		}
		if err := a.txn(things.Insert(&thing{ID: id, Owner: owner, Name: "name-" + id})); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(items []Item[thing]) string {
		var s []string
		for _, it := range items {
			s = append(s, it.Value.ID)
		}
		return strings.Join(s, ",")
	}
	r := readFSM(a.f)
	tests := []struct {
		name string
		q    Query
		want string
		more bool
	}{
		{"all", Query{}, "a,b,c,d,e", false},
		{"limit", Query{Limit: 2}, "a,b", true},
		{"after", Query{After: "b", Limit: 2}, "c,d", true},
		{"after last page", Query{After: "c"}, "d,e", false},
		{"reverse", Query{Reverse: true, Limit: 2}, "e,d", true},
		{"reverse before", Query{Reverse: true, Before: "d"}, "c,b,a", false},
		{"before forward", Query{Before: "c"}, "a,b", false},
		{"secondary index", Query{Index: "owner", Key: "even"}, "b,d", false},
		{"secondary index reverse", Query{Index: "owner", Key: "odd", Reverse: true}, "e,c,a", false},
		{"secondary prefix", Query{Index: "name", Key: "name-", Prefix: true, Limit: 3}, "a,b,c", true},
		{"filter", Query{Filter: func(v any) bool { return v.(*thing).ID != "c" }}, "a,b,d,e", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, more := things.List(r, tt.q)
			if got := ids(items); got != tt.want || more != tt.more {
				t.Errorf("List = %s (more %v), want %s (more %v)", got, more, tt.want, tt.more)
			}
		})
	}
	if n := things.Count(r); n != 5 {
		t.Errorf("Count = %d, want 5", n)
	}
}

func TestMultiKeyIndex(t *testing.T) {
	type group struct {
		ID      string   `json:"id"`
		Members []string `json:"members"`
	}
	groups := &Table[group]{Name: "groups", ID: func(g *group) string { return g.ID },
		Indexes: []Index[group]{{Name: "member", Keys: func(g *group) []string { return g.Members }}}}
	f, err := newFSM([]Def{groups}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := &applier{t: t, f: f}
	if err := a.txn(groups.Insert(&group{ID: "g1", Members: []string{"u1", "u2"}}), groups.Insert(&group{ID: "g2", Members: []string{"u2"}}), groups.Insert(&group{ID: "g3"})); err != nil {
		t.Fatal(err)
	}
	ids := func(u string) []string {
		items, _ := groups.List(readFSM(f), Query{Index: "member", Key: u})
		var out []string
		for _, it := range items {
			out = append(out, it.Value.ID)
		}
		return out
	}
	if got := ids("u2"); strings.Join(got, ",") != "g1,g2" {
		t.Errorf("groups of u2 = %v", got)
	}
	if err := a.txn(groups.Put(&group{ID: "g1", Members: []string{"u1"}})); err != nil {
		t.Fatal(err)
	}
	if got := ids("u2"); strings.Join(got, ",") != "g2" {
		t.Errorf("groups of u2 after removal = %v", got)
	}
}

func TestTableDeclarationsAreChecked(t *testing.T) {
	bad := []Def{
		&Table[thing]{Name: "Bad-Name", ID: func(t *thing) string { return t.ID }},
		&Table[thing]{Name: "noid"},
		&Table[thing]{Name: "dupindex", ID: func(t *thing) string { return t.ID }, Indexes: []Index[thing]{{Name: "id", Key: func(*thing) (string, bool) { return "", false }}}},
		&Table[thing]{Name: "nokey", ID: func(t *thing) string { return t.ID }, Indexes: []Index[thing]{{Name: "k"}}},
		&Table[thing]{Name: "uniquemulti", ID: func(t *thing) string { return t.ID }, Indexes: []Index[thing]{{Name: "k", Unique: true, Keys: func(*thing) []string { return nil }}}},
	}
	for _, d := range bad {
		if _, err := newFSM([]Def{d}, t.TempDir()); err == nil {
			t.Errorf("table %s accepted", d.TableName())
		}
	}
	if _, err := newFSM([]Def{things, things}, t.TempDir()); err == nil {
		t.Errorf("a table declared twice was accepted")
	}
}
