package spec

import (
	"fmt"
	"github.com/svchost/svc/internal/policy"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/secrets"
)

// Health check defaults, used where a spec leaves interval or timeout out.
const (
	DefaultHealthInterval = 10 * time.Second
	DefaultHealthTimeout  = 2 * time.Second
)

// Isolation levels a spec may ask of its runtime: host policy's levels.
var isolations = []string{policy.IsolationNone, policy.IsolationSandbox, policy.IsolationContainer, policy.IsolationVM}

// maxProblems caps the problems one answer lists.
const maxProblems = 50

var (
	envNameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	slotFieldRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)
	slotTypeRE  = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
)

// Problem is one thing wrong with a document.
type Problem struct {
	Code    errcode.Code `json:"code"`
	Field   string       `json:"field"`
	Message string       `json:"message"`
}

// Validate checks what a document means: the rules of the API contract
// ("The spec document") on top of the form Parse checks, which Validate
// checks again so that documents built in code meet the same bar.
//
// It finds every problem, in a fixed order (limits and names, the app's
// env, each workload by name, volumes, slots, runtime, deploy rules, lifecycle, the primary
// workload, dependency cycles), and returns nil or the first problem as an
// *errcode.Error: its code (VALID_DANGLING_MOUNT, VALID_DANGLING_SLOT_REF,
// VALID_DEPENDENCY_CYCLE, VALID_ENV_AMBIGUOUS, VALID_PRIMARY_WORKLOAD or
// VALID_INVALID) and details.field lead, and details.problems lists all of
// them (at most 50) as {code, field, message}.
//
// A document with a single workload that does not say primary has that
// workload as its primary; with more than one, exactly one must say so.
func Validate(d Document) error {
	v := &validator{d: d}
	if err := checkLimits(d); err != nil {
		v.addErr(err)
	}
	v.env("env", d.Env, nil)
	for _, name := range sortedKeys(d.Workloads) {
		v.workload(name, d.Workloads[name])
	}
	for _, name := range sortedKeys(d.Volumes) {
		if d.Volumes[name].SizeBytes <= 0 {
			v.invalid("volumes."+name+".size_bytes", "volume %s needs a size_bytes above 0", name)
		}
	}
	for _, name := range sortedKeys(d.Slots) {
		if !slotTypeRE.MatchString(d.Slots[name].Type) {
			v.invalid("slots."+name+".type", "slot %s needs a type: lower-case letters, digits, _ and - (for example postgres)", name)
		}
	}
	if rt := d.Runtime; rt != nil {
		if rt.Isolation != "" && !slices.Contains(isolations, rt.Isolation) {
			v.invalid("runtime.isolation", "runtime.isolation is one of %s", strings.Join(isolations, ", "))
		}
		if len(rt.Adapter) > 256 || hasControl(rt.Adapter) {
			v.invalid("runtime.adapter", "runtime.adapter names an adapter by ID or kind")
		}
	}
	if dr := d.Deploy; dr != nil && (dr.Approvals < 0 || dr.Approvals > MaxApprovals) {
		v.invalid("deploy.approvals", "deploy.approvals is 0 to %d", MaxApprovals)
	}
	if lc := d.Lifecycle; lc != nil {
		if lc.IdleDays < 0 || lc.IdleDays > MaxIdleDays {
			v.invalid("lifecycle.idle_days", "lifecycle.idle_days is 0 (never) to %d days without a request", MaxIdleDays)
		}
		if lc.IdleAction != "" && lc.IdleAction != IdleStop && lc.IdleAction != IdleDelete {
			v.invalid("lifecycle.idle_action", "lifecycle.idle_action is %s (the default) or %s", IdleStop, IdleDelete)
		}
	}
	v.primary()
	v.cycles()
	return v.err()
}

type validator struct {
	d        Document
	problems []Problem
	first    *errcode.Error
}

func (v *validator) add(code errcode.Code, field, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if v.first == nil {
		v.first = errcode.New(code, "%s", msg).WithDetail("field", field)
	}
	if len(v.problems) < maxProblems {
		v.problems = append(v.problems, Problem{Code: code, Field: field, Message: msg})
	}
}

func (v *validator) invalid(field, format string, args ...any) {
	v.add(errcode.ValidInvalid, field, format, args...)
}

func (v *validator) addErr(err error) {
	e, ok := errcode.As(err)
	if !ok {
		e = errcode.New(errcode.ValidInvalid, "%s", err.Error())
	}
	field, _ := e.Details["field"].(string)
	v.add(e.Code, field, "%s", e.Message)
}

func (v *validator) err() error {
	if v.first == nil {
		return nil
	}
	return v.first.WithDetail("problems", v.problems)
}

func (v *validator) workload(name string, w Workload) {
	at := "workloads." + name
	// Static, image and dockerfile builds bring their own way to run.
	ownRun := false
	if b := w.Build; b == nil {
		v.invalid(at+".build", "workload %s needs a build: kind is one of %s", name, strings.Join(BuildKinds(), ", "))
	} else {
		v.build(at+".build", b)
		ownRun = b.Kind == BuildStatic || b.Kind == BuildImage || b.Kind == BuildDockerfile
	}
	v.run(at+".run", w.Run, ownRun)
	v.env(at+".env", w.Env, v.d.Env)
	seen := map[string]bool{}
	for i, m := range w.Mounts {
		f := fmt.Sprintf("%s.mounts[%d]", at, i)
		if _, ok := v.d.Volumes[m.Volume]; !ok {
			v.add(errcode.ValidDanglingMount, f+".volume", "workload %s mounts the volume %q, which volumes does not declare", name, m.Volume)
		}
		switch {
		case !path.IsAbs(m.Path) || path.Clean(m.Path) != m.Path || m.Path == "/" || hasControl(m.Path):
			v.invalid(f+".path", "a mount path is an absolute, clean path other than / (for example /data), not %q", m.Path)
		case seen[m.Path]:
			v.invalid(f+".path", "workload %s mounts two volumes at %s", name, m.Path)
		}
		seen[m.Path] = true
	}
	deps := map[string]bool{}
	for i, dep := range w.DependsOn {
		f := fmt.Sprintf("%s.depends_on[%d]", at, i)
		switch _, ok := v.d.Workloads[dep]; {
		case !ok:
			v.invalid(f, "workload %s depends on %q, which is not a workload of this spec", name, dep)
		case deps[dep]:
			v.invalid(f, "workload %s names %s twice in depends_on", name, dep)
		}
		deps[dep] = true
	}
	if r := w.Resources; r != nil {
		for _, x := range []struct {
			field string
			n     int64
		}{{"cpu_millis", r.CPUMillis}, {"memory_bytes", r.MemoryBytes}, {"disk_bytes", r.DiskBytes}} {
			if x.n < 0 {
				v.invalid(at+".resources."+x.field, "%s cannot be negative (0 means no limit)", x.field)
			}
		}
	}
}

func (v *validator) build(at string, b *Build) {
	if !slices.Contains(BuildKinds(), b.Kind) {
		v.invalid(at+".kind", "build kind %q is not one of %s", b.Kind, strings.Join(BuildKinds(), ", "))
		return
	}
	switch {
	case b.Kind == BuildImage && strings.TrimSpace(b.Image) == "":
		v.invalid(at+".image", "a build of kind image names the image to run")
	case b.Kind != BuildImage && b.Image != "":
		v.invalid(at+".image", "image applies to builds of kind image only")
	case b.Image != "" && strings.ContainsFunc(b.Image, isSpaceOrControl):
		v.invalid(at+".image", "an image reference has no spaces")
	}
	switch {
	case b.Kind == BuildCommand && strings.TrimSpace(b.Command) == "":
		v.invalid(at+".command", "a build of kind command names the command that builds")
	case strings.ContainsRune(b.Command, 0):
		v.invalid(at+".command", "the build command contains a NUL byte")
	}
	if b.Dockerfile != "" && b.Kind != BuildDockerfile {
		v.invalid(at+".dockerfile", "dockerfile applies to builds of kind dockerfile only")
	}
	for _, p := range []struct{ field, value string }{{"context", b.Context}, {"dockerfile", b.Dockerfile}} {
		if p.value != "" && !isInside(p.value) {
			v.invalid(at+"."+p.field, "%s is a clean path inside the source, such as . or app/, not %q", p.field, p.value)
		}
	}
}

// isInside reports whether p is a relative, clean path that stays inside
// the source.
func isInside(p string) bool {
	c := path.Clean(p)
	return !path.IsAbs(p) && (c == p || c+"/" == p) && c != ".." && !strings.HasPrefix(c, "../") && !hasControl(p)
}

func (v *validator) run(at string, r Run, ownRun bool) {
	switch {
	case len(r.Command) == 0 && !ownRun:
		v.invalid(at+".command", "run.command is required (the program and its arguments) unless the build kind is static, image or dockerfile")
	case len(r.Command) > 0 && strings.TrimSpace(r.Command[0]) == "":
		v.invalid(at+".command[0]", "run.command starts with the program to run")
	}
	for i, arg := range r.Command {
		if strings.ContainsRune(arg, 0) {
			v.invalid(fmt.Sprintf("%s.command[%d]", at, i), "an argument cannot contain a NUL byte")
		}
	}
	if r.Port < 0 || r.Port > 65535 {
		v.invalid(at+".port", "port is 1 to 65535, or left out for a workload that serves no HTTP")
	}
	h := r.Health
	if h == nil {
		return
	}
	if !strings.HasPrefix(h.Path, "/") || strings.ContainsFunc(h.Path, isSpaceOrControl) {
		v.invalid(at+".health.path", "the health check path starts with / (for example /healthz)")
	}
	if r.Port == 0 {
		v.invalid(at+".health", "an HTTP health check needs run.port")
	}
	interval, timeout := time.Duration(h.Interval), time.Duration(h.Timeout)
	if interval < 0 {
		v.invalid(at+".health.interval", "the health check interval must be above 0")
	}
	if timeout < 0 {
		v.invalid(at+".health.timeout", "the health check timeout must be above 0")
	}
	if interval == 0 {
		interval = DefaultHealthInterval
	}
	if timeout == 0 {
		timeout = DefaultHealthTimeout
	}
	if timeout >= interval {
		v.invalid(at+".health.timeout", "the health check timeout (%s) must be shorter than its interval (%s)", timeout, interval)
	}
}

// env checks an env map; app is the app-level map a workload's map must not
// contradict (nil for the app-level map itself).
func (v *validator) env(at string, env, app map[string]EnvValue) {
	for _, name := range sortedKeys(env) {
		val, f := env[name], at+"."+name
		if !envNameRE.MatchString(name) {
			v.invalid(f, "%q is not a variable name: letters, digits and underscores, not starting with a digit", name)
		}
		switch val.Kind() {
		case "secret":
			if secrets.CheckKey(val.Secret) != nil {
				v.invalid(f+".secret", "%q is not a secret's key: letters, digits and underscores, not starting with a digit, at most %d characters", val.Secret, secrets.MaxKeyLen)
			}
		case "slot":
			if _, ok := v.d.Slots[val.Slot]; !ok {
				v.add(errcode.ValidDanglingSlotRef, f+".slot", "%s refers to the slot %q, which slots does not declare", name, val.Slot)
			}
			if !slotFieldRE.MatchString(val.Field) {
				v.invalid(f+".field", "%q is not a slot field: lower-case letters, digits and underscores (for example url)", val.Field)
			}
		default:
			if strings.ContainsRune(val.Value, 0) {
				v.invalid(f, "the value of %s contains a NUL byte", name)
			}
		}
		if outer, ok := app[name]; ok && outer != val {
			v.add(errcode.ValidEnvAmbiguous, f, "%s is set for the whole app and, differently, for this workload", name)
		}
	}
}

// Primary returns the name of the primary workload: the one marked
// primary, or the only workload when there is one and it does not say
// primary at all (an explicit primary: false names no primary). It returns
// "" when the document does not have exactly one.
func (d Document) Primary() string {
	var marked []string
	for name, w := range d.Workloads {
		if w.IsPrimary() {
			marked = append(marked, name)
		}
	}
	switch {
	case len(marked) == 1:
		return marked[0]
	case len(marked) == 0 && len(d.Workloads) == 1:
		for name, w := range d.Workloads {
			if w.Primary == nil {
				return name
			}
		}
	}
	return ""
}

func (v *validator) primary() {
	if v.d.Primary() != "" {
		return
	}
	var marked []string
	for _, name := range sortedKeys(v.d.Workloads) {
		if v.d.Workloads[name].IsPrimary() {
			marked = append(marked, name)
		}
	}
	switch {
	case len(v.d.Workloads) == 0:
		v.add(errcode.ValidPrimaryWorkload, "workloads", "a spec declares at least one workload, and exactly one is primary")
	case len(marked) == 0 && len(v.d.Workloads) == 1:
		name := sortedKeys(v.d.Workloads)[0]
		v.add(errcode.ValidPrimaryWorkload, "workloads."+name+".primary", "the only workload, %s, says primary: false, so the spec names no primary: remove the field or set it to true", name)
	case len(marked) == 0:
		v.add(errcode.ValidPrimaryWorkload, "workloads", "none of the %d workloads is primary: mark exactly one with primary: true", len(v.d.Workloads))
	default:
		v.add(errcode.ValidPrimaryWorkload, "workloads."+marked[1]+".primary", "%d workloads are primary (%s); exactly one may be", len(marked), strings.Join(marked, ", "))
	}
}

// cycles reports the first dependency cycle, walking workloads by name.
func (v *validator) cycles() {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(name string) []string
	visit = func(name string) []string {
		state[name] = onPath
		stack = append(stack, name)
		for _, dep := range v.d.Workloads[name].DependsOn {
			if _, ok := v.d.Workloads[dep]; !ok {
				continue // reported as VALID_INVALID
			}
			switch state[dep] {
			case onPath:
				i := slices.Index(stack, dep)
				return append(slices.Clone(stack[i:]), dep)
			case unseen:
				if c := visit(dep); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[name] = done
		return nil
	}
	for _, name := range sortedKeys(v.d.Workloads) {
		if state[name] != unseen {
			continue
		}
		if c := visit(name); c != nil {
			leads := v.first == nil
			v.add(errcode.ValidDependencyCycle, "workloads."+c[0]+".depends_on", "workloads depend on each other in a cycle: %s", strings.Join(c, " -> "))
			if leads {
				v.first.WithDetail("cycle", c)
			}
			return
		}
	}
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }
