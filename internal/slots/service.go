package slots

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

// Sealer seals secret fields (the keyring).
type Sealer interface {
	Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error)
	Open(sealed, aad []byte) ([]byte, error)
}

var _ Store = (*raftstore.Store)(nil)

// Deps are the service's collaborators.
type Deps struct {
	Store Store
	Ring  Sealer
	// Provisioners returns the slots adapters this server loaded, the
	// category's primary first.
	Provisioners func() []Loaded
	Now          func() time.Time
	Logger       *slog.Logger
}

// Service lists an app's slots, fills them, and resolves their fields.
type Service struct{ d Deps }

// NewService returns the slots service.
func NewService(d Deps) *Service {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Provisioners == nil {
		d.Provisioners = func() []Loaded { return nil }
	}
	return &Service{d: d}
}

// EffectiveNextDeploy is when a fill takes effect.
const EffectiveNextDeploy = "next_deploy"

// View is a slot as the API lists it: what the spec declares and what
// fills it. Fields hold only what may be shown; SecretFields names the
// sealed ones, never their values.
type View struct {
	Key      string `json:"key"`
	Type     string `json:"type"`
	Required bool   `json:"required"`
	// Declared is false for a fill whose slot the spec no longer declares.
	Declared     bool              `json:"declared"`
	Filled       bool              `json:"filled"`
	Mode         *string           `json:"mode"`
	AdapterID    *string           `json:"adapter_id"`
	Fields       map[string]string `json:"fields"`
	SecretFields []string          `json:"secret_fields"`
	// Effective says when the fill applies: "next_deploy".
	Effective *string    `json:"effective"`
	UpdatedAt *time.Time `json:"updated_at"`
	// Note explains a fill that does not fill its slot (another type).
	Note string `json:"note,omitempty"`
}

// ListKey is a slot's place in List (the declared slots by key, then fills
// of slots no longer declared by key), unique among them: the cursor of
// its pages.
func (v View) ListKey() string {
	if v.Declared {
		return "0" + v.Key
	}
	return "1" + v.Key
}

// declaredSlot is a slot the app's spec declares.
type declaredSlot struct {
	spec.Slot
	Key string
}

func view(key string, d *declaredSlot, f *Fill) View {
	v := View{Key: key, Fields: map[string]string{}, SecretFields: []string{}}
	if d != nil {
		v.Type, v.Required, v.Declared = d.Type, d.Required, true
	}
	if f == nil {
		return v
	}
	if d == nil {
		v.Type = f.Type
	}
	v.Filled = d == nil || d.Type == f.Type
	if !v.Filled {
		v.Note = fmt.Sprintf("filled for a slot of type %s; the spec declares type %s: fill it again", f.Type, d.Type)
	}
	mode, eff, updated := f.Mode, EffectiveNextDeploy, f.UpdatedAt
	v.Mode, v.Effective, v.UpdatedAt = &mode, &eff, &updated
	if f.AdapterID != "" {
		id := f.AdapterID
		v.AdapterID = &id
	}
	maps.Copy(v.Fields, f.Fields)
	v.SecretFields = slices.Sorted(maps.Keys(f.Sealed))
	return v
}

// List returns the slots of an app: every slot its spec declares (the
// pinned revision's and the latest's), filled or not, then the fills of
// slots the spec no longer declares.
func (s *Service) List(appID string) ([]View, error) {
	r := s.d.Store.Read()
	if !apps.Exists(r, appID) {
		return nil, errcode.New(errcode.NotFound, "no app %s", appID)
	}
	decl, err := declared(r, appID)
	if err != nil {
		return nil, err
	}
	items, _ := Fills.List(r, raftstore.Query{Index: "app", Key: appID})
	fills := map[string]*Fill{}
	for i := range items {
		fills[items[i].Value.Key] = &items[i].Value
	}
	out := []View{}
	for _, key := range slices.Sorted(maps.Keys(decl)) {
		d := decl[key]
		out = append(out, view(key, &d, fills[key]))
	}
	for _, key := range slices.Sorted(maps.Keys(fills)) {
		if _, ok := decl[key]; !ok {
			out = append(out, view(key, nil, fills[key]))
		}
	}
	return out, nil
}

// declared returns the slots the app's spec declares: those of the pinned
// revision and of the latest one (a slot added by a revision not yet pinned
// may be filled before the deploy that pins it). Where both declare a key,
// the latest revision's declaration wins.
func declared(r *raftstore.Reader, appID string) (map[string]declaredSlot, error) {
	out := map[string]declaredSlot{}
	h, _, ok := spec.Heads.Get(r, appID)
	if !ok {
		return out, nil
	}
	for _, n := range []uint64{h.Pinned, h.Latest} {
		if n == 0 {
			continue
		}
		doc, ok, err := documentAt(r, appID, n)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		for key, sl := range doc.Slots {
			out[key] = declaredSlot{Slot: sl, Key: key}
		}
	}
	return out, nil
}

// documentAt reads revision n of an app's spec.
func documentAt(r *raftstore.Reader, appID string, n uint64) (spec.Document, bool, error) {
	rev, _, ok := spec.Revisions.First(r, "app_revision", raftstore.Key(appID, raftstore.Uint(n)))
	if !ok {
		return spec.Document{}, false, nil
	}
	doc, err := rev.Spec()
	if err != nil {
		return spec.Document{}, false, fmt.Errorf("read the slots of %s: %w", appID, err)
	}
	return doc, true, nil
}

// FillRequest is one way to fill a slot: exactly one of its fields is set.
type FillRequest struct {
	// Provision asks a slots adapter of the slot's type to make the
	// resource (the primary one of that type, or the one named).
	Provision *ProvisionFill `json:"provision,omitempty" doc:"ask a slots adapter of the slot's type to make the resource: {adapter_id} or {} for the primary one"`
	// Bind points the slot at something already running.
	Bind *BindFill `json:"bind,omitempty" doc:"point the slot at something already running"`
	// Value sets the slot's fields; values are strings (numbers and
	// booleans are taken as their text). For postgres: url, or host, port,
	// database, username, password (and sslmode, which goes into the URL).
	Value map[string]any `json:"value,omitempty" doc:"the slot's fields, as strings (postgres: url, or host, port, database, username, password, sslmode)"`
}

// ProvisionFill asks for a provisioned resource.
type ProvisionFill struct {
	AdapterID string `json:"adapter_id,omitempty"`
	// RotatePassword draws a new password when the slot was provisioned by
	// the same adapter before; otherwise the resource keeps its password, so
	// that the app running with it keeps working until its next deploy.
	RotatePassword bool `json:"rotate_password,omitempty"`
}

// BindFill points a slot at something already running.
type BindFill struct {
	URL string `json:"url"`
}

func (req FillRequest) mode() (string, error) {
	var modes []string
	if req.Provision != nil {
		modes = append(modes, ModeProvision)
	}
	if req.Bind != nil {
		modes = append(modes, ModeBind)
	}
	if req.Value != nil {
		modes = append(modes, ModeValue)
	}
	if len(modes) != 1 {
		return "", errcode.Invalid("", "fill a slot in exactly one way: provision, bind or value (got %d)", len(modes)).
			WithDetail("modes", Modes()).
			WithRemedy(`for example {"provision": {}}, {"bind": {"url": "postgres://…"}} or {"value": {"url": "postgres://…"}}`)
	}
	return modes[0], nil
}

// Fill fills one slot of an app, replacing how it was filled before. The
// slot must be declared by the app's spec (pinned or latest revision).
// Secret fields are sealed; the fill, its audit entry (slot.fill: key,
// type, mode, adapter; never a value) commit in one write. It applies at
// the app's next deploy. A resource provisioned earlier is never dropped: a
// fill that replaces it leaves it in place and says so in the log and the
// audit entry.
func (s *Service) Fill(ctx context.Context, appID, key string, req FillRequest) (View, error) {
	mode, err := req.mode()
	if err != nil {
		return View{}, err
	}
	r := s.d.Store.Read()
	app, _, ok := apps.Apps.Get(r, appID)
	if !ok {
		return View{}, errcode.New(errcode.NotFound, "no app %s", appID)
	}
	decl, err := declared(r, appID)
	if err != nil {
		return View{}, err
	}
	slot, ok := decl[key]
	if !ok {
		return View{}, errcode.New(errcode.NotFound, "app %s declares no slot %q", appID, key).
			WithRemedy("declare it in the spec (slots: {%s: {type: postgres}}) in a new revision with POST /api/v1/apps/%s/specs, then fill it", key, appID).
			WithDetail("declared", slices.Sorted(maps.Keys(decl)))
	}
	old, _, hadOld := Fills.Get(r, RowID(appID, key))

	var fields, secret map[string]string
	adapterID := ""
	switch mode {
	case ModeProvision:
		fields, secret, adapterID, err = s.provision(ctx, app, slot, req.Provision, old, hadOld)
	case ModeBind:
		fields, secret, err = bindFields(slot.Type, req.Bind.URL)
	case ModeValue:
		fields, secret, err = valueFields(slot.Type, req.Value)
	}
	if err != nil {
		return View{}, err
	}
	// Whatever produced them, fields that are secret for the type are sealed.
	for name, v := range fields {
		if IsSecret(slot.Type, name) {
			secret[name] = v
			delete(fields, name)
		}
	}
	sealed := map[string][]byte{}
	for name, v := range secret {
		if sealed[name], err = s.d.Ring.Seal(ctx, []byte(v), aad(appID, key, name)); err != nil {
			return View{}, fmt.Errorf("seal field %s of slot %s: %w", name, key, err)
		}
	}
	now := s.d.Now()
	var (
		row  Fill
		prev Fill
		left bool
	)
	_, err = s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		_, appMeta, ok := apps.Apps.Get(r, appID)
		if !ok {
			return nil, errcode.New(errcode.NotFound, "no app %s", appID)
		}
		var meta raftstore.Meta
		var exists bool
		prev, meta, exists = Fills.Get(r, RowID(appID, key))
		details := map[string]any{"key": key, "type": slot.Type, "mode": mode, "created": !exists,
			"fields": slices.Sorted(maps.Keys(fields)), "secret_fields": slices.Sorted(maps.Keys(sealed))}
		if adapterID != "" {
			details["adapter_id"] = adapterID
		}
		// A resource provisioned before and not the one filling the slot
		// now stays where it is.
		left = exists && prev.Mode == ModeProvision &&
			(mode != ModeProvision || prev.AdapterID != adapterID || !maps.Equal(prev.Fields, fields))
		if exists {
			details["previous_mode"] = prev.Mode
		}
		if left {
			details["previous_left_in_place"] = true
		}
		row = Fill{ID: RowID(appID, key), AppID: appID, Key: key, Type: slot.Type, Mode: mode, AdapterID: adapterID,
			Fields: fields, Sealed: sealed, CreatedAt: now, UpdatedAt: now}
		if exists {
			row.CreatedAt = prev.CreatedAt
		}
		return []raftstore.Op{
			apps.Apps.Check(appID, appMeta.ModifyIndex),
			Fills.PutIf(&row, meta.ModifyIndex),
			audit.Record(ctx, now, "slot.fill", appID, audit.Target{Kind: "slot", ID: key}, details),
		}, nil
	})
	if err != nil {
		return View{}, fmt.Errorf("fill slot %s: %w", key, err)
	}
	if left {
		s.d.Logger.Info("slot refilled; the resource provisioned before is left in place, not dropped",
			"app_id", appID, "key", key, "adapter_id", prev.AdapterID, "fields", prev.Fields)
	}
	return view(key, &slot, &row), nil
}

// provision has a slots adapter make (or find again) the slot's resource.
func (s *Service) provision(ctx context.Context, app apps.App, slot declaredSlot, req *ProvisionFill, old Fill, hadOld bool) (fields, secret map[string]string, adapterID string, err error) {
	l, err := s.provisioner(slot.Type, req.AdapterID)
	if err != nil {
		return nil, nil, "", err
	}
	preq := ProvisionRequest{AppID: app.ID, AppSlug: app.Slug, Key: slot.Key}
	same := hadOld && old.Mode == ModeProvision && old.AdapterID == l.AdapterID
	if same {
		preq.Previous = maps.Clone(old.Fields)
	}
	if same && !req.RotatePassword {
		if pw, ok := old.Sealed["password"]; ok {
			plain, err := s.d.Ring.Open(pw, aad(app.ID, slot.Key, "password"))
			if err != nil {
				return nil, nil, "", fmt.Errorf("open the password of slot %s: %w", slot.Key, err)
			}
			preq.Password = string(plain)
		}
	}
	out, err := l.Provisioner.Provision(ctx, preq)
	if err != nil {
		return nil, nil, "", fmt.Errorf("provision slot %s with adapter %s: %w", slot.Key, l.AdapterID, err)
	}
	fields, secret = map[string]string{}, map[string]string{}
	maps.Copy(fields, out.Fields)
	maps.Copy(secret, out.SecretFields)
	return fields, secret, l.AdapterID, nil
}

// provisioner picks the slots adapter that provisions a type: the one
// named, else the first loaded of that type (the category's primary
// first).
func (s *Service) provisioner(typ, adapterID string) (Loaded, error) {
	loaded := s.d.Provisioners()
	if adapterID != "" {
		i := slices.IndexFunc(loaded, func(l Loaded) bool { return l.AdapterID == adapterID })
		switch {
		case i < 0:
			return Loaded{}, errcode.New(errcode.AdapterUnavailable, "no slots adapter %s is loaded on this server", adapterID).
				WithRemedy("GET /api/v1/adapters lists the slots adapters; a new one applies after POST /api/v1/restart")
		case loaded[i].Provisioner == nil:
			return Loaded{}, errcode.New(errcode.AdapterUnavailable, "the slots adapter %s did not open: %s", adapterID, errcode.MessageOf(loaded[i].Err))
		case loaded[i].Provisioner.Type() != typ:
			return Loaded{}, errcode.Invalid("provision.adapter_id", "the slots adapter %s provisions %s, and this slot is of type %s",
				adapterID, loaded[i].Provisioner.Type(), typ)
		}
		return loaded[i], nil
	}
	for _, l := range loaded {
		if l.Provisioner != nil && l.Provisioner.Type() == typ {
			return l, nil
		}
	}
	for _, l := range loaded {
		if l.Provisioner == nil && l.Kind == typ {
			return Loaded{}, errcode.New(errcode.AdapterUnavailable, "the %s slots adapter %s did not open: %s", typ, l.AdapterID, errcode.MessageOf(l.Err)).
				WithRemedy("fix its configuration with POST /api/v1/adapters and restart, or fill the slot with bind or value")
		}
	}
	return Loaded{}, errcode.New(errcode.AdapterUnavailable, "no slots adapter that provisions %s is configured", typ).
		WithRemedy("configure one with POST /api/v1/adapters (category slots, kind %s) and restart, or fill the slot with bind or value", typ)
}

// Resolve returns one field of a filled slot, opening it if it is secret.
// It is for the deploy path, which puts the value into a workload's
// environment; it is not audited and must never be shown.
func (s *Service) Resolve(appID, key, field string) (string, error) {
	f, _, ok := Fills.Get(s.d.Store.Read(), RowID(appID, key))
	if !ok {
		return "", errcode.New(errcode.PlanSlotUnfilled, "slot %s of app %s is not filled", key, appID).
			WithDetail("slots", []string{key}).
			WithRemedy("fill it with PUT /api/v1/apps/%s/slots/%s", appID, key)
	}
	if v, ok := f.Fields[field]; ok {
		return v, nil
	}
	sealed, ok := f.Sealed[field]
	if !ok {
		names := slices.Sorted(maps.Keys(f.Fields))
		names = append(names, slices.Sorted(maps.Keys(f.Sealed))...)
		return "", errcode.New(errcode.NotFound, "slot %s of app %s has no field %q", key, appID, field).WithDetail("fields", names)
	}
	plain, err := s.d.Ring.Open(sealed, aad(appID, key, field))
	if err != nil {
		return "", fmt.Errorf("open field %s of slot %s: %w", field, key, err)
	}
	return string(plain), nil
}

// IsSealed says whether a filled slot's field is a credential (kept sealed
// in the store): the deploy path marks a variable made from it, so that a
// runtime which must keep secrets out of its job can refuse it.
func (s *Service) IsSealed(appID, key, field string) bool {
	f, _, ok := Fills.Get(s.d.Store.Read(), RowID(appID, key))
	if !ok {
		return false
	}
	_, sealed := f.Sealed[field]
	return sealed
}

// SweepDeletedApps removes the fills of apps that no longer exist. It runs
// on the leader. A resource a slots adapter provisioned for them is left in
// place (data is never dropped automatically); the log names it.
func (s *Service) SweepDeletedApps(ctx context.Context) error {
	var gone []Fill
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		items, _ := Fills.List(r, raftstore.Query{Filter: func(v any) bool { return !apps.Exists(r, v.(*Fill).AppID) }, Limit: 500})
		gone = make([]Fill, len(items))
		ops := make([]raftstore.Op, len(items))
		for i, it := range items {
			gone[i], ops[i] = it.Value, Fills.DeleteIf(it.Value.ID, it.Meta.ModifyIndex)
		}
		return ops, nil
	})
	if err != nil {
		return fmt.Errorf("sweep slot fills of deleted apps: %w", err)
	}
	for _, f := range gone {
		if f.Mode == ModeProvision {
			s.d.Logger.Info("app deleted: its provisioned slot resource is left in place, not dropped",
				"app_id", f.AppID, "key", f.Key, "adapter_id", f.AdapterID, "fields", f.Fields)
		}
	}
	return nil
}

// Reseal re-seals every sealed field under the keyring's current key.
func (s *Service) Reseal(ctx context.Context) (int, error) {
	items, _ := Fills.List(s.d.Store.Read(), raftstore.Query{})
	n := 0
	for _, it := range items {
		f := it.Value
		if len(f.Sealed) == 0 {
			continue
		}
		next := f
		next.Sealed = map[string][]byte{}
		for name, sealed := range f.Sealed {
			plain, err := s.d.Ring.Open(sealed, aad(f.AppID, f.Key, name))
			if err != nil {
				return n, fmt.Errorf("re-seal field %s of slot %s of %s: %w", name, f.Key, f.AppID, err)
			}
			if next.Sealed[name], err = s.d.Ring.Seal(ctx, plain, aad(f.AppID, f.Key, name)); err != nil {
				return n, err
			}
		}
		// Written only over the sealed fields it re-sealed: a fill
		// rewritten meanwhile is sealed under the current key already.
		done := false
		_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
			cur, meta, ok := Fills.Get(r, f.ID)
			if done = ok && sameSealed(cur.Sealed, f.Sealed); !done {
				return nil, nil
			}
			cur.Sealed = next.Sealed
			return []raftstore.Op{Fills.PutIf(&cur, meta.ModifyIndex)}, nil
		})
		if err != nil {
			return n, fmt.Errorf("re-seal slot %s of %s: %w", f.Key, f.AppID, err)
		}
		if done {
			n += len(f.Sealed)
		}
	}
	return n, nil
}

// sameSealed says whether two fills' sealed fields are the same bytes.
func sameSealed(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, bytes.Equal)
}

func aad(appID, key, field string) []byte { return []byte("slot/" + appID + "/" + key + "/" + field) }
