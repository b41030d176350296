package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/raftstore"
)

// Saved is the host policy as saved through the API. Settings fixed at
// startup are never written into it, so that removing one from the
// configuration and restarting restores the saved value.
type Saved struct {
	ID     string `json:"id"`
	Policy Policy `json:"policy"`
}

// savedID is the ID of the one saved policy row.
const savedID = "host"

// Table holds the saved policy.
var Table = &raftstore.Table[Saved]{
	Name: "policy",
	ID:   func(s *Saved) string { return s.ID },
}

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

var _ Store = (*raftstore.Store)(nil)

// Service reads and replaces the host policy.
type Service struct {
	store Store
	fixed Fixed
	now   func() time.Time
}

// NewService returns the policy service; fixed holds the settings fixed at
// startup.
func NewService(store Store, fixed Fixed, now func() time.Time) *Service {
	return &Service{store: store, fixed: fixed, now: now}
}

func (s *Service) saved(r *raftstore.Reader) (Policy, raftstore.Meta) {
	v, m, ok := Table.Get(r, savedID)
	if !ok {
		return Default(), m
	}
	return v.Policy, m
}

// Current returns the policy in force: the saved policy with the settings
// fixed at startup over it.
func (s *Service) Current() Policy {
	p, _ := s.saved(s.store.Read())
	return s.fixed.Apply(p)
}

// Fixed lists the settings fixed at startup.
func (s *Service) Fixed() []string {
	names := s.fixed.Names()
	if names == nil {
		return []string{}
	}
	return names
}

// Replace replaces the saved policy with the one in body (a decoded JSON
// object of settings; missing ones take their defaults). A setting fixed at
// startup may appear only with its fixed value (STATE_INVALID otherwise),
// and the saved value of a fixed setting is kept as it was. Of two
// replacements made at once, the later one applied is the policy.
func (s *Service) Replace(ctx context.Context, body map[string]any) (Policy, error) {
	var next Policy
	_, err := s.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		old, meta := s.saved(r)
		var err error
		if next, err = s.candidate(body, old); err != nil {
			return nil, err
		}
		changed := changedSettings(old, next)
		if len(changed) == 0 {
			return nil, nil
		}
		now := s.now()
		return []raftstore.Op{
			Table.PutIf(&Saved{ID: savedID, Policy: next}, meta.ModifyIndex),
			audit.Record(ctx, now, "policy.update", "", audit.Target{Kind: "policy", ID: savedID}, map[string]any{"changed": changed}),
			events.Emit(ctx, now, "policy.updated", nil, "", "", nil),
		}, nil
	})
	if err != nil {
		return Policy{}, err
	}
	return s.fixed.Apply(next), nil
}

// Candidate validates a policy body as Replace would, without saving it,
// and returns the policy that would be in force.
func (s *Service) Candidate(body map[string]any) (Policy, error) {
	old, _ := s.saved(s.store.Read())
	p, err := s.candidate(body, old)
	if err != nil {
		return Policy{}, err
	}
	return s.fixed.Apply(p), nil
}

func (s *Service) candidate(body map[string]any, saved Policy) (Policy, error) {
	m := make(map[string]any, len(body))
	for k, v := range body {
		m[k] = v
	}
	savedMap := saved.Map()
	fixedMap := s.fixed.Apply(Default()).Map()
	var refused []string
	for _, name := range s.fixed.Names() {
		if v, ok := m[name]; ok {
			one, err := FromMap(map[string]any{name: v})
			if err != nil {
				return Policy{}, invalid(err)
			}
			if !reflect.DeepEqual(one.Map()[name], fixedMap[name]) {
				refused = append(refused, name)
			}
		}
		m[name] = savedMap[name]
	}
	if len(refused) > 0 {
		sort.Strings(refused)
		return Policy{}, errcode.New(errcode.StateInvalid, "fixed at startup and cannot be changed here: %v", refused).
			WithDetail("fixed", refused).
			WithRemedy("change it in the configuration file or SVC_POLICY_* environment and restart")
	}
	p, err := FromMap(m)
	if err != nil {
		return Policy{}, invalid(err)
	}
	return p, nil
}

func invalid(err error) *errcode.Error {
	e := errcode.New(errcode.ValidInvalid, "%s", err.Error())
	var se *SettingError
	if errors.As(err, &se) {
		e.WithDetail("field", "policy."+se.Setting)
	}
	var ue *UnknownSettingError
	if errors.As(err, &ue) {
		e.WithDetail("field", "policy."+ue.Name)
	}
	return e
}

func changedSettings(a, b Policy) []string {
	am, bm := a.Map(), b.Map()
	var out []string
	for _, name := range Names() {
		if !reflect.DeepEqual(am[name], bm[name]) {
			out = append(out, name)
		}
	}
	return out
}

// DecodeBody decodes a {"policy": {...}} request body's inner object,
// keeping numbers exact.
func DecodeBody(raw json.RawMessage) (map[string]any, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, errcode.Invalid("policy", "policy must be a JSON object of settings")
	}
	return m, nil
}
