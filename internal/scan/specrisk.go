package scan

import (
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/svchost/svc/internal/spec"
)

// SpecRisks returns the spec document's own risks, one finding per
// workload and risk, each titled with its remedy:
//
//   - a workload that serves (run.port) without a health check (low): a
//     broken app keeps receiving traffic;
//   - a workload with neither a CPU nor a memory limit (medium): one app can
//     starve the host (a static site, served by the runtime, runs nothing);
//   - a run command that hands a string to a shell (sh -c, bash -lc, …)
//     (medium): what the shell expands is code;
//   - a serving workload told to listen on a loopback address (low): the
//     edge cannot reach it; seen in the command's arguments (--host
//     127.0.0.1, -b localhost:8000, --bind=[::1]) and in listen-address
//     environment variables (HOST, BIND, LISTEN_ADDR, …) given as literals.
//
// It is pure: the findings depend on the document alone.
func SpecRisks(d spec.Document) []Finding {
	var out []Finding
	for _, name := range slices.Sorted(maps.Keys(d.Workloads)) {
		w := d.Workloads[name]
		serves := w.Run.Port > 0
		if serves && (w.Run.Health == nil || w.Run.Health.Path == "") {
			out = append(out, specFinding("no-health-check", name, Low,
				"Workload "+name+" serves on a port without a health check: set run.health.path to a path that answers 200 when it works"))
		}
		static := w.Build != nil && w.Build.Kind == spec.BuildStatic
		if !static && (w.Resources == nil || (w.Resources.CPUMillis == 0 && w.Resources.MemoryBytes == 0)) {
			out = append(out, specFinding("no-resource-limits", name, Medium,
				"Workload "+name+" has no resource limits: set resources.memory_bytes and resources.cpu_millis"))
		}
		if runsShell(w.Run.Command) {
			out = append(out, specFinding("shell-command", name, Medium,
				"Workload "+name+" runs its command through a shell ("+path.Base(w.Run.Command[0])+" -c): name the program and its arguments in run.command"))
		}
		if serves && listensOnLoopback(w.Run.Command, d.Env, w.Env) {
			out = append(out, specFinding("loopback-listen", name, Low,
				"Workload "+name+" is told to listen on a loopback address: listen on every interface (0.0.0.0) at $PORT"))
		}
	}
	return out
}

func specFinding(rule, workload, severity, title string) Finding {
	return Finding{ID: "spec:" + rule + ":" + workload, Severity: severity, Title: title, Fixable: true}
}

var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ash": true, "ksh": true, "mksh": true, "fish": true}

// runsShell reports whether a command is a shell given a command string:
// a shell (or busybox/env running one) with a -c flag, alone or among
// others (-c, -ec, -lc).
func runsShell(cmd []string) bool {
	for len(cmd) > 0 && (path.Base(cmd[0]) == "env" || path.Base(cmd[0]) == "busybox") {
		cmd = cmd[1:]
	}
	if len(cmd) == 0 || !shells[path.Base(cmd[0])] {
		return false
	}
	for _, a := range cmd[1:] {
		if a == "--" || !strings.HasPrefix(a, "-") {
			return false // the options end: a script file, not a string
		}
		if !strings.HasPrefix(a, "--") && strings.Contains(a[1:], "c") {
			return true
		}
	}
	return false
}

var loopbackRE = regexp.MustCompile(`^(?:localhost|127(?:\.\d{1,3}){3}|::1|\[::1\])(?::\d+)?$`)

var listenFlags = map[string]bool{"host": true, "bind": true, "listen": true, "addr": true, "address": true, "b": true, "http": true, "listen-address": true, "http-addr": true}

var listenEnv = regexp.MustCompile(`^(?:HOST|ADDR|ADDRESS|(?:SERVER|APP|HTTP|WEB|LISTEN|BIND)_HOST|(?:[A-Z0-9]+_)*(?:BIND|LISTEN)(?:_ADDR|_ADDRESS|_HOST)?)$`)

// listensOnLoopback reports whether the command's arguments or the literal
// environment name a loopback address to listen on.
func listensOnLoopback(cmd []string, envs ...map[string]spec.EnvValue) bool {
	for i, a := range cmd {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		flag, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !listenFlags[strings.ToLower(flag)] {
			continue
		}
		if !hasVal && i+1 < len(cmd) {
			val = cmd[i+1]
		}
		if loopbackRE.MatchString(val) {
			return true
		}
	}
	for _, env := range envs {
		for k, v := range env {
			if v.Kind() == "literal" && listenEnv.MatchString(strings.ToUpper(k)) && loopbackRE.MatchString(strings.TrimSpace(v.Value)) {
				return true
			}
		}
	}
	return false
}
