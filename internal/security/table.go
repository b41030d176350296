// Package security owns apps' security results and acting on them: the
// security_results table (one row per app: the last scan's state, score,
// basis, findings and counts, the spec revision it read, and what gating
// remembers: since when the score is below the installation minimum,
// whether the owner was told, when the app was stopped for it), the scans
// themselves (internal/scan over the app's source checkout and its pinned
// spec revision, with the OSV database of the primary scanner adapter,
// then the AI screening adapters, screen.go) and the running-app side of
// host policy's min_security_score.
//
// AI screening: every scanner adapter that screens (scanners/ai) is asked
// after internal/scan, with the files the secret check flagged withheld;
// its findings join the result and the basis names it ("ai:<adapter ID>")
// with what it used. One that fails is named in the basis with why and the
// score is taken from the scanners that answered: the scan is still done.
// With host policy disable_ai_screening none is called (no request leaves
// the server) and the basis says AI screening is off by policy.
//
// Scans run on request (Request: the row goes to scanning in the write
// that audits the request, the scan runs in the background on the server
// that took it, which gets the checkout through internal/source), and on
// the leader (Check, every CheckEvery) for every app whose release is
// newer than its last scan (a deploy) or whose last scan is a day old.
// A scan's end writes the result with security.scanned, or keeps the last
// score and writes state failed with security.scan_failed.
//
// Gating: the plan (internal/plan) refuses an app below the minimum or
// never scanned through Score; the leader's Check applies Gate (pure,
// table-tested) to apps meant to run: security.below_minimum once, the
// stop through the scheduler's StopBecause with security.insecure_stopped
// after insecure_grace_hours when insecure_action is stop, and
// security.recovered once the score is back at or above the minimum.
//
// It writes only its own table, its events and audit entries; the row
// goes in the write that deletes the app (ForgetOps, from
// internal/volumes' DeleteApp).
package security

import (
	"errors"
	"time"

	"github.com/svchost/svc/internal/scan"
	"github.com/svchost/svc/raftstore"
)

// States of a result.
const (
	NeverScanned = "never_scanned"
	Scanning     = "scanning"
	Done         = "done"
	Failed       = "failed"
)

// Record is an app's stored security result: the View the API shows
// (whose score, scanned_at, spec_id, basis, findings and counts are the
// last finished scan's: a scan under way or failed keeps them), and what
// the service remembers besides.
type Record struct {
	AppID string `json:"app_id"`
	View
	// RequestedAt is when the latest scan began.
	RequestedAt time.Time `json:"requested_at"`
	// Reason is why the latest scan failed (never a secret).
	Reason string `json:"reason,omitempty"`
	// BelowSince is when the score was first seen below the minimum
	// (security.below_minimum was emitted then); nil when it is not.
	BelowSince *time.Time `json:"below_since,omitempty"`
	// StoppedAt is when the app was stopped for it.
	StoppedAt *time.Time `json:"stopped_at,omitempty"`
}

// Results is the table of security results (ID: the app's ID).
var Results = &raftstore.Table[Record]{
	Name: "security_results",
	ID:   func(r *Record) string { return r.AppID },
	Validate: func(_ *raftstore.Reader, _, r *Record) error {
		if r == nil {
			return nil
		}
		switch {
		case r.AppID == "":
			return errors.New("a security result names its app")
		case r.State != Scanning && r.State != Done && r.State != Failed:
			return errors.New("a security result's state is scanning, done or failed")
		case r.Score != nil && (*r.Score < 0 || *r.Score > 100):
			return errors.New("a security score is 0 to 100")
		}
		return nil
	},
}

// Tables lists the tables this package declares.
func Tables() []raftstore.Def { return []raftstore.Def{Results} }

// ForgetOps removes the app's security result, for the write that deletes
// the app.
func ForgetOps(r *raftstore.Reader, appID string) []raftstore.Op {
	if _, _, ok := Results.Get(r, appID); !ok {
		return nil
	}
	return []raftstore.Op{Results.Delete(appID)}
}

// ScoreOf is the app's last score from the view r; nil when it was never
// scanned to the end.
func ScoreOf(r *raftstore.Reader, appID string) *int {
	row, _, ok := Results.Get(r, appID)
	if !ok || row.Score == nil {
		return nil
	}
	v := *row.Score
	return &v
}

// View is a security result as GET /apps/{appID}/security answers it
// (API.md).
type View struct {
	State     string         `json:"state"`
	Score     *int           `json:"score"`
	ScannedAt *time.Time     `json:"scanned_at"`
	SpecID    *string        `json:"spec_id"`
	Basis     []scan.Basis   `json:"basis"`
	Findings  []scan.Finding `json:"findings"`
	Counts    scan.Counts    `json:"counts"`
	// Failure is why the latest scan failed, in state failed only; the
	// stored Record keeps it as Reason (whose key, at the shallower depth,
	// is the one stored).
	Failure *string `json:"reason"`
}

// view is the row as the API shows it; never_scanned without a row.
func view(row Record, ok bool) View {
	if !ok {
		return View{State: NeverScanned, Basis: []scan.Basis{}, Findings: []scan.Finding{}}
	}
	v := row.View
	v.Failure = nil
	if v.State == Failed && row.Reason != "" {
		reason := row.Reason
		v.Failure = &reason
	}
	if v.Basis == nil {
		v.Basis = []scan.Basis{}
	}
	if v.Findings == nil {
		v.Findings = []scan.Finding{}
	}
	return v
}
