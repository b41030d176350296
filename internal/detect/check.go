package detect

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/svchost/svc/internal/spec"
)

// nameRE is the shape of workload, volume and slot names.
var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`)

// envNameRE is the shape of an environment variable name (and of a
// secret's key, which is at most maxSecretKey long).
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

const maxSecretKey = 128

// validEnvName reports whether name can be a variable of a proposal, and
// the key of a secret.
func validEnvName(name string) bool {
	return len(name) <= maxSecretKey && envNameRE.MatchString(name)
}

// sanitizeName turns s into a name of nameRE's shape, or fallback when
// nothing of s is left.
func sanitizeName(s, fallback string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9' && b.Len() > 0:
			b.WriteRune(r)
			dash = false
		case b.Len() > 0 && !dash:
			b.WriteByte('-')
			dash = true
		}
	}
	n := strings.TrimRight(b.String(), "-")
	if len(n) > 31 {
		n = strings.TrimRight(n[:31], "-")
	}
	if n == "" {
		return fallback
	}
	return n
}

// uniqueName returns name, or name with a number appended, so that it is
// not in taken; it stays within nameRE's length.
func uniqueName(name string, taken func(string) bool) string {
	if !taken(name) {
		return name
	}
	for i := 2; ; i++ {
		suffix := "-" + strconv.Itoa(i)
		base := name
		if len(base)+len(suffix) > 31 {
			base = strings.TrimRight(base[:31-len(suffix)], "-")
		}
		if n := base + suffix; !taken(n) {
			return n
		}
	}
}

// checkDocument is the sanity every proposal must pass before it is
// offered: exactly one primary workload (marked), names of the right
// shape, ports in range, known build kinds, a static workload on port 0,
// mounts and slot references that resolve, dependencies on declared
// workloads without a cycle; then spec.Validate, the authority.
func checkDocument(d spec.Document) error {
	if err := checkShape(d); err != nil {
		return err
	}
	return spec.Validate(d)
}

func checkShape(d spec.Document) error {
	if len(d.Workloads) == 0 {
		return errors.New("no workload")
	}
	primaries := 0
	for _, name := range sortedKeys(d.Workloads) {
		w := d.Workloads[name]
		if !nameRE.MatchString(name) {
			return fmt.Errorf("workload name %q", name)
		}
		if w.IsPrimary() {
			primaries++
		}
		if w.Run.Port < 0 || w.Run.Port > 65535 {
			return fmt.Errorf("workload %s: port %d", name, w.Run.Port)
		}
		if w.Build != nil {
			if !slices.Contains(spec.BuildKinds(), w.Build.Kind) {
				return fmt.Errorf("workload %s: build kind %q", name, w.Build.Kind)
			}
			switch w.Build.Kind {
			case spec.BuildGo, spec.BuildNode, spec.BuildPython:
				if len(w.Run.Command) == 0 {
					return fmt.Errorf("workload %s: no run command", name)
				}
			case spec.BuildImage:
				if w.Build.Image == "" {
					return fmt.Errorf("workload %s: image build without an image", name)
				}
			case spec.BuildStatic:
				if w.Run.Port != 0 {
					return fmt.Errorf("workload %s: a static workload has port 0", name)
				}
			}
		} else if len(w.Run.Command) == 0 {
			return fmt.Errorf("workload %s: neither build nor run command", name)
		}
		for _, arg := range w.Run.Command {
			if strings.ContainsRune(arg, 0) {
				return fmt.Errorf("workload %s: NUL in run command", name)
			}
		}
		if err := checkEnv(d, w.Env); err != nil {
			return fmt.Errorf("workload %s: %w", name, err)
		}
		for _, m := range w.Mounts {
			if _, ok := d.Volumes[m.Volume]; !ok {
				return fmt.Errorf("workload %s: mount of undeclared volume %q", name, m.Volume)
			}
			if !strings.HasPrefix(m.Path, "/") {
				return fmt.Errorf("workload %s: mount path %q", name, m.Path)
			}
		}
		for _, dep := range w.DependsOn {
			if _, ok := d.Workloads[dep]; !ok || dep == name {
				return fmt.Errorf("workload %s: depends on %q", name, dep)
			}
		}
	}
	if primaries != 1 {
		return fmt.Errorf("%d primary workloads", primaries)
	}
	if err := checkEnv(d, d.Env); err != nil {
		return err
	}
	for _, name := range sortedKeys(d.Volumes) {
		if !nameRE.MatchString(name) {
			return fmt.Errorf("volume name %q", name)
		}
	}
	for _, name := range sortedKeys(d.Slots) {
		if !nameRE.MatchString(name) || d.Slots[name].Type == "" {
			return fmt.Errorf("slot %q", name)
		}
	}
	return checkCycles(d)
}

func checkEnv(d spec.Document, env map[string]spec.EnvValue) error {
	for _, k := range sortedKeys(env) {
		v := env[k]
		if !envNameRE.MatchString(k) {
			return fmt.Errorf("variable name %q", k)
		}
		switch v.Kind() {
		case "slot":
			if _, ok := d.Slots[v.Slot]; !ok || v.Field == "" {
				return fmt.Errorf("variable %s: undeclared slot %q", k, v.Slot)
			}
		case "secret":
			if !envNameRE.MatchString(v.Secret) || len(v.Secret) > maxSecretKey {
				return fmt.Errorf("variable %s: secret name %q", k, v.Secret)
			}
		}
	}
	return nil
}

func checkCycles(d spec.Document) error {
	const (
		unseen = iota
		visiting
		done
	)
	state := map[string]int{}
	var visit func(string) error
	visit = func(n string) error {
		switch state[n] {
		case visiting:
			return fmt.Errorf("dependency cycle through %s", n)
		case done:
			return nil
		}
		state[n] = visiting
		for _, dep := range d.Workloads[n].DependsOn {
			if err := visit(dep); err != nil {
				return err
			}
		}
		state[n] = done
		return nil
	}
	for _, n := range sortedKeys(d.Workloads) {
		if err := visit(n); err != nil {
			return err
		}
	}
	return nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
