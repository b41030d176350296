// Package idle owns apps' activity records and acting on idle apps (the
// spec document's lifecycle: {idle_days, idle_action}).
//
// It owns the idle_activity table: one row per app, when it last had a
// request through the edge (at minute resolution) and when its owner was
// warned of the idle action, and for which activity. The edge keeps the
// stamps in memory (edge/activity.go); every server writes them here
// (Flush, every FlushEvery), only an app's stamp that moved past the
// stored one by at least FlushStep, so that a busy installation writes at
// most one row per app per FlushStep per server; a server shutting down
// writes what moved at all (FlushAll). The row goes in the write
// that deletes its app (ForgetOps, from internal/volumes' DeleteApp), and
// the leader's pass sweeps any a flush left behind.
//
// The leader loop (Check, every CheckEvery) looks at every running app
// whose deployed spec sets idle_days: its last activity is the newest of
// the stored one, this server's stamp, its last deploy (the release), its
// last start (ActiveOps, from the scheduler's start) and its creation.
// Decide (pure, table-tested) says what is due: the warning
// (app.idle_warning) a day before the action (half a day for idle_days
// 1), remembered in the row until newer activity makes it stale; then,
// never sooner than the warning's lead after it, the action: stop
// (app.idle_stopped, through the scheduler's stop: the app stays stopped
// until somebody starts it) or delete (the way DELETE /apps/{id}?backup=true
// does: an on_delete backup of an app with volumes first, app.deleted with
// reason idle).
//
// It must not write the apps table (the scheduler stops an app, the
// backups and volumes services delete one), nor read the edge's routing;
// it reads apps and specs and writes only its own table, its events and
// nothing else.
package idle

import (
	"errors"
	"time"

	"github.com/svchost/svc/raftstore"
)

// Activity is an app's activity record.
type Activity struct {
	AppID string `json:"app_id"`
	// Last is the app's last activity as stored (minute resolution).
	Last time.Time `json:"last"`
	// WarnedAt is when the owner was warned of the idle action, and
	// WarnedFor the last activity the warning was about: activity after
	// it makes the warning stale.
	WarnedAt  *time.Time `json:"warned_at,omitempty"`
	WarnedFor *time.Time `json:"warned_for,omitempty"`
}

// Activities is the table of activity records (ID: the app's ID).
var Activities = &raftstore.Table[Activity]{
	Name: "idle_activity",
	ID:   func(a *Activity) string { return a.AppID },
	Validate: func(_ *raftstore.Reader, _, a *Activity) error {
		if a != nil && (a.AppID == "" || (a.WarnedAt == nil) != (a.WarnedFor == nil)) {
			return errors.New("an activity record names its app, and a warning what it was about")
		}
		return nil
	},
}

// Tables lists the tables this package declares.
func Tables() []raftstore.Def { return []raftstore.Def{Activities} }

// Resolution is that of stored activity.
const Resolution = time.Minute

// coarse is t at the stored resolution, in UTC.
func coarse(t time.Time) time.Time { return t.UTC().Truncate(Resolution) }

// ActiveOps records activity on the app at at (a start counts as
// activity), when it is newer than the stored one.
func ActiveOps(r *raftstore.Reader, appID string, at time.Time) []raftstore.Op {
	at = coarse(at)
	row, meta, ok := Activities.Get(r, appID)
	switch {
	case !ok:
		return []raftstore.Op{Activities.Insert(&Activity{AppID: appID, Last: at})}
	case at.After(row.Last):
		row.Last = at
		return []raftstore.Op{Activities.PutIf(&row, meta.ModifyIndex)}
	}
	return nil
}

// ForgetOps removes the app's activity record, for the write that deletes
// the app.
func ForgetOps(r *raftstore.Reader, appID string) []raftstore.Op {
	if _, _, ok := Activities.Get(r, appID); !ok {
		return nil
	}
	return []raftstore.Op{Activities.Delete(appID)}
}
