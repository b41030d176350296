package security

import (
	"testing"
	"time"

	"github.com/svchost/svc/internal/policy"
)

func TestDue(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	done := Record{View: View{State: Done}, RequestedAt: t0}
	cases := []struct {
		name     string
		now      time.Duration
		row      Record
		hasRow   bool
		pinned   bool
		released time.Time
		want     bool
	}{
		{"nothing pinned: nothing to scan", 0, Record{}, false, false, time.Time{}, false},
		{"never scanned", 0, Record{}, false, true, time.Time{}, true},
		{"scanned lately", time.Hour, done, true, true, time.Time{}, false},
		{"scanned a day ago", Day, done, true, true, time.Time{}, true},
		{"deployed after the scan", time.Hour, done, true, true, at(time.Minute), true},
		{"deployed before the scan", time.Hour, done, true, true, at(-time.Minute), false},
		{"a failed scan waits a day too", time.Hour, Record{View: View{State: Failed}, RequestedAt: t0}, true, true, time.Time{}, false},
		{"a scan under way", time.Minute, Record{View: View{State: Scanning}, RequestedAt: t0}, true, true, at(time.Second), false},
		{"a scan under way for too long: lost", ScanTimeout, Record{View: View{State: Scanning}, RequestedAt: t0}, true, true, time.Time{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Due(at(c.now), c.row, c.hasRow, c.pinned, c.released); got != c.want {
				t.Errorf("Due = %v; want %v", got, c.want)
			}
		})
	}
}

func TestGate(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	score := func(n int) *int { return &n }
	pol := func(min int, action string, grace int) policy.Policy {
		p := policy.Default()
		p.MinSecurityScore, p.InsecureAction, p.InsecureGraceHours = min, action, grace
		return p
	}
	stop, warn := policy.InsecureStop, policy.InsecureWarn
	cases := []struct {
		name    string
		now     time.Duration
		p       policy.Policy
		row     Record
		running bool
		want    Step
	}{
		{"no minimum", 0, pol(0, stop, 1), Record{View: View{Score: score(10)}}, true, Stay},
		{"never scanned", 0, pol(80, stop, 1), Record{}, true, Stay},
		{"at the minimum", 0, pol(80, stop, 1), Record{View: View{Score: score(80)}}, true, Stay},
		{"falls below: tell", 0, pol(80, stop, 1), Record{View: View{Score: score(79)}}, true, Below},
		{"below, not meant to run: nothing", 0, pol(80, stop, 1), Record{View: View{Score: score(79)}}, false, Stay},
		{"below, told, within the grace hours", 59 * time.Minute, pol(80, stop, 1), Record{View: View{Score: score(79)}, BelowSince: at(0)}, true, Stay},
		{"below past the grace hours, action stop", time.Hour, pol(80, stop, 1), Record{View: View{Score: score(79)}, BelowSince: at(0)}, true, Stop},
		{"below past the grace hours, action warn", 48 * time.Hour, pol(80, warn, 1), Record{View: View{Score: score(79)}, BelowSince: at(0)}, true, Stay},
		{"zero grace hours: stopped at the next check", 0, pol(80, stop, 0), Record{View: View{Score: score(79)}, BelowSince: at(0)}, true, Stop},
		{"stopped, started again, no scan since: not stopped again", 3 * time.Hour, pol(80, stop, 1),
			Record{View: View{Score: score(79), ScannedAt: at(-time.Hour)}, BelowSince: at(0), StoppedAt: at(time.Hour)}, true, Stay},
		{"stopped, started again, a scan since still below: stopped again", 3 * time.Hour, pol(80, stop, 1),
			Record{View: View{Score: score(79), ScannedAt: at(2 * time.Hour)}, BelowSince: at(0), StoppedAt: at(time.Hour)}, true, Stop},
		{"back at the minimum: recovered", 0, pol(80, stop, 1), Record{View: View{Score: score(80)}, BelowSince: at(-time.Hour)}, true, Recover},
		{"the minimum removed: recovered", 0, pol(0, stop, 1), Record{View: View{Score: score(10)}, BelowSince: at(-time.Hour)}, false, Recover},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Gate(t0.Add(c.now), c.p, c.row, c.running); got != c.want {
				t.Errorf("Gate = %v; want %v", got, c.want)
			}
		})
	}
}
