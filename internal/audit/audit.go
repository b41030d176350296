// Package audit owns the audit log: the entry every state-changing request
// and every secret read writes, in the same replicated write as the change,
// and the filtered, newest-first query of GET /api/v1/audit.
//
// The log is append-only, enforced by the store's FSM: the table accepts
// inserts only, has no retention rule, and so no command can change or remove
// an entry. An entry's ID is minted from its time, so IDs sort like times.
// This package must not touch HTTP or adapters; it declares the table, builds
// entries (from the actor in the request's context) and queries them.
package audit

import (
	"time"

	"github.com/svchost/svc/raftstore"
)

// Principal kinds, as the specification names them.
const (
	PrincipalUser      = "user"
	PrincipalToken     = "token"
	PrincipalSystem    = "system"
	PrincipalAnonymous = "anonymous"
)

// Entry is one audit log entry. Details never carry a secret value. Its ID
// carries its Time to the millisecond (New mints both from one reading of
// the clock), so a time range bounds the IDs a query walks.
type Entry struct {
	ID            string         `json:"id"`
	Time          time.Time      `json:"time"`
	Action        string         `json:"action"`
	PrincipalID   string         `json:"principal_id"`
	PrincipalKind string         `json:"principal_kind"`
	AppID         *string        `json:"app_id"`
	TargetKind    *string        `json:"target_kind"`
	TargetID      *string        `json:"target_id"`
	RequestID     string         `json:"request_id"`
	Details       map[string]any `json:"details"`
}

func deref(p *string) (string, bool) {
	if p == nil || *p == "" {
		return "", false
	}
	return *p, true
}

// Entries is the audit log table. It is append-only and has no retention
// rule: guarantee 2 of the specification. It is a history table: entries
// live in each node's hash-chained history store on disk, not in memory,
// and every filter of Query has an index.
var Entries = &raftstore.Table[Entry]{
	Name:       "audit",
	ID:         func(e *Entry) string { return e.ID },
	AppendOnly: true,
	History:    true,
	Indexes: []raftstore.Index[Entry]{
		{Name: "principal", Key: func(e *Entry) (string, bool) { return e.PrincipalID, e.PrincipalID != "" }},
		{Name: "principal_kind", Key: func(e *Entry) (string, bool) { return e.PrincipalKind, e.PrincipalKind != "" }},
		{Name: "app", Key: func(e *Entry) (string, bool) { return deref(e.AppID) }},
		{Name: "target_kind", Key: func(e *Entry) (string, bool) { return deref(e.TargetKind) }},
		{Name: "target", Key: func(e *Entry) (string, bool) { return deref(e.TargetID) }},
		// action serves the action prefix filter of Query. Actions are
		// dotted names from the code, never containing a NUL byte.
		{Name: "action", Key: func(e *Entry) (string, bool) { return e.Action, e.Action != "" }},
	},
}
