// Package spec owns the spec document (the sole record of how an app runs),
// reading it from JSON or YAML (Parse), its validation (Validate), the
// classified difference between two documents (Diff), the redacted export
// of an app's configuration, and spec revisions: the append-only history of
// how each app runs, and the head that says which revision is latest and
// which is pinned. Its Service creates, lists, reads and pins revisions over
// the replicated store, and sweeps those retention lets go.
//
// Revisions are append-only, enforced by the store's FSM through the tables
// declared here: a revision is only ever inserted, numbers run 1, 2, 3… per
// app without gaps, and retention removes only revisions that are neither
// pinned, nor among the last ten pinned, nor newer than the newest of those.
// Pinning also records the pin on the app's row, in the same write, through
// the apps package's op builder (apps.PinOps). Only this package writes
// revisions and heads: another package that writes a revision (volumes)
// builds it with AppendOps inside its own write, so that numbering,
// validation and the size cap live here once.
// This package must not touch HTTP or adapters, nor write another
// package's tables.
package spec

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// KeepPinned is how many of the most recently pinned revisions retention
// keeps (guarantee 3 of the specification).
const KeepPinned = 10

// Revision is one spec revision of an app. It never changes once written.
type Revision struct {
	ID        string          `json:"id"`
	AppID     string          `json:"app_id"`
	Number    uint64          `json:"revision"`
	CreatedAt time.Time       `json:"created_at"`
	CreatedBy string          `json:"created_by"`
	Document  json.RawMessage `json:"spec"`
}

// maxStoredBytes caps a revision's stored document. Parse caps the text it
// reads at MaxDocumentBytes; its JSON form may be somewhat larger.
const maxStoredBytes = 4 * MaxDocumentBytes

// encodeDocument is a document's stored form: its JSON encoding, which
// Revision.Spec reads back to an equal document.
func encodeDocument(d Document) (json.RawMessage, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode spec document: %w", err)
	}
	if len(b) > maxStoredBytes {
		return nil, errcode.New(errcode.ValidInvalid, "the spec document is %d bytes as JSON; at most %d", len(b), maxStoredBytes)
	}
	return b, nil
}

// Spec decodes the revision's document.
func (r Revision) Spec() (Document, error) {
	var d Document
	if err := json.Unmarshal(r.Document, &d); err != nil {
		return Document{}, fmt.Errorf("decode revision %d of %s: %w", r.Number, r.AppID, err)
	}
	d.normalize()
	return d, nil
}

// Head is an app's revision pointer: the latest number written, the pinned
// one (0 when none), and the distinct revisions pinned most recently, oldest
// first, at most KeepPinned.
type Head struct {
	AppID      string   `json:"app_id"`
	Latest     uint64   `json:"latest"`
	Pinned     uint64   `json:"pinned"`
	PinHistory []uint64 `json:"pin_history"`
}

// Pin returns the head with revision n pinned and recorded in the history.
func (h Head) Pin(n uint64) Head {
	hist := slices.DeleteFunc(slices.Clone(h.PinHistory), func(x uint64) bool { return x == n })
	hist = append(hist, n)
	if len(hist) > KeepPinned {
		hist = hist[len(hist)-KeepPinned:]
	}
	h.Pinned, h.PinHistory = n, hist
	return h
}

// Revisions is the revision table: append-only.
var Revisions = &raftstore.Table[Revision]{
	Name:       "spec_revisions",
	ID:         func(r *Revision) string { return r.ID },
	AppendOnly: true,
	Indexes: []raftstore.Index[Revision]{
		{Name: "app_revision", Unique: true, Key: func(r *Revision) (string, bool) {
			return raftstore.Key(r.AppID, raftstore.Uint(r.Number)), true
		}},
		{Name: "app", Key: func(r *Revision) (string, bool) { return r.AppID, true }},
	},
}

// The tables' rules read each other, so they are attached in init.
func init() {
	Revisions.Validate = validateRevision
	Revisions.Retain = retainRevision
	Heads.Validate = validateHead
}

func validateRevision(rd *raftstore.Reader, _, rev *Revision) error {
	h, _, ok := Heads.Get(rd, rev.AppID)
	if rev.Number == 0 || !ok || rev.Number > h.Latest {
		return errcode.New(errcode.StateInvalid,
			"revision %d of %s is not recorded in the app's head", rev.Number, rev.AppID)
	}
	return nil
}

func retainRevision(rd *raftstore.Reader, rev *Revision, _ raftstore.Meta) error {
	h, _, _ := Heads.Get(rd, rev.AppID)
	if rev.Number == h.Pinned || slices.Contains(h.PinHistory, rev.Number) {
		return fmt.Errorf("revision %d is pinned or among the last %d pinned", rev.Number, KeepPinned)
	}
	if len(h.PinHistory) == 0 || rev.Number > slices.Max(h.PinHistory) {
		return fmt.Errorf("revision %d is newer than every pinned revision", rev.Number)
	}
	return nil
}

// Heads is the per-app head table. Its rules keep revision numbers
// contiguous: Latest only grows, and every number up to it has a revision.
var Heads = &raftstore.Table[Head]{
	Name: "spec_heads",
	ID:   func(h *Head) string { return h.AppID },
}

func validateHead(rd *raftstore.Reader, old, h *Head) error {
	if h == nil {
		return nil // the app is gone; its revisions remain until retention
	}
	from := uint64(0)
	if old != nil {
		from = old.Latest
	}
	if h.Latest < from {
		return errcode.New(errcode.StateInvalid, "the latest revision of %s cannot go back from %d to %d", h.AppID, from, h.Latest)
	}
	for n := from + 1; n <= h.Latest; n++ {
		if _, _, ok := Revisions.First(rd, "app_revision", raftstore.Key(h.AppID, raftstore.Uint(n))); !ok {
			return errcode.New(errcode.StateInvalid, "revision %d of %s is missing", n, h.AppID)
		}
	}
	if h.Pinned > h.Latest || len(h.PinHistory) > KeepPinned {
		return errcode.New(errcode.StateInvalid, "the pin of %s is out of range", h.AppID)
	}
	return nil
}
