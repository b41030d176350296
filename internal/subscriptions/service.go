package subscriptions

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/webhook"
	"github.com/svchost/svc/raftstore"
)

// Store is what the service and the dispatcher need of the replicated
// store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

// Sealer seals and opens signing keys and header values (the keyring).
type Sealer interface {
	Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error)
	Open(sealed, aad []byte) ([]byte, error)
}

// Policy is the host policy in force.
type Policy interface {
	Current() policy.Policy
}

var _ Store = (*raftstore.Store)(nil)

// Deps are the service's collaborators.
type Deps struct {
	Store  Store
	Ring   Sealer
	Policy Policy
	Now    func() time.Time
	// Declared returns the category of an adapter declared at startup
	// (the config file or SVC_ADAPTERS), which the store does not hold;
	// nil knows none.
	Declared func(adapterID string) (category string, ok bool)
}

// Service manages subscriptions and their delivery logs for callers.
type Service struct{ d Deps }

// NewService returns the subscriptions service.
func NewService(d Deps) *Service {
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Service{d: d}
}

// Limits of what a subscription saves.
const (
	maxFilters  = 50
	maxPerOwner = 100
	// keyOverlap is how long a key a rotation replaced keeps signing.
	keyOverlap = 24 * time.Hour
)

// Request is the body that creates a subscription.
type Request struct {
	AppID           *string           `json:"app_id,omitempty" doc:"the app whose events it receives (app.view on it); absent: every event of the installation (install.events.manage)"`
	Events          []string          `json:"events,omitempty" doc:"event names (deploy.failed), prefixes (deploy.*) or *; a name matching no event is refused"`
	URL             *string           `json:"url,omitempty" doc:"the webhook's address (http or https); exactly one of url and adapter_id"`
	AdapterID       *string           `json:"adapter_id,omitempty" doc:"a notification adapter (chat, email, push) to send through instead of a webhook"`
	Method          *string           `json:"method,omitempty" doc:"POST (default), PUT or PATCH"`
	ContentType     *string           `json:"content_type,omitempty" doc:"the body's content type; default application/json"`
	Headers         map[string]string `json:"headers,omitempty" doc:"extra headers sent with each request; values are stored encrypted and never shown again; on a change, the whole set"`
	PayloadTemplate *string           `json:"payload_template,omitempty" doc:"the body as a Go text/template (.ID .Type .OccurredAt .App .Actor .Data .Subject .Body .Fields .Link .Envelope; json, default); empty: the standard body"`
}

// Patch is the body that changes a subscription: any field of the create
// body, and Enabled, which turns it off or back on (clearing its failure
// record).
type Patch struct {
	Request
	Enabled *bool `json:"enabled,omitempty" doc:"false turns it off, true back on (clearing its failure record)"`
}

// KeyView describes a signing key without its value.
type KeyView struct {
	CreatedAt time.Time  `json:"created_at"`
	RetiresAt *time.Time `json:"retires_at"`
}

// View is a subscription as the API shows it: header names, never values;
// keys' dates, never the keys.
type View struct {
	ID              string     `json:"id"`
	AppID           *string    `json:"app_id"`
	OwnerID         string     `json:"owner_id"`
	Events          []string   `json:"events"`
	URL             *string    `json:"url"`
	AdapterID       *string    `json:"adapter_id"`
	Method          string     `json:"method"`
	ContentType     string     `json:"content_type"`
	HeaderNames     []string   `json:"header_names"`
	PayloadTemplate *string    `json:"payload_template"`
	Enabled         bool       `json:"enabled"`
	DisabledReason  *string    `json:"disabled_reason"`
	FailingSince    *time.Time `json:"failing_since"`
	SigningKeys     []KeyView  `json:"signing_keys"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
}

// ListKey is a subscription's place in lists (by ID, oldest first).
func (v View) ListKey() string { return v.ID }

// Created is the answer to a create: the subscription and its signing key,
// shown this once.
type Created struct {
	Subscription View   `json:"subscription"`
	SigningKey   string `json:"signing_key"`
}

// RotatedKey is the answer to a key rotation: the new key, shown once.
type RotatedKey struct {
	SigningKey string `json:"signing_key"`
}

// DeliveryView is a delivery as the delivery log shows it.
type DeliveryView struct {
	ID             string     `json:"id"`
	SubscriptionID string     `json:"subscription_id"`
	EventID        string     `json:"event_id"`
	EventType      string     `json:"event_type"`
	State          string     `json:"state"`
	Attempts       []Attempt  `json:"attempts"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	CreatedAt      time.Time  `json:"created_at"`
}

// ListKey is a delivery's place in the log (newest first, by ID).
func (v DeliveryView) ListKey() string { return v.ID }

func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Subscription) view(now time.Time) View {
	v := View{ID: s.ID, AppID: opt(s.AppID), OwnerID: s.OwnerID, Events: slices.Clone(s.Events), URL: opt(s.URL),
		AdapterID: opt(s.AdapterID), Method: s.Method, ContentType: s.ContentType,
		HeaderNames: append([]string{}, slices.Sorted(maps.Keys(s.Headers))...), PayloadTemplate: opt(s.PayloadTemplate),
		Enabled: s.Enabled, DisabledReason: opt(s.DisabledReason), FailingSince: s.FailingSince,
		SigningKeys: []KeyView{}, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	for _, k := range s.liveKeys(now) {
		v.SigningKeys = append(v.SigningKeys, KeyView{CreatedAt: k.CreatedAt, RetiresAt: k.RetiresAt})
	}
	return v
}

func (d *Delivery) view() DeliveryView {
	as := d.Attempts
	if as == nil {
		as = []Attempt{}
	}
	return DeliveryView{ID: d.ID, SubscriptionID: d.SubscriptionID, EventID: d.EventID, EventType: d.EventType,
		State: d.State, Attempts: as, NextAttemptAt: d.NextAttemptAt, CreatedAt: d.CreatedAt}
}

// keyAAD and headerAAD bind sealed values to their subscription.
func keyAAD(subID string) []byte { return []byte("subscription/" + subID + "/signing-key") }
func headerAAD(subID, name string) []byte {
	return []byte("subscription/" + subID + "/header/" + name)
}

// ownerOf is who owns what a caller makes: the account it acts as (itself
// or the creator of its delegated token), or the service token itself.
func ownerOf(c authz.Caller) string {
	if c.Principal.UserID != "" {
		return c.Principal.UserID
	}
	return c.Principal.ID
}

// Create makes a subscription and returns it with its signing key.
func (s *Service) Create(ctx context.Context, c authz.Caller, req Request) (Created, error) {
	sub := Subscription{ID: ids.New(ids.Subscription), OwnerID: ownerOf(c), Enabled: true}
	if err := s.apply(ctx, &sub, req, true); err != nil {
		return Created{}, err
	}
	key, err := webhook.NewKey()
	if err != nil {
		return Created{}, err
	}
	if sub.URL != "" {
		sealed, err := s.d.Ring.Seal(ctx, []byte(key), keyAAD(sub.ID))
		if err != nil {
			return Created{}, err
		}
		sub.Keys = []Key{{Sealed: sealed, CreatedAt: s.d.Now().UTC()}}
	}
	_, err = s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		if err := s.mayHold(r, c, sub.AppID); err != nil {
			return nil, err
		}
		owned, _ := Subscriptions.List(r, raftstore.Query{Index: "owner", Key: sub.OwnerID})
		if len(owned) >= maxPerOwner {
			return nil, errcode.New(errcode.StateInvalid, "%s already has %d subscriptions, the most one owner may have", sub.OwnerID, maxPerOwner).
				WithRemedy("delete one that is no longer needed")
		}
		now := s.d.Now().UTC()
		sub.CreatedAt, sub.UpdatedAt = now, now
		if len(sub.Keys) == 1 {
			sub.Keys[0].CreatedAt = now
		}
		return []raftstore.Op{
			Subscriptions.Insert(&sub),
			audit.Record(ctx, now, "subscription.create", sub.AppID, audit.Target{Kind: "subscription", ID: sub.ID},
				map[string]any{"events": sub.Events, "adapter_id": opt(sub.AdapterID), "header_names": slices.Sorted(maps.Keys(sub.Headers))}),
		}, nil
	})
	if err != nil {
		return Created{}, err
	}
	out := Created{Subscription: sub.view(s.d.Now())}
	if sub.URL != "" {
		out.SigningKey = key
	}
	return out, nil
}

// apply checks a request's fields and sets them on sub (all of them when
// creating, those given when changing). Header values are sealed here.
func (s *Service) apply(ctx context.Context, sub *Subscription, req Request, creating bool) error {
	if req.AppID != nil {
		if !creating && *req.AppID != sub.AppID {
			return errcode.Invalid("app_id", "a subscription's app cannot change").WithRemedy("create another subscription")
		}
		sub.AppID = *req.AppID
	}
	if req.Events != nil || creating {
		if err := checkFilters(req.Events); err != nil {
			return err
		}
		sub.Events = slices.Clone(req.Events)
	}
	switch {
	case req.URL != nil && req.AdapterID != nil:
		return errcode.Invalid("url", "give either url (a webhook) or adapter_id (a notification adapter), not both")
	case req.URL != nil:
		if err := webhook.CheckURL(*req.URL, s.d.Policy.Current().AllowPrivateWebhooks); err != nil {
			return err
		}
		sub.URL, sub.AdapterID = *req.URL, ""
	case req.AdapterID != nil:
		if err := s.checkAdapter(*req.AdapterID); err != nil {
			return err
		}
		sub.AdapterID, sub.URL = *req.AdapterID, ""
	case creating:
		return errcode.Invalid("url", "a subscription needs a url (a webhook) or an adapter_id (a notification adapter)")
	}
	if req.Method != nil {
		if err := webhook.CheckMethod(*req.Method); err != nil {
			return err
		}
		sub.Method = *req.Method
	}
	if req.ContentType != nil {
		if err := webhook.CheckContentType(*req.ContentType); err != nil {
			return err
		}
		sub.ContentType = *req.ContentType
	}
	if req.PayloadTemplate != nil {
		sub.PayloadTemplate = *req.PayloadTemplate
	}
	if sub.Method == "" {
		sub.Method = "POST"
	}
	if sub.ContentType == "" {
		sub.ContentType = "application/json"
	}
	if sub.AdapterID != "" && (req.Headers != nil || sub.PayloadTemplate != "" || sub.Method != "POST" || sub.ContentType != "application/json") {
		return errcode.Invalid("adapter_id", "method, content_type, headers and payload_template shape webhooks; a notification adapter renders its own messages")
	}
	if sub.PayloadTemplate != "" && (req.PayloadTemplate != nil || req.ContentType != nil) {
		if err := webhook.CheckTemplate(sub.PayloadTemplate, sub.ContentType); err != nil {
			return err
		}
	}
	if req.Headers != nil {
		if err := webhook.CheckHeaders(req.Headers); err != nil {
			return err
		}
		sealed := map[string][]byte{}
		for name, value := range req.Headers {
			b, err := s.d.Ring.Seal(ctx, []byte(value), headerAAD(sub.ID, name))
			if err != nil {
				return err
			}
			sealed[name] = b
		}
		sub.Headers = sealed
	}
	if sub.AdapterID != "" {
		sub.Headers = nil
	}
	return nil
}

// checkFilters refuses an empty list, too many filters, and a filter that
// selects no event of the catalogue.
func checkFilters(fs []string) error {
	if len(fs) == 0 {
		return errcode.Invalid("events", "name the events to send: exact names (deploy.failed), prefixes (deploy.*) or *")
	}
	if len(fs) > maxFilters {
		return errcode.Invalid("events", "at most %d filters; use a prefix (deploy.*) or *", maxFilters)
	}
	for _, f := range fs {
		if !events.FilterMatchesAny(f) {
			return errcode.Invalid("events", "%q matches no event", truncate(f, 80)).
				WithRemedy("GET /api/v1/events lists the event names; a prefix ends in .* (deploy.*)")
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// checkAdapter refuses an adapter that is not a configured (or declared)
// notification adapter.
func (s *Service) checkAdapter(id string) error {
	a, _, ok := adapters.Adapters.Get(s.d.Store.Read(), id)
	if s.d.Declared != nil {
		if category, declared := s.d.Declared(id); declared {
			a.Category, ok = category, true
		}
	}
	if !ok || a.Category != adapters.CategoryNotification {
		return errcode.Invalid("adapter_id", "no notification adapter %s", truncate(id, 80)).
			WithRemedy("GET /api/v1/adapters lists them; configure one with POST /api/v1/adapters (category notification)")
	}
	return nil
}

// facts are what access decisions read: the installation's roles and
// grants, under host policy's floor.
func (s *Service) facts(r *raftstore.Reader) (authz.Facts, authz.Floor) {
	return identity.FactsOf(r), identity.FloorOf(s.d.Policy.Current())
}

// mayHold refuses a subscription on appID (install-wide when empty) to a
// caller who may not have one: app.view on the app (NOT_FOUND for an app
// it cannot see), or install.events.manage for an install-wide one.
func (s *Service) mayHold(r *raftstore.Reader, c authz.Caller, appID string) error {
	if appID == "" {
		if !c.Has(authz.InstallEventsManage) {
			return errcode.New(errcode.PermVerbRequired, "an install-wide subscription needs %s", authz.InstallEventsManage).
				WithDetail("verb", string(authz.InstallEventsManage)).
				WithRemedy("subscribe to an app's events instead (app_id), or ask an administrator")
		}
		return nil
	}
	f, floor := s.facts(r)
	held := authz.AppVerbs(f, c.Principal, appID, floor)
	if !apps.Exists(r, appID) || (held == 0 && !c.Has(authz.InstallEventsManage)) {
		return errcode.New(errcode.NotFound, "no app %s", appID).WithDetail("field", "app_id")
	}
	if !held.Has(authz.AppView) && !c.Has(authz.InstallEventsManage) {
		return errcode.New(errcode.PermVerbRequired, "subscribing to an app's events needs %s on it", authz.AppView).
			WithDetail("verb", string(authz.AppView))
	}
	return nil
}

// manageable returns a subscription the caller may manage: its owner, or a
// holder of install.events.manage. Anyone else is refused
// PERM_VERB_REQUIRED, whether or not the subscription exists.
func manageable(r *raftstore.Reader, c authz.Caller, id string) (Subscription, raftstore.Meta, error) {
	sub, meta, ok := Subscriptions.Get(r, id)
	if ok && sub.OwnerID == ownerOf(c) || c.Has(authz.InstallEventsManage) {
		if !ok {
			return sub, meta, errcode.New(errcode.NotFound, "no subscription %s", id)
		}
		return sub, meta, nil
	}
	return sub, meta, errcode.New(errcode.PermVerbRequired, "only its owner or a holder of %s manages a subscription", authz.InstallEventsManage).
		WithDetail("verb", string(authz.InstallEventsManage))
}

// List returns the subscriptions the caller manages: its own, or every one
// with install.events.manage; appID narrows them to one app's.
func (s *Service) List(c authz.Caller, appID string) ([]View, error) {
	r := s.d.Store.Read()
	var items []raftstore.Item[Subscription]
	if c.Has(authz.InstallEventsManage) {
		items, _ = Subscriptions.List(r, raftstore.Query{})
	} else {
		items, _ = Subscriptions.List(r, raftstore.Query{Index: "owner", Key: ownerOf(c)})
	}
	now := s.d.Now()
	out := []View{}
	for _, it := range items {
		if appID != "" && it.Value.AppID != appID {
			continue
		}
		out = append(out, it.Value.view(now))
	}
	return out, nil // by ID: the table's order, and the owner index's within one owner
}

// Get returns one subscription the caller manages.
func (s *Service) Get(c authz.Caller, id string) (View, error) {
	sub, _, err := manageable(s.d.Store.Read(), c, id)
	if err != nil {
		return View{}, err
	}
	return sub.view(s.d.Now()), nil
}

// Update changes a subscription: any field of the create body, and
// enabled. Turning it back on clears its failure record.
func (s *Service) Update(ctx context.Context, c authz.Caller, id string, req Patch) (View, error) {
	cur, _, err := manageable(s.d.Store.Read(), c, id)
	if err != nil {
		return View{}, err
	}
	next := cur
	if err := s.apply(ctx, &next, req.Request, false); err != nil {
		return View{}, err
	}
	if next.URL != "" && len(next.Keys) == 0 { // an adapter's subscription becomes a webhook: it needs a key
		return View{}, errcode.Invalid("url", "a subscription made for a notification adapter has no signing key").
			WithRemedy("create a new subscription for the webhook")
	}
	var out Subscription
	_, err = s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		sub, meta, err := manageable(r, c, id)
		if err != nil {
			return nil, err
		}
		if err := s.mayHold(r, c, sub.AppID); err != nil {
			return nil, err
		}
		now := s.d.Now().UTC()
		out = sub
		out.Events, out.URL, out.AdapterID, out.Method, out.ContentType = next.Events, next.URL, next.AdapterID, next.Method, next.ContentType
		out.Headers, out.PayloadTemplate = next.Headers, next.PayloadTemplate
		details := map[string]any{"fields": changed(req)}
		if req.Enabled != nil && *req.Enabled != sub.Enabled {
			out.Enabled = *req.Enabled
			out.DisabledReason = ""
			if !out.Enabled {
				out.DisabledReason = "turned off by " + ownerOf(c)
			}
			out.FailingSince = nil
			details["enabled"] = out.Enabled
		}
		out.UpdatedAt = now
		return []raftstore.Op{
			Subscriptions.PutIf(&out, meta.ModifyIndex),
			audit.Record(ctx, now, "subscription.update", out.AppID, audit.Target{Kind: "subscription", ID: id}, details),
		}, nil
	})
	if err != nil {
		return View{}, err
	}
	return out.view(s.d.Now()), nil
}

// changed names the fields a change gives, for its audit entry (never a
// header's value).
func changed(req Patch) []string {
	var out []string
	for name, given := range map[string]bool{"events": req.Events != nil, "url": req.URL != nil, "adapter_id": req.AdapterID != nil,
		"method": req.Method != nil, "content_type": req.ContentType != nil, "headers": req.Headers != nil,
		"payload_template": req.PayloadTemplate != nil, "enabled": req.Enabled != nil} {
		if given {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// maxDeletedDeliveries bounds the deliveries a delete removes in its own
// write; the sweep removes the rest.
const maxDeletedDeliveries = 500

// Delete removes a subscription and its delivery log.
func (s *Service) Delete(ctx context.Context, c authz.Caller, id string) error {
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		sub, meta, err := manageable(r, c, id)
		if err != nil {
			return nil, err
		}
		now := s.d.Now()
		ops := []raftstore.Op{
			Subscriptions.DeleteIf(id, meta.ModifyIndex),
			audit.Record(ctx, now, "subscription.delete", sub.AppID, audit.Target{Kind: "subscription", ID: id}, nil),
		}
		ds, _ := Deliveries.List(r, raftstore.Query{Index: "subscription", Key: id, Limit: maxDeletedDeliveries})
		for _, d := range ds {
			ops = append(ops, Deliveries.DeleteIf(d.Value.ID, d.Meta.ModifyIndex))
		}
		return ops, nil
	})
	return err
}

// RotateKey gives a webhook subscription a new signing key, shown once;
// the key it replaces keeps signing for 24 hours beside it.
func (s *Service) RotateKey(ctx context.Context, c authz.Caller, id string) (RotatedKey, error) {
	sub, _, err := manageable(s.d.Store.Read(), c, id)
	if err != nil {
		return RotatedKey{}, err
	}
	if sub.URL == "" {
		return RotatedKey{}, errcode.New(errcode.StateInvalid, "subscription %s sends through a notification adapter, which signs nothing", id)
	}
	key, err := webhook.NewKey()
	if err != nil {
		return RotatedKey{}, err
	}
	sealed, err := s.d.Ring.Seal(ctx, []byte(key), keyAAD(id))
	if err != nil {
		return RotatedKey{}, err
	}
	_, err = s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		sub, meta, err := manageable(r, c, id)
		if err != nil {
			return nil, err
		}
		now := s.d.Now().UTC()
		retires := now.Add(keyOverlap)
		keys := []Key{{Sealed: sealed, CreatedAt: now}}
		for _, k := range sub.liveKeys(now) {
			if k.RetiresAt == nil {
				k.RetiresAt = &retires
			}
			keys = append(keys, k)
		}
		sub.Keys = keys[:min(len(keys), 3)]
		sub.UpdatedAt = now
		return []raftstore.Op{
			Subscriptions.PutIf(&sub, meta.ModifyIndex),
			audit.Record(ctx, now, "subscription.rotate_key", sub.AppID, audit.Target{Kind: "subscription", ID: id}, nil),
		}, nil
	})
	if err != nil {
		return RotatedKey{}, err
	}
	return RotatedKey{SigningKey: key}, nil
}

// Test sends a subscription.test event to this subscription only: the
// event and its delivery are written together, and the dispatcher sends it
// at once, whatever the subscription's filter and even when it is off.
func (s *Service) Test(ctx context.Context, c authz.Caller, id string) (DeliveryView, error) {
	var d Delivery
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		sub, meta, err := manageable(r, c, id)
		if err != nil {
			return nil, err
		}
		now := s.d.Now().UTC()
		ev := events.New(ctx, now, "subscription.test", nil, "subscription", id, map[string]any{"subscription_id": id})
		d = Delivery{ID: ids.NewAt(ids.Delivery, now), SubscriptionID: id, EventID: ev.ID, EventType: ev.Type,
			State: StatePending, NextAttemptAt: &now, CreatedAt: now, Once: true, Attempts: []Attempt{}}
		return []raftstore.Op{
			Subscriptions.Check(id, meta.ModifyIndex),
			events.Insert(ev),
			Deliveries.Insert(&d),
			audit.Record(ctx, now, "subscription.test", sub.AppID, audit.Target{Kind: "subscription", ID: id}, map[string]any{"delivery_id": d.ID}),
		}, nil
	})
	if err != nil {
		return DeliveryView{}, err
	}
	return d.view(), nil
}

// Deliveries returns a subscription's delivery log, newest first.
func (s *Service) Deliveries(c authz.Caller, id string) ([]DeliveryView, error) {
	r := s.d.Store.Read()
	if _, _, err := manageable(r, c, id); err != nil {
		return nil, err
	}
	items, _ := Deliveries.List(r, raftstore.Query{Index: "subscription", Key: id, Reverse: true})
	out := make([]DeliveryView, len(items))
	for i, it := range items {
		out[i] = it.Value.view()
	}
	return out, nil
}

// Delivery returns one delivery of a subscription.
func (s *Service) Delivery(c authz.Caller, id, deliveryID string) (DeliveryView, error) {
	r := s.d.Store.Read()
	if _, _, err := manageable(r, c, id); err != nil {
		return DeliveryView{}, err
	}
	d, _, ok := Deliveries.Get(r, deliveryID)
	if !ok || d.SubscriptionID != id {
		return DeliveryView{}, errcode.New(errcode.NotFound, "no delivery %s of subscription %s", deliveryID, id)
	}
	return d.view(), nil
}

// Resend makes a new attempt on a delivery (the same event, the same
// Svc-Event-Id), once, whatever its state; one still waiting for a retry is
// attempted now instead.
func (s *Service) Resend(ctx context.Context, c authz.Caller, id, deliveryID string) (DeliveryView, error) {
	var d Delivery
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		sub, _, err := manageable(r, c, id)
		if err != nil {
			return nil, err
		}
		cur, meta, ok := Deliveries.Get(r, deliveryID)
		if !ok || cur.SubscriptionID != id {
			return nil, errcode.New(errcode.NotFound, "no delivery %s of subscription %s", deliveryID, id)
		}
		if !sub.Enabled {
			return nil, errcode.New(errcode.StateInvalid, "subscription %s is off", id).
				WithRemedy("turn it back on first (PATCH with enabled true)")
		}
		now := s.d.Now().UTC()
		d = cur
		waiting := cur.State == StatePending || cur.State == StateRetryScheduled
		d.State, d.NextAttemptAt = StatePending, &now
		if !waiting {
			d.Once = true // a delivery that ended gets one attempt
		}
		return []raftstore.Op{
			Deliveries.PutIf(&d, meta.ModifyIndex),
			audit.Record(ctx, now, "delivery.resend", sub.AppID, audit.Target{Kind: "delivery", ID: deliveryID}, map[string]any{"subscription_id": id}),
		}, nil
	})
	if err != nil {
		return DeliveryView{}, err
	}
	return d.view(), nil
}

// Reseal seals every signing key and header value again under the
// keyring's current key (after a rotation of the keyring).
func (s *Service) Reseal(ctx context.Context) (int, error) {
	items, _ := Subscriptions.List(s.d.Store.Read(), raftstore.Query{})
	n := 0
	for _, it := range items {
		sub := it.Value
		next := sub
		next.Keys = slices.Clone(sub.Keys)
		for i, k := range sub.Keys {
			plain, err := s.d.Ring.Open(k.Sealed, keyAAD(sub.ID))
			if err != nil {
				return n, fmt.Errorf("re-seal a signing key of %s: %w", sub.ID, err)
			}
			if next.Keys[i].Sealed, err = s.d.Ring.Seal(ctx, plain, keyAAD(sub.ID)); err != nil {
				return n, err
			}
		}
		next.Headers = map[string][]byte{}
		for name, sealed := range sub.Headers {
			plain, err := s.d.Ring.Open(sealed, headerAAD(sub.ID, name))
			if err != nil {
				return n, fmt.Errorf("re-seal header %s of %s: %w", name, sub.ID, err)
			}
			if next.Headers[name], err = s.d.Ring.Seal(ctx, plain, headerAAD(sub.ID, name)); err != nil {
				return n, err
			}
		}
		_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
			cur, meta, ok := Subscriptions.Get(r, sub.ID)
			if !ok || !sameSealed(cur, sub) {
				return nil, nil // its keys or headers changed meanwhile: sealed under the current key already
			}
			cur.Keys, cur.Headers = next.Keys, next.Headers
			return []raftstore.Op{Subscriptions.PutIf(&cur, meta.ModifyIndex)}, nil
		})
		if err != nil {
			return n, fmt.Errorf("re-seal %s: %w", sub.ID, err)
		}
		n += len(next.Keys) + len(next.Headers)
	}
	return n, nil
}

// sameSealed says whether two versions of a subscription hold the same
// sealed keys and header values.
func sameSealed(a, b Subscription) bool {
	if len(a.Keys) != len(b.Keys) || !maps.EqualFunc(a.Headers, b.Headers, bytes.Equal) {
		return false
	}
	for i := range a.Keys {
		if !bytes.Equal(a.Keys[i].Sealed, b.Keys[i].Sealed) {
			return false
		}
	}
	return true
}
