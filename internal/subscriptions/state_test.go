package subscriptions

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/internal/events"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// TestAfterAttemptWalksTheSchedule: failures wait each step of the
// schedule in turn, the attempt after the last step fails the delivery, a
// success ends it at any point, and a resend is one attempt.
func TestAfterAttemptWalksTheSchedule(t *testing.T) {
	schedule := []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute}
	fail := func(at time.Time) Outcome {
		return Outcome{At: at, StatusCode: 500, Error: "the receiver answered 500"}
	}
	d := Delivery{State: StatePending, NextAttemptAt: &t0}
	at := t0
	for i, wait := range schedule {
		d = afterAttempt(d, fail(at), schedule)
		if d.State != StateRetryScheduled || d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(at.Add(wait)) || d.Failures != i+1 {
			t.Fatalf("after failure %d: %+v; want a retry at %s", i+1, d, at.Add(wait))
		}
		at = *d.NextAttemptAt
	}
	d = afterAttempt(d, fail(at), schedule)
	if d.State != StateFailed || d.NextAttemptAt != nil || len(d.Attempts) != 4 {
		t.Fatalf("after the last retry: %+v; want failed after 4 attempts", d)
	}
	if a := d.Attempts[3]; a.StatusCode == nil || *a.StatusCode != 500 || a.Error == nil || !a.At.Equal(at) {
		t.Errorf("last attempt %+v", a)
	}

	ok := afterAttempt(Delivery{State: StateRetryScheduled, Failures: 2, NextAttemptAt: &t0}, Outcome{At: t0, StatusCode: 204}, schedule)
	if ok.State != StateDelivered || ok.Failures != 0 || ok.NextAttemptAt != nil || ok.Attempts[0].Error != nil {
		t.Errorf("a success: %+v", ok)
	}
	once := afterAttempt(Delivery{State: StatePending, Once: true, NextAttemptAt: &t0}, fail(t0), schedule)
	if once.State != StateFailed || once.Once {
		t.Errorf("a failed resend: %+v; want failed, no retry", once)
	}
	noAnswer := afterAttempt(Delivery{State: StatePending, NextAttemptAt: &t0}, Outcome{At: t0, Error: "no answer within 15s"}, schedule)
	if noAnswer.Attempts[0].StatusCode != nil || noAnswer.State != StateRetryScheduled {
		t.Errorf("no answer: %+v", noAnswer)
	}
}

// TestAttemptLogIsBounded keeps the first attempts and the latest.
func TestAttemptLogIsBounded(t *testing.T) {
	var as []Attempt
	for i := range 100 {
		as = appendAttempt(as, Attempt{At: t0.Add(time.Duration(i) * time.Second)})
	}
	if len(as) != maxAttemptsKept || !as[0].At.Equal(t0) || !as[len(as)-1].At.Equal(t0.Add(99*time.Second)) {
		t.Errorf("%d attempts kept, first %s, last %s", len(as), as[0].At, as[len(as)-1].At)
	}
}

// TestAfterOutcomeTurnsOffAfterADay: the failure record starts at the
// first failure, a success clears it, and only failures lasting
// disableAfter turn the subscription off, once.
func TestAfterOutcomeTurnsOffAfterADay(t *testing.T) {
	day := 24 * time.Hour
	s := Subscription{Enabled: true}
	fail := func(at time.Time) Outcome { return Outcome{At: at, Error: "no answer within 15s"} }
	s, off := afterOutcome(s, fail(t0), day)
	if off || s.FailingSince == nil || !s.FailingSince.Equal(t0) {
		t.Fatalf("first failure: %+v off=%t", s, off)
	}
	s, off = afterOutcome(s, fail(t0.Add(23*time.Hour)), day)
	if off || !s.Enabled || !s.FailingSince.Equal(t0) {
		t.Fatalf("23 hours of failures: %+v off=%t", s, off)
	}
	cleared, _ := afterOutcome(s, Outcome{At: t0.Add(23 * time.Hour), StatusCode: 200}, day)
	if cleared.FailingSince != nil || !cleared.Enabled {
		t.Errorf("a success: %+v; want the record cleared", cleared)
	}
	s, off = afterOutcome(s, fail(t0.Add(day)), day)
	if !off || s.Enabled || s.DisabledReason == "" {
		t.Fatalf("a day of failures: %+v off=%t; want turned off", s, off)
	}
	if _, again := afterOutcome(s, fail(t0.Add(25*time.Hour)), day); again {
		t.Error("a subscription already off was turned off again")
	}
}

// TestReceives: scope and filters decide which subscriptions get an event;
// a test event reaches none by fan-out.
func TestReceives(t *testing.T) {
	app := &events.AppRef{ID: "app_1", Name: "Web", Slug: "web"}
	appEv := &events.Event{Type: "deploy.failed", App: app}
	otherEv := &events.Event{Type: "deploy.failed", App: &events.AppRef{ID: "app_2"}}
	installEv := &events.Event{Type: "token.created"}
	testEv := &events.Event{Type: "subscription.test"}
	cases := []struct {
		name string
		s    Subscription
		ev   *events.Event
		want bool
	}{
		{"app subscription, its app's event", Subscription{Enabled: true, AppID: "app_1", Events: []string{"deploy.*"}}, appEv, true},
		{"app subscription, another app's event", Subscription{Enabled: true, AppID: "app_1", Events: []string{"*"}}, otherEv, false},
		{"app subscription, an install event", Subscription{Enabled: true, AppID: "app_1", Events: []string{"*"}}, installEv, false},
		{"install-wide, an app event", Subscription{Enabled: true, Events: []string{"deploy.failed"}}, appEv, true},
		{"install-wide, an install event", Subscription{Enabled: true, Events: []string{"token.*"}}, installEv, true},
		{"no filter selects it", Subscription{Enabled: true, Events: []string{"app.*", "deploy.started"}}, appEv, false},
		{"off", Subscription{Enabled: false, Events: []string{"*"}}, appEv, false},
		{"a test event", Subscription{Enabled: true, Events: []string{"*"}}, testEv, false},
	}
	for _, c := range cases {
		if got := receives(&c.s, c.ev); got != c.want {
			t.Errorf("%s: receives = %t; want %t", c.name, got, c.want)
		}
	}
}

// TestLiveKeys: a rotated key signs until it retires.
func TestLiveKeys(t *testing.T) {
	retires := t0.Add(24 * time.Hour)
	s := Subscription{Keys: []Key{{Sealed: []byte("new"), CreatedAt: t0}, {Sealed: []byte("old"), RetiresAt: &retires}}}
	if got := len(s.liveKeys(t0.Add(time.Hour))); got != 2 {
		t.Errorf("during the overlap: %d keys; want 2", got)
	}
	got := s.liveKeys(retires)
	if diff := cmp.Diff([]Key{{Sealed: []byte("new"), CreatedAt: t0}}, got); diff != "" {
		t.Errorf("after the overlap (-want +got):\n%s", diff)
	}
}
