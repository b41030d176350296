package audit

import (
	"context"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// Target is what an audited action acted on.
type Target struct {
	Kind string // user, group, role, token, session, policy, app, …
	ID   string
}

// New builds the audit entry of an action taken by the actor in ctx. Details
// must never hold a secret value.
func New(ctx context.Context, now time.Time, action string, appID string, target Target, details map[string]any) *Entry {
	a := actor.From(ctx)
	e := &Entry{
		ID:            ids.NewAt(ids.Audit, now),
		Time:          now.UTC(),
		Action:        action,
		PrincipalID:   a.ID,
		PrincipalKind: a.Kind,
		RequestID:     a.RequestID,
		Details:       details,
	}
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	if appID != "" {
		e.AppID = &appID
	}
	if target.Kind != "" {
		e.TargetKind, e.TargetID = &target.Kind, &target.ID
	}
	return e
}

// Record is the operation that appends the audit entry of an action, for the
// write that makes the change (New's rules apply). Other packages append to
// the audit log only through Record and Insert.
func Record(ctx context.Context, now time.Time, action string, appID string, target Target, details map[string]any) raftstore.Op {
	return Entries.Insert(New(ctx, now, action, appID, target, details))
}

// Insert is the operation that appends an entry built with New and then
// completed by the caller.
func Insert(e *Entry) raftstore.Op { return Entries.Insert(e) }
