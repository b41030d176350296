package scan

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/internal/spec"
)

// TestCompareVersions: semantic versions for Go (with or without the v)
// and npm, PEP 440 for PyPI with its spellings and its ordering of dev,
// pre, post and local versions; unreadable versions decide nothing.
func TestCompareVersions(t *testing.T) {
	cases := []struct {
		eco, a, b string
		want      int
		ok        bool
	}{
		{EcosystemGo, "v0.3.7", "0.3.8", -1, true},
		{EcosystemGo, "v0.3.8", "0.3.8", 0, true},
		{EcosystemGo, "v0.0.0-20220722155237-a158d28d115b", "0.1.0", -1, true},
		{EcosystemGo, "v1.2.3+incompatible", "1.2.3", 0, true},
		{EcosystemNPM, "4.17.15", "4.17.21", -1, true},
		{EcosystemNPM, "4.17.21", "4.17.3", 1, true},
		{EcosystemNPM, "1.0.0-rc.1", "1.0.0", -1, true},
		{EcosystemNPM, "1.0.0-alpha", "1.0.0-alpha.1", -1, true},
		{EcosystemNPM, "latest", "1.0.0", 0, false},
		{EcosystemPyPI, "3.2.19", "3.2.20", -1, true},
		{EcosystemPyPI, "4.1.10", "4.1.9", 1, true},
		{EcosystemPyPI, "1.0", "1.0.0", 0, true},
		{EcosystemPyPI, "1.0.dev1", "1.0a1", -1, true},
		{EcosystemPyPI, "1.0a1", "1.0a2", -1, true},
		{EcosystemPyPI, "1.0a2", "1.0b1", -1, true},
		{EcosystemPyPI, "1.0b1", "1.0rc1", -1, true},
		{EcosystemPyPI, "1.0rc1", "1.0", -1, true},
		{EcosystemPyPI, "1.0", "1.0.post1", -1, true},
		{EcosystemPyPI, "1.0.post1.dev1", "1.0.post1", -1, true},
		{EcosystemPyPI, "1.0", "1.0+local.1", -1, true},
		{EcosystemPyPI, "1.0+abc", "1.0+1", -1, true},
		{EcosystemPyPI, "1.0-1", "1.0.post1", 0, true},
		{EcosystemPyPI, "1.0-RC-1", "1.0rc1", 0, true},
		{EcosystemPyPI, "1.0alpha", "1.0a0", 0, true},
		{EcosystemPyPI, "2!0.1", "9.9", 1, true},
		{EcosystemPyPI, "v1.2", "1.2", 0, true},
		{EcosystemPyPI, "1.0.x", "1.0", 0, false},
		{"crates.io", "1.0.0", "1.0.0", 0, false},
	}
	for _, c := range cases {
		got, ok := compareVersions(c.eco, c.a, c.b)
		if got != c.want || ok != c.ok {
			t.Errorf("compareVersions(%s, %q, %q) = %d, %t; want %d, %t", c.eco, c.a, c.b, got, ok, c.want, c.ok)
		}
	}
}

// TestAffects evaluates OSV ranges: several intervals, last_affected,
// unsorted events, a versions list and ranges that decide nothing.
func TestAffects(t *testing.T) {
	type ev = struct {
		Introduced   string `json:"introduced,omitempty"`
		Fixed        string `json:"fixed,omitempty"`
		LastAffected string `json:"last_affected,omitempty"`
	}
	rng := func(typ string, evs ...ev) osvRange { return osvRange{Type: typ, Events: evs} }
	django := advisory{ranges: []osvRange{rng("ECOSYSTEM",
		ev{Introduced: "4.2"}, ev{Fixed: "4.2.3"}, ev{Introduced: "3.2"}, ev{Fixed: "3.2.20"}, ev{Introduced: "4.0"}, ev{Fixed: "4.1.10"})}}
	last := advisory{ranges: []osvRange{rng("SEMVER", ev{Introduced: "1.0.0"}, ev{LastAffected: "1.4.2"})}}
	listed := advisory{versions: []string{"2.0.0", "0.9.1"}, ranges: []osvRange{rng("GIT", ev{Introduced: "abc"}, ev{Fixed: "def"}), rng("SEMVER", ev{Introduced: "3.0.0"}, ev{Fixed: "3.1.0"})}}
	goAdv := advisory{ranges: []osvRange{rng("SEMVER", ev{Introduced: "0"}, ev{Fixed: "0.3.8"})}}
	cases := []struct {
		name    string
		a       advisory
		eco, v  string
		hit     bool
		fixedIn string
	}{
		{"below every interval", django, EcosystemPyPI, "3.1.14", false, ""},
		{"in the first interval", django, EcosystemPyPI, "3.2.19", true, "3.2.20"},
		{"at its fix", django, EcosystemPyPI, "3.2.20", false, ""},
		{"between intervals", django, EcosystemPyPI, "3.3", false, ""},
		{"in the second", django, EcosystemPyPI, "4.0.1", true, "4.1.10"},
		{"a pre-release in the third", django, EcosystemPyPI, "4.2rc1", false, ""},
		{"the third", django, EcosystemPyPI, "4.2", true, "4.2.3"},
		{"after all", django, EcosystemPyPI, "5.0", false, ""},
		{"at last_affected", last, EcosystemNPM, "1.4.2", true, ""},
		{"after last_affected", last, EcosystemNPM, "1.4.3", false, ""},
		{"before introduced", last, EcosystemNPM, "0.9.0", false, ""},
		{"listed, with a fix above in a range", listed, EcosystemNPM, "2.0.0", true, "3.1.0"},
		{"listed, no fix above", listed, EcosystemNPM, "0.9.1", true, "3.1.0"},
		{"not listed, GIT range ignored", listed, EcosystemNPM, "1.0.0", false, ""},
		{"Go's v prefix", goAdv, EcosystemGo, "v0.3.7", true, "0.3.8"},
		{"a Go pseudo-version", goAdv, EcosystemGo, "v0.0.0-20210101000000-abcdefabcdef", true, "0.3.8"},
		{"Go fixed", goAdv, EcosystemGo, "v0.3.8", false, ""},
		{"an unreadable version", goAdv, EcosystemGo, "master", false, ""},
	}
	for _, c := range cases {
		hit, fix := c.a.affects(c.eco, c.v)
		if hit != c.hit || fix != c.fixedIn {
			t.Errorf("%s: affects(%s) = %t, %q; want %t, %q", c.name, c.v, hit, fix, c.hit, c.fixedIn)
		}
	}
}

// TestCVSS3 checks base scores against values NVD publishes for the
// vectors.
func TestCVSS3(t *testing.T) {
	cases := map[string]float64{
		"CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H": 9.8,
		"CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:H": 7.5,
		"CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:C/C:L/I:L/A:N": 6.1,
		"CVSS:3.0/AV:N/AC:L/PR:L/UI:N/S:C/C:H/I:H/A:H": 9.9,
		"CVSS:3.1/AV:N/AC:H/PR:N/UI:N/S:U/C:H/I:N/A:N": 5.9,
		"CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:N": 0,
	}
	for v, want := range cases {
		got, ok := cvss3(v)
		if !ok || got != want {
			t.Errorf("cvss3(%s) = %v, %t; want %v", v, got, ok, want)
		}
	}
	for _, bad := range []string{"", "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N", "CVSS:3.1/AV:X/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", "CVSS:3.1/AV:N"} {
		if _, ok := cvss3(bad); ok {
			t.Errorf("cvss3(%q) read a score", bad)
		}
	}
}

// TestSpecRisks: each risk alone, with its remedy in the title, and
// nothing for a workload that has none.
func TestSpecRisks(t *testing.T) {
	good := goodSpec().Workloads["web"]
	with := func(edit func(w *spec.Workload)) spec.Document {
		w := good
		w.Run.Health = &spec.Health{Path: "/healthz"}
		edit(&w)
		return spec.Document{Workloads: map[string]spec.Workload{"web": w}}
	}
	cases := []struct {
		name string
		doc  spec.Document
		want []string
	}{
		{"none", with(func(*spec.Workload) {}), nil},
		{"no health check", with(func(w *spec.Workload) { w.Run.Health = nil }), []string{"spec:no-health-check:web"}},
		{"a worker needs none", with(func(w *spec.Workload) { w.Run.Health, w.Run.Port = nil, 0 }), nil},
		{"no limits", with(func(w *spec.Workload) { w.Resources = nil }), []string{"spec:no-resource-limits:web"}},
		{"a memory limit is a limit", with(func(w *spec.Workload) { w.Resources = &spec.Resources{MemoryBytes: 1 << 28} }), nil},
		{"a static site runs nothing", with(func(w *spec.Workload) { w.Resources, w.Build = nil, &spec.Build{Kind: spec.BuildStatic} }), nil},
		{"sh -c", with(func(w *spec.Workload) { w.Run.Command = []string{"sh", "-c", "exec ./app"} }), []string{"spec:shell-command:web"}},
		{"/bin/bash -lc", with(func(w *spec.Workload) { w.Run.Command = []string{"/bin/bash", "-lc", "./app"} }), []string{"spec:shell-command:web"}},
		{"env bash -e -c", with(func(w *spec.Workload) { w.Run.Command = []string{"/usr/bin/env", "bash", "-e", "-c", "./app"} }), []string{"spec:shell-command:web"}},
		{"a script file is not a string", with(func(w *spec.Workload) { w.Run.Command = []string{"sh", "start.sh", "-c"} }), nil},
		{"--host 127.0.0.1", with(func(w *spec.Workload) { w.Run.Command = []string{"uvicorn", "app:app", "--host", "127.0.0.1"} }), []string{"spec:loopback-listen:web"}},
		{"-b localhost:8000", with(func(w *spec.Workload) { w.Run.Command = []string{"gunicorn", "-b", "localhost:8000", "app:app"} }), []string{"spec:loopback-listen:web"}},
		{"--bind=[::1]:80", with(func(w *spec.Workload) { w.Run.Command = []string{"./app", "--bind=[::1]:80"} }), []string{"spec:loopback-listen:web"}},
		{"--host 0.0.0.0", with(func(w *spec.Workload) { w.Run.Command = []string{"uvicorn", "--host", "0.0.0.0"} }), nil},
		{"HOST=127.0.0.1", with(func(w *spec.Workload) { w.Env = map[string]spec.EnvValue{"HOST": spec.Literal("127.0.0.1")} }), []string{"spec:loopback-listen:web"}},
		{"HTTP_LISTEN_ADDR=localhost:80", with(func(w *spec.Workload) {
			w.Env = map[string]spec.EnvValue{"HTTP_LISTEN_ADDR": spec.Literal("localhost:80")}
		}), []string{"spec:loopback-listen:web"}},
		{"a secret reference decides nothing", with(func(w *spec.Workload) { w.Env = map[string]spec.EnvValue{"HOST": {Secret: "HOST"}} }), nil},
		{"a client's host is not a listen address", with(func(w *spec.Workload) { w.Env = map[string]spec.EnvValue{"DATABASE_HOST": spec.Literal("localhost")} }), nil},
		{"everything", with(func(w *spec.Workload) {
			w.Run.Health, w.Resources = nil, nil
			w.Run.Command = []string{"bash", "-c", "./app --host 127.0.0.1"}
			w.Env = map[string]spec.EnvValue{"LISTEN_ADDR": spec.Literal("127.0.0.1:8080")}
		}), []string{"spec:no-health-check:web", "spec:no-resource-limits:web", "spec:shell-command:web", "spec:loopback-listen:web"}},
	}
	for _, c := range cases {
		var got []string
		for _, f := range SpecRisks(c.doc) {
			got = append(got, f.ID)
			if f.Path != nil || !f.Fixable {
				t.Errorf("%s: %s has path %v, fixable %t", c.name, f.ID, f.Path, f.Fixable)
			}
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, d)
		}
	}
}

// TestParsers covers what each manifest parser keeps and leaves out.
func TestParsers(t *testing.T) {
	cases := []struct {
		name  string
		parse func([]byte) []Package
		in    string
		want  []Package
	}{
		{"go.mod with a version replace", parseGoMod, "module m\n\nrequire (\n\ta.example/x v1.0.0\n\tb.example/y v0.1.0 // indirect\n)\nreplace a.example/x v1.0.0 => a.example/x v1.0.1\n",
			[]Package{{EcosystemGo, "a.example/x", "v1.0.1", ""}, {EcosystemGo, "b.example/y", "v0.1.0", ""}}},
		{"go.mod unparseable", parseGoMod, "module\nrequire (((\n", nil},
		{"package-lock v1", parsePackageLock, `{"lockfileVersion":1,"dependencies":{"a":{"version":"1.0.0","dependencies":{"b":{"version":"2.0.0"}}},"c":{"version":"github:x/y"}}}`,
			[]Package{{EcosystemNPM, "a", "1.0.0", ""}, {EcosystemNPM, "b", "2.0.0", ""}}},
		{"package.json exact only", parsePackageJSON, `{"dependencies":{"a":"1.2.3","b":"^1.2.3","c":"=v2.0.0","d":{"x":1}},"devDependencies":{"e":"1.0.0-beta.1"}}`,
			[]Package{{EcosystemNPM, "a", "1.2.3", ""}, {EcosystemNPM, "c", "2.0.0", ""}, {EcosystemNPM, "e", "1.0.0-beta.1", ""}}},
		{"requirements", parseRequirements, "Flask_Login==0.6.3\nrequests == 2.31.0 # pinned\nnumpy>=1\nfoo===1.0\nbar==1.*\n  # comment\n--index-url https://x\n",
			[]Package{{EcosystemPyPI, "flask-login", "0.6.3", ""}, {EcosystemPyPI, "requests", "2.31.0", ""}, {EcosystemPyPI, "foo", "1.0", ""}}},
		{"poetry.lock", parsePoetryLock, "[[package]]\nname = \"Zope.Interface\"\nversion = '6.0'\n[package.extras]\nversion = \"9\"\n[[package]]\nname = \"x\"\n",
			[]Package{{EcosystemPyPI, "zope-interface", "6.0", ""}}},
	}
	sortPkgs := cmp.Transformer("sort", func(in []Package) []Package {
		out := append([]Package(nil), in...)
		for i := 1; i < len(out); i++ {
			for j := i; j > 0 && out[j].Name < out[j-1].Name; j-- {
				out[j], out[j-1] = out[j-1], out[j]
			}
		}
		return out
	})
	for _, c := range cases {
		if d := cmp.Diff(c.want, c.parse([]byte(c.in)), sortPkgs); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, d)
		}
	}
}

// TestEntropy: the measure the floors are set against.
func TestEntropy(t *testing.T) {
	for s, want := range map[string]float64{"": 0, "aaaa": 0, "abab": 1, "abcd": 2, "0123456789abcdef": 4} {
		if got := entropy([]byte(s)); got != want {
			t.Errorf("entropy(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestClip: long titles are cut at a rune boundary, short ones kept.
func TestClip(t *testing.T) {
	if got := clip("short"); got != "short" {
		t.Errorf("clip(short) = %q", got)
	}
	long := strings.Repeat("é", MaxTitle)
	got := clip(long)
	if len(got) > MaxTitle || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("clip of %d bytes: %d bytes, valid %t", len(long), len(got), utf8.ValidString(got))
	}
	db := &DB{index: map[string][]advisory{}}
	name := strings.Repeat("a", 10_000)
	if err := db.add([]byte(`{"id":"X-1","summary":"` + strings.Repeat("s", 5000) + `","affected":[{"package":{"ecosystem":"npm","name":"` + name + `"},"versions":["1.0.0"]}]}`)); err != nil {
		t.Fatal(err)
	}
	fs := db.match([]Package{{EcosystemNPM, name, "1.0.0", "package-lock.json"}})
	if len(fs) != 1 || len(fs[0].Title) > MaxTitle || len(fs[0].ID) > MaxTitle {
		t.Errorf("findings %d, title %d bytes", len(fs), len(fs[0].Title))
	}
}
