// Package backups owns backups as records (the backups table: kind, app,
// state, size, the volumes each holds, when it was verified) and what is
// done with them: taking one (asked for, the final one before an app is
// deleted, or the rolling hourly one, with its retention), verifying one,
// restoring an app's volumes from one, and deleting an app with the
// decision about its data (guarantee 4). The bytes are the backup
// repository's (internal/backuprepo, on a backup storage adapter); the
// volumes' data is the runtime's, reached through the Data this package is
// given, or, for an app whose runtime keeps its volumes on another machine
// (Nomad's host volumes), copied through Remote into a staging directory
// of this server before it is written (live: such a runtime cannot pause
// the app), and restored into one before it is copied back.
//
// It must not touch HTTP, nor build operations on another package's
// tables (apps and volumes give it their op builders).
package backups

import (
	"errors"
	"slices"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// Kinds of backup.
const (
	KindRolling  = "rolling"
	KindOnDelete = "on_delete"
	KindDR       = "dr_bundle"
)

// States of a backup.
const (
	StatePending   = "pending"
	StateRunning   = "running"
	StateCompleted = "completed"
	StateFailed    = "failed"
)

// Volume is a volume a backup holds.
type Volume struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	SizeBytes int64  `json:"size_bytes"`
	// AppID is the volume's app, in a disaster-recovery bundle (which
	// holds the volumes of every app).
	AppID string `json:"app_id,omitempty"`
}

// Problem is a refusal or failure as a backup records it.
type Problem struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Remedy  string `json:"remedy,omitempty"`
}

// Backup is a backup's record. Consistency says how the volumes were
// copied: "paused" (the app's processes paused for the copy), "stopped"
// (nothing ran) or "live" (the runtime cannot pause; a bundle holding a
// volume copied from another machine says live too).
type Backup struct {
	ID          string     `json:"id"`
	Kind        string     `json:"kind"`
	AppID       *string    `json:"app_id"`
	AppSlug     string     `json:"app_slug,omitempty"`
	State       string     `json:"state"`
	SizeBytes   int64      `json:"size_bytes"`
	PlainBytes  int64      `json:"plain_bytes"`
	Volumes     []Volume   `json:"volumes"`
	Scheduled   bool       `json:"scheduled"`
	Consistency string     `json:"consistency,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	CompletedAt *time.Time `json:"completed_at"`
	VerifiedAt  *time.Time `json:"verified_at"`
	Error       *Problem   `json:"error"`
	// Store is what a disaster-recovery bundle saved of the store: the
	// index it is at and its digest, which the installation it is
	// restored into has.
	Store *raftstore.Saved `json:"store,omitempty"`
	// Skipped are the volumes a bundle left out: those of apps whose
	// runtime keeps volumes elsewhere and cannot copy them (Deps.Remote),
	// which that runtime's own tools back up.
	Skipped []Volume `json:"skipped_volumes,omitempty"`
}

// app returns the backup's app ID, "" for none.
func (b *Backup) app() string {
	if b.AppID == nil {
		return ""
	}
	return *b.AppID
}

// Backups is the table of backups.
var Backups = &raftstore.Table[Backup]{
	Name: "backups",
	ID:   func(b *Backup) string { return b.ID },
	Indexes: []raftstore.Index[Backup]{
		{Name: "app", Key: func(b *Backup) (string, bool) { return b.app(), b.AppID != nil }},
		{Name: "pending", Key: func(b *Backup) (string, bool) { return b.ID, b.State == StatePending }},
	},
	Validate: func(_ *raftstore.Reader, old, b *Backup) error {
		if b == nil {
			return nil
		}
		if !slices.Contains([]string{KindRolling, KindOnDelete, KindDR}, b.Kind) ||
			!slices.Contains([]string{StatePending, StateRunning, StateCompleted, StateFailed}, b.State) {
			return errors.New("a backup has a known kind and state")
		}
		if (b.Kind == KindDR) != (b.AppID == nil) {
			return errors.New("a backup is of one app, or a disaster-recovery bundle of none")
		}
		if old != nil && (old.State == StateCompleted || old.State == StateFailed) && old.State != b.State {
			return errcode.New(errcode.StateInvalid, "backup %s is %s already", b.ID, old.State)
		}
		return nil
	},
}

// Tables lists the tables this package declares.
func Tables() []raftstore.Def { return []raftstore.Def{Backups} }
