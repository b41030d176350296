package detect

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/internal/spec"
)

func mapFS(files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for p, s := range files {
		fsys[p] = &fstest.MapFile{Data: []byte(s)}
	}
	return fsys
}

// run detects files and fails on a dropped bid or a proposal that does not
// validate.
func run(t *testing.T, files map[string]string, answers map[string]string) Result {
	t.Helper()
	r, dropped := detect(mapFS(files), answers, Runtime{})
	if len(dropped) > 0 {
		t.Fatalf("bids dropped: %v", dropped)
	}
	if r.Winner != nil {
		checkBids(t, r)
	}
	return r
}

func bidders(r Result) []string {
	var out []string
	if r.Winner != nil {
		out = append(out, r.Winner.Detector)
	}
	for _, b := range r.RunnersUp {
		out = append(out, b.Detector)
	}
	return out
}

func questionKeys(r Result) []string {
	var out []string
	for _, q := range r.Questions {
		out = append(out, q.Key)
	}
	return out
}

func TestPrecedence(t *testing.T) {
	files := map[string]string{
		"compose.yaml":     "services:\n  web:\n    build: .\n    ports: [\"8000:8000\"]\n",
		"Procfile":         "web: gunicorn app:app --bind 0.0.0.0:8000\n",
		"Dockerfile":       "FROM python:3.12\nEXPOSE 8000\n",
		"requirements.txt": "flask\ngunicorn\n",
		"app.py":           "from flask import Flask\napp = Flask(__name__)\n",
		"index.html":       "<html>",
	}
	r := run(t, files, nil)
	if diff := cmp.Diff([]string{"compose", "procfile", "dockerfile", "python", "static"}, bidders(r)); diff != "" {
		t.Errorf("bids (-want +got):\n%s", diff)
	}
	delete(files, "compose.yaml")
	if got := run(t, files, nil).Winner.Detector; got != "procfile" {
		t.Errorf("without compose the winner is %s; want procfile", got)
	}
	delete(files, "Procfile")
	if got := run(t, files, nil).Winner.Detector; got != "dockerfile" {
		t.Errorf("without Procfile the winner is %s; want dockerfile", got)
	}
}

// TestTiesByName: equal scores go to the detector name that sorts first.
func TestTiesByName(t *testing.T) {
	r := run(t, map[string]string{
		"go.mod":       "module x\n",
		"main.go":      "package main\n\nfunc main() { http.ListenAndServe(\":8080\", nil) }\n",
		"package.json": `{"scripts": {"start": "node server.js"}, "dependencies": {"express": "4"}}`,
		"server.js":    "require('express')().listen(3000)\n",
	}, nil)
	if diff := cmp.Diff([]string{"go", "node"}, bidders(r)); diff != "" {
		t.Errorf("bids (-want +got):\n%s", diff)
	}
	if r.Winner.Score != r.RunnersUp[0].Score {
		t.Errorf("scores %d and %d; the test needs a tie", r.Winner.Score, r.RunnersUp[0].Score)
	}
}

func TestDeterministic(t *testing.T) {
	dirs, err := os.ReadDir(filepath.Join("testdata", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		fsys := os.DirFS(filepath.Join("testdata", "samples", d.Name()))
		first := Detect(fsys, nil, Runtime{})
		for range 5 {
			if diff := cmp.Diff(first, Detect(fsys, nil, Runtime{}), cmp.AllowUnexported(Bid{})); diff != "" {
				t.Fatalf("%s: a second Detect differs (-first +second):\n%s", d.Name(), diff)
			}
		}
	}
}

func TestGoPort(t *testing.T) {
	app := []string{"./app"}
	portFlag := func(name, value string) []string {
		return []string{"sh", "-c", "exec ./app --" + name + "=" + value}
	}
	tests := []struct {
		name      string
		src       string
		answers   map[string]string
		port      int
		env       string
		command   []string
		questions []string
	}{
		{"literal", `http.ListenAndServe("0.0.0.0:8081", nil)`, nil, 8081, "", app, nil},
		{"server addr", `srv := &http.Server{Addr: ":9090"}`, nil, 9090, "", app, nil},
		{"gin", `r.Run(":7000")`, nil, 7000, "", app, nil},
		{"env with fallback literal", "port := os.Getenv(\"PORT\")\nif port == \"\" { port = \"5050\" }\nhttp.ListenAndServe(\":\"+port, nil)", nil, 5050, "5050", app, nil},
		{"env with listen fallback", "addr := \":4040\"\nif p := os.Getenv(\"PORT\"); p != \"\" { addr = \":\" + p }\nhttp.ListenAndServe(addr, nil)", nil, 4040, "4040", app, nil},
		{"env only", `http.ListenAndServe(":"+os.Getenv("PORT"), nil)`, nil, 8080, "8080", app, []string{KeyPort}},
		// A program that does not read PORT says how it takes its port.
		{"flag.Int port", "port := flag.Int(\"port\", 9000, \"port to listen on\")\nflag.Parse()\nhttp.ListenAndServe(fmt.Sprintf(\":%d\", *port), nil)", nil,
			9000, "9000", portFlag("port", `"$PORT"`), nil},
		{"whoami: StringVar port, default from another variable", `flag.StringVar(&port, "port", getEnv("WHOAMI_PORT_NUMBER", "80"), "give me a port number")`, nil,
			8080, "8080", portFlag("port", `"$PORT"`), nil},
		{"string addr", `addr := flag.String("addr", "localhost:7070", "listen address")`, nil, 7070, "7070", portFlag("addr", `":$PORT"`), nil},
		{"string port holding an address", `flag.StringVar(&listen, "port", ":6060", "")`, nil, 6060, "6060", portFlag("port", `":$PORT"`), nil},
		{"pflag IntVarP", `cmd.Flags().IntVarP(&port, "http-port", "p", 3000, "HTTP port")`, nil, 3000, "3000", portFlag("http-port", `"$PORT"`), nil},
		{"pflag StringP", `pflag.StringP("listen-addr", "l", "0.0.0.0:5005", "")`, nil, 5005, "5005", portFlag("listen-addr", `":$PORT"`), nil},
		{"number flag named listen", `flag.Uint("listen", 4242, "")`, nil, 4242, "4242", portFlag("listen", `"$PORT"`), nil},
		{"privileged default", `flag.Int("port", 80, "")`, nil, 8080, "8080", portFlag("port", `"$PORT"`), nil},
		{"bare name beats prefixed", "flag.String(\"http-addr\", \":1111\", \"\")\nflag.Int(\"port\", 4000, \"\")", nil, 4000, "4000", portFlag("port", `"$PORT"`), nil},
		{"flag beats a literal listen address", "addr := flag.String(\"listen\", \":8081\", \"\")\nsrv := &http.Server{Addr: \":5000\"}", nil,
			8081, "8081", portFlag("listen", `":$PORT"`), nil},
		{"PORT beats a flag", `flag.StringVar(&port, "port", os.Getenv("PORT"), "")`, nil, 8080, "8080", app, []string{KeyPort}},
		// Flags of other listeners and of clients are not the port.
		{"other listeners", "flag.String(\"metrics-addr\", \"\", \"\")\nflag.Int(\"grpc-port\", 9, \"\")\nflag.String(\"db.addr\", \"db:5432\", \"\")\nviper.GetInt(\"port\")", nil,
			8080, "8080", app, []string{KeyPort, KeyRunCommand}},
		{"nothing", `fmt.Println("hi")`, nil, 8080, "8080", app, []string{KeyPort, KeyRunCommand}},
		{"nothing, answered with a variable", `fmt.Println("hi")`, map[string]string{KeyPort: "8000", KeyRunCommand: "./app -listen :$PORT"},
			8000, "8000", []string{"sh", "-c", "./app -listen :$PORT"}, nil},
		{"nothing, answered with words", `fmt.Println("hi")`, map[string]string{KeyPort: "8000", KeyRunCommand: "./app serve --config 'my app.yaml'"},
			8000, "8000", []string{"./app", "serve", "--config", "my app.yaml"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, map[string]string{
				"go.mod":  "module example.com/x\n",
				"main.go": "package main\n\nfunc main() {\n" + tt.src + "\n}\n",
			}, tt.answers)
			w := r.Winner.Proposal.Workloads["web"]
			if w.Run.Port != tt.port || w.Env["PORT"].Value != tt.env {
				t.Errorf("port %d, PORT %q; want %d, %q", w.Run.Port, w.Env["PORT"].Value, tt.port, tt.env)
			}
			if diff := cmp.Diff(tt.command, w.Run.Command); diff != "" {
				t.Errorf("run command (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.questions, questionKeys(r), cmpEmpty); diff != "" {
				t.Errorf("questions (-want +got):\n%s", diff)
			}
			if known := len(tt.questions) == 0 && tt.answers == nil; known != (r.Winner.Score == 75) {
				t.Errorf("score %d with questions %v; a known port scores 75, an asked one 65", r.Winner.Score, tt.questions)
			}
		})
	}
}

// TestGoPortFlagEvidence: a proposal that passes $PORT to a flag says so,
// naming the file that declares the flag.
func TestGoPortFlagEvidence(t *testing.T) {
	r := run(t, map[string]string{
		"go.mod":         "module example.com/x\n",
		"main.go":        "package main\n\nfunc main() { run() }\n",
		"server.go":      "package main\n\nvar addr = flag.String(\"addr\", \":8443\", \"listen address\")\n",
		"cmd/x/other.go": "package main\n",
	}, nil)
	want := Evidence{Path: "server.go", Reason: "takes its port from the flag -addr (an address, default port 8443), not from PORT: the run command passes $PORT to it"}
	if !slices.Contains(r.Winner.Evidence, want) {
		t.Errorf("evidence = %+v; want %+v", r.Winner.Evidence, want)
	}
}

func TestGoWithoutMainDoesNotBid(t *testing.T) {
	r := run(t, map[string]string{"go.mod": "module x\n", "lib.go": "package x\n"}, nil)
	if r.Winner != nil {
		t.Errorf("winner = %s; a library does not run", r.Winner.Detector)
	}
}

func TestGoPicksCmdByModuleName(t *testing.T) {
	r := run(t, map[string]string{
		"go.mod":              "module github.com/acme/shop\n",
		"cmd/migrate/main.go": "package main\n",
		"cmd/shop/main.go":    "package main\n",
		"cmd/tool/doc.go":     "// Package tool.\npackage tool\n",
	}, map[string]string{KeyPort: "8000", KeyRunCommand: "./app"})
	if got := r.Winner.Proposal.Workloads["web"].Build.Command; got != "go build -o app ./cmd/shop" {
		t.Errorf("build = %q; want the cmd named after the module", got)
	}
	if len(r.Questions) != 0 || r.Winner.Proposal.Workloads["web"].Run.Port != 8000 {
		t.Errorf("answered port not used: %+v, %+v", r.Questions, r.Winner.Proposal.Workloads["web"].Run)
	}
}

func TestInvalidPortAnswerAsksAgain(t *testing.T) {
	for _, bad := range []string{"", "http", "0", "70000", "-1"} {
		r := run(t, map[string]string{"go.mod": "module x\n", "main.go": "package main\n"}, map[string]string{KeyPort: bad, KeyRunCommand: "./app"})
		if diff := cmp.Diff([]string{KeyPort}, questionKeys(r)); diff != "" {
			t.Errorf("answer %q: questions (-want +got):\n%s", bad, diff)
		}
	}
}

func TestNode(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		build spec.Build
		run   []string
		port  int
	}{
		{"nuxt", map[string]string{"package.json": `{"scripts": {"build": "nuxt build"}, "dependencies": {"nuxt": "3"}}`},
			spec.Build{Kind: spec.BuildNode, Context: ".", Command: "npm install && npm run build"}, []string{"node", ".output/server/index.mjs"}, 3000},
		{"sveltekit node", map[string]string{"package.json": `{"devDependencies": {"@sveltejs/kit": "2", "@sveltejs/adapter-node": "5"}}`, "package-lock.json": "{}"},
			spec.Build{Kind: spec.BuildNode, Context: ".", Command: "npm ci && npx vite build"}, []string{"node", "build"}, 3000},
		{"sveltekit static", map[string]string{"package.json": `{"scripts": {"build": "vite build"}, "devDependencies": {"@sveltejs/kit": "2", "@sveltejs/adapter-static": "3"}}`},
			spec.Build{Kind: spec.BuildStatic, Context: "build", Command: "npm install && npm run build"}, nil, 0},
		{"create react app", map[string]string{"package.json": `{"scripts": {"build": "react-scripts build"}, "dependencies": {"react-scripts": "5"}}`, "yarn.lock": "", ".yarnrc.yml": ""},
			spec.Build{Kind: spec.BuildStatic, Context: "build", Command: "yarn install --immutable && yarn build"}, nil, 0},
		{"vite outDir", map[string]string{"package.json": `{"scripts": {"build": "vite build"}, "devDependencies": {"vite": "5"}}`, "vite.config.js": "export default { build: { outDir: 'public/app' } }"},
			spec.Build{Kind: spec.BuildStatic, Context: "public/app", Command: "npm install && npm run build"}, nil, 0},
		{"fastify listen object", map[string]string{"package.json": `{"dependencies": {"fastify": "4"}}`, "index.js": "fastify.listen({ port: 4000, host: '0.0.0.0' })"},
			spec.Build{Kind: spec.BuildNode, Context: ".", Command: "npm install"}, []string{"node", "index.js"}, 4000},
		{"hono with pnpm field", map[string]string{"package.json": `{"packageManager": "pnpm@9.1.0", "scripts": {"start": "tsx src/index.ts"}, "dependencies": {"hono": "4", "@hono/node-server": "1"}}`, "src/index.ts": "serve({ fetch: app.fetch, port: 8787 })"},
			spec.Build{Kind: spec.BuildNode, Context: ".", Command: "pnpm install"}, []string{"pnpm", "start"}, 8787},
		{"malformed fields", map[string]string{"package.json": `{"scripts": 5, "dependencies": ["express"], "main": {}}`},
			spec.Build{Kind: spec.BuildNode, Context: ".", Command: "npm install"}, []string{"npm", "start"}, 3000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tt.files, nil)
			if r.Winner == nil || r.Winner.Detector != "node" {
				t.Fatalf("winner = %+v; want node", r.Winner)
			}
			w := r.Winner.Proposal.Workloads["web"]
			if diff := cmp.Diff(&tt.build, w.Build); diff != "" {
				t.Errorf("build (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.run, w.Run.Command); diff != "" {
				t.Errorf("run (-want +got):\n%s", diff)
			}
			if w.Run.Port != tt.port {
				t.Errorf("port = %d; want %d", w.Run.Port, tt.port)
			}
		})
	}
}

func TestNodeInvalidJSONDoesNotBid(t *testing.T) {
	if r := run(t, map[string]string{"package.json": "{nope"}, nil); r.Winner != nil {
		t.Errorf("winner = %s; want none", r.Winner.Detector)
	}
}

func TestPython(t *testing.T) {
	tests := []struct {
		name      string
		files     map[string]string
		build     string
		run       []string
		port      int
		questions []string
	}{
		{"flask without gunicorn", map[string]string{"requirements.txt": "-r requirements/base.txt\n", "requirements/base.txt": "flask==3.0\n", "wsgi.py": "import flask\napplication = None\napp = flask.Flask(__name__)\n"},
			"pip install -r requirements.txt", []string{"flask", "run", "--host", "0.0.0.0", "--port", "5000"}, 5000, nil},
		{"flask factory", map[string]string{"requirements.txt": "Flask\ngunicorn\n", "app/__init__.py": "def create_app():\n    return Flask(__name__)\n"},
			"pip install -r requirements.txt", []string{"gunicorn", "app:create_app()", "--bind", "0.0.0.0:5000"}, 5000, nil},
		{"poetry fastapi under src", map[string]string{"pyproject.toml": "[tool.poetry.dependencies]\npython = \"^3.12\"\nfastapi = \"*\"\nuvicorn = {extras = [\"standard\"], version = \"*\"}\n", "src/app/main.py": "api: FastAPI = FastAPI()\n"},
			"pip install poetry && poetry config virtualenvs.create false && poetry install --no-root --only main", []string{"uvicorn", "app.main:api", "--host", "0.0.0.0", "--port", "8000", "--app-dir", "src"}, 8000, nil},
		{"pipenv streamlit", map[string]string{"Pipfile": "[packages]\nstreamlit = \"*\"\n", "Pipfile.lock": "{}", "streamlit_app.py": "import streamlit as st\n"},
			"pip install pipenv && pipenv install --system --deploy", []string{"streamlit", "run", "streamlit_app.py", "--server.port", "8501", "--server.address", "0.0.0.0"}, 8501, nil},
		{"django runserver", map[string]string{"requirements.txt": "django\n", "manage.py": "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'proj.settings')\n"},
			"pip install -r requirements.txt", []string{"python", "manage.py", "runserver", "0.0.0.0:8000"}, 8000, nil},
		{"stdlib env port", map[string]string{"main.py": "import os, http.server\nport = int(os.environ.get('PORT', 9000))\n"},
			"", []string{"python", "main.py"}, 9000, nil},
		{"unknown framework", map[string]string{"requirements.txt": "aiohttp\n", "app.py": "print('hi')\n"},
			"pip install -r requirements.txt", []string{"python", "app.py"}, 8000, []string{KeyPort}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tt.files, nil)
			if r.Winner == nil || r.Winner.Detector != "python" {
				t.Fatalf("winner = %+v; want python", r.Winner)
			}
			w := r.Winner.Proposal.Workloads["web"]
			if w.Build.Command != tt.build {
				t.Errorf("build = %q; want %q", w.Build.Command, tt.build)
			}
			if diff := cmp.Diff(tt.run, w.Run.Command); diff != "" {
				t.Errorf("run (-want +got):\n%s", diff)
			}
			if w.Run.Port != tt.port {
				t.Errorf("port = %d; want %d", w.Run.Port, tt.port)
			}
			if diff := cmp.Diff(tt.questions, questionKeys(r), cmpEmpty); diff != "" {
				t.Errorf("questions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPythonScriptWithoutServerDoesNotBid(t *testing.T) {
	if r := run(t, map[string]string{"main.py": "print('hello')\n"}, nil); r.Winner != nil {
		t.Errorf("winner = %s; a script that serves nothing has no bid", r.Winner.Detector)
	}
}

func TestProcfile(t *testing.T) {
	r := run(t, map[string]string{
		"Procfile":     "web: node server.js --port ${PORT} && echo $HOME\nclock: node clock.js\nweb: ignored twice\nnot a process\n",
		"package.json": `{"scripts": {"build": "tsc"}}`,
	}, nil)
	d := r.Winner.Proposal
	if r.Winner.Detector != "procfile" {
		t.Fatalf("winner = %s; want procfile", r.Winner.Detector)
	}
	if diff := cmp.Diff([]string{"sh", "-c", "node server.js --port ${PORT} && echo $HOME"}, d.Workloads["web"].Run.Command); diff != "" {
		t.Errorf("web command needs a shell (-want +got):\n%s", diff)
	}
	if got := d.Workloads["web"].Build; got.Kind != spec.BuildNode || got.Command != "npm install && npm run build" {
		t.Errorf("build = %+v; want the node build", got)
	}
	if diff := cmp.Diff([]string{"node", "clock.js"}, d.Workloads["clock"].Run.Command); diff != "" {
		t.Errorf("clock (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{KeyPort}, questionKeys(r)); diff != "" {
		t.Errorf("questions (-want +got):\n%s", diff)
	}
}

func TestProcfileWithoutWeb(t *testing.T) {
	r := run(t, map[string]string{"Procfile": "worker: python worker.py\n"}, nil)
	if r.Winner == nil || r.Winner.Detector != "procfile" || r.Winner.Score != 40 {
		t.Fatalf("winner = %+v; want procfile at 40", r.Winner)
	}
	w := r.Winner.Proposal.Workloads["worker"]
	if !w.IsPrimary() || w.Run.Port != 0 || w.Build.Kind != spec.BuildPython {
		t.Errorf("worker = %+v; want the primary, on no port, a python build", w)
	}
}

func TestProcfilePortFromCommand(t *testing.T) {
	r := run(t, map[string]string{"Procfile": "web: gunicorn app:app -b 0.0.0.0:8123\n", "requirements.txt": "gunicorn\n"}, nil)
	if w := r.Winner.Proposal.Workloads["web"]; w.Run.Port != 8123 || len(r.Questions) != 0 {
		t.Errorf("web port %d, questions %+v; want 8123 and none", w.Run.Port, r.Questions)
	}
}

func TestDockerfile(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		build spec.Build
		port  int
		score int
	}{
		{"subdir", map[string]string{"deploy/Dockerfile": "FROM nginx\nexpose 80 443\n"},
			spec.Build{Kind: spec.BuildDockerfile, Context: "deploy"}, 80, 70},
		{"variant at root", map[string]string{"Dockerfile.prod": "FROM x\nEXPOSE 3000-3005/tcp\n", "sub/Dockerfile": "FROM y\nEXPOSE 1\n"},
			spec.Build{Kind: spec.BuildDockerfile, Context: ".", Dockerfile: "Dockerfile.prod"}, 3000, 70},
		{"no expose", map[string]string{"Dockerfile": "FROM x\n# EXPOSE 9\nCMD [\"x\"]\n"},
			spec.Build{Kind: spec.BuildDockerfile, Context: "."}, 8080, 80},
		{"arg default", map[string]string{"Dockerfile": "FROM x\nARG PORT=5555\nEXPOSE $PORT\n"},
			spec.Build{Kind: spec.BuildDockerfile, Context: "."}, 5555, 80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tt.files, nil)
			w := r.Winner.Proposal.Workloads["web"]
			if r.Winner.Detector != "dockerfile" || r.Winner.Score != tt.score {
				t.Errorf("winner %s (%d); want dockerfile (%d)", r.Winner.Detector, r.Winner.Score, tt.score)
			}
			if diff := cmp.Diff(&tt.build, w.Build); diff != "" {
				t.Errorf("build (-want +got):\n%s", diff)
			}
			if w.Run.Port != tt.port {
				t.Errorf("port = %d; want %d", w.Run.Port, tt.port)
			}
		})
	}
}

func TestStatic(t *testing.T) {
	r := run(t, map[string]string{"public/index.html": "<html>", "public/app.css": ""}, nil)
	if r.Winner == nil || r.Winner.Detector != "static" || r.Winner.Score != 50 {
		t.Fatalf("winner = %+v; want static at 50", r.Winner)
	}
	if got := r.Winner.Proposal.Workloads["web"]; got.Build.Context != "public" || got.Run.Port != 0 {
		t.Errorf("web = %+v; want context public on port 0", got)
	}
	r = run(t, map[string]string{"dist/index.html": "<html>"}, nil)
	if r.Winner == nil || r.Winner.Proposal.Workloads["web"].Build.Context != "dist" {
		t.Errorf("dist/index.html not served: %+v", r.Winner)
	}
}

func TestEnvExample(t *testing.T) {
	r := run(t, map[string]string{
		"go.mod":  "module x\n",
		"main.go": "package main\n\nfunc main() { http.ListenAndServe(\":8080\", nil); os.Getenv(\"GITHUB_TOKEN\") }\n",
		".env.example": "# settings\nSECRET_KEY=\nAPI_TOKEN=replace-me\nSTRIPE_PUBLISHABLE_KEY=pk_test\n" +
			"REDIS_URL=redis://localhost:6379\nMONGODB_URI=mongodb+srv://u:p@cluster/db\nSITE_NAME=\nPORT=1234\nbad-name=x\n",
	}, map[string]string{"env.SITE_NAME": "Shop"})
	want := map[string]spec.EnvValue{
		"SECRET_KEY":             {Secret: "SECRET_KEY"},
		"API_TOKEN":              {Secret: "API_TOKEN"},
		"GITHUB_TOKEN":           {Secret: "GITHUB_TOKEN"},
		"STRIPE_PUBLISHABLE_KEY": spec.Literal("pk_test"),
		"REDIS_URL":              {Slot: "redis", Field: "url"},
		"MONGODB_URI":            {Slot: "db", Field: "url"},
		"SITE_NAME":              spec.Literal("Shop"),
	}
	got := r.Winner.Proposal.Workloads["web"].Env
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"secret.API_TOKEN", "secret.SECRET_KEY", "secret.GITHUB_TOKEN"}, questionKeys(r)); diff != "" {
		t.Errorf("questions (-want +got):\n%s", diff)
	}
	for _, q := range r.Questions {
		if q.Kind != KindSecret || q.Default != "" {
			t.Errorf("question %+v; want a secret without a default", q)
		}
	}
}

func TestSanitizeName(t *testing.T) {
	tests := map[string]string{
		"web":        "web",
		"Web_Server": "web-server",
		"9lives":     "lives",
		"__":         "x",
		"a--b":       "a-b",
		"very-long-service-name-that-goes-on-and-on": "very-long-service-name-that-goe",
		"ünïcode": "n-code",
	}
	for in, want := range tests {
		if got := sanitizeName(in, "x"); got != want || !nameRE.MatchString(got) {
			t.Errorf("sanitizeName(%q) = %q; want %q", in, got, want)
		}
	}
	taken := map[string]bool{"web": true, "web-2": true}
	if got := uniqueName("web", func(n string) bool { return taken[n] }); got != "web-3" {
		t.Errorf("uniqueName = %q; want web-3", got)
	}
}
