package subscriptions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/notify"
	"github.com/svchost/svc/internal/webhook"
	"github.com/svchost/svc/raftstore"
)

// Sender makes one webhook attempt (internal/webhook).
type Sender interface {
	Send(ctx context.Context, req webhook.Request) webhook.Result
}

var _ Sender = (*webhook.Sender)(nil)

// DefaultSchedule is the shipped retry schedule: the waits before each
// retry of a failed delivery.
var DefaultSchedule = []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour}

// DispatchDeps are the dispatcher's collaborators and settings.
type DispatchDeps struct {
	Store  Store
	Ring   Sealer
	Policy Policy
	Sender Sender
	// Notifier returns the loaded notification adapter with that ID.
	Notifier func(adapterID string) (notify.Notifier, bool)
	Now      func() time.Time
	Logger   *slog.Logger
	// NodeID names the lease's holder in the store.
	NodeID string
	// ConsoleURL is the installation's external URL, for links; empty:
	// none.
	ConsoleURL string
	// Schedule, AttemptTimeout and DisableAfter are events.retry_schedule,
	// events.attempt_timeout and events.disable_after.
	Schedule       []time.Duration
	AttemptTimeout time.Duration
	DisableAfter   time.Duration
	// Workers bounds attempts in flight (128); PerSubscription bounds
	// those of one subscription (4), so that a slow receiver holds only
	// its own.
	Workers, PerSubscription int
}

// Dispatcher turns the outbox into deliveries and sends them. Run it on
// the leader only (a leader loop).
type Dispatcher struct {
	d DispatchDeps
	// kick wakes the sending loop when an attempt ends.
	kick chan struct{}
}

// NewDispatcher returns a dispatcher; zero settings take the shipped
// values.
func NewDispatcher(d DispatchDeps) *Dispatcher {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Schedule == nil {
		d.Schedule = DefaultSchedule
	}
	if d.AttemptTimeout <= 0 {
		d.AttemptTimeout = 15 * time.Second
	}
	if d.DisableAfter <= 0 {
		d.DisableAfter = 24 * time.Hour
	}
	if d.Workers <= 0 {
		d.Workers = 128
	}
	if d.PerSubscription <= 0 {
		d.PerSubscription = 4
	}
	if d.Notifier == nil {
		d.Notifier = func(string) (notify.Notifier, bool) { return nil, false }
	}
	return &Dispatcher{d: d, kick: make(chan struct{}, 1)}
}

// errFenced ends a dispatcher whose lease another leader took.
var errFenced = errors.New("the dispatcher's lease moved to a newer leader")

// Run dispatches until ctx ends or another leader takes the lease. It
// first takes a new epoch of the lease; every write after checks it.
func (x *Dispatcher) Run(ctx context.Context) error {
	ctx = actor.With(ctx, actor.System)
	epoch, err := x.acquire(ctx)
	if err != nil {
		return fmt.Errorf("take the dispatcher's lease: %w", err)
	}
	x.d.Logger.Info("dispatcher started", "epoch", epoch)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context, uint64) error{x.fanOut, x.send} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := loop(ctx, epoch); err != nil && ctx.Err() == nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// acquire writes a new epoch of the lease.
//
// A lease this node already holds is kept as it is: no other dispatcher
// can be running under it (a node's previous run ended before this one
// started, the leader loops see to it, and a process that restarted is
// gone), and a leader that comes back writes nothing it need not.
func (x *Dispatcher) acquire(ctx context.Context) (uint64, error) {
	var epoch uint64
	_, err := x.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		cur, meta, _ := Leases.Get(r, leaseID)
		if cur.Holder == x.d.NodeID && cur.Epoch > 0 {
			epoch = cur.Epoch
			return nil, nil
		}
		epoch = cur.Epoch + 1
		return []raftstore.Op{Leases.PutIf(&Lease{ID: leaseID, Holder: x.d.NodeID, Epoch: epoch, Since: x.d.Now().UTC()}, meta.ModifyIndex)}, nil
	})
	return epoch, err
}

// fence is the check every write of the dispatcher carries: the lease is
// still at its epoch. A newer epoch ends the dispatcher.
func fence(r *raftstore.Reader, epoch uint64) (raftstore.Op, error) {
	l, meta, _ := Leases.Get(r, leaseID)
	if l.Epoch != epoch {
		return raftstore.Op{}, errFenced
	}
	return Leases.Check(leaseID, meta.ModifyIndex), nil
}

// Fan-out bounds: events read per write, and deliveries one write makes.
// A write's events are never split between two fan-outs (the cursor is a
// raft index): one write that exceeds a bound is fanned out whole, alone.
const (
	fanOutEvents     = 256
	fanOutDeliveries = 1000
)

// fanOut follows the outbox: it records the deliveries of the events after
// the cursor and moves the cursor past them in the same write, then waits
// for more.
func (x *Dispatcher) fanOut(ctx context.Context, epoch uint64) error {
	for ctx.Err() == nil {
		r := x.d.Store.Read()
		through, _ := events.ReadCursor(r)
		if evs, _ := events.Events.Since(r, through, 1); len(evs) == 0 {
			_ = r.Wait(ctx) // the outbox or the cursor changes
			continue
		}
		made := 0
		_, err := x.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
			guard, err := fence(r, epoch)
			if err != nil {
				return nil, err
			}
			through, version := events.ReadCursor(r)
			evs := eventsAfter(r, through)
			if len(evs) == 0 {
				return nil, nil
			}
			subs, _ := Subscriptions.List(r, raftstore.Query{})
			now := x.d.Now().UTC()
			ops := []raftstore.Op{guard}
			last := through
			made = 0
			// The cursor is a raft index: the events of one write are
			// fanned out together, or not yet.
			for i := 0; i < len(evs); {
				at := evs[i].Meta.CreateIndex
				var ds []raftstore.Op
				for ; i < len(evs) && evs[i].Meta.CreateIndex == at; i++ {
					for _, s := range subs {
						// Only what happened after it was made: a backlog
						// fanned out late is not sent to a newer subscription.
						if at <= s.Meta.CreateIndex || !receives(&s.Value, &evs[i].Value) {
							continue
						}
						ds = append(ds, Deliveries.Insert(&Delivery{ID: ids.NewAt(ids.Delivery, now), SubscriptionID: s.Value.ID,
							EventID: evs[i].Value.ID, EventType: evs[i].Value.Type, State: StatePending, NextAttemptAt: &now,
							CreatedAt: now, Attempts: []Attempt{}}))
					}
				}
				if last > through && made+len(ds) > fanOutDeliveries {
					break // the rest in the next write
				}
				ops = append(ops, ds...)
				made += len(ds)
				last = at
			}
			return append(ops, events.Advance(last, version)), nil
		})
		if err != nil {
			if errors.Is(err, errFenced) || ctx.Err() != nil {
				return err
			}
			x.d.Logger.Warn("dispatcher: could not record deliveries; trying again", "err", errcode.MessageOf(err))
			pause(ctx, time.Second)
			continue
		}
		if made > 0 {
			x.wake()
		}
	}
	return nil
}

// eventsAfter returns the events of the outbox after the cursor, for one
// fan-out: about fanOutEvents of them, in log order, and only whole
// writes: a write's events share its raft index, which the cursor moves
// past for all of them at once, so a page that would end inside a write
// ends before it (or, when one write fills it, takes that write whole).
func eventsAfter(r *raftstore.Reader, through uint64) []raftstore.Item[events.Event] {
	for limit := fanOutEvents; ; limit *= 2 {
		evs, more := events.Events.Since(r, through, limit)
		if n := wholeWrites(evs, more); n > 0 || !more {
			return evs[:n]
		}
	}
}

// wholeWrites is how many of evs, in log order, belong to writes all of
// whose events are among them: when more follow, the last write's may go
// on after the page. It is pure.
func wholeWrites(evs []raftstore.Item[events.Event], more bool) int {
	n := len(evs)
	if !more || n == 0 {
		return n
	}
	for n > 0 && evs[n-1].Meta.CreateIndex == evs[len(evs)-1].Meta.CreateIndex {
		n--
	}
	return n
}

// receives reports whether a subscription gets an event: it is on, its
// scope covers the event (an app's subscription its app's events, an
// install-wide one every event) and a filter selects it. subscription.test
// goes only to the subscription tested, written with its delivery.
func receives(s *Subscription, ev *events.Event) bool {
	if !s.Enabled || ev.Type == "subscription.test" {
		return false
	}
	if s.AppID != "" && (ev.App == nil || ev.App.ID != s.AppID) {
		return false
	}
	return slices.ContainsFunc(s.Events, func(f string) bool { return events.Matches(f, ev.Type) })
}

func (x *Dispatcher) wake() {
	select {
	case x.kick <- struct{}{}:
	default:
	}
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// send starts an attempt for every delivery that is due, within the
// bounds, and waits for the next one to be due, a change of the
// deliveries, or an attempt to end.
func (x *Dispatcher) send(ctx context.Context, epoch uint64) error {
	var (
		mu       sync.Mutex
		inFlight = map[string]string{} // delivery -> subscription
		perSub   = map[string]int{}
		fatal    = make(chan error, 1)
		wg       sync.WaitGroup
	)
	defer wg.Wait()
	for {
		r := x.d.Store.Read()
		now := x.d.Now()
		var wakeAt time.Time
		mu.Lock()
		var due []raftstore.Item[Delivery]
		if free := x.d.Workers - len(inFlight); free > 0 { // a Limit of 0 would be no limit
			due, _ = Deliveries.List(r, raftstore.Query{Index: "due", Prefix: true,
				Until: func(v any) bool {
					d := v.(*Delivery)
					if d.NextAttemptAt.After(now) {
						wakeAt = *d.NextAttemptAt
						return true
					}
					return false
				},
				Filter: func(v any) bool {
					d := v.(*Delivery)
					_, busy := inFlight[d.ID]
					return !busy && perSub[d.SubscriptionID] < x.d.PerSubscription
				},
				Limit: free})
		}
		for _, it := range due {
			d := it.Value
			if perSub[d.SubscriptionID] >= x.d.PerSubscription {
				continue
			}
			inFlight[d.ID] = d.SubscriptionID
			perSub[d.SubscriptionID]++
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := x.attempt(ctx, epoch, d.ID)
				if err != nil && !errors.Is(err, errFenced) {
					pause(ctx, time.Second) // not recorded: it stays due, but not in a tight loop
				}
				mu.Lock()
				delete(inFlight, d.ID)
				if perSub[d.SubscriptionID]--; perSub[d.SubscriptionID] == 0 {
					delete(perSub, d.SubscriptionID)
				}
				mu.Unlock()
				if errors.Is(err, errFenced) {
					select {
					case fatal <- err:
					default:
					}
				}
				x.wake()
			}()
		}
		mu.Unlock()
		wctx, cancel := context.WithCancel(ctx)
		changed := make(chan struct{})
		go func() { _ = r.Wait(wctx); close(changed) }()
		var timer <-chan time.Time
		if !wakeAt.IsZero() {
			timer = time.After(time.Until(wakeAt) + time.Millisecond)
		}
		select {
		case <-ctx.Done():
		case err := <-fatal:
			cancel()
			return err
		case <-changed:
		case <-x.kick:
		case <-timer:
		}
		cancel()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// attempt makes one attempt of a delivery and records it.
func (x *Dispatcher) attempt(ctx context.Context, epoch uint64, id string) error {
	r := x.d.Store.Read()
	d, _, ok := Deliveries.Get(r, id)
	start := x.d.Now()
	if !ok || (d.State != StatePending && d.State != StateRetryScheduled) || d.NextAttemptAt.After(start) {
		// Ended, or recorded meanwhile with its next attempt later: the
		// loop listed it from a view taken before that record.
		return nil
	}
	sub, _, ok := Subscriptions.Get(r, d.SubscriptionID)
	test := d.EventType == "subscription.test"
	var (
		o     Outcome
		final bool // an attempt not made: no retry, no failure record
	)
	switch reason := x.refusal(r, &sub, ok, test, start); {
	case reason != "":
		o, final = Outcome{At: start, Error: reason}, true
	default:
		ev, _, ok := events.Events.Get(r, d.EventID)
		if !ok {
			o, final = Outcome{At: start, Error: "the event is no longer in the outbox"}, true
			break
		}
		o = x.deliver(ctx, &sub, &d, &ev)
	}
	if ctx.Err() != nil {
		return ctx.Err() // a leader change cut the attempt short: the next leader makes it again
	}
	if !o.delivered() {
		x.d.Logger.Info("delivery attempt failed", "delivery_id", d.ID, "subscription_id", d.SubscriptionID,
			"event_type", d.EventType, "status", o.StatusCode, "reason", o.Error)
	}
	return x.record(ctx, epoch, id, o, final || test)
}

// refusal says why a delivery is not attempted: its subscription is gone
// or off (a test is sent even then), or the owner no longer sees its
// subject; empty when it is attempted.
func (x *Dispatcher) refusal(r *raftstore.Reader, sub *Subscription, exists, test bool, now time.Time) string {
	switch {
	case !exists:
		return "the subscription was deleted"
	case !sub.Enabled && !test:
		return "the subscription is off"
	}
	return ownerSees(r, sub, x.d.Policy, now)
}

// ownerSees says why a subscription's owner no longer sees its subject
// (empty when it does): the owner can no longer act, or lacks app.view on
// the app (install.events.manage for an install-wide subscription). An
// app deleted since still gets its last events, app.deleted among them,
// while the owner can act.
func ownerSees(r *raftstore.Reader, sub *Subscription, pol Policy, now time.Time) string {
	p, ok := identity.PrincipalOf(r, sub.OwnerID, now, pol.Current().MaxTokenLifetimeDays)
	if !ok {
		return "the subscription's owner can no longer act (suspended, deleted, revoked or expired)"
	}
	f, floor := identity.FactsOf(r), identity.FloorOf(pol.Current())
	if authz.InstallVerbs(f, p, floor).Has(authz.InstallEventsManage) {
		return ""
	}
	if sub.AppID == "" {
		return "the subscription's owner no longer holds install.events.manage"
	}
	if !apps.Exists(r, sub.AppID) {
		return ""
	}
	if !authz.AppVerbs(f, p, sub.AppID, floor).Has(authz.AppView) {
		return "the subscription's owner no longer holds app.view on " + sub.AppID
	}
	return ""
}

// deliver sends the event: to the webhook, signed with the live keys, or
// through the notification adapter.
func (x *Dispatcher) deliver(ctx context.Context, sub *Subscription, d *Delivery, ev *events.Event) Outcome {
	start := x.d.Now()
	if sub.AdapterID != "" {
		n, ok := x.d.Notifier(sub.AdapterID)
		if !ok {
			return Outcome{At: start, Error: fmt.Sprintf("notification adapter %s is not loaded (deleted, or waiting for a restart)", sub.AdapterID)}
		}
		actx, cancel := context.WithTimeout(ctx, x.d.AttemptTimeout)
		defer cancel()
		err := n.Notify(actx, notify.Render(ev, x.d.ConsoleURL))
		o := Outcome{At: start, Duration: x.d.Now().Sub(start)}
		if err != nil {
			o.Error = errcode.MessageOf(err)
			if actx.Err() != nil && ctx.Err() == nil {
				o.Error = fmt.Sprintf("no answer within %s", x.d.AttemptTimeout)
			}
		}
		return o
	}
	req := webhook.Request{URL: sub.URL, Method: sub.Method, ContentType: sub.ContentType, Template: sub.PayloadTemplate,
		DeliveryID: d.ID, Event: ev, ConsoleURL: x.d.ConsoleURL, Headers: map[string]string{}}
	for _, k := range sub.liveKeys(start) {
		key, err := x.d.Ring.Open(k.Sealed, keyAAD(sub.ID))
		if err != nil {
			return Outcome{At: start, Error: "a signing key could not be opened: " + errcode.MessageOf(err)}
		}
		req.Keys = append(req.Keys, string(key))
	}
	for name, sealed := range sub.Headers {
		v, err := x.d.Ring.Open(sealed, headerAAD(sub.ID, name))
		if err != nil {
			return Outcome{At: start, Error: "header " + name + " could not be opened: " + errcode.MessageOf(err)}
		}
		req.Headers[name] = string(v)
	}
	res := x.d.Sender.Send(ctx, req)
	o := Outcome{At: start, StatusCode: res.StatusCode, Duration: res.Duration, Error: res.Error}
	if !res.Delivered() && o.Error == "" {
		o.Error = fmt.Sprintf("the receiver answered %d", res.StatusCode)
	}
	return o
}

// record writes an attempt's outcome: the delivery's next state and, for
// an attempt of the subscription's own (not a test, not a refusal), its
// failure record, turning it off after DisableAfter of failures
// (subscription.disabled).
func (x *Dispatcher) record(ctx context.Context, epoch uint64, id string, o Outcome, final bool) error {
	var disabled *Subscription
	_, err := x.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		guard, err := fence(r, epoch)
		if err != nil {
			return nil, err
		}
		cur, meta, ok := Deliveries.Get(r, id)
		if !ok || (cur.State != StatePending && cur.State != StateRetryScheduled) {
			return nil, nil // deleted, or ended meanwhile
		}
		if final {
			cur.Once = true
		}
		next := afterAttempt(cur, o, x.d.Schedule)
		ops := []raftstore.Op{guard, Deliveries.PutIf(&next, meta.ModifyIndex)}
		disabled = nil
		if final {
			return ops, nil
		}
		sub, smeta, ok := Subscriptions.Get(r, cur.SubscriptionID)
		if !ok {
			return ops, nil
		}
		after, off := afterOutcome(sub, o, x.d.DisableAfter)
		if sameFailure(sub, after) {
			return ops, nil
		}
		after.UpdatedAt = x.d.Now().UTC()
		ops = append(ops, Subscriptions.PutIf(&after, smeta.ModifyIndex))
		if off {
			disabled = &after
			now := x.d.Now()
			var ref *events.AppRef
			if a, _, ok := apps.Apps.Get(r, sub.AppID); ok {
				ref = &events.AppRef{ID: a.ID, Name: a.Name, Slug: a.Slug}
			}
			ops = append(ops,
				audit.Record(ctx, now, "subscription.disable", sub.AppID, audit.Target{Kind: "subscription", ID: sub.ID},
					map[string]any{"reason": after.DisabledReason}),
				events.Emit(ctx, now, "subscription.disabled", ref, "subscription", sub.ID,
					map[string]any{"subscription_id": sub.ID, "reason": after.DisabledReason}))
		}
		return ops, nil
	})
	if err != nil {
		if !errors.Is(err, errFenced) && ctx.Err() == nil {
			x.d.Logger.Warn("dispatcher: could not record an attempt", "delivery_id", id, "err", errcode.MessageOf(err))
		}
		return err
	}
	if disabled != nil {
		x.d.Logger.Warn("subscription turned off after a day of failed deliveries", "subscription_id", disabled.ID, "owner_id", disabled.OwnerID)
	}
	return nil
}

// sameFailure says whether an attempt left a subscription's failure record
// as it was (nothing to write).
func sameFailure(a, b Subscription) bool {
	return a.Enabled == b.Enabled && (a.FailingSince == nil) == (b.FailingSince == nil) &&
		(a.FailingSince == nil || a.FailingSince.Equal(*b.FailingSince))
}

// keepDeliveries is how long an ended delivery stays in the log.
const keepDeliveries = 30 * 24 * time.Hour

// SweepDeliveries deletes ended deliveries older than 30 days and those of
// subscriptions deleted since, then the subscriptions of apps deleted since
// once nothing of theirs waits to be sent (app.deleted itself is sent
// first); a leader loop.
func (s *Service) SweepDeliveries(ctx context.Context) error {
	r := s.d.Store.Read()
	cutoff := s.d.Now().Add(-keepDeliveries)
	if _, err := Deliveries.Sweep(ctx, s.d.Store, raftstore.Query{}, func(d *Delivery) bool {
		if _, _, ok := Subscriptions.Get(r, d.SubscriptionID); !ok {
			return true
		}
		return (d.State == StateDelivered || d.State == StateFailed) && d.CreatedAt.Before(cutoff)
	}, 500); err != nil {
		return err
	}
	if through, _ := events.ReadCursor(r); through < r.TableIndex(events.Events) {
		return nil // events not fanned out yet may be for them (app.deleted)
	}
	_, err := Subscriptions.Sweep(ctx, s.d.Store, raftstore.Query{}, func(sub *Subscription) bool {
		return sub.AppID != "" && !apps.Exists(r, sub.AppID) && !waiting(r, sub.ID)
	}, 100)
	return err
}

// waiting reports whether a subscription has a delivery waiting to be sent.
func waiting(r *raftstore.Reader, subID string) bool {
	ds, _ := Deliveries.List(r, raftstore.Query{Index: "subscription", Key: subID, Limit: 1,
		Filter: func(v any) bool { d := v.(*Delivery); return d.State == StatePending || d.State == StateRetryScheduled }})
	return len(ds) > 0
}
