package upgrade

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// States of an upgrade.
const (
	StateChecking   = "checking"
	StateRestarting = "restarting"
	StateDone       = "done"
	StateFailed     = "failed"
)

// MarkerFile is the marker's name in the work directory.
const MarkerFile = "upgrade.json"

// Record is what an upgrade is: the marker keeps it, the API shows it.
type Record struct {
	ID         string     `json:"id"`
	State      string     `json:"state"`
	From       string     `json:"from"`
	To         string     `json:"to"`
	Reason     *string    `json:"reason"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// Marker is the record of the latest upgrade of this node, kept in the
// work directory across the exec. Reported says its event (svc.upgraded
// or svc.upgrade_failed) is written; Attempts counts the starts of the new
// binary after the exec.
type Marker struct {
	Record
	Attempts int  `json:"attempts"`
	Reported bool `json:"reported"`
	// Rollout is the ID of the rollout this upgrade is a step of (its
	// end ends the step), "" for an upgrade of this server alone.
	Rollout string `json:"rollout,omitempty"`
}

// Fail marks m failed for reason at now.
func (m *Marker) Fail(reason string, now time.Time) {
	m.State, m.Reason, m.FinishedAt, m.Reported = StateFailed, &reason, &now, false
}

// Finish marks m done at now.
func (m *Marker) Finish(now time.Time) {
	m.State, m.Reason, m.FinishedAt = StateDone, nil, &now
}

// Action is what a starting binary does about the marker.
type Action int

const (
	// Nothing: no upgrade pending.
	Nothing Action = iota
	// Confirm: this is the new binary's first start after the exec; count
	// the attempt, and once serving emit svc.upgraded and mark it done.
	Confirm
	// RollBack: the new binary started before and never became ready;
	// mark the upgrade failed, swap the previous binary back and exec it.
	RollBack
	// ReportFailed: the upgrade failed and this (the old) binary runs:
	// emit svc.upgrade_failed.
	ReportFailed
	// ReportDone: the upgrade is done but its event is not written yet.
	ReportDone
)

func (a Action) String() string {
	return [...]string{"nothing", "confirm", "roll back", "report failed", "report done"}[a]
}

// Decide says what a binary of version running, starting (not as a trial
// child), does about m (nil: none); reason is the failure to record with
// RollBack and ReportFailed when the marker does not say one yet.
func Decide(m *Marker, running string) (a Action, reason string) {
	if m == nil {
		return Nothing, ""
	}
	switch m.State {
	case StateDone:
		if !m.Reported && running == m.To {
			return ReportDone, ""
		}
		return Nothing, ""
	case StateFailed:
		if !m.Reported && running == m.From {
			return ReportFailed, ""
		}
		return Nothing, ""
	case StateRestarting:
		switch running {
		case m.To:
			if m.Attempts > 0 {
				return RollBack, fmt.Sprintf("%s stopped after it was started in place (start %d); the previous binary was restored", m.To, m.Attempts+1)
			}
			return Confirm, ""
		case m.From:
			// The process stopped between the swap and the exec, and the
			// old binary runs again (swapped back, or restored by hand).
			return ReportFailed, "the upgrade was interrupted before " + m.To + " started; " + m.From + " runs"
		}
		return ReportFailed, "neither " + m.From + " nor " + m.To + " started: " + running + " runs"
	}
	// StateChecking is never saved: a check interrupted left nothing
	// behind but a temporary file.
	return Nothing, ""
}

// Load reads the marker in dir; nil, nil when there is none.
func Load(dir string) (*Marker, error) {
	b, err := os.ReadFile(filepath.Join(dir, MarkerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("upgrade marker: %w", err)
	}
	var m Marker
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("upgrade marker %s: %w", filepath.Join(dir, MarkerFile), err)
	}
	return &m, nil
}

// Save writes m to dir atomically (a temporary file renamed over the
// marker, synced).
func Save(dir string, m *Marker) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("upgrade marker: %w", err)
	}
	f, err := os.CreateTemp(dir, MarkerFile+".*")
	if err != nil {
		return fmt.Errorf("upgrade marker: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("upgrade marker: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("upgrade marker: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("upgrade marker: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, MarkerFile)); err != nil {
		return fmt.Errorf("upgrade marker: %w", err)
	}
	return nil
}
