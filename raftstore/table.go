package raftstore

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/go-memdb"
)

// Meta is what the store records about every row: the Raft index of the
// command that created it and of the last one that changed it.
type Meta struct {
	CreateIndex uint64 `json:"create_index"`
	ModifyIndex uint64 `json:"modify_index"`
}

// row is what memdb holds. Value is a *T of the row's table and is never
// mutated once inserted: a change inserts a new row.
type row struct {
	ID string
	Meta
	Value any
}

// Index is a secondary index of a table. Key returns the index key of a row
// and false when the row is not indexed; Keys, used instead, returns several
// (a group indexed by each of its members). Build compound keys with Key.
type Index[T any] struct {
	Name string
	// Unique makes the FSM refuse a write that would give two rows the same
	// key (go-memdb itself silently overwrites unique index entries). Only
	// single-key indexes may be unique.
	Unique bool
	Key    func(*T) (string, bool)
	Keys   func(*T) []string
}

// Table declares one table of the store. Domain packages declare their
// tables; the store enforces what the declaration says on every node.
//
// Validate and Retain run inside the FSM's Apply: they must be deterministic
// (no clock, no randomness, no I/O) and may only read through r.
type Table[T any] struct {
	Name string
	ID   func(*T) string
	// AppendOnly tables accept inserts only: an insert over an existing row,
	// a put or a delete is refused, and only the retention command may remove
	// a row, and only one Retain allows.
	AppendOnly bool
	Indexes    []Index[T]
	// Validate, if set, checks every row of this table a command writes,
	// against the state after all of the command's operations; old is nil on
	// insert and new is nil on delete. An error refuses the whole command.
	Validate func(r *Reader, old, new *T) error
	// Retain, if set, says whether the retention command may remove v (with
	// its metadata m); without it, rows are never removed by retention.
	Retain func(r *Reader, v *T, m Meta) error
	// Invariant, if set, checks a property of the whole state once for every
	// command that writes to this table, after all its operations; an error
	// refuses the command. Several tables may share one invariant (it runs
	// once per command however many of them were written).
	Invariant *Invariant
	// History tables hold what only grows (audit entries, events, finished
	// deploys' logs): their rows are kept on disk in the node's history
	// store, hash-chained, not in memory (history.go). A row is written once
	// (Insert) and never changed; Delete (or, on an append-only table, the
	// retention its Retain rule allows) drops it. Their indexes are not
	// unique, and they take no Validate or Invariant rule. Reads are the
	// same as any table's, plus Query.Where.
	History bool
}

// Invariant is a named check of the whole state, run inside Apply.
type Invariant struct {
	Name  string
	Check func(r *Reader) error
}

// Def is a table declaration of any row type, as Open takes them. Only *Table
// implements it.
type Def interface {
	TableName() string
	def() tableDef
}

// tableDef is the untyped view of a table that the FSM works with.
type tableDef struct {
	name       string
	appendOnly bool
	unique     []string
	schema     *memdb.TableSchema
	decode     func([]byte) (any, error)
	idOf       func(any) string
	check      func(r *Reader, old, new any) error
	retain     func(r *Reader, v any, m Meta) error
	invariant  *Invariant
	history    bool
	indexNames []string
	// keys returns the secondary index keys of a row (history tables keep
	// their own indexes).
	keys func(v any) []indexKey
}

// indexKey is one key of a row in one secondary index.
type indexKey struct {
	index, key string
}

var tableNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// TableName returns the table's name.
func (t *Table[T]) TableName() string { return t.Name }

func (t *Table[T]) def() tableDef {
	d := tableDef{
		name:       t.Name,
		appendOnly: t.AppendOnly,
		schema: &memdb.TableSchema{
			Name: t.Name,
			Indexes: map[string]*memdb.IndexSchema{
				"id": {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
			},
		},
		decode: func(b []byte) (any, error) {
			v := new(T)
			if err := json.Unmarshal(b, v); err != nil {
				return nil, err
			}
			return v, nil
		},
		idOf:      func(v any) string { return t.ID(v.(*T)) },
		invariant: t.Invariant,
		history:   t.History,
		keys:      func(v any) []indexKey { return t.keysOf(v.(*T)) },
	}
	for _, ix := range t.Indexes {
		d.indexNames = append(d.indexNames, ix.Name)
		var indexer memdb.Indexer = funcIndexer[T]{key: ix.Key}
		if ix.Keys != nil {
			indexer = multiIndexer[T]{keys: ix.Keys}
		}
		d.schema.Indexes[ix.Name] = &memdb.IndexSchema{
			Name:         ix.Name,
			Unique:       ix.Unique,
			AllowMissing: true,
			Indexer:      indexer,
		}
		if ix.Unique {
			d.unique = append(d.unique, ix.Name)
		}
	}
	if t.Validate != nil {
		d.check = func(r *Reader, old, new any) error {
			o, _ := old.(*T)
			n, _ := new.(*T)
			return t.Validate(r, o, n)
		}
	}
	if t.Retain != nil {
		d.retain = func(r *Reader, v any, m Meta) error { return t.Retain(r, v.(*T), m) }
	}
	return d
}

// keysOf returns the secondary index keys of v. A key containing NUL is
// left out: index entries end keys with NUL (see indexEntry), as memdb's do.
func (t *Table[T]) keysOf(v *T) []indexKey {
	var out []indexKey
	for _, ix := range t.Indexes {
		if ix.Keys != nil {
			for _, k := range ix.Keys(v) {
				if !strings.ContainsRune(k, 0) {
					out = append(out, indexKey{ix.Name, k})
				}
			}
			continue
		}
		if k, ok := ix.Key(v); ok && !strings.ContainsRune(k, 0) {
			out = append(out, indexKey{ix.Name, k})
		}
	}
	return out
}

func (t *Table[T]) validate() error {
	if !tableNameRE.MatchString(t.Name) {
		return fmt.Errorf("table name %q: want %s", t.Name, tableNameRE)
	}
	if t.ID == nil {
		return fmt.Errorf("table %s: no ID function", t.Name)
	}
	if t.History && (t.Validate != nil || t.Invariant != nil) {
		return fmt.Errorf("table %s: a history table takes no Validate or Invariant rule", t.Name)
	}
	seen := map[string]bool{"id": true}
	for _, ix := range t.Indexes {
		if seen[ix.Name] || ix.Name == "" || strings.HasSuffix(ix.Name, "_prefix") {
			return fmt.Errorf("table %s: bad or duplicate index name %q", t.Name, ix.Name)
		}
		if (ix.Key == nil) == (ix.Keys == nil) {
			return fmt.Errorf("table %s: index %s needs exactly one of Key and Keys", t.Name, ix.Name)
		}
		if ix.Keys != nil && ix.Unique {
			return fmt.Errorf("table %s: index %s: a multi-key index cannot be unique", t.Name, ix.Name)
		}
		if t.History && ix.Unique {
			return fmt.Errorf("table %s: index %s: a history table's indexes cannot be unique", t.Name, ix.Name)
		}
		seen[ix.Name] = true
	}
	return nil
}

// Key joins parts into a compound index key that sorts part by part.
func Key(parts ...string) string { return strings.Join(parts, "\x1f") }

// Uint encodes n so that keys sort numerically.
func Uint(n uint64) string { return fmt.Sprintf("%016x", n) }

// funcIndexer adapts a typed key function to memdb's indexer interfaces. Keys
// are terminated with a NUL byte like memdb's StringFieldIndex, so that an
// exact lookup never matches a longer key and prefix lookups still work.
type funcIndexer[T any] struct {
	key func(*T) (string, bool)
}

var (
	_ memdb.SingleIndexer = funcIndexer[struct{}]{}
	_ memdb.PrefixIndexer = funcIndexer[struct{}]{}
)

func (f funcIndexer[T]) FromObject(obj any) (bool, []byte, error) {
	r, ok := obj.(*row)
	if !ok {
		return false, nil, fmt.Errorf("index: object is %T, not a row", obj)
	}
	k, ok := f.key(r.Value.(*T))
	if !ok {
		return false, nil, nil
	}
	return true, append([]byte(k), 0), nil
}

func (f funcIndexer[T]) FromArgs(args ...any) ([]byte, error) {
	k, err := oneString(args)
	if err != nil {
		return nil, err
	}
	return append([]byte(k), 0), nil
}

func (f funcIndexer[T]) PrefixFromArgs(args ...any) ([]byte, error) {
	k, err := oneString(args)
	return []byte(k), err
}

// multiIndexer indexes a row under several keys.
type multiIndexer[T any] struct {
	keys func(*T) []string
}

var (
	_ memdb.MultiIndexer  = multiIndexer[struct{}]{}
	_ memdb.PrefixIndexer = multiIndexer[struct{}]{}
)

func (m multiIndexer[T]) FromObject(obj any) (bool, [][]byte, error) {
	r, ok := obj.(*row)
	if !ok {
		return false, nil, fmt.Errorf("index: object is %T, not a row", obj)
	}
	var out [][]byte
	for _, k := range m.keys(r.Value.(*T)) {
		out = append(out, append([]byte(k), 0))
	}
	return len(out) > 0, out, nil
}

func (m multiIndexer[T]) FromArgs(args ...any) ([]byte, error) {
	return funcIndexer[T]{}.FromArgs(args...)
}

func (m multiIndexer[T]) PrefixFromArgs(args ...any) ([]byte, error) {
	return funcIndexer[T]{}.PrefixFromArgs(args...)
}

func oneString(args []any) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("index: want one argument, got %d", len(args))
	}
	s, ok := args[0].(string)
	if !ok {
		return "", fmt.Errorf("index: argument is %T, not a string", args[0])
	}
	return s, nil
}

// AppendOnly reports whether a declared table is append-only.
func AppendOnly(d Def) bool { return d.def().appendOnly }
