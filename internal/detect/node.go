package detect

import (
	"encoding/json"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/svchost/svc/internal/spec"
)

// nodeDetector bids on package.json. Scores: 78 for a server framework
// whose build and port are known (Next.js, Nuxt, SvelteKit with the node
// adapter), 75 for Remix, Astro's node adapter, and express, fastify, koa,
// hono, NestJS or hapi with a start command, 70 for a static build (Vite,
// Create React App, Vue CLI, Parcel, Astro, SvelteKit's static adapter),
// 60 for a start script alone, 30 for a package.json that says nothing of
// how it runs (the command and port are asked).
type nodeDetector struct{}

var _ Detector = nodeDetector{}

// maxNodeScan bounds how many source files are read looking for the port.
const maxNodeScan = 60

type packageJSON struct {
	Name           string
	Main           string
	Scripts        map[string]string
	Deps           map[string]bool
	PackageManager string
}

// parsePackageJSON reads the fields detection uses, each on its own, so
// that one malformed field does not hide the others.
func parsePackageJSON(src []byte) (packageJSON, bool) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(src, &raw); err != nil {
		return packageJSON{}, false
	}
	pkg := packageJSON{Deps: map[string]bool{}}
	_ = json.Unmarshal(raw["name"], &pkg.Name)
	_ = json.Unmarshal(raw["main"], &pkg.Main)
	_ = json.Unmarshal(raw["packageManager"], &pkg.PackageManager)
	var scripts map[string]any
	_ = json.Unmarshal(raw["scripts"], &scripts)
	pkg.Scripts = map[string]string{}
	for k, v := range scripts {
		if s, ok := v.(string); ok {
			pkg.Scripts[k] = s
		}
	}
	for _, field := range []string{"dependencies", "devDependencies"} {
		var deps map[string]any
		_ = json.Unmarshal(raw[field], &deps)
		for k := range deps {
			pkg.Deps[k] = true
		}
	}
	return pkg, true
}

// nodePM is a package manager's commands.
type nodePM struct {
	name    string
	install string
	run     string // prefix of "<run> build"
}

func (pm nodePM) start() []string { return []string{pm.name, "start"} }

// nodePackageManager picks npm, yarn or pnpm from the lockfile or the
// packageManager field.
func nodePackageManager(t *Tree, pkg packageJSON) (nodePM, string) {
	pmField, _, _ := strings.Cut(pkg.PackageManager, "@")
	switch {
	case t.Has("pnpm-lock.yaml"):
		return nodePM{"pnpm", "pnpm install --frozen-lockfile", "pnpm run"}, "pnpm-lock.yaml"
	case t.Has("yarn.lock"):
		if t.Has(".yarnrc.yml") {
			return nodePM{"yarn", "yarn install --immutable", "yarn"}, "yarn.lock"
		}
		return nodePM{"yarn", "yarn install --frozen-lockfile", "yarn"}, "yarn.lock"
	case t.Has("package-lock.json"):
		return nodePM{"npm", "npm ci", "npm run"}, "package-lock.json"
	case t.Has("npm-shrinkwrap.json"):
		return nodePM{"npm", "npm ci", "npm run"}, "npm-shrinkwrap.json"
	case pmField == "pnpm":
		return nodePM{"pnpm", "pnpm install", "pnpm run"}, ""
	case pmField == "yarn":
		return nodePM{"yarn", "yarn install", "yarn"}, ""
	}
	return nodePM{"npm", "npm install", "npm run"}, ""
}

var nodeServerFrameworks = []string{"express", "fastify", "koa", "hono", "@hono/node-server", "@nestjs/core", "@hapi/hapi", "restify"}

func (nodeDetector) Bid(t *Tree) (Bid, bool) {
	src, ok := t.Read("package.json")
	if !ok {
		return Bid{}, false
	}
	pkg, ok := parsePackageJSON(src)
	if !ok {
		return Bid{}, false
	}
	b := Bid{Detector: "node"}
	b.evidence("package.json", "a Node.js package")
	pm, lock := nodePackageManager(t, pkg)
	if lock != "" {
		b.evidence(lock, "%s lockfile", pm.name)
	}
	install := pm.install
	build := install
	if _, ok := pkg.Scripts["build"]; ok {
		build = install + " && " + pm.run + " build"
	}
	_, hasStart := pkg.Scripts["start"]
	has := func(dep string) bool { return pkg.Deps[dep] }
	w := spec.Workload{Primary: spec.Bool(true), Build: &spec.Build{Kind: spec.BuildNode, Context: ".", Command: build}}
	env := envSources{dbType: driverSlotType(sortedKeys(pkg.Deps))}
	env.loadEnvExample(t)
	fixedPort := func(port int, run []string) {
		w.Run = spec.Run{Command: run, Port: port}
		w.Env = map[string]spec.EnvValue{"PORT": spec.Literal(strconv.Itoa(port))}
	}
	startOr := func(alt ...string) []string {
		if hasStart {
			return pm.start()
		}
		return alt
	}
	withBuild := func(alt string) string {
		if _, ok := pkg.Scripts["build"]; ok {
			return build
		}
		return install + " && " + alt
	}
	switch {
	case has("next"):
		b.Score = 78
		b.evidence("package.json", "Next.js (next start serves on port 3000)")
		w.Build.Command = withBuild("npx next build")
		fixedPort(3000, startOr("npx", "next", "start"))
	case has("nuxt"):
		b.Score = 78
		b.evidence("package.json", "Nuxt (its server listens on port 3000)")
		w.Build.Command = withBuild("npx nuxt build")
		fixedPort(3000, []string{"node", ".output/server/index.mjs"})
	case has("@sveltejs/kit") && has("@sveltejs/adapter-static"):
		return staticBuild(t, b, "build", build, "SvelteKit with the static adapter"), true
	case has("@sveltejs/kit"):
		b.Score = 78
		if !has("@sveltejs/adapter-node") {
			b.Score = 65
			b.evidence("package.json", "SvelteKit without the node adapter: assumed to build for node (add @sveltejs/adapter-node)")
		} else {
			b.evidence("package.json", "SvelteKit with the node adapter (port 3000)")
		}
		w.Build.Command = withBuild("npx vite build")
		fixedPort(3000, []string{"node", "build"})
	case (has("@remix-run/serve") || has("@react-router/serve")) && hasStart:
		b.Score = 75
		b.evidence("package.json", "Remix / React Router server (port 3000)")
		fixedPort(3000, pm.start())
	case has("astro") && has("@astrojs/node"):
		b.Score = 75
		b.evidence("package.json", "Astro with the node adapter (port 4321)")
		w.Build.Command = withBuild("npx astro build")
		fixedPort(4321, []string{"node", "./dist/server/entry.mjs"})
		w.Env["HOST"] = spec.Literal("0.0.0.0")
	case has("astro"):
		return staticBuild(t, b, "dist", withBuild("npx astro build"), "Astro static site"), true
	default:
		server := ""
		for _, f := range nodeServerFrameworks {
			if has(f) {
				server = f
				break
			}
		}
		ssr := false
		for d := range pkg.Deps {
			ssr = ssr || strings.HasPrefix(d, "@remix-run/") || strings.HasPrefix(d, "@react-router/") || d == "@solidjs/start" || d == "@builder.io/qwik-city"
		}
		if server == "" && !hasStart && !ssr {
			if out, name, ok := nodeStaticOutput(t, pkg); ok {
				return staticBuild(t, b, out, build, name), true
			}
		}
		entry := nodeEntry(t, pkg)
		port := scanNodePort(t, entry, &env)
		switch {
		case server != "" && (hasStart || entry != ""):
			b.Score = 75
			b.evidence("package.json", "%s server", server)
		case hasStart:
			b.Score = 60
			b.evidence("package.json", "start script: %s", pkg.Scripts["start"])
		default:
			b.Score = 30
		}
		switch {
		case hasStart:
			w.Run.Command = pm.start()
		case entry != "" && server != "":
			w.Run.Command = []string{"node", entry}
		default:
			def := pm.start()
			if entry != "" {
				def = []string{"node", entry}
			}
			w.Run.Command = b.askCommand(t, "Command that starts the app (package.json has no start script)", def)
		}
		switch {
		case port.literal > 0:
			w.Run.Port = port.literal
			b.evidence(port.where, "listens on port %d", port.literal)
		case port.env && port.fallback > 0:
			w.Run.Port = port.fallback
			w.Env = map[string]spec.EnvValue{"PORT": spec.Literal(strconv.Itoa(port.fallback))}
			b.evidence(port.where, "reads PORT (falling back to %d)", port.fallback)
		default:
			why := "the code does not say"
			if port.env {
				why = "it reads PORT"
				b.evidence(port.where, "reads PORT")
			}
			w.Run.Port = b.askPort(t, "Port the app listens on ("+why+")", 3000)
			w.Env = map[string]spec.EnvValue{"PORT": spec.Literal(strconv.Itoa(w.Run.Port))}
		}
	}
	b.Proposal = spec.Document{Workloads: map[string]spec.Workload{"web": w}}
	env.applyEnv(t, &b, "web", "PORT")
	return b, true
}

// staticBuild is the bid for a package that builds a static site into out.
func staticBuild(t *Tree, b Bid, out, build, what string) Bid {
	b.Score = 70
	b.evidence("package.json", "%s: built into %s and served as static files", what, out)
	b.Proposal = spec.Document{Workloads: map[string]spec.Workload{"web": {
		Primary: spec.Bool(true),
		Build:   &spec.Build{Kind: spec.BuildStatic, Context: out, Command: build},
	}}}
	return b
}

var viteOutDirRE = regexp.MustCompile(`outDir\s*:\s*['"]([\w./-]+)['"]`)

// nodeStaticOutput reports a static build tool with a build script and
// the directory it writes.
func nodeStaticOutput(t *Tree, pkg packageJSON) (string, string, bool) {
	if _, ok := pkg.Scripts["build"]; !ok {
		return "", "", false
	}
	switch {
	case pkg.Deps["vite"]:
		out := "dist"
		for _, cfg := range []string{"vite.config.ts", "vite.config.js", "vite.config.mjs", "vite.config.mts"} {
			if m := viteOutDirRE.FindStringSubmatch(t.ReadString(cfg)); m != nil {
				if o := path.Clean(m[1]); !path.IsAbs(o) && !strings.HasPrefix(o, "..") {
					out = o
				}
				break
			}
		}
		return out, "Vite build", true
	case pkg.Deps["react-scripts"]:
		return "build", "Create React App build", true
	case pkg.Deps["@vue/cli-service"]:
		return "dist", "Vue CLI build", true
	case pkg.Deps["parcel"]:
		return "dist", "Parcel build", true
	}
	return "", "", false
}

var nodeStartEntryRE = regexp.MustCompile(`(?:^|\s|&&\s*)(?:node|nodemon|ts-node|tsx|bun)\s+(?:-{1,2}[\w-]+(?:=\S+)?\s+)*([\w./-]+\.(?:js|mjs|cjs|ts))`)

// nodeEntry returns the file the app starts from: the start script's
// script, main, or a conventional name.
func nodeEntry(t *Tree, pkg packageJSON) string {
	if m := nodeStartEntryRE.FindStringSubmatch(pkg.Scripts["start"]); m != nil {
		if p := path.Clean(m[1]); t.Has(p) {
			return p
		}
	}
	if pkg.Main != "" {
		if p := path.Clean(pkg.Main); t.Has(p) {
			return p
		}
	}
	p, _ := t.first("server.js", "index.js", "app.js", "main.js", "server.mjs", "index.mjs", "src/server.js", "src/index.js", "src/app.js", "src/main.js")
	return p
}

var (
	nodePortFallbackRE = regexp.MustCompile(`process\.env\.PORT\s*(?:\|\||\?\?)\s*['"]?(\d{2,5})`)
	nodePortEnvRE      = regexp.MustCompile(`process\.env(?:\.PORT\b|\[\s*['"]PORT['"]\s*\])`)
	nodePortLiteralRE  = regexp.MustCompile(`\.listen\(\s*(\d{2,5})\b|listen\(\s*\{\s*port\s*:\s*(\d{2,5})\b|\bport\s*:\s*(\d{2,5})\b|(?:const|let|var)\s+PORT\s*=\s*(\d{2,5})\b`)
)

// scanNodePort reads the entry file, then the other sources, for the port.
func scanNodePort(t *Tree, entry string, env *envSources) goPort {
	var files []string
	if entry != "" {
		files = append(files, entry)
	}
	for _, f := range t.filesUnder(".", 4*maxNodeScan, ".js", ".mjs", ".cjs", ".ts") {
		if f != entry && !strings.HasSuffix(f, ".d.ts") && !strings.Contains(f, ".config.") && !strings.HasPrefix(f, "build/") && !strings.HasPrefix(f, "public/") {
			files = append(files, f)
		}
	}
	var found goPort
	for i, f := range files {
		if i >= maxNodeScan {
			break
		}
		src, ok := t.Read(f)
		if !ok {
			continue
		}
		env.scanEnvReads(f, src)
		if !found.env {
			if m := nodePortFallbackRE.FindSubmatch(src); m != nil {
				if p, err := strconv.Atoi(string(m[1])); err == nil && p >= 1 && p <= 65535 {
					found.env, found.fallback, found.where = true, p, f
				}
			} else if nodePortEnvRE.Match(src) {
				found.env, found.where = true, f
			}
		}
		if found.literal == 0 {
			if m := nodePortLiteralRE.FindSubmatch(src); m != nil {
				s := string(m[1]) + string(m[2]) + string(m[3]) + string(m[4])
				if p, err := strconv.Atoi(s); err == nil && p >= 1 && p <= 65535 {
					found.literal = p
					if !found.env {
						found.where = f
					}
				}
			}
		}
	}
	if found.env {
		if found.fallback == 0 {
			found.fallback = found.literal
		}
		found.literal = 0
	}
	return found
}
