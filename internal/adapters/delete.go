package adapters

import (
	"context"
	"fmt"
	"strings"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/raftstore"
)

// Dependent is something that depends on an adapter, as a refused delete
// names it in details.dependents: what it is (secrets, slot_fills,
// releases, deployments, specs, primary), how many, the IDs of the first
// few, and what to do about it.
type Dependent struct {
	What    string   `json:"what"`
	Count   int      `json:"count"`
	IDs     []string `json:"ids"`
	Message string   `json:"message"`
	Remedy  string   `json:"remedy,omitempty"`
}

// MaxDependentIDs caps the IDs a Dependent lists.
const MaxDependentIDs = 10

// DependentsFunc finds, on the view a delete is decided on, what the store
// records as depending on the adapter a, and the operations (Check,
// CheckTable) that make the delete conditional on what it read, so that a
// dependent recorded meanwhile makes the decision run again. It is pure: a
// raftstore.Build calls it.
type DependentsFunc func(r *raftstore.Reader, a Adapter) ([]Dependent, []raftstore.Op)

// Delete removes a configured adapter that nothing depends on, with an
// audit entry (adapter.delete) and the adapter.configured event (the
// catalogue's one event for a change of the installation's adapters; its
// target is the adapter, and credentials_changed says whether credentials
// went with it). What depends on it is what the store records (see
// Deps.Dependents: secrets it holds, slot fills it provisioned, releases
// and deploys on it, pinned specs that name it) and, while another adapter
// of its category is loaded, its being the primary adapter this server
// loaded (new work of the category goes to it until the next restart). A
// built-in adapter is never deleted. Like a configuration, the deletion
// applies at the next restart: until then the adapter stays loaded and
// GET /adapters lists it as deleted, pending a restart.
func (s *Service) Delete(ctx context.Context, id string) error {
	if d, ok := s.declared(id); ok {
		return fixedAtStartup(d, "deleted")
	}
	if k, ok := s.builtinKind(id); ok {
		return errcode.New(errcode.StateInvalid, "adapter %s is the built-in %s adapter; it cannot be deleted", id, k.Category).
			WithDetail("adapter_id", id).WithDetail("builtin", true).
			WithRemedy("to stop using it, configure another %s adapter (the most recently configured one is its category's primary after a restart)", k.Category)
	}
	set := s.loaded()
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		a, meta, ok := Adapters.Get(r, id)
		if !ok {
			return nil, errcode.New(errcode.NotFound, "no adapter %s", id)
		}
		var deps []Dependent
		var ops []raftstore.Op
		if d := primaryDependent(set, a); d != nil {
			deps = append(deps, *d)
		}
		if s.d.Dependents != nil {
			found, guards := s.d.Dependents(r, a)
			deps, ops = append(deps, found...), guards
		}
		if len(deps) > 0 {
			return nil, inUse(a, deps)
		}
		ops = append(ops, Adapters.DeleteIf(a.ID, meta.ModifyIndex))
		if _, hmeta, ok := Healths.Get(r, a.ID); ok {
			ops = append(ops, Healths.DeleteIf(a.ID, hmeta.ModifyIndex))
		}
		now := s.d.Now()
		return append(ops,
			audit.Record(ctx, now, "adapter.delete", "", audit.Target{Kind: "adapter", ID: a.ID},
				map[string]any{"category": a.Category, "kind": a.Kind, "revision": a.Revision}),
			events.Emit(ctx, now, "adapter.configured", nil, "adapter", a.ID, map[string]any{
				"category": a.Category, "kind": a.Kind, "credentials_changed": len(a.Credentials) > 0,
			})), nil
	})
	return err
}

// builtinKind returns the built-in kind whose well-known ID id is.
func (s *Service) builtinKind(id string) (Kind, bool) {
	for _, k := range s.kinds {
		if k.Default && k.DefaultID == id {
			return k, true
		}
	}
	return Kind{}, false
}

// primaryDependent says that a is in use as its category's primary: the
// primary this server loaded, while another adapter of the category is
// loaded (so that new work of the category would go elsewhere had a not
// been there, and records made until the restart would name an adapter
// that is gone). Alone in its category, it takes nothing another adapter
// would have taken, and what it made is recorded (the other dependents).
func primaryDependent(set *Set, a Adapter) *Dependent {
	p, ok := set.Primary(a.Category)
	if !ok || p.Adapter.ID != a.ID || len(set.Of(a.Category)) < 2 {
		return nil
	}
	return &Dependent{What: "primary", Count: 1, IDs: []string{a.ID},
		Message: fmt.Sprintf("it is the primary %s adapter this server loaded: %s go to it until the next restart", a.Category, primaryWork(a.Category)),
		Remedy: "configure the " + a.Category + " adapter that should take over (POST /api/v1/adapters: the most recently configured one becomes primary), " +
			"restart (POST /api/v1/restart), then delete this one"}
}

// primaryWork is what a category's primary adapter takes.
func primaryWork(category string) string {
	switch category {
	case CategoryRuntime:
		return "new deploys of apps whose spec names no runtime"
	case CategorySecrets:
		return "new secrets"
	case CategorySlots:
		return "slot provisions that name no adapter"
	case CategoryRoutes:
		return "the edge's routes"
	case CategoryIdentity:
		return "sign-ins"
	}
	return "new " + category + " work"
}

// inUse is the refusal of a delete while deps depend on a.
func inUse(a Adapter, deps []Dependent) *errcode.Error {
	msgs := make([]string, len(deps))
	for i, d := range deps {
		msgs[i] = d.Message
	}
	e := errcode.New(errcode.StateInvalid, "adapter %s (%s, kind %s) is in use: %s", a.ID, a.Category, a.Kind, strings.Join(msgs, "; ")).
		WithDetail("adapter_id", a.ID).WithDetail("dependents", deps)
	if len(deps) == 1 && deps[0].Remedy != "" {
		return e.WithRemedy("%s", deps[0].Remedy)
	}
	return e.WithRemedy("remove or move what details.dependents names (each says how), then delete the adapter")
}
