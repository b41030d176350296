package detect

import (
	"go/parser"
	"go/token"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/svchost/svc/internal/spec"
)

// goDetector bids on a Go module with a main package at the root or in
// cmd/<name>. Scores: 75 when the code says its port (PORT with a
// fallback, a port flag, which the run command gives $PORT, or a listen
// address), 65 when the port is asked. A program that shows none of these
// is asked its port and its run command too.
type goDetector struct{}

var _ Detector = goDetector{}

// maxGoScan bounds how many Go files are read looking for the port.
const maxGoScan = 200

func (goDetector) Bid(t *Tree) (Bid, bool) {
	mod, ok := t.Read("go.mod")
	if !ok {
		return Bid{}, false
	}
	b := Bid{Detector: "go", Score: 65}
	module := goModulePath(string(mod))
	b.evidence("go.mod", "Go module %s", module)
	mainDir, ok := goMainPackage(t, module)
	if !ok {
		return Bid{}, false
	}
	target := "."
	if mainDir != "." {
		target = "./" + mainDir
	}
	b.evidence(mainDir, "main package")
	w := spec.Workload{
		Primary: spec.Bool(true),
		Build:   &spec.Build{Kind: spec.BuildGo, Context: ".", Command: "go build -o app " + target},
		Run:     spec.Run{Command: []string{"./app"}},
	}
	env := envSources{dbType: driverSlotType(goRequires(string(mod)))}
	env.loadEnvExample(t)
	port := scanGoPort(t, mainDir, &env)
	fixed := false // the code listens on one port: PORT means nothing to it
	switch {
	case port.env && port.fallback > 0:
		w.Run.Port = port.fallback
		b.Score = 75
		b.evidence(port.where, "reads PORT (falling back to %d)", port.fallback)
	case port.env:
		w.Run.Port = b.askPort(t, "Port the app listens on (it reads PORT)", 8080)
		b.evidence(port.where, "reads PORT")
	case port.flag != nil:
		f := port.flag
		w.Run.Port = f.port
		if w.Run.Port < 1024 {
			w.Run.Port = 8080 // svc chooses the port: an unprivileged one
		}
		w.Run.Command = f.command("./app")
		b.Score = 75
		b.evidence(f.where, "takes its port from the flag -%s (%s), not from PORT: the run command passes $PORT to it", f.name, f.describe())
	case port.literal > 0:
		w.Run.Port, fixed = port.literal, true
		b.Score = 75
		b.evidence(port.where, "listens on port %d", port.literal)
	default:
		w.Run.Port = b.askPort(t, "Port the app listens on (svc gives it in PORT)", 8080)
		w.Run.Command = goAskCommand(t, &b)
	}
	if !fixed {
		w.Env = map[string]spec.EnvValue{"PORT": spec.Literal(strconv.Itoa(w.Run.Port))}
	}
	b.Proposal = spec.Document{Workloads: map[string]spec.Workload{"web": w}}
	env.applyEnv(t, &b, "web", "PORT")
	return b, true
}

func goModulePath(mod string) string {
	for line := range strings.Lines(mod) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// goRequires lists the module paths go.mod requires.
func goRequires(mod string) []string {
	var out []string
	block := false
	for line := range strings.Lines(mod) {
		line, _, _ = strings.Cut(line, "//")
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case block && f[0] == ")":
			block = false
		case block:
			out = append(out, f[0])
		case f[0] == "require" && len(f) >= 2 && f[1] == "(":
			block = true
		case f[0] == "require" && len(f) >= 3:
			out = append(out, f[1])
		}
	}
	return out
}

// goMainPackage returns the directory of the main package to build: the
// root's, else cmd/<module's last element>, cmd/server, cmd/web, cmd/api,
// cmd/app, else the first cmd/<name> in order.
func goMainPackage(t *Tree, module string) (string, bool) {
	if isGoMain(t, ".") {
		return ".", true
	}
	var cands []string
	for _, f := range t.Files() {
		dir := path.Dir(f)
		if strings.HasPrefix(f, "cmd/") && strings.Count(f, "/") == 2 && strings.HasSuffix(f, ".go") && (len(cands) == 0 || cands[len(cands)-1] != dir) {
			cands = append(cands, dir)
		}
	}
	var mains []string
	for _, dir := range cands {
		if isGoMain(t, dir) {
			mains = append(mains, dir)
		}
	}
	if len(mains) == 0 {
		return "", false
	}
	for _, want := range []string{path.Base(module), "server", "web", "api", "app"} {
		for _, m := range mains {
			if path.Base(m) == want {
				return m, true
			}
		}
	}
	return mains[0], true
}

// isGoMain reports whether a non-test Go file of dir is in package main.
func isGoMain(t *Tree, dir string) bool {
	for _, f := range t.filesIn(dir) {
		if !strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, ok := t.Read(f)
		if !ok {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, src, parser.PackageClauseOnly)
		if err == nil && file.Name.Name == "main" {
			return true
		}
	}
	return false
}

// goPort is what the code says about its port.
type goPort struct {
	literal  int         // a listen address with a port
	env      bool        // reads PORT
	fallback int         // the port used when PORT is unset
	where    string      // the file that says it
	flag     *goPortFlag // a command-line flag that sets it
}

var (
	goListenRE   = regexp.MustCompile(`(?:ListenAndServe(?:TLS)?|Listen|\.Run|\.Start|Addr\s*:)\s*\(?\s*(?:"tcp[46]?"\s*,\s*)?"[\w.\-\[\]:]*?:(\d{1,5})"`)
	goPortEnvRE  = regexp.MustCompile(`os\.(?:Getenv|LookupEnv)\(\s*"PORT"\s*\)`)
	goFallbackRE = regexp.MustCompile(`(?i)port\s*(?:=|:=)\s*"(\d{2,5})"|port\s*(?:=|:=)\s*(\d{2,5})\b|"(?:0\.0\.0\.0)?:(\d{2,5})"`)
)

// scanGoPort reads the main package first, then the module's other Go
// files, for a listen address or a PORT variable; it records the
// variables read on the way.
func scanGoPort(t *Tree, mainDir string, env *envSources) goPort {
	files := t.filesIn(mainDir)
	for _, f := range t.filesUnder(".", maxGoScan, ".go") {
		if path.Dir(f) != mainDir {
			files = append(files, f)
		}
	}
	var found goPort
	n := 0
	for _, f := range files {
		if !strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") {
			continue
		}
		if n++; n > maxGoScan {
			break
		}
		src, ok := t.Read(f)
		if !ok {
			continue
		}
		env.scanEnvReads(f, src)
		if fl, ok := scanGoPortFlag(f, src); ok && (found.flag == nil || fl.rank < found.flag.rank) {
			found.flag = &fl
		}
		if found.literal == 0 {
			if m := goListenRE.FindSubmatch(src); m != nil {
				if p, err := strconv.Atoi(string(m[1])); err == nil && p >= 1 && p <= 65535 {
					found.literal, found.where = p, f
				}
			}
		}
		if !found.env && goPortEnvRE.Match(src) {
			found.env, found.where = true, f
			for _, m := range goFallbackRE.FindAllSubmatch(src, -1) {
				s := string(m[1]) + string(m[2]) + string(m[3])
				if p, err := strconv.Atoi(s); err == nil && p >= 1 && p <= 65535 {
					found.fallback = p
					break
				}
			}
		}
	}
	if found.env {
		// A listen address next to PORT is its fallback, not a fixed port;
		// a flag's default may read PORT.
		if found.fallback == 0 {
			found.fallback = found.literal
		}
		found.literal, found.flag = 0, nil
	}
	return found
}
