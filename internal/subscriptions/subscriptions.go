// Package subscriptions owns event subscriptions and their deliveries: who
// is sent which events (an app's or the whole installation's, by exact
// name, prefix or *), where (a webhook URL, shaped by method, content type,
// sealed extra headers and a payload template, or a notification adapter),
// the signing keys (shown once, sealed, rotated with a 24-hour overlap), and
// the delivery log with every attempt.
//
// Its Dispatcher is the outbox's only reader: on the leader only, fenced by
// a lease every one of its writes checks (a deposed leader cannot mark
// anything delivered), it follows the outbox in log order, fans each event
// out into deliveries of the subscriptions that match, and sends them
// (webhooks through internal/webhook, notifications through the adapters'
// notify.Notifier), recording each attempt and retrying on the schedule
// through the replicated store. Delivery is at least once: an attempt is
// made before it is recorded, so a leader change may repeat it, with the
// same Svc-Event-Id and body.
//
// Access is decided here, at saving and again at every sending: a
// subscription's owner must still see its subject. It must not import the
// server or an adapter implementation, and never returns, logs or records
// a signing key or header value once saved.
package subscriptions

import (
	"errors"
	"slices"
	"time"

	"github.com/svchost/svc/raftstore"
)

// Delivery states.
const (
	StatePending        = "pending"
	StateDelivered      = "delivered"
	StateRetryScheduled = "retry_scheduled"
	StateFailed         = "failed"
)

// Key is a signing key of a subscription, sealed by the keyring. A key
// replaced by a rotation keeps signing until RetiresAt.
type Key struct {
	Sealed    []byte     `json:"sealed"`
	CreatedAt time.Time  `json:"created_at"`
	RetiresAt *time.Time `json:"retires_at,omitempty"`
}

// Subscription is one subscription as the store keeps it.
type Subscription struct {
	ID string `json:"id"`
	// AppID is the app whose events it receives; empty for an install-wide
	// subscription.
	AppID string `json:"app_id,omitempty"`
	// OwnerID is the account (or the service token) that made it; its
	// access is checked at every sending.
	OwnerID string   `json:"owner_id"`
	Events  []string `json:"events"`
	// Exactly one of URL (a webhook) and AdapterID (a notification adapter)
	// is set.
	URL         string `json:"url,omitempty"`
	AdapterID   string `json:"adapter_id,omitempty"`
	Method      string `json:"method"`
	ContentType string `json:"content_type"`
	// Headers are the extra headers' values, sealed, by name.
	Headers         map[string][]byte `json:"headers,omitempty"`
	PayloadTemplate string            `json:"payload_template,omitempty"`
	// Keys are the signing keys, newest first.
	Keys           []Key      `json:"keys"`
	Enabled        bool       `json:"enabled"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
	FailingSince   *time.Time `json:"failing_since,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

// Attempt is one attempt of a delivery, as the delivery log shows it.
type Attempt struct {
	At         time.Time `json:"at"`
	StatusCode *int      `json:"status_code"`
	Error      *string   `json:"error"`
	DurationMS int64     `json:"duration_ms"`
}

// Delivery is one event sent to one subscription, with its attempts.
type Delivery struct {
	ID             string     `json:"id"`
	SubscriptionID string     `json:"subscription_id"`
	EventID        string     `json:"event_id"`
	EventType      string     `json:"event_type"`
	State          string     `json:"state"`
	Attempts       []Attempt  `json:"attempts"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	CreatedAt      time.Time  `json:"created_at"`
	// Failures counts the failed attempts of the current series: where the
	// retry schedule stands.
	Failures int `json:"failures,omitempty"`
	// Once marks a resend: one attempt, no retries after it.
	Once bool `json:"once,omitempty"`
}

// Lease fences the dispatcher: the leader that runs it takes a new epoch,
// and every write of the dispatcher checks that the lease is still the one
// it took.
type Lease struct {
	ID     string    `json:"id"`
	Holder string    `json:"holder"`
	Epoch  uint64    `json:"epoch"`
	Since  time.Time `json:"since"`
}

// leaseID is the ID of the dispatcher's lease row.
const leaseID = "dispatcher"

// maxAttemptsKept bounds a delivery's attempt log: the first attempts and
// the latest are kept.
const maxAttemptsKept = 30

// The tables.
var (
	Subscriptions = &raftstore.Table[Subscription]{
		Name: "subscriptions",
		ID:   func(s *Subscription) string { return s.ID },
		Indexes: []raftstore.Index[Subscription]{
			{Name: "owner", Key: func(s *Subscription) (string, bool) { return s.OwnerID, true }},
			{Name: "app", Key: func(s *Subscription) (string, bool) { return s.AppID, s.AppID != "" }},
			{Name: "adapter", Key: func(s *Subscription) (string, bool) { return s.AdapterID, s.AdapterID != "" }},
		},
		Validate: func(_ *raftstore.Reader, _, s *Subscription) error {
			if s == nil {
				return nil
			}
			if (s.URL == "") == (s.AdapterID == "") {
				return errors.New("a subscription has exactly one of url and adapter_id")
			}
			if len(s.Events) == 0 || s.OwnerID == "" || (s.URL != "" && len(s.Keys) == 0) {
				return errors.New("a subscription has events, an owner, and a signing key for a webhook")
			}
			return nil
		},
	}
	Deliveries = &raftstore.Table[Delivery]{
		Name: "deliveries",
		ID:   func(d *Delivery) string { return d.ID },
		Indexes: []raftstore.Index[Delivery]{
			{Name: "subscription", Key: func(d *Delivery) (string, bool) { return d.SubscriptionID, true }},
			// due orders the deliveries waiting for an attempt by when.
			{Name: "due", Key: func(d *Delivery) (string, bool) {
				if d.NextAttemptAt == nil || (d.State != StatePending && d.State != StateRetryScheduled) {
					return "", false
				}
				return raftstore.Uint(uint64(max(d.NextAttemptAt.UnixNano(), 0))), true
			}},
		},
		Validate: func(_ *raftstore.Reader, _, d *Delivery) error {
			if d == nil {
				return nil
			}
			if !slices.Contains([]string{StatePending, StateDelivered, StateRetryScheduled, StateFailed}, d.State) {
				return errors.New("unknown delivery state " + d.State)
			}
			waiting := d.State == StatePending || d.State == StateRetryScheduled
			if waiting != (d.NextAttemptAt != nil) {
				return errors.New("a delivery has a next attempt exactly while it waits for one")
			}
			return nil
		},
	}
	Leases = &raftstore.Table[Lease]{
		Name: "dispatch_lease",
		ID:   func(l *Lease) string { return l.ID },
		Validate: func(_ *raftstore.Reader, old, l *Lease) error {
			if l == nil {
				return errors.New("the dispatcher's lease is never removed")
			}
			if old != nil && l.Epoch <= old.Epoch {
				return errors.New("the dispatcher's lease only moves to a newer epoch")
			}
			return nil
		},
	}
)

// Tables lists the tables this package declares.
func Tables() []raftstore.Def { return []raftstore.Def{Subscriptions, Deliveries, Leases} }

// liveKeys are the keys that sign at now: the newest, and those a rotation
// replaced that have not retired yet.
func (s *Subscription) liveKeys(now time.Time) []Key {
	var out []Key
	for _, k := range s.Keys {
		if k.RetiresAt == nil || now.Before(*k.RetiresAt) {
			out = append(out, k)
		}
	}
	return out
}

// Outcome is what one attempt came to, as the dispatcher records it.
type Outcome struct {
	At         time.Time
	StatusCode int // 0: no answer
	Error      string
	Duration   time.Duration
}

func (o Outcome) delivered() bool { return o.Error == "" }

// afterAttempt is a delivery once an attempt is recorded: delivered, or
// the next retry of the schedule, or failed once the schedule is spent (or
// after a resend's one attempt). It is pure.
func afterAttempt(d Delivery, o Outcome, schedule []time.Duration) Delivery {
	a := Attempt{At: o.At.UTC(), DurationMS: o.Duration.Milliseconds()}
	if o.StatusCode != 0 {
		code := o.StatusCode
		a.StatusCode = &code
	}
	if o.Error != "" {
		msg := o.Error
		a.Error = &msg
	}
	d.Attempts = appendAttempt(d.Attempts, a)
	d.NextAttemptAt = nil
	switch {
	case o.delivered():
		d.State, d.Failures, d.Once = StateDelivered, 0, false
	case d.Once || d.Failures >= len(schedule):
		d.State, d.Once = StateFailed, false
		d.Failures++
	default:
		next := o.At.Add(schedule[d.Failures]).UTC()
		d.State, d.NextAttemptAt = StateRetryScheduled, &next
		d.Failures++
	}
	return d
}

// appendAttempt adds an attempt, keeping the first attempts and the latest
// when the log is full.
func appendAttempt(as []Attempt, a Attempt) []Attempt {
	out := append(slices.Clone(as), a)
	if len(out) > maxAttemptsKept {
		keep := maxAttemptsKept / 3
		out = append(out[:keep], out[len(out)-(maxAttemptsKept-keep):]...)
	}
	return out
}

// afterOutcome is a subscription's failure record after an attempt: a
// delivered attempt clears it; a failed one starts it, and a subscription
// whose attempts have all failed for disableAfter is turned off. It
// reports whether this attempt turned it off. It is pure.
func afterOutcome(s Subscription, o Outcome, disableAfter time.Duration) (Subscription, bool) {
	if o.delivered() {
		s.FailingSince = nil
		return s, false
	}
	if s.FailingSince == nil {
		at := o.At.UTC()
		s.FailingSince = &at
	}
	if s.Enabled && o.At.Sub(*s.FailingSince) >= disableAfter {
		s.Enabled = false
		s.DisabledReason = "every delivery attempt failed for " + disableAfter.String() + "; the last: " + o.Error
		return s, true
	}
	return s, false
}
