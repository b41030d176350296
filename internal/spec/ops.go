package spec

import (
	"context"
	"encoding/json"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// Op builders: only this package writes revisions and heads. Another
// package that writes a revision (volumes declares one) calls AppendOps
// inside its own Update's build, so that numbering, validation and the
// size cap live here once.

// AppendOps returns the operations that write d as the app's next revision
// after the latest one in r, neither pinned nor deployed, and that
// revision. It validates d and caps its stored size; the caller adds its
// audit entry. NOT_FOUND when the app does not exist.
func AppendOps(ctx context.Context, r *raftstore.Reader, appID string, d Document, now time.Time) ([]raftstore.Op, Revision, error) {
	raw, err := validEncoding(d)
	if err != nil {
		return nil, Revision{}, err
	}
	ops, rev, _, err := appendOps(ctx, r, appID, raw, false, now)
	return ops, rev, err
}

// validEncoding validates d and returns its stored form, within the cap.
func validEncoding(d Document) (json.RawMessage, error) {
	if err := Validate(d); err != nil {
		return nil, err
	}
	return encodeDocument(d)
}

// appendOps writes raw (a valid, encoded document) as the app's next
// revision, pinned when pin is set (the app row records the pin too). It
// returns the operations, the revision and the head after the write.
func appendOps(ctx context.Context, r *raftstore.Reader, appID string, raw json.RawMessage, pin bool, now time.Time) ([]raftstore.Op, Revision, Head, error) {
	_, appMeta, ok := apps.Apps.Get(r, appID)
	if !ok {
		return nil, Revision{}, Head{}, noApp(appID)
	}
	head, headMeta, _ := Heads.Get(r, appID)
	rev := Revision{ID: ids.NewAt(ids.Spec, now), AppID: appID, Number: head.Latest + 1,
		CreatedAt: now, CreatedBy: createdBy(ctx), Document: raw}
	head.AppID, head.Latest = appID, rev.Number
	ops := []raftstore.Op{Revisions.Insert(&rev)}
	if !pin {
		// The app must still exist when the revision is written.
		ops = append(ops, Heads.PutIf(&head, headMeta.ModifyIndex), apps.Apps.Check(appID, appMeta.ModifyIndex))
		return ops, rev, head, nil
	}
	head = head.Pin(rev.Number)
	_, pinOps, err := apps.PinOps(r, appID, apps.Pin{SpecID: rev.ID, Revision: int(rev.Number)}, now)
	if err != nil {
		return nil, Revision{}, Head{}, err
	}
	ops = append(ops, Heads.PutIf(&head, headMeta.ModifyIndex))
	return append(ops, pinOps...), rev, head, nil
}

// RevisionAt returns revision n of an app as r has it.
func RevisionAt(r *raftstore.Reader, appID string, n uint64) (Revision, bool) {
	rev, _, ok := revision(r, appID, n)
	return rev, ok
}

// createdBy names who writes a revision: the account or token acting, or
// the service itself.
func createdBy(ctx context.Context) string {
	a := actor.From(ctx)
	if a.ID == "" {
		return a.Kind
	}
	return a.ID
}
