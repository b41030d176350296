package detect

import (
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/svchost/svc/internal/spec"
)

// pythonDetector bids on requirements.txt, pyproject.toml (PEP 621 or
// Poetry), Pipfile, or a root script serving HTTP with the standard
// library. Scores: 78 for Django (manage.py), 75 for Flask, FastAPI and
// Streamlit, 55 for a standard-library server, 35 for an entry script of
// no known framework (the port is asked).
type pythonDetector struct{}

var _ Detector = pythonDetector{}

// pythonEntries are the scripts an app conventionally starts from.
var pythonEntries = []string{"app.py", "main.py", "server.py", "wsgi.py", "application.py", "run.py", "api.py", "asgi.py", "app/__init__.py", "app/main.py", "src/main.py", "src/app.py", "src/app/main.py"}

func (pythonDetector) Bid(t *Tree) (Bid, bool) {
	b := Bid{Detector: "python"}
	deps, install := pythonDependencies(t, &b)
	has := func(d string) bool { return slices.Contains(deps, d) }
	env := envSources{dbType: driverSlotType(deps)}
	env.loadEnvExample(t)
	w := spec.Workload{Primary: spec.Bool(true), Build: &spec.Build{Kind: spec.BuildPython, Context: ".", Command: install}}
	switch {
	case has("django") && t.Has("manage.py"):
		b.Score = 78
		proj := djangoProject(t)
		b.evidence("manage.py", "Django project %s", proj)
		w.Run.Port = 8000
		if has("gunicorn") {
			w.Run.Command = []string{"gunicorn", proj + ".wsgi", "--bind", "0.0.0.0:8000"}
		} else {
			w.Run.Command = []string{"python", "manage.py", "runserver", "0.0.0.0:8000"}
		}
		for _, f := range t.filesUnder(proj, 20, ".py") {
			if strings.Contains(f, "settings") {
				if src, ok := t.Read(f); ok {
					env.scanEnvReads(f, src)
				}
			}
		}
	case has("fastapi") || has("starlette"):
		file, app, ok := pythonFindApp(t, &env, pyFastAPIRE)
		if !ok {
			return pythonGeneric(t, b, w, &env)
		}
		b.Score = 75
		module, appDir := pythonModule(file)
		b.evidence(file, "FastAPI app %s", app)
		w.Run.Port = 8000
		w.Run.Command = []string{"uvicorn", module + ":" + app, "--host", "0.0.0.0", "--port", "8000"}
		if appDir != "" {
			w.Run.Command = append(w.Run.Command, "--app-dir", appDir)
		}
		if !has("uvicorn") && !has("gunicorn") {
			b.evidence(file, "uvicorn is not among the dependencies; fastapi[standard] brings it")
		}
	case has("flask"):
		file, app, ok := pythonFindApp(t, &env, pyFlaskRE)
		if !ok {
			src := ""
			for _, f := range pythonEntries {
				if s := t.ReadString(f); strings.Contains(s, "def create_app") {
					file, src, app = f, s, "create_app()"
					break
				}
			}
			if src == "" {
				return pythonGeneric(t, b, w, &env)
			}
		}
		b.Score = 75
		module, _ := pythonModule(file)
		b.evidence(file, "Flask app %s", app)
		w.Run.Port = 5000
		if has("gunicorn") {
			w.Run.Command = []string{"gunicorn", module + ":" + app, "--bind", "0.0.0.0:5000"}
		} else {
			w.Run.Command = []string{"flask", "run", "--host", "0.0.0.0", "--port", "5000"}
			w.Env = map[string]spec.EnvValue{"FLASK_APP": spec.Literal(module + ":" + app)}
		}
	case has("streamlit"):
		file, ok := "", false
		for _, f := range append([]string{"streamlit_app.py", "Home.py"}, pythonEntries...) {
			if strings.Contains(t.ReadString(f), "import streamlit") {
				file, ok = f, true
				break
			}
		}
		if !ok {
			return pythonGeneric(t, b, w, &env)
		}
		b.Score = 75
		b.evidence(file, "Streamlit app")
		w.Run.Port = 8501
		w.Run.Command = []string{"streamlit", "run", file, "--server.port", "8501", "--server.address", "0.0.0.0"}
	default:
		return pythonGeneric(t, b, w, &env)
	}
	b.Proposal = spec.Document{Workloads: map[string]spec.Workload{"web": w}}
	env.applyEnv(t, &b, "web", "PORT")
	return b, true
}

// pythonGeneric bids on an entry script: a standard-library server (its
// port read from the code) or, weaker, any script with dependencies.
func pythonGeneric(t *Tree, b Bid, w spec.Workload, env *envSources) (Bid, bool) {
	markers := len(b.Evidence) > 0
	entry, stdlib := "", false
	for _, f := range pythonEntries {
		src, ok := t.Read(f)
		if !ok {
			continue
		}
		env.scanEnvReads(f, src)
		if pyStdlibServerRE.Match(src) {
			entry, stdlib = f, true
			break
		}
		if entry == "" {
			entry = f
		}
	}
	if entry == "" || (!stdlib && !markers) {
		return Bid{}, false
	}
	w.Run.Command = []string{"python", entry}
	src, _ := t.Read(entry)
	port := scanPythonPort(src)
	if stdlib {
		b.Score = 55
		b.evidence(entry, "serves HTTP with the standard library")
	} else {
		b.Score = 35
		b.evidence(entry, "entry script of no known framework")
	}
	switch {
	case port.env && port.fallback > 0:
		w.Run.Port = port.fallback
		w.Env = map[string]spec.EnvValue{"PORT": spec.Literal(strconv.Itoa(port.fallback))}
		b.evidence(entry, "reads PORT (falling back to %d)", port.fallback)
	case port.literal > 0:
		w.Run.Port = port.literal
		b.evidence(entry, "listens on port %d", port.literal)
	default:
		why := "the code does not say"
		if port.env {
			why = "it reads PORT"
		}
		w.Run.Port = b.askPort(t, "Port the app listens on ("+why+")", 8000)
		w.Env = map[string]spec.EnvValue{"PORT": spec.Literal(strconv.Itoa(w.Run.Port))}
	}
	b.Proposal = spec.Document{Workloads: map[string]spec.Workload{"web": w}}
	env.applyEnv(t, &b, "web", "PORT")
	return b, true
}

var (
	pyFastAPIRE       = regexp.MustCompile(`(?m)^(\w+)\s*(?::\s*\w+\s*)?=\s*(?:fastapi\.)?(?:FastAPI|Starlette)\(`)
	pyFlaskRE         = regexp.MustCompile(`(?m)^(\w+)\s*=\s*(?:flask\.)?Flask\(`)
	pyStdlibServerRE  = regexp.MustCompile(`\bhttp\.server\b|\bHTTPServer\b|\bsocketserver\b|\bwsgiref\.simple_server\b`)
	pyPortFallbackRE  = regexp.MustCompile(`os\.(?:environ\.get|getenv)\(\s*['"]PORT['"]\s*,\s*['"]?(\d{2,5})`)
	pyPortEnvRE       = regexp.MustCompile(`os\.(?:environ\.get|getenv)\(\s*['"]PORT['"]|os\.environ\[\s*['"]PORT['"]\s*\]`)
	pyPortLiteralRE   = regexp.MustCompile(`(?:HTTPServer|TCPServer|make_server|serve)\(\s*\(?\s*['"][^'"]*['"]\s*,\s*(\d{2,5})|(?m)^\s*PORT\s*=\s*(\d{2,5})\b|port\s*=\s*(\d{2,5})\b`)
	pyRequirementName = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)`)
	pyDjangoSettings  = regexp.MustCompile(`DJANGO_SETTINGS_MODULE['"]\s*,\s*['"]([\w.]+)\.settings`)
)

func scanPythonPort(src []byte) goPort {
	var p goPort
	if m := pyPortFallbackRE.FindSubmatch(src); m != nil {
		p.env = true
		p.fallback, _ = strconv.Atoi(string(m[1]))
	} else if pyPortEnvRE.Match(src) {
		p.env = true
	}
	if m := pyPortLiteralRE.FindSubmatch(src); m != nil {
		p.literal, _ = strconv.Atoi(string(m[1]) + string(m[2]) + string(m[3]))
	}
	if p.fallback < 1 || p.fallback > 65535 {
		p.fallback = 0
	}
	if p.literal < 1 || p.literal > 65535 {
		p.literal = 0
	}
	return p
}

// pythonDependencies reads the normalized dependency names and the
// install command from requirements.txt, pyproject.toml or Pipfile.
func pythonDependencies(t *Tree, b *Bid) ([]string, string) {
	var deps []string
	install := ""
	if t.Has("requirements.txt") {
		deps = append(deps, pythonRequirements(t, "requirements.txt", 0)...)
		install = "pip install -r requirements.txt"
		b.evidence("requirements.txt", "Python requirements")
	}
	if src, ok := t.Read("pyproject.toml"); ok {
		tables := tomlTables(string(src))
		for _, d := range tomlStrings(tables["project"]["dependencies"]) {
			deps = append(deps, pythonName(d))
		}
		poetry := tables["tool.poetry.dependencies"]
		for _, k := range sortedKeys(poetry) {
			if k != "python" {
				deps = append(deps, pythonName(k))
			}
		}
		if install == "" {
			switch {
			case len(poetry) > 0 || t.Has("poetry.lock"):
				install = "pip install poetry && poetry config virtualenvs.create false && poetry install --no-root --only main"
			case t.Has("uv.lock"):
				install = "pip install uv && uv export --frozen --no-dev --no-emit-project -o requirements.lock && pip install -r requirements.lock"
			default:
				install = "pip install ."
			}
		}
		b.evidence("pyproject.toml", "Python project")
	}
	if src, ok := t.Read("Pipfile"); ok {
		for _, k := range sortedKeys(tomlTables(string(src))["packages"]) {
			deps = append(deps, pythonName(k))
		}
		if install == "" {
			install = "pip install pipenv && pipenv install --system"
			if t.Has("Pipfile.lock") {
				install += " --deploy"
			}
		}
		b.evidence("Pipfile", "Pipenv project")
	}
	if install == "" && t.Has("setup.py") {
		install = "pip install ."
		b.evidence("setup.py", "Python package")
	}
	slices.Sort(deps)
	return slices.Compact(deps), install
}

// pythonRequirements reads a requirements file and the files it includes.
func pythonRequirements(t *Tree, p string, depth int) []string {
	src, ok := t.Read(p)
	if !ok || depth > 3 {
		return nil
	}
	var deps []string
	for line := range strings.Lines(string(src)) {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "-r ") || strings.HasPrefix(line, "--requirement "):
			_, inc, _ := strings.Cut(line, " ")
			deps = append(deps, pythonRequirements(t, path.Join(path.Dir(p), strings.TrimSpace(inc)), depth+1)...)
		case strings.HasPrefix(line, "-"):
		case strings.Contains(line, "#egg="):
			_, egg, _ := strings.Cut(line, "#egg=")
			deps = append(deps, pythonName(egg))
		default:
			if n := pythonName(line); n != "" {
				deps = append(deps, n)
			}
		}
	}
	return deps
}

// pythonName returns a requirement's normalized project name (PEP 503).
func pythonName(req string) string {
	m := pyRequirementName.FindString(strings.TrimSpace(req))
	m = strings.ToLower(m)
	return strings.NewReplacer("_", "-", ".", "-").Replace(m)
}

// djangoProject returns the Django project package named in manage.py, or
// the directory holding settings.py and wsgi.py.
func djangoProject(t *Tree) string {
	if m := pyDjangoSettings.FindStringSubmatch(t.ReadString("manage.py")); m != nil {
		return m[1]
	}
	for _, f := range t.Files() {
		if strings.Count(f, "/") == 1 && path.Base(f) == "wsgi.py" && t.Has(path.Dir(f)+"/settings.py") {
			return path.Dir(f)
		}
	}
	return "app"
}

// pythonFindApp finds the entry script defining the application object.
func pythonFindApp(t *Tree, env *envSources, re *regexp.Regexp) (file, app string, ok bool) {
	for _, f := range pythonEntries {
		src, ok := t.Read(f)
		if !ok {
			continue
		}
		env.scanEnvReads(f, src)
		if m := re.FindSubmatch(src); m != nil {
			return f, string(m[1]), true
		}
	}
	return "", "", false
}

// pythonModule turns a script's path into its module name, and the
// directory to import it from when it lives under src/.
func pythonModule(file string) (module, appDir string) {
	if rest, ok := strings.CutPrefix(file, "src/"); ok {
		file, appDir = rest, "src"
	}
	file = strings.TrimSuffix(strings.TrimSuffix(file, ".py"), "/__init__")
	return strings.ReplaceAll(file, "/", "."), appDir
}
