package detect

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/svchost/svc/internal/spec"
)

// procfileDetector bids on a Procfile: its web process is the primary
// workload and every other process a worker. Scores: 85 with a web
// process, 40 without (the first process is made primary). The build
// comes from the language markers beside it (Python, Node.js, Go, Ruby).
type procfileDetector struct{}

var _ Detector = procfileDetector{}

var (
	procLineRE = regexp.MustCompile(`^([A-Za-z0-9_-]+)\s*:\s*(.+)$`)
	// procPortVarRE matches $PORT and ${PORT}.
	procPortVarRE = regexp.MustCompile(`\$(?:PORT\b|\{PORT\})`)
	// procOtherVarRE matches any other variable reference.
	procOtherVarRE = regexp.MustCompile(`\$(?:\{?[A-Za-z_][A-Za-z0-9_]*\}?)`)
	// procPortFlagRE finds a port given on the command line.
	procPortFlagRE = regexp.MustCompile(`(?:--port[ =]|-p |--bind[ =]\S*:|-b \S*:|0\.0\.0\.0:|--server\.port[ =])(\d{2,5})\b`)
)

func (procfileDetector) Bid(t *Tree) (Bid, bool) {
	src, ok := t.Read("Procfile")
	if !ok {
		return Bid{}, false
	}
	type proc struct{ name, cmd string }
	var procs []proc
	seen := map[string]bool{}
	for line := range strings.Lines(string(src)) {
		m := procLineRE.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil || seen[m[1]] || strings.TrimSpace(m[2]) == "" || strings.ContainsFunc(m[2], isControl) {
			continue
		}
		seen[m[1]] = true
		procs = append(procs, proc{m[1], strings.TrimSpace(m[2])})
	}
	b := Bid{Detector: "procfile", Score: 85}
	build := procfileBuild(t, &b)
	if build == nil {
		// No language markers: the commands run the source as it is, which
		// the python and node builds do without a build command.
		for _, p := range procs {
			switch w, _, _ := strings.Cut(p.cmd, " "); {
			case strings.HasPrefix(w, "python"):
				build = &spec.Build{Kind: spec.BuildPython, Context: "."}
			case w == "node":
				build = &spec.Build{Kind: spec.BuildNode, Context: "."}
			}
			if build != nil {
				break
			}
		}
		if build == nil {
			return Bid{}, false
		}
	}
	d := spec.Document{Workloads: map[string]spec.Workload{}}
	primary := ""
	var order []string
	for _, p := range procs {
		if p.name == "release" {
			b.evidence("Procfile", "release process %q is a one-off step, not a workload", p.cmd)
			continue
		}
		name := uniqueName(sanitizeName(p.name, "worker"), func(n string) bool { _, ok := d.Workloads[n]; return ok })
		w := spec.Workload{Build: build}
		if p.name == "web" && primary == "" {
			primary, w.Primary = name, spec.Bool(true)
			port := 0
			if m := procPortFlagRE.FindStringSubmatch(p.cmd); m != nil && !procPortVarRE.MatchString(p.cmd) {
				port, _ = strconv.Atoi(m[1])
			}
			if port < 1 || port > 65535 {
				why := "the web process does not say"
				if procPortVarRE.MatchString(p.cmd) {
					why = "the web process reads $PORT"
				}
				port = b.askPort(t, "Port the web process listens on ("+why+")", 8080)
			}
			w.Run.Port = port
			w.Env = map[string]spec.EnvValue{"PORT": spec.Literal(strconv.Itoa(port))}
			b.evidence("Procfile", "web process: %s", p.cmd)
		} else {
			b.evidence("Procfile", "%s process: %s", p.name, p.cmd)
		}
		w.Run.Command = procCommand(p.cmd, w.Run.Port)
		d.Workloads[name] = w
		order = append(order, name)
	}
	if len(d.Workloads) == 0 {
		return Bid{}, false
	}
	if primary == "" {
		b.Score = 40
		primary = order[0]
		w := d.Workloads[primary]
		w.Primary = spec.Bool(true)
		d.Workloads[primary] = w
		b.evidence("Procfile", "no web process: %s is made primary", primary)
	}
	b.Proposal = d
	return b, true
}

// procCommand splits a process's command into words. $PORT is replaced by
// the port; a command that needs a shell (operators, other variables)
// runs under sh -c, which also expands $PORT from the environment.
func procCommand(cmd string, port int) []string {
	if !procOtherVarRE.MatchString(procPortVarRE.ReplaceAllString(cmd, "")) {
		expanded := cmd
		if port > 0 {
			expanded = procPortVarRE.ReplaceAllString(cmd, strconv.Itoa(port))
		}
		if words, err := splitWords(expanded); err == nil && len(words) > 0 && strings.TrimSpace(words[0]) != "" && !procPortVarRE.MatchString(expanded) {
			return words
		}
	}
	return []string{"sh", "-c", cmd}
}

// procfileBuild is the build of a Procfile's processes, from the language
// markers of the tree; nil when there are none.
func procfileBuild(t *Tree, b *Bid) *spec.Build {
	switch {
	case t.Has("requirements.txt") || t.Has("pyproject.toml") || t.Has("Pipfile"):
		var scratch Bid
		_, install := pythonDependencies(t, &scratch)
		b.Evidence = append(b.Evidence, scratch.Evidence...)
		return &spec.Build{Kind: spec.BuildPython, Context: ".", Command: install}
	case t.Has("package.json"):
		src, _ := t.Read("package.json")
		pkg, _ := parsePackageJSON(src)
		pm, _ := nodePackageManager(t, pkg)
		cmd := pm.install
		if _, ok := pkg.Scripts["build"]; ok {
			cmd += " && " + pm.run + " build"
		}
		b.evidence("package.json", "Node.js build")
		return &spec.Build{Kind: spec.BuildNode, Context: ".", Command: cmd}
	case t.Has("go.mod"):
		b.evidence("go.mod", "Go build of every main package into bin/")
		return &spec.Build{Kind: spec.BuildGo, Context: ".", Command: "go build -o bin/ ./..."}
	case t.Has("Gemfile"):
		b.evidence("Gemfile", "Ruby build")
		return &spec.Build{Kind: spec.BuildCommand, Context: ".", Command: "bundle install"}
	}
	return nil
}
