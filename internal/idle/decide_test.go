package idle

import (
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	warned := func(when, about time.Duration) Warning { return Warning{At: at(when), For: at(about)} }
	h := time.Hour
	cases := []struct {
		name string
		now  time.Duration // after t0
		last time.Duration // after t0
		days int
		w    Warning
		want Verdict
	}{
		{"never: no idle days", 400 * Day, 0, 0, Warning{}, Verdict{}},
		{"active lately", 2 * Day, 0, 30, Warning{}, Verdict{}},
		{"just before the warning", 29*Day - time.Minute, 0, 30, Warning{}, Verdict{}},
		{"a day before the action: warn", 29 * Day, 0, 30, Warning{}, Verdict{Do: Warn, ActionAt: at(30 * Day)}},
		{"warned: nothing until the action", 29*Day + 12*h, 0, 30, warned(29*Day, 0), Verdict{Do: Nothing, ActionAt: at(30 * Day)}},
		{"warned: the action is due", 30 * Day, 0, 30, warned(29*Day, 0), Verdict{Do: Act, ActionAt: at(30 * Day)}},
		{"warned late (the leader was down): the action a day after the warning", 40 * Day, 0, 30, Warning{},
			Verdict{Do: Warn, ActionAt: at(41 * Day)}},
		{"warned late: no action before its lead", 40*Day + 23*h, 0, 30, warned(40*Day, 0), Verdict{Do: Nothing, ActionAt: at(41 * Day)}},
		{"warned late: the action after its lead", 41 * Day, 0, 30, warned(40*Day, 0), Verdict{Do: Act, ActionAt: at(41 * Day)}},
		{"a request after the warning: the warning is stale, nothing due", 30 * Day, 29*Day + h, 30, warned(29*Day, 0), Verdict{}},
		{"a request after the warning, then idle again: warned anew", 58*Day + h, 29*Day + h, 30, warned(29*Day, 0),
			Verdict{Do: Warn, ActionAt: at(59*Day + h)}},
		{"one idle day: warned half a day before", 12 * h, 0, 1, Warning{}, Verdict{Do: Warn, ActionAt: at(Day)}},
		{"one idle day: nothing before", 12*h - time.Minute, 0, 1, Warning{}, Verdict{}},
		{"one idle day: the action", Day, 0, 1, warned(12*h, 0), Verdict{Do: Act, ActionAt: at(Day)}},
		{"a warning about older activity than the record's does not count", 30 * Day, 0, 30, warned(-Day, -30*Day),
			Verdict{Do: Warn, ActionAt: at(31 * Day)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Decide(at(c.now), at(c.last), c.days, c.w); got != c.want {
				t.Errorf("Decide = %+v; want %+v", got, c.want)
			}
		})
	}
}
