package plan

import (
	"slices"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/slots"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// The facts a plan is made from, each through the small interface of the
// service that keeps it. Make stays pure; Service only gathers.
type (
	revisions interface {
		Get(appID string, n uint64) (spec.View, error)
	}
	slotFills interface {
		List(appID string) ([]slots.View, error)
	}
	secretKeys interface {
		List(appID string) ([]secrets.View, error)
	}
	runtimes interface {
		Current() *adapters.Set
	}
	rejections interface {
		Rejection(appID string) error
	}
	policies interface {
		Current() policy.Policy
	}
	reader interface {
		Read() *raftstore.Reader
	}
	scores interface {
		Score(appID string) *int
	}
)

var (
	_ revisions  = (*spec.Service)(nil)
	_ slotFills  = (*slots.Service)(nil)
	_ secretKeys = (*secrets.Service)(nil)
	_ runtimes   = (*adapters.Service)(nil)
	_ policies   = (*policy.Service)(nil)
	_ reader     = (*raftstore.Store)(nil)
)

// Deps are where a plan's facts come from.
type Deps struct {
	Store      reader
	Specs      revisions
	Slots      slotFills
	Secrets    secretKeys
	Adapters   runtimes
	Detections rejections
	Policy     policies
	// Security gives apps' last security scores (internal/security); nil
	// means never scanned.
	Security scores
}

// Service makes plans of apps' revisions.
type Service struct{ d Deps }

// NewService returns the plan service.
func NewService(d Deps) *Service { return &Service{d: d} }

// Plan plans a deploy of an app's revision n (0: the pinned one) under the
// policy in force.
func (s *Service) Plan(appID string, n uint64) (Result, error) {
	return s.plan(appID, n, s.d.Policy.Current())
}

// errNothingPinned refuses a plan of an app with no pinned revision.
func errNothingPinned(appID string) *errcode.Error {
	return errcode.New(errcode.StateInvalid, "app %s has no pinned revision to deploy", appID).
		WithRemedy("accept detection's proposal, or write a revision and pin it")
}

func (s *Service) plan(appID string, n uint64, pol policy.Policy) (Result, error) {
	r := s.d.Store.Read()
	app, _, ok := apps.Apps.Get(r, appID)
	if !ok {
		return Result{}, errcode.New(errcode.NotFound, "no app %s", appID)
	}
	if n == 0 && app.Pinned != nil {
		n = uint64(app.Pinned.Revision)
	}
	if n == 0 {
		res := Result{Actions: []Action{}, Refusals: []*errcode.Error{errNothingPinned(appID)}, Warnings: []Warning{}}
		if err := s.rejection(appID); err != nil {
			if e, ok := errcode.As(err); ok {
				res.Refusals = append(res.Refusals, e)
			}
		}
		return res, nil
	}
	rev, err := s.d.Specs.Get(appID, n)
	if err != nil {
		return Result{}, err
	}
	in := Input{Revision: n, Spec: rev.Spec, Policy: pol, Runtimes: s.runtimes(), Source: app.Source}
	if s.d.Security != nil {
		in.SecurityScore = s.d.Security.Score(appID)
	}
	filled := map[string]bool{}
	if views, err := s.d.Slots.List(appID); err == nil {
		for _, v := range views {
			filled[v.Key] = v.Filled
		}
	}
	in.Filled = func(k string) bool { return filled[k] }
	set, origin := map[string]bool{}, map[string]string{}
	if views, err := s.d.Secrets.List(appID); err == nil {
		for _, v := range views {
			set[v.Key], origin[v.Key] = true, v.Origin
		}
	}
	in.SecretSet = func(k string) bool { return set[k] }
	kinds := map[string]string{}
	for _, l := range s.d.Adapters.Current().Of(adapters.CategorySecrets) {
		kinds[l.Adapter.ID] = l.Adapter.Kind
	}
	in.SecretOrigin = func(k string) (string, string) { return origin[k], kinds[origin[k]] }
	return Make(in), nil
}

func (s *Service) rejection(appID string) error {
	if s.d.Detections == nil {
		return nil
	}
	return s.d.Detections.Rejection(appID)
}

// DefaultRuntime is the runtime a deploy of a spec that names none would
// use under the policy in force, with its capabilities (detection weighs
// its proposals by what it can build); the refusal when no runtime would
// do.
func (s *Service) DefaultRuntime() (Runtime, error) {
	rt, refusal := chooseRuntime(Input{Policy: s.d.Policy.Current(), Runtimes: s.runtimes()})
	if refusal != nil {
		return Runtime{}, refusal
	}
	return rt, nil
}

// runtimes are the loaded runtime adapters with their live capabilities;
// not one deleted since it was loaded (it stays loaded until the server
// restarts, but nothing new is planned onto it).
func (s *Service) runtimes() []Runtime {
	var out []Runtime
	r := s.d.Store.Read()
	for _, l := range s.d.Adapters.Current().Of(adapters.CategoryRuntime) {
		if _, _, stored := adapters.Adapters.Get(r, l.Adapter.ID); !stored && !l.Virtual {
			continue
		}
		rt := Runtime{ID: l.Adapter.ID, Kind: l.Adapter.Kind, Primary: l.Primary, Loaded: l.Instance != nil, Isolation: policy.IsolationNone}
		if l.Instance != nil {
			caps := l.Instance.Capabilities()
			if iso, ok := caps["isolation"].(string); ok && iso != "" {
				rt.Isolation = iso
			}
			rt.BuildIsolation, _ = caps["build_isolation"].(string)
			if builds, ok := caps["builds"].([]string); ok {
				rt.Builds = builds
			}
			rt.Egress, _ = caps["egress_allowlist"].(bool)
			rt.Unavailable, _ = caps["unavailable"].(string)
			rt.SecretsFrom, _ = caps["secrets_from"].(string)
		}
		out = append(out, rt)
	}
	return out
}

// Blocked is an app a candidate policy would block, with the reasons.
type Blocked struct {
	AppID   string           `json:"app_id"`
	Name    string           `json:"name"`
	Reasons []*errcode.Error `json:"reasons"`
}

// Preview names the apps a candidate policy would block that the policy
// in force does not: a pinned revision it would refuse to deploy (a
// source outside source_allowlist among the reasons), the source of an
// app with nothing pinned yet outside source_allowlist, a grant to
// everyone that public sharing would forbid.
func (s *Service) Preview(candidate policy.Policy) []Blocked {
	current := s.d.Policy.Current()
	r := s.d.Store.Read()
	all, _ := apps.Apps.List(r, raftstore.Query{})
	out := []Blocked{}
	for _, it := range all {
		a := it.Value
		var reasons []*errcode.Error
		if a.Pinned != nil {
			now, err1 := s.plan(a.ID, 0, current)
			next, err2 := s.plan(a.ID, 0, candidate)
			if err1 == nil && err2 == nil {
				for _, e := range next.Refusals {
					if !hasCode(now.Refusals, e.Code) {
						reasons = append(reasons, e)
					}
				}
			}
		}
		if a.Pinned == nil {
			if e := sourceNotAllowed(Input{Source: a.Source, Policy: candidate}); e != nil {
				reasons = append(reasons, e)
			}
		}
		if e := anonymousForbidden(r, a.ID, candidate); e != nil {
			reasons = append(reasons, e)
		}
		if len(reasons) > 0 {
			out = append(out, Blocked{AppID: a.ID, Name: a.Name, Reasons: reasons})
		}
	}
	return out
}

func hasCode(es []*errcode.Error, c errcode.Code) bool {
	return slices.ContainsFunc(es, func(e *errcode.Error) bool { return e.Code == c })
}

// anonymousForbidden refuses an app's grant to everyone that the candidate
// policy's public sharing would not allow.
func anonymousForbidden(r *raftstore.Reader, appID string, p policy.Policy) *errcode.Error {
	grants, _ := identity.Grants.List(r, raftstore.Query{Index: "app", Key: appID})
	for _, g := range grants {
		if g.Value.Plane != identity.PlaneData || g.Value.PrincipalKind != "anonymous" {
			continue
		}
		sharing := p.EffectivePublicSharing()
		if sharing == policy.SharingNone || (sharing == policy.SharingPasscodeOnly && !g.Value.Passcode) {
			return errcode.New(errcode.PolicyAnonymousGrant, "the app is shared with everyone%s, which public_sharing %s forbids",
				map[bool]string{true: " behind a passcode", false: ""}[g.Value.Passcode], sharing).WithDetail("grant_id", g.Value.ID)
		}
	}
	return nil
}
