package detect

import (
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/svchost/svc/internal/spec"
)

// dockerfileDetector bids on a Dockerfile: the image it builds is how the
// app runs. Scores: 80 for Dockerfile at the root, 70 for one found in a
// subdirectory or under another name (Dockerfile.prod, web.Dockerfile).
// The port is the first EXPOSE; the image's own CMD runs it.
type dockerfileDetector struct{}

var _ Detector = dockerfileDetector{}

func (dockerfileDetector) Bid(t *Tree) (Bid, bool) {
	p, ok := findDockerfile(t)
	if !ok {
		return Bid{}, false
	}
	src, ok := t.Read(p)
	if !ok {
		return Bid{}, false
	}
	b := Bid{Detector: "dockerfile", Score: 80}
	dir, file := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	build := &spec.Build{Kind: spec.BuildDockerfile, Context: dir}
	if file != "Dockerfile" {
		build.Dockerfile = file
	}
	if p != "Dockerfile" {
		b.Score = 70
		b.evidence(p, "a Dockerfile outside the root (build context %s)", dir)
	} else {
		b.evidence(p, "a Dockerfile at the root")
	}
	w := spec.Workload{Primary: spec.Bool(true), Build: build}
	if port, ok := dockerfileExpose(string(src)); ok {
		w.Run.Port = port
		b.evidence(p, "EXPOSE %d", port)
	} else {
		w.Run.Port = b.askPort(t, "Port the image listens on (the Dockerfile has no EXPOSE)", 8080)
	}
	b.Proposal = spec.Document{Workloads: map[string]spec.Workload{"web": w}}
	var env envSources
	env.loadEnvExample(t)
	env.applyEnv(t, &b, "web", "")
	return b, true
}

// dockerfileSkipDirs hold Dockerfiles that are not the app's.
var dockerfileSkipDirs = []string{"example", "examples", "test", "tests", "testdata", "fixtures", "docs", ".github", ".devcontainer"}

// findDockerfile returns the Dockerfile to build: the root's, else another
// name at the root, else the shallowest one at most two directories down
// (outside examples, tests and docs), "Dockerfile" before its variants,
// then in path order.
func findDockerfile(t *Tree) (string, bool) {
	if t.Has("Dockerfile") {
		return "Dockerfile", true
	}
	best, bestDepth := "", 1<<30
	for _, f := range t.Files() {
		if !isDockerfileName(path.Base(f)) || strings.ContainsFunc(f, isControl) {
			continue
		}
		depth := strings.Count(f, "/")
		if depth > 2 || slices.ContainsFunc(strings.Split(path.Dir(f), "/"), func(d string) bool { return slices.Contains(dockerfileSkipDirs, d) }) {
			continue
		}
		// At the same depth "Dockerfile" beats its variants.
		if depth < bestDepth || (depth == bestDepth && path.Base(f) == "Dockerfile" && path.Base(best) != "Dockerfile") {
			best, bestDepth = f, depth
		}
	}
	return best, best != ""
}

func isDockerfileName(n string) bool {
	return n == "Dockerfile" || strings.HasPrefix(n, "Dockerfile.") || strings.HasSuffix(n, ".Dockerfile") || strings.HasSuffix(n, ".dockerfile")
}

var dockerVarRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// dockerfileExpose returns the first port an EXPOSE instruction names,
// expanding ARG and ENV values declared before it.
func dockerfileExpose(src string) (int, bool) {
	vars := map[string]string{}
	expand := func(s string) string {
		return dockerVarRE.ReplaceAllStringFunc(s, func(m string) string {
			sm := dockerVarRE.FindStringSubmatch(m)
			name := sm[1] + sm[3]
			if v, ok := vars[name]; ok && v != "" {
				return v
			}
			return sm[2]
		})
	}
	for _, line := range dockerfileInstructions(src) {
		instr, args, _ := strings.Cut(line, " ")
		args = strings.TrimSpace(args)
		switch strings.ToUpper(instr) {
		case "ARG", "ENV":
			fields := strings.Fields(args)
			if len(fields) == 0 {
				continue
			}
			if !strings.Contains(fields[0], "=") && strings.EqualFold(instr, "ENV") && len(fields) > 1 {
				vars[fields[0]] = strings.Trim(strings.Join(fields[1:], " "), `"'`)
				continue
			}
			for _, f := range fields {
				k, v, _ := strings.Cut(f, "=")
				if _, exists := vars[k]; !exists || v != "" {
					vars[k] = strings.Trim(expand(v), `"'`)
				}
			}
		case "EXPOSE":
			for _, f := range strings.Fields(expand(args)) {
				f, _, _ = strings.Cut(f, "/")
				f, _, _ = strings.Cut(f, "-")
				if n, err := strconv.Atoi(f); err == nil && n >= 1 && n <= 65535 {
					return n, true
				}
			}
		}
	}
	return 0, false
}

// dockerfileInstructions returns the instructions of a Dockerfile, one a
// line: comments dropped, continuation lines joined.
func dockerfileInstructions(src string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.Lines(src) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		if rest, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(rest)
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(line)
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, strings.Join(strings.Fields(s), " "))
		}
		cur.Reset()
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, strings.Join(strings.Fields(s), " "))
	}
	return out
}
