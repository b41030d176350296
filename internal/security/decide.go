package security

import (
	"time"

	"github.com/svchost/svc/internal/policy"
)

// Day is how old a scan may grow before the leader scans again.
const Day = 24 * time.Hour

// ScanTimeout is how long a scan may stay under way before the leader
// takes it for lost (its server went away) and scans again.
const ScanTimeout = 15 * time.Minute

// Due says whether the leader should scan an app at now: one with a
// pinned revision that was never scanned, whose release is newer than its
// latest scan (a deploy since), whose latest scan is a day old, or whose
// scan under way is older than ScanTimeout. hasRow says the app has a
// result; released is zero for an app that runs no release.
func Due(now time.Time, row Record, hasRow, pinned bool, released time.Time) bool {
	if !pinned {
		return false
	}
	if !hasRow {
		return true
	}
	if row.State == Scanning {
		return now.Sub(row.RequestedAt) >= ScanTimeout
	}
	return released.After(row.RequestedAt) || now.Sub(row.RequestedAt) >= Day
}

// Step is what Gate says is due for a running app's score.
type Step int

const (
	// Stay: nothing to do.
	Stay Step = iota
	// Below: the score fell below the minimum; tell (security.below_minimum).
	Below
	// Stop the app (security.insecure_stopped): below past the grace hours
	// with insecure_action stop.
	Stop
	// Recover: back at or above the minimum (security.recovered).
	Recover
)

// Gate decides for an app meant to run (running: its desired state is
// running) what its score calls for under policy p, given what the record
// remembers (BelowSince, StoppedAt, ScannedAt). An app never scanned is
// not one that fell below (the plan refuses deploying it); a minimum of 0
// requires nothing. An app stopped for its score is not stopped again
// until a scan after the stop finds it still below (somebody started it).
func Gate(now time.Time, p policy.Policy, row Record, running bool) Step {
	below := p.MinSecurityScore > 0 && row.Score != nil && *row.Score < p.MinSecurityScore
	switch {
	case !below && row.BelowSince != nil:
		return Recover
	case !below || !running:
		return Stay
	case row.BelowSince == nil:
		return Below
	case p.InsecureAction != policy.InsecureStop:
		return Stay
	case now.Before(row.BelowSince.Add(time.Duration(p.InsecureGraceHours) * time.Hour)):
		return Stay
	case row.StoppedAt != nil && (row.ScannedAt == nil || !row.ScannedAt.After(*row.StoppedAt)):
		return Stay
	}
	return Stop
}
