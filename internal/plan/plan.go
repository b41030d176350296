// Package plan decides what a deploy of a spec revision would do and every
// reason it would be refused (PLAN_* errors), with warnings (WARN_*) that
// never block, and which apps a candidate host policy would block. Make is
// a pure function of its input; Service gathers the facts (the revision,
// filled slots, set secrets, loaded runtimes and their capabilities, host
// policy, the detection's compose rejection) through the small interfaces
// of the services that keep them, and the deploy path runs the same checks
// before it builds anything.
//
// It must not write anything, call adapters or start anything.
package plan

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/source"
	"github.com/svchost/svc/internal/spec"
)

// Runtime is a loaded runtime adapter as the plan sees it.
type Runtime struct {
	ID        string
	Kind      string
	Primary   bool
	Loaded    bool   // opened on this server
	Isolation string // a policy isolation level
	// BuildIsolation is the strongest isolation its builds can run at
	// (a policy isolation level; "" means none).
	BuildIsolation string
	// Builds lists the build kinds it can run.
	Builds []string
	// Egress says it enforces host policy's egress_allowlist.
	Egress bool
	// Unavailable says why it can run nothing here ("" when it can): a
	// process runtime set to sandbox every workload on a host that
	// cannot.
	Unavailable string
	// SecretsFrom is the kind of secrets adapter its workloads read
	// secrets from ("vault": the Nomad runtime's template blocks); empty
	// means it is handed their values, from whichever adapter holds them.
	SecretsFrom string
}

// Input is everything a plan is made from.
type Input struct {
	Revision uint64
	Spec     spec.Document
	Policy   policy.Policy
	Runtimes []Runtime
	// Filled reports whether a slot has been filled.
	Filled func(slot string) bool
	// SecretSet reports whether the app has a secret of that key.
	SecretSet func(key string) bool
	// SecretOrigin names the adapter holding a secret the app has: its ID
	// and kind (kind empty when no loaded adapter has that ID).
	SecretOrigin func(key string) (id, kind string)
	// ComposeRejection is the detection's refusal of untranslatable
	// compose constructs, when the spec came from compose.
	ComposeRejection error
	// SecurityScore is the app's last security score, nil when unscanned.
	SecurityScore *int
	// Source is the source recorded on the app (nil: none yet). Host
	// policy's source_allowlist must allow it.
	Source *apps.Source
}

// Action is one step a deploy would take.
type Action struct {
	Workload string `json:"workload"`
	Step     string `json:"step"` // build, start
	Detail   string `json:"detail"`
}

// Warning never blocks a deploy.
type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Result is a plan.
type Result struct {
	Deployable bool             `json:"deployable"`
	Runtime    string           `json:"runtime,omitempty"` // the adapter a deploy would use
	Actions    []Action         `json:"actions"`
	Refusals   []*errcode.Error `json:"refusals"`
	Warnings   []Warning        `json:"warnings"`
}

// Make plans a deploy of in.Spec.
func Make(in Input) Result {
	r := Result{Actions: []Action{}, Refusals: []*errcode.Error{}, Warnings: []Warning{}}
	if in.ComposeRejection != nil {
		if e, ok := errcode.As(in.ComposeRejection); ok {
			r.Refusals = append(r.Refusals, e)
		} else {
			r.Refusals = append(r.Refusals, errcode.New(errcode.PlanComposeRejected, "%s", in.ComposeRejection.Error()))
		}
	}
	if missing := unfilled(in); len(missing) > 0 {
		r.Refusals = append(r.Refusals, errcode.New(errcode.PlanSlotUnfilled, "required slots are not filled: %s", strings.Join(missing, ", ")).
			WithDetail("slots", missing).WithRemedy("fill each with PUT /api/v1/apps/{appID}/slots/{key}"))
	}
	rt, refusal := chooseRuntime(in)
	if refusal != nil {
		r.Refusals = append(r.Refusals, refusal)
	} else {
		r.Runtime = rt.ID
		r.Refusals = append(r.Refusals, capabilities(in.Spec, rt, in.Policy)...)
		if e := undeliverable(in, rt); e != nil {
			r.Refusals = append(r.Refusals, e)
		}
	}
	if e := belowMinimum(in); e != nil {
		r.Refusals = append(r.Refusals, e)
	}
	if e := sourceNotAllowed(in); e != nil {
		r.Refusals = append(r.Refusals, e)
	}
	r.Actions = actions(in.Spec)
	r.Warnings = warnings(in)
	r.Deployable = len(r.Refusals) == 0
	return r
}

// belowMinimum refuses an app whose security score is below host
// policy's min_security_score, or that was never scanned while one is
// set (whatever insecure_action says: that is for running apps).
func belowMinimum(in Input) *errcode.Error {
	min := in.Policy.MinSecurityScore
	switch {
	case min <= 0:
		return nil
	case in.SecurityScore == nil:
		return errcode.New(errcode.PlanSecurityBelow, "the installation requires a security score of %d and the app was never scanned", min).
			WithDetail("minimum", min).WithRemedy("scan it with POST /api/v1/apps/{appID}/security/scan, then plan again")
	case *in.SecurityScore < min:
		return errcode.New(errcode.PlanSecurityBelow, "the app's security score %d is below the installation's minimum %d", *in.SecurityScore, min).
			WithDetail("score", *in.SecurityScore).WithDetail("minimum", min).
			WithRemedy("fix the findings GET /api/v1/apps/{appID}/security lists and scan again")
	}
	return nil
}

// sourceNotAllowed refuses an app whose recorded source host policy's
// source_allowlist does not allow (an allowlist set after the source was
// taken): a repository outside it, or an uploaded archive when it does
// not name archive: (source.CheckArchiveAllowed). Nothing deploys from a
// source the operator's list leaves out.
func sourceNotAllowed(in Input) *errcode.Error {
	if in.Source == nil || len(in.Policy.SourceAllowlist) == 0 {
		return nil
	}
	var err error
	switch in.Source.Kind {
	case source.KindArchive:
		err = source.CheckArchiveAllowed(in.Policy.SourceAllowlist)
	case source.KindRepository:
		err = source.CheckAllowed(in.Source.Repository, in.Policy.SourceAllowlist)
	}
	if e, ok := errcode.As(err); ok {
		return e
	}
	if err != nil {
		return errcode.New(errcode.PolicySourceNotAllow, "the app's recorded source cannot be checked against source_allowlist: %v", err)
	}
	return nil
}

func unfilled(in Input) []string {
	var out []string
	for name, s := range in.Spec.Slots {
		if s.Required && (in.Filled == nil || !in.Filled(name)) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// chooseRuntime picks the runtime a deploy would use: the one the spec
// names, else the primary; it must be loaded and meet host policy's
// minimum runtime isolation and minimum build isolation (every deploy
// builds each workload, or starts a build made under the same policy),
// each at least sandbox while egress_allowlist is set
// (policy.EffectiveIsolation).
func chooseRuntime(in Input) (Runtime, *errcode.Error) {
	want := ""
	if in.Spec.Runtime != nil {
		want = in.Spec.Runtime.Adapter
	}
	var candidates []Runtime
	for _, rt := range in.Runtimes {
		if want == "" || rt.ID == want || rt.Kind == want {
			candidates = append(candidates, rt)
		}
	}
	if want != "" && len(candidates) == 0 {
		return Runtime{}, errcode.New(errcode.PlanAdapterNotConfig, "the spec names the runtime %q, which this installation has not configured", want).
			WithDetail("adapter", want).WithRemedy("configure it with POST /api/v1/adapters, or remove runtime.adapter from the spec")
	}
	need, needBuild := in.Policy.EffectiveIsolation(in.Policy.MinRuntimeIsolation), in.Policy.EffectiveIsolation(in.Policy.MinBuildIsolation)
	var meets []Runtime
	for _, rt := range candidates {
		if rt.Loaded && policy.AtLeast(rt.Isolation, need) && policy.AtLeast(buildIsolation(rt), needBuild) {
			meets = append(meets, rt)
		}
	}
	if len(meets) == 0 {
		return Runtime{}, errcode.New(errcode.PlanNoAdapterPolicy, "no configured runtime offers the isolation host policy requires (workloads: %s, builds: %s)", need, needBuild).
			WithDetail("min_runtime_isolation", need).WithDetail("min_build_isolation", needBuild).
			WithDetail("runtimes", runtimeIsolations(candidates)).WithDetail("build_isolations", buildIsolations(candidates)).
			WithRemedy("configure a runtime adapter that offers this isolation (the process runtime offers sandbox where bubblewrap and passt are installed), or lower min_runtime_isolation / min_build_isolation in host policy (egress_allowlist, when set, needs sandbox)")
	}
	slices.SortStableFunc(meets, func(a, b Runtime) int {
		if a.Primary != b.Primary {
			if a.Primary {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	return meets[0], nil
}

func runtimeIsolations(rts []Runtime) map[string]string {
	out := map[string]string{}
	for _, rt := range rts {
		out[rt.ID] = rt.Isolation
	}
	return out
}

// buildIsolation is the isolation a runtime's builds run at; a runtime
// that does not say offers none.
func buildIsolation(rt Runtime) string {
	if rt.BuildIsolation == "" {
		return policy.IsolationNone
	}
	return rt.BuildIsolation
}

func buildIsolations(rts []Runtime) map[string]string {
	out := map[string]string{}
	for _, rt := range rts {
		out[rt.ID] = buildIsolation(rt)
	}
	return out
}

// capabilities refuses what the chosen runtime cannot do.
func capabilities(d spec.Document, rt Runtime, pol policy.Policy) []*errcode.Error {
	var out []*errcode.Error
	if rt.Unavailable != "" {
		out = append(out, errcode.New(errcode.PlanCapabilityUnsupp, "the runtime %s cannot run apps: %s", rt.ID, rt.Unavailable).
			WithDetail("capability", "isolation").
			WithRemedy("install bubblewrap and passt on the host (Debian: apt-get install bubblewrap passt), or set runtime.isolation: none and restart (apps then run without isolation)"))
	}
	if len(pol.EgressAllowlist) > 0 && !rt.Egress {
		out = append(out, errcode.New(errcode.PlanCapabilityUnsupp, "host policy restricts egress (egress_allowlist) and the runtime %s (%s) cannot enforce it", rt.ID, rt.Kind).
			WithDetail("capability", "egress_allowlist").
			WithRemedy("deploy on a runtime that enforces egress_allowlist (the process runtime's sandbox), or empty egress_allowlist"))
	}
	if d.Runtime != nil && d.Runtime.Isolation != "" && !policy.AtLeast(rt.Isolation, d.Runtime.Isolation) {
		out = append(out, errcode.New(errcode.PlanCapabilityUnsupp, "the spec asks for %s isolation; the runtime %s offers %s", d.Runtime.Isolation, rt.ID, rt.Isolation).
			WithDetail("capability", "isolation"))
	}
	for _, name := range sortedWorkloads(d) {
		w := d.Workloads[name]
		if w.Build != nil && len(rt.Builds) > 0 && !slices.Contains(rt.Builds, w.Build.Kind) {
			out = append(out, errcode.New(errcode.PlanCapabilityUnsupp, "workload %s needs a %s build, which the runtime %s (%s) cannot run", name, w.Build.Kind, rt.ID, rt.Kind).
				WithDetail("capability", "build."+w.Build.Kind).WithDetail("workload", name))
		}
	}
	return out
}

// undeliverable refuses secrets the spec binds that the runtime cannot
// deliver: its workloads read secrets from one kind of secrets adapter
// (the Nomad runtime's from Vault) and another holds them (builtin keeps
// them sealed in svc's store, where no Nomad task can read them), so the
// workload would wait on a Vault path that does not exist.
func undeliverable(in Input, rt Runtime) *errcode.Error {
	if rt.SecretsFrom == "" || in.SecretSet == nil || in.SecretOrigin == nil {
		return nil
	}
	var keys, origins []string
	for _, key := range secretRefs(in.Spec) {
		if !in.SecretSet(key) {
			continue
		}
		if id, kind := in.SecretOrigin(key); kind != rt.SecretsFrom {
			if kind == "" {
				kind = "an adapter not loaded"
			}
			keys, origins = append(keys, key), append(origins, fmt.Sprintf("%s (%s)", key, kind+" "+id))
		}
	}
	if len(keys) == 0 {
		return nil
	}
	return errcode.New(errcode.PlanCapabilityUnsupp, "the runtime %s (%s) delivers secrets from the %s secrets adapter only, and these secrets are held elsewhere: %s",
		rt.ID, rt.Kind, rt.SecretsFrom, strings.Join(origins, ", ")).
		WithDetail("capability", "secrets").WithDetail("secrets", keys).WithDetail("secrets_from", rt.SecretsFrom).
		WithRemedy("make the %s secrets adapter the primary one (POST /api/v1/adapters, category secrets, kind %s, and restart svc), then set each of these secrets again (PUT /api/v1/apps/{appID}/secrets/{key}) so that it is written there", rt.SecretsFrom, rt.SecretsFrom)
}

func sortedWorkloads(d spec.Document) []string {
	names := make([]string, 0, len(d.Workloads))
	for n := range d.Workloads {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// actions lists builds then starts, dependencies first.
func actions(d spec.Document) []Action {
	order := StartOrder(d)
	out := []Action{}
	for _, name := range order {
		if b := d.Workloads[name].Build; b != nil {
			out = append(out, Action{Workload: name, Step: "build", Detail: b.Kind})
		}
	}
	for _, name := range order {
		w := d.Workloads[name]
		detail := strings.Join(w.Run.Command, " ")
		if w.Run.Port > 0 {
			detail = fmt.Sprintf("%s (port %d)", detail, w.Run.Port)
		}
		out = append(out, Action{Workload: name, Step: "start", Detail: strings.TrimSpace(detail)})
	}
	return out
}

// StartOrder is a topological order of the workloads by depends_on (by
// name among equals); a cycle (which validation refuses) falls back to
// name order for what remains.
func StartOrder(d spec.Document) []string {
	names := sortedWorkloads(d)
	done := map[string]bool{}
	var out []string
	for len(out) < len(names) {
		progressed := false
		for _, n := range names {
			if done[n] {
				continue
			}
			ready := true
			for _, dep := range d.Workloads[n].DependsOn {
				if _, known := d.Workloads[dep]; known && !done[dep] {
					ready = false
				}
			}
			if ready {
				done[n], progressed = true, true
				out = append(out, n)
			}
		}
		if !progressed {
			for _, n := range names {
				if !done[n] {
					done[n] = true
					out = append(out, n)
				}
			}
		}
	}
	return out
}

func warnings(in Input) []Warning {
	out := []Warning{}
	for _, name := range sortedWorkloads(in.Spec) {
		w := in.Spec.Workloads[name]
		if w.Run.Port > 0 && w.Run.Health == nil {
			out = append(out, Warning{Code: "WARN_NO_HEALTH_CHECK", Message: fmt.Sprintf("workload %s serves HTTP without a health check: a broken start is noticed only when it exits", name)})
		}
		if w.Resources == nil || (w.Resources.MemoryBytes == 0 && w.Resources.CPUMillis == 0) {
			out = append(out, Warning{Code: "WARN_NO_RESOURCE_LIMITS", Message: fmt.Sprintf("workload %s has no CPU or memory limit", name)})
		}
	}
	if in.SecretSet != nil {
		var missing []string
		for _, ref := range secretRefs(in.Spec) {
			if !in.SecretSet(ref) {
				missing = append(missing, ref)
			}
		}
		if len(missing) > 0 {
			out = append(out, Warning{Code: "WARN_SECRET_NOT_SET", Message: "the spec uses secrets the app does not have yet: " + strings.Join(missing, ", ") + "; they will be empty"})
		}
	}
	return out
}

func secretRefs(d spec.Document) []string {
	seen := map[string]bool{}
	add := func(env map[string]spec.EnvValue) {
		for _, v := range env {
			if v.Secret != "" {
				seen[v.Secret] = true
			}
		}
	}
	add(d.Env)
	for _, w := range d.Workloads {
		add(w.Env)
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
