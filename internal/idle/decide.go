package idle

import "time"

// Day is the unit of idle_days.
const Day = 24 * time.Hour

// Do is what an idle app's reading calls for.
type Do int

const (
	// Nothing is due yet.
	Nothing Do = iota
	// Warn the owner of the action at ActionAt.
	Warn
	// Act: stop or delete the app now.
	Act
)

// Verdict is what Decide says: what to do, and when the action comes (for
// Warn, the time to tell; for Nothing after a warning, the time told).
type Verdict struct {
	Do       Do
	ActionAt time.Time
}

// Warning is what the row remembers of a warning: when, and the last
// activity it was about (both zero: none).
type Warning struct {
	At, For time.Time
}

// lead is how long before the action the owner is warned: a day, half a
// day for an app idle after one day (a warning a day before would come
// with the request itself).
func lead(days int) time.Duration {
	if days == 1 {
		return Day / 2
	}
	return Day
}

// Decide says what is due at now for an app last active at last whose
// lifecycle acts after days idle days (0: never), given the warning
// remembered. A warning about an activity older than last is stale (a
// request came since): forgotten. Without a current warning, the warning
// is due lead(days) before the action, the action then coming at
// last+days, but never sooner than lead(days) after the warning. With one,
// the action comes at the time the warning told: the later of its
// activity plus days and the warning plus lead(days).
func Decide(now, last time.Time, days int, w Warning) Verdict {
	if days <= 0 {
		return Verdict{}
	}
	idle, ahead := time.Duration(days)*Day, lead(days)
	if !w.At.IsZero() && !last.After(w.For) {
		at := later(w.For.Add(idle), w.At.Add(ahead))
		if now.Before(at) {
			return Verdict{Do: Nothing, ActionAt: at}
		}
		return Verdict{Do: Act, ActionAt: at}
	}
	due := last.Add(idle)
	if now.Before(due.Add(-ahead)) {
		return Verdict{}
	}
	return Verdict{Do: Warn, ActionAt: later(due, now.Add(ahead))}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
