package detect

import (
	"strings"

	"github.com/svchost/svc/internal/spec"
)

// staticDetector bids on an index.html served as it is, at the root or in
// public/, dist/, build/ or site/. Scores: 60 at the root, 50 in one of
// those directories, 20 when the tree also holds a server marker (a
// package.json, go.mod, Python project, Dockerfile, compose file or
// Procfile), where the site is more likely a part of something else.
//
// A static workload has run.port 0: it listens on nothing itself, and the
// runtime serves the files of its build context.
type staticDetector struct{}

var _ Detector = staticDetector{}

// staticDirs are where a site's index.html is looked for, in order.
var staticDirs = []string{".", "public", "dist", "build", "site", "docs", "www", "_site"}

// serverMarkers are files that say the tree is more than a site.
var serverMarkers = []string{
	"package.json", "go.mod", "requirements.txt", "pyproject.toml", "Pipfile", "setup.py", "manage.py",
	"Dockerfile", "Procfile", "compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml",
	"Gemfile", "composer.json", "Cargo.toml", "pom.xml", "build.gradle",
}

func (staticDetector) Bid(t *Tree) (Bid, bool) {
	dir := ""
	for _, d := range staticDirs {
		p := "index.html"
		if d != "." {
			p = d + "/index.html"
		}
		if t.probe(p) {
			dir = d
			break
		}
	}
	if dir == "" {
		return Bid{}, false
	}
	b := Bid{Detector: "static", Score: 60}
	p := strings.TrimPrefix(dir+"/index.html", "./")
	if dir == "." {
		b.evidence(p, "index.html at the root")
	} else {
		b.Score = 50
		b.evidence(p, "index.html in %s/", dir)
	}
	if m, ok := t.first(serverMarkers...); ok {
		b.Score = 20
		b.evidence(m, "a server marker: the site may be part of an app")
	}
	b.Proposal = spec.Document{Workloads: map[string]spec.Workload{"web": {
		Primary: spec.Bool(true),
		Build:   &spec.Build{Kind: spec.BuildStatic, Context: dir},
	}}}
	return b, true
}
