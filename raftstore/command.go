package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/svchost/svc/internal/errcode"
)

// cmdType is the first byte of every log entry.
//
// The list is append-only: a new command type goes at the end, and a number is
// never reused or renumbered, because every log entry ever written must decode
// the same way on every node forever. A type with the high bit set may be
// ignored by a node that does not know it (a forward-compatible optional
// command); any other unknown type stops the node rather than letting its
// state diverge.
type cmdType uint8

const (
	_         cmdType = iota // 0 is never used
	cmdTxn                   // 1: a transaction of table operations
	cmdRetain                // 2: retention: remove rows of an append-only table
)

const ignorableFlag cmdType = 0x80

// cmdServer announces a server's binary version (versions.go); versions
// before it skip it, as it is ignorable.
const cmdServer = ignorableFlag | 3

// handlers maps each command type to its apply function, filled by register
// in init so that a duplicate is caught when the binary starts.
var handlers = map[cmdType]func(f *fsm, index uint64, payload []byte) any{}

// register adds command type t, which binaries of version minVersion and
// later apply ("": every version); a leader refuses to propose it while a
// server of the cluster is older (versions.go).
func register(t cmdType, minVersion string, fn func(f *fsm, index uint64, payload []byte) any) {
	if _, dup := handlers[t]; dup {
		panic(fmt.Sprintf("raftstore: command type %d registered twice", t))
	}
	handlers[t] = fn
	since[t] = minVersion
}

func init() {
	register(cmdTxn, "", (*fsm).applyTxn)
	register(cmdRetain, "", (*fsm).applyRetain)
	register(cmdServer, "", (*fsm).applyServer)
}

// Limits on a command, checked before it is proposed.
const (
	maxOpsPerTxn  = 10_000
	maxIDLength   = 256
	maxRetainRows = 10_000
)

type opKind string

const (
	opInsert opKind = "insert" // create; refused if the row exists
	opPut    opKind = "put"    // create or replace; If makes it conditional
	opDelete opKind = "delete" // remove; refused if the row does not exist
	opCheck  opKind = "check"  // assert a row's (or, without ID, a table's) modify index
)

// Op is one operation of a transaction. Build ops with the methods of Table.
type Op struct {
	Kind  opKind          `json:"op"`
	Table string          `json:"table"`
	ID    string          `json:"id,omitempty"`
	If    *uint64         `json:"if,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`

	err error // a construction error, reported by Apply before proposing
}

type txnCmd struct {
	Ops []Op `json:"ops"`
}

type retainCmd struct {
	Table string   `json:"table"`
	IDs   []string `json:"ids"`
}

func (t *Table[T]) valueOp(kind opKind, v *T) Op {
	op := Op{Kind: kind, Table: t.Name}
	if v == nil {
		op.err = fmt.Errorf("%s %s: nil value", kind, t.Name)
		return op
	}
	op.ID = t.ID(v)
	b, err := json.Marshal(v)
	if err != nil {
		op.err = fmt.Errorf("%s %s/%s: encode: %w", kind, t.Name, op.ID, err)
	}
	op.Value = b
	return op
}

// Insert creates v; the command is refused if a row with its ID exists.
func (t *Table[T]) Insert(v *T) Op { return t.valueOp(opInsert, v) }

// Put creates or replaces v.
func (t *Table[T]) Put(v *T) Op { return t.valueOp(opPut, v) }

// PutIf replaces v only if its row's modify index is still modifyIndex
// (compare-and-set); 0 means the row must not exist.
func (t *Table[T]) PutIf(v *T, modifyIndex uint64) Op {
	op := t.valueOp(opPut, v)
	op.If = &modifyIndex
	return op
}

// Delete removes the row with the given ID; refused if it does not exist.
func (t *Table[T]) Delete(id string) Op { return Op{Kind: opDelete, Table: t.Name, ID: id} }

// DeleteIf removes the row only if its modify index is still modifyIndex.
func (t *Table[T]) DeleteIf(id string, modifyIndex uint64) Op {
	return Op{Kind: opDelete, Table: t.Name, ID: id, If: &modifyIndex}
}

// Check asserts that the row's modify index is modifyIndex (0: absent),
// without writing. It makes a command conditional on rows it only read.
func (t *Table[T]) Check(id string, modifyIndex uint64) Op {
	return Op{Kind: opCheck, Table: t.Name, ID: id, If: &modifyIndex}
}

// CheckTable asserts that no row of the table changed since the table's
// index was index. It guards decisions that read a whole table.
func (t *Table[T]) CheckTable(index uint64) Op {
	return Op{Kind: opCheck, Table: t.Name, If: &index}
}

func encodeCommand(t cmdType, payload any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(byte(t))
	if err := json.NewEncoder(&buf).Encode(payload); err != nil {
		return nil, fmt.Errorf("encode command: %w", err)
	}
	return buf.Bytes(), nil
}

// validateCommand checks that a command would decode and apply without
// panicking on every node: its type is known, its payload decodes, every
// table exists and every value decodes into its table's row type with the ID
// it claims. A leader validates every command before proposing it, including
// commands forwarded by other nodes, so no entry that would stop the cluster
// ever reaches the log. Business rules are the FSM's, not this function's.
func validateCommand(b []byte, tables map[string]tableDef) error {
	if len(b) == 0 {
		return errors.New("empty command")
	}
	switch t := cmdType(b[0]); t {
	case cmdTxn:
		var c txnCmd
		if err := strictDecode(b[1:], &c); err != nil {
			return fmt.Errorf("decode transaction: %w", err)
		}
		return validateTxn(c, tables)
	case cmdRetain:
		var c retainCmd
		if err := strictDecode(b[1:], &c); err != nil {
			return fmt.Errorf("decode retention: %w", err)
		}
		if _, ok := tables[c.Table]; !ok {
			return fmt.Errorf("retention: unknown table %q", c.Table)
		}
		if len(c.IDs) == 0 || len(c.IDs) > maxRetainRows {
			return fmt.Errorf("retention: %d rows; want 1 to %d", len(c.IDs), maxRetainRows)
		}
		for _, id := range c.IDs {
			if id == "" || len(id) > maxIDLength {
				return fmt.Errorf("retention: bad row id %q", id)
			}
		}
		return nil
	case cmdServer:
		var c serverCmd
		if err := strictDecode(b[1:], &c); err != nil {
			return fmt.Errorf("decode server announcement: %w", err)
		}
		if c.ID == "" || len(c.ID) > maxIDLength || c.Version == "" || len(c.Version) > maxIDLength {
			return fmt.Errorf("server announcement: bad id %q or version %q", c.ID, c.Version)
		}
		return nil
	default:
		return fmt.Errorf("unknown command type %d", t)
	}
}

func validateTxn(c txnCmd, tables map[string]tableDef) error {
	if len(c.Ops) == 0 || len(c.Ops) > maxOpsPerTxn {
		return fmt.Errorf("transaction has %d operations; want 1 to %d", len(c.Ops), maxOpsPerTxn)
	}
	for i, op := range c.Ops {
		if err := validateOp(op, tables); err != nil {
			return fmt.Errorf("operation %d: %w", i, err)
		}
	}
	return nil
}

func validateOp(op Op, tables map[string]tableDef) error {
	td, ok := tables[op.Table]
	if !ok {
		return fmt.Errorf("unknown table %q", op.Table)
	}
	if len(op.ID) > maxIDLength {
		return fmt.Errorf("%s: id longer than %d bytes", op.Table, maxIDLength)
	}
	switch op.Kind {
	case opInsert, opPut:
		if op.ID == "" {
			return fmt.Errorf("%s %s: empty id", op.Kind, op.Table)
		}
		v, err := td.decode(op.Value)
		if err != nil {
			return fmt.Errorf("%s %s/%s: decode value: %w", op.Kind, op.Table, op.ID, err)
		}
		if got := td.idOf(v); got != op.ID {
			return fmt.Errorf("%s %s: value has id %q, operation says %q", op.Kind, op.Table, got, op.ID)
		}
	case opDelete:
		if op.ID == "" || op.Value != nil {
			return fmt.Errorf("delete %s: want an id and no value", op.Table)
		}
	case opCheck:
		if op.If == nil || op.Value != nil {
			return fmt.Errorf("check %s: want an index and no value", op.Table)
		}
	default:
		return fmt.Errorf("unknown operation %q", op.Kind)
	}
	return nil
}

func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// Reason says why the FSM refused a command.
type Reason string

const (
	ReasonExists     Reason = "exists"      // insert over an existing row
	ReasonNotFound   Reason = "not_found"   // delete, conditional put or check of a missing row
	ReasonStale      Reason = "stale"       // a modify index precondition failed
	ReasonConflict   Reason = "conflict"    // a unique index would hold two rows
	ReasonAppendOnly Reason = "append_only" // a change or removal of an append-only row
	ReasonRejected   Reason = "rejected"    // a table's Validate or Retain refused
)

// TxnError is a command the FSM refused. Every node refuses it identically,
// nothing of it is applied, and it crosses the forwarding connection intact.
// Err is the public error the API answers with.
type TxnError struct {
	Reason Reason         `json:"reason"`
	Op     int            `json:"op"`
	Table  string         `json:"table"`
	ID     string         `json:"id,omitempty"`
	Index  string         `json:"index,omitempty"`
	Err    *errcode.Error `json:"error"`
}

func (e *TxnError) Error() string {
	return fmt.Sprintf("raftstore: %s %s/%s: %s", e.Reason, e.Table, e.ID, e.Err.Message)
}

func (e *TxnError) Unwrap() error { return e.Err }

// IsReason reports whether err is a refusal for the given reason.
func IsReason(err error, r Reason) bool {
	var te *TxnError
	return errors.As(err, &te) && te.Reason == r
}

func refuse(reason Reason, op int, table, id string, code errcode.Code, format string, args ...any) *TxnError {
	return &TxnError{Reason: reason, Op: op, Table: table, ID: id, Err: errcode.New(code, format, args...)}
}
