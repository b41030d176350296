package scan

import (
	"bufio"
	"bytes"
	"encoding/json"
	"path"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
)

// OSV ecosystem names of the packages the dependency check knows.
const (
	EcosystemGo   = "Go"
	EcosystemNPM  = "npm"
	EcosystemPyPI = "PyPI"
)

// Package is one dependency at one version, as a manifest or lock file
// names it (Path, relative to the tree's root).
type Package struct {
	Ecosystem string
	Name      string
	Version   string
	Path      string
}

// inventory reads every manifest and lock file of the tree it knows: go.mod
// (its require lines), package-lock.json (lockfileVersion 1 to 3),
// package.json where no package-lock.json sits beside it (exact versions
// only), requirements*.txt (pinned with ==) and poetry.lock. It returns the
// packages, deduplicated, and the manifests read.
func inventory(t *tree) ([]Package, []string) {
	lockDirs := map[string]bool{}
	for _, f := range t.files {
		if path.Base(f.path) == "package-lock.json" {
			lockDirs[path.Dir(f.path)] = true
		}
	}
	var pkgs []Package
	var manifests []string
	for _, f := range t.files {
		base := path.Base(f.path)
		var parse func([]byte) []Package
		switch {
		case base == "go.mod":
			parse = parseGoMod
		case base == "package-lock.json":
			parse = parsePackageLock
		case base == "package.json" && !lockDirs[path.Dir(f.path)]:
			parse = parsePackageJSON
		case base == "poetry.lock":
			parse = parsePoetryLock
		case strings.HasPrefix(base, "requirements") && strings.HasSuffix(base, ".txt"):
			parse = parseRequirements
		default:
			continue
		}
		b, err := t.read(f, MaxManifestBytes)
		if err != nil {
			continue
		}
		manifests = append(manifests, f.path)
		for _, p := range parse(b) {
			p.Path = f.path
			pkgs = append(pkgs, p)
		}
	}
	slices.SortFunc(pkgs, func(a, b Package) int {
		return strings.Compare(a.Path+"\x00"+a.Ecosystem+"\x00"+a.Name+"\x00"+a.Version, b.Path+"\x00"+b.Ecosystem+"\x00"+b.Name+"\x00"+b.Version)
	})
	return slices.Compact(pkgs), manifests
}

// parseGoMod reads go.mod's require lines, with replace directives that
// name another module version applied; a module replaced by a local
// directory is left out (it is the app's own code). The go and toolchain
// lines are not read: the Go that builds the app is the installation's.
func parseGoMod(b []byte) []Package {
	f, err := modfile.Parse("go.mod", b, nil)
	if err != nil {
		// A newer go.mod: read what this version of modfile knows.
		if f, err = modfile.ParseLax("go.mod", b, nil); err != nil {
			return nil
		}
	}
	var out []Package
	for _, r := range f.Require {
		mod := r.Mod
		keep := true
		for _, rep := range f.Replace {
			if rep.Old.Path == mod.Path && (rep.Old.Version == "" || rep.Old.Version == mod.Version) {
				if rep.New.Version == "" {
					keep = false
				} else {
					mod = rep.New
				}
			}
		}
		if keep && mod.Path != "" && mod.Version != "" {
			out = append(out, Package{Ecosystem: EcosystemGo, Name: mod.Path, Version: mod.Version})
		}
	}
	return out
}

// parsePackageLock reads an npm lock file: the "packages" map of versions
// 2 and 3 (keys node_modules/NAME, nested ones …/node_modules/NAME), or
// the nested "dependencies" of version 1. Linked (workspace) packages and
// the root are left out.
func parsePackageLock(b []byte) []Package {
	var lock struct {
		Packages map[string]struct {
			Name    string `json:"name"`
			Version string `json:"version"`
			Link    bool   `json:"link"`
		} `json:"packages"`
		Dependencies map[string]lockV1Dep `json:"dependencies"`
	}
	if json.Unmarshal(b, &lock) != nil {
		return nil
	}
	var out []Package
	if lock.Packages != nil {
		for key, p := range lock.Packages {
			i := strings.LastIndex(key, "node_modules/")
			if i < 0 || p.Link || p.Version == "" {
				continue
			}
			name := key[i+len("node_modules/"):]
			if p.Name != "" {
				name = p.Name
			}
			if name == "" {
				continue
			}
			out = append(out, Package{Ecosystem: EcosystemNPM, Name: name, Version: p.Version})
		}
		return out
	}
	var walkV1 func(deps map[string]lockV1Dep, depth int)
	walkV1 = func(deps map[string]lockV1Dep, depth int) {
		if depth > MaxDepth {
			return
		}
		for name, d := range deps {
			if name != "" && exactSemver.MatchString(d.Version) {
				out = append(out, Package{Ecosystem: EcosystemNPM, Name: name, Version: d.Version})
			}
			walkV1(d.Dependencies, depth+1)
		}
	}
	walkV1(lock.Dependencies, 0)
	return out
}

type lockV1Dep struct {
	Version      string               `json:"version"`
	Dependencies map[string]lockV1Dep `json:"dependencies"`
}

// exactSemver is an exact npm version (no range), optionally written with
// "=" or "v" in front.
var exactSemver = regexp.MustCompile(`^=?v?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?)$`)

// parsePackageJSON reads package.json's dependencies and devDependencies
// where a version is exact; ranges (^1.2.0, ~1.2, *) say nothing certain
// without a lock file and are left out.
func parsePackageJSON(b []byte) []Package {
	var pj struct {
		Dependencies    map[string]any `json:"dependencies"`
		DevDependencies map[string]any `json:"devDependencies"`
	}
	if json.Unmarshal(b, &pj) != nil {
		return nil
	}
	var out []Package
	for _, deps := range []map[string]any{pj.Dependencies, pj.DevDependencies} {
		for name, v := range deps {
			s, _ := v.(string)
			if m := exactSemver.FindStringSubmatch(strings.TrimSpace(s)); m != nil && name != "" {
				out = append(out, Package{Ecosystem: EcosystemNPM, Name: name, Version: m[1]})
			}
		}
	}
	return out
}

// requirementRE is a pinned requirement: NAME[extras]==VERSION, then
// environment markers, hashes or a comment.
var requirementRE = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*===?\s*([A-Za-z0-9!+._-]+)\s*(?:[;#\\]|--hash|$)`)

// parseRequirements reads a pip requirements file's pinned lines (== or
// ===); other specifiers, options (-r, -e, --index-url) and URLs are left
// out.
func parseRequirements(b []byte) []Package {
	var out []Package
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := requirementRE.FindStringSubmatch(line); m != nil && !strings.Contains(m[2], "*") {
			out = append(out, Package{Ecosystem: EcosystemPyPI, Name: pypiName(m[1]), Version: m[2]})
		}
	}
	return out
}

// parsePoetryLock reads poetry.lock's [[package]] tables: their name and
// version keys. It is the part of TOML that poetry writes for them (one
// `key = "string"` per line), not a TOML parser.
func parsePoetryLock(b []byte) []Package {
	var out []Package
	var name, version string
	in := false
	flush := func() {
		if in && name != "" && version != "" {
			out = append(out, Package{Ecosystem: EcosystemPyPI, Name: pypiName(name), Version: version})
		}
		name, version = "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "[[package]]":
			flush()
			in = true
		case strings.HasPrefix(line, "["):
			flush()
			in = false
		case in:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			s, ok := tomlString(strings.TrimSpace(v))
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "name":
				name = s
			case "version":
				version = s
			}
		}
	}
	flush()
	return out
}

// tomlString reads a basic or literal TOML string without escapes (the
// form package names and versions take).
func tomlString(v string) (string, bool) {
	if len(v) < 2 || (v[0] != '"' && v[0] != '\'') || v[len(v)-1] != v[0] {
		return "", false
	}
	s := v[1 : len(v)-1]
	if strings.ContainsAny(s, "\"'\\") {
		return "", false
	}
	return s, true
}

var pypiSeparators = regexp.MustCompile(`[-_.]+`)

// pypiName is a Python package name normalized as PEP 503 says.
func pypiName(s string) string { return pypiSeparators.ReplaceAllString(strings.ToLower(s), "-") }
