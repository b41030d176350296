package detection

import (
	"context"
	"fmt"
	"sort"

	"github.com/svchost/svc/internal/detect"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// Value is a value set at accept: an environment variable of the proposal
// (of one workload, or of every workload), or, with Secret, a secret that
// goes to the secrets adapter and is referred to by name.
type Value struct {
	Key      string `json:"key" doc:"the setting's key"`
	Value    string `json:"value" doc:"its value"`
	Secret   bool   `json:"secret,omitempty" doc:"true to keep it as a secret"`
	Workload string `json:"workload,omitempty" doc:"the workload it is for (default all)"`
}

// Accept is what POST …/detection/accept asks.
type Accept struct {
	Values  []Value
	Confirm bool
	// CanWriteSecrets says whether the caller holds app.secrets.write,
	// which a secret value additionally needs.
	CanWriteSecrets bool
}

// MaxValues bounds the values of one accept.
const MaxValues = 128

// Proposal returns the document accepting would write: the winner's
// proposal with the values set. A compose proposal with constructs it could
// not translate is refused (PLAN_COMPOSE_CONSTRUCT_REJECTED, naming them).
func (s *Service) Proposal(appID string, values []Value) (spec.Document, error) {
	return s.proposal(appID, values, true)
}

func (s *Service) proposal(appID string, values []Value, strict bool) (spec.Document, error) {
	rec, err := s.Get(appID)
	if err != nil {
		return spec.Document{}, err
	}
	if rec.Winner == nil {
		return spec.Document{}, errcode.New(errcode.StateInvalid, "detection has no proposal for app %s (status %s)", appID, rec.Status).
			WithRemedy("upload or fetch the app's source, or write a spec with POST /api/v1/apps/%s/specs", appID)
	}
	if err := detect.ComposeRejection(*rec.Winner); err != nil && strict {
		return spec.Document{}, err
	}
	return withValues(rec.Winner.Proposal, values)
}

// withValues sets each value in a copy of d.
func withValues(d spec.Document, values []Value) (spec.Document, error) {
	if len(values) > MaxValues {
		return spec.Document{}, errcode.Invalid("values", "at most %d values", MaxValues)
	}
	out := d
	out.Env = cloneEnv(d.Env)
	out.Workloads = map[string]spec.Workload{}
	for name, w := range d.Workloads {
		w.Env = cloneEnv(w.Env)
		out.Workloads[name] = w
	}
	for i, v := range values {
		field := fmt.Sprintf("values[%d]", i)
		if err := secrets.CheckKey(v.Key); err != nil {
			return spec.Document{}, errcode.Invalid(field+".key", "a value's key is an environment variable name")
		}
		ev := spec.Literal(v.Value)
		if v.Secret {
			ev = spec.EnvValue{Secret: v.Key}
		} else if err := secrets.CheckValue(v.Value); err != nil {
			return spec.Document{}, errcode.Invalid(field+".value", "a value is UTF-8 text without NUL bytes, at most %d bytes", secrets.MaxValueBytes)
		}
		if v.Workload == "" {
			if out.Env == nil {
				out.Env = map[string]spec.EnvValue{}
			}
			out.Env[v.Key] = ev
			// A workload that sets the same key would make the document
			// ambiguous: the value given now wins everywhere.
			for name, w := range out.Workloads {
				delete(w.Env, v.Key)
				out.Workloads[name] = w
			}
			continue
		}
		w, ok := out.Workloads[v.Workload]
		if !ok {
			return spec.Document{}, errcode.Invalid(field+".workload", "the proposal has no workload %q", v.Workload)
		}
		if w.Env == nil {
			w.Env = map[string]spec.EnvValue{}
		}
		w.Env[v.Key] = ev
		out.Workloads[v.Workload] = w
	}
	return out, nil
}

func cloneEnv(m map[string]spec.EnvValue) map[string]spec.EnvValue {
	if m == nil {
		return nil
	}
	out := make(map[string]spec.EnvValue, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Accept writes the proposal, with the values set, as a pinned revision.
// Secret values go to the secrets adapter first (each audited as
// secret.set), so that the revision never names a secret that is not
// there; a refusal of any of them writes nothing more. Over an app that
// already has a pinned revision, Confirm is required.
func (s *Service) Accept(ctx context.Context, appID string, a Accept) (spec.View, error) {
	doc, err := s.Proposal(appID, a.Values)
	if err != nil {
		return spec.View{}, err
	}
	if h, _, ok := spec.Heads.Get(s.d.Store.Read(), appID); ok && h.Pinned != 0 && !a.Confirm {
		return spec.View{}, errcode.New(errcode.StateInvalid, "app %s is configured already (revision %d is pinned); accepting replaces its configuration", appID, h.Pinned).
			WithDetail("protected", "confirm").WithRemedy("GET …/detection/diff shows what changes; send confirm: true to accept")
	}
	var secretValues []Value
	for _, v := range a.Values {
		if v.Secret {
			secretValues = append(secretValues, v)
		}
	}
	if len(secretValues) > 0 && !a.CanWriteSecrets {
		return spec.View{}, errcode.New(errcode.PermVerbRequired, "secret values need the verb app.secrets.write").WithDetail("verb", "app.secrets.write")
	}
	if err := spec.Validate(doc); err != nil {
		return spec.View{}, err
	}
	sort.SliceStable(secretValues, func(i, j int) bool { return secretValues[i].Key < secretValues[j].Key })
	for _, v := range secretValues {
		if _, err := s.d.Secrets.Put(ctx, secrets.Ref{AppID: appID, Key: v.Key}, v.Value); err != nil {
			return spec.View{}, fmt.Errorf("accept: secret %s: %w", v.Key, err)
		}
	}
	return s.d.Specs.CreateAndPin(ctx, appID, doc, "accept")
}

// Diff is what accepting the proposal would change on the app: the pinned
// revision against the proposal (an app with none pinned gains everything).
func (s *Service) Diff(appID string) (spec.DiffResult, error) {
	doc, err := s.proposal(appID, nil, false)
	if err != nil {
		return spec.DiffResult{}, err
	}
	r := s.d.Store.Read()
	var pinned spec.Document
	if h, _, ok := spec.Heads.Get(r, appID); ok && h.Pinned != 0 {
		rev, _, ok := spec.Revisions.First(r, "app_revision", raftstore.Key(appID, raftstore.Uint(h.Pinned)))
		if ok {
			if pinned, err = rev.Spec(); err != nil {
				return spec.DiffResult{}, err
			}
		}
	}
	return spec.Diff(pinned, doc), nil
}

// Rejection is the compose rejection of the app's detected proposal, nil
// when there is none: the plan refuses with it while the app has no pinned
// revision.
func (s *Service) Rejection(appID string) error {
	rec, _, ok := Records.Get(s.d.Store.Read(), appID)
	if !ok || rec.Winner == nil {
		return nil
	}
	return detect.ComposeRejection(*rec.Winner)
}
